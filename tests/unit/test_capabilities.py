"""What doctor and Add cluster say a provider offers: never "no" for what discovery omits."""

from app.oidc.settings import Metadata


def meta(**extra: object) -> Metadata:
    base: dict[str, object] = dict(
        issuer="https://idp",
        authorization_endpoint="https://idp/auth",
        token_endpoint="https://idp/token",
        jwks_uri="https://idp/jwks",
        device_authorization_endpoint=None,
        revocation_endpoint="https://idp/revoke",
        end_session_endpoint=None,
        grant_types_supported=(),
        code_challenge_methods_supported=("S256",),
        id_token_signing_alg_values_supported=("RS256",),
        scopes_supported=("openid",),
    )
    base.update(extra)
    return Metadata(**base)  # type: ignore[arg-type]


def states(m: Metadata, has_secret: bool = False) -> dict[str, str]:
    return {c.name: c.state for c in m.capabilities(has_secret)}


def test_refresh_tokens_without_offline_access_in_discovery_are_unknown_not_no() -> None:
    assert states(meta())["refresh tokens"] == "unknown"
    assert (
        states(meta(grant_types_supported=("authorization_code", "refresh_token")))[
            "refresh tokens"
        ]
        == "yes"
    )
    assert states(meta(scopes_supported=("openid", "offline_access")))["refresh tokens"] == "yes"


def test_revocation_a_public_client_cannot_use_is_no_with_the_reason() -> None:
    strict = meta(revocation_endpoint_auth_methods_supported=("client_secret_basic",))
    (cap,) = [c for c in strict.capabilities() if c.name == "token revocation"]
    assert cap.state == "no" and "requires client authentication" in cap.detail
    assert states(strict, has_secret=True)["token revocation"] == "yes"
    assert (
        states(meta(revocation_endpoint_auth_methods_supported=("none",)))["token revocation"]
        == "yes"
    )
    assert states(meta())["token revocation"] == "yes"
    assert states(meta(revocation_endpoint=None))["token revocation"] == "no"


def test_pkce_not_listed_is_unknown() -> None:
    assert states(meta(code_challenge_methods_supported=()))["PKCE (S256)"] == "unknown"
    assert states(meta(code_challenge_methods_supported=("plain",)))["PKCE (S256)"] == "no"
