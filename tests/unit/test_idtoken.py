"""Our use of joserfc for id_tokens: the algorithms we allow and refuse, the checks we add
around it (crit, strict JSON, unusable keys), one clear error for anything hostile, and the
claims OIDCClient checks itself. That signatures verify at all is joserfc's to test."""

import base64
import contextlib
import json
import warnings
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding
from hypothesis import given
from hypothesis import strategies as st
from joserfc import jws, jwt
from joserfc.errors import SecurityWarning
from joserfc.jwk import ECKey, KeySet, OctKey, OKPKey, RSAKey

from app.oidc import idtoken
from app.oidc.client import OIDCClient
from app.oidc.errors import LoginError
from app.oidc.settings import Metadata, OIDCSettings
from tests.fakes import Clock

ISSUER = "https://idp.example"
CLAIMS = {"iss": ISSUER, "aud": "kubectl", "sub": "alice", "exp": 2000000000}
ALGORITHMS = list(idtoken.SUPPORTED)
CURVES = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}


def new_key(alg: str, kid: str = "k1") -> Any:
    if alg.startswith(("RS", "PS")):
        return RSAKey.generate_key(2048, parameters={"kid": kid})
    if alg.startswith("ES"):
        return ECKey.generate_key(CURVES[alg], parameters={"kid": kid})
    return OKPKey.generate_key("Ed448" if alg == "Ed448" else "Ed25519", parameters={"kid": kid})


def public_jwks(*keys: Any) -> dict[str, Any]:
    return dict(KeySet(list(keys)).as_dict(private=False))


def sign(key: Any, alg: str, claims: dict[str, Any] | None = None, **header: Any) -> str:
    with warnings.catch_warnings():  # joserfc warns that RFC 9864 deprecates "EdDSA"
        warnings.simplefilter("ignore", SecurityWarning)
        return jwt.encode({"alg": alg, "kid": key.kid, **header}, claims or CLAIMS, key, [alg])


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def signed_raw(key: Any, header: dict[str, Any], claims: str) -> str:
    """An RS256 token over exactly these bytes: what no well-behaved signer would produce."""
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(claims.encode())}"
    signature = key.private_key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{b64(signature)}"


@pytest.mark.parametrize("alg", ALGORITHMS)
def test_every_algorithm_we_allow_verifies_without_a_warning(alg: str) -> None:
    key = new_key(alg)  # "EdDSA" included: joserfc's SecurityWarning would fail this test
    keys = idtoken.import_key_set(public_jwks(key))
    assert idtoken.verify(sign(key, alg), keys, ALGORITHMS) == CLAIMS


@pytest.mark.parametrize("alg", ["RS256", "ES256", "EdDSA"])
def test_a_forged_claim_or_signature_is_refused(alg: str) -> None:
    key = new_key(alg)
    keys = idtoken.import_key_set(public_jwks(key))
    header, _payload, signature = sign(key, alg).split(".")
    forged = b64(json.dumps({**CLAIMS, "sub": "root"}).encode())
    with pytest.raises(idtoken.IdTokenError, match="signature does not match"):
        idtoken.verify(f"{header}.{forged}.{signature}", keys, ALGORITHMS)
    other = new_key(alg)  # same kid, another key
    with pytest.raises(idtoken.IdTokenError, match="signature does not match"):
        idtoken.verify(sign(other, alg), keys, ALGORITHMS)


def test_unsigned_and_hmac_tokens_are_refused_whatever_discovery_says() -> None:
    key = new_key("RS256")
    keys = idtoken.import_key_set(public_jwks(key))
    header = b64(json.dumps({"alg": "none"}).encode())
    unsigned = f"{header}.{b64(json.dumps(CLAIMS).encode())}."
    with pytest.raises(idtoken.IdTokenError, match="'none' is not accepted"):
        idtoken.verify(unsigned, keys, [*ALGORITHMS, "none"])
    # The classic confusion: HS256 keyed with the provider's public key, which anyone has.
    secret = OctKey.import_key(json.dumps(public_jwks(key)["keys"][0]).encode())
    confused = jwt.encode({"alg": "HS256", "kid": "k1"}, CLAIMS, secret, ["HS256"])
    with pytest.raises(idtoken.IdTokenError, match="'HS256' is not accepted"):
        idtoken.verify(confused, keys, [*ALGORITHMS, "HS256"])
    with pytest.raises(idtoken.IdTokenError, match="no algorithm kubetray accepts"):
        idtoken.verify(confused, keys, ["HS256", "none"])


def test_only_the_algorithms_the_provider_announces_are_accepted() -> None:
    key = new_key("PS256")
    keys = idtoken.import_key_set(public_jwks(key))
    with pytest.raises(idtoken.IdTokenError, match="'PS256' is not accepted"):
        idtoken.verify(sign(key, "PS256"), keys, ["RS256"])


def test_a_key_pinned_to_an_algorithm_signs_only_that_one() -> None:
    key = new_key("RS256")
    pinned = {**public_jwks(key)["keys"][0], "alg": "RS256"}
    with pytest.raises(idtoken.IdTokenError, match="no PS256 key 'k1'"):
        idtoken.verify(sign(key, "PS256"), idtoken.import_key_set({"keys": [pinned]}), ALGORITHMS)


@pytest.mark.parametrize(("signed", "pinned"), [("Ed25519", "EdDSA"), ("EdDSA", "Ed25519")])
def test_eddsa_and_ed25519_name_the_same_algorithm_for_a_key(signed: str, pinned: str) -> None:
    key = new_key("Ed25519")
    jwk = {**public_jwks(key)["keys"][0], "alg": pinned}
    keys = idtoken.import_key_set({"keys": [jwk]})
    assert idtoken.verify(sign(key, signed), keys, ALGORITHMS) == CLAIMS
    ed448 = {**public_jwks(new_key("Ed448"))["keys"][0], "alg": "EdDSA"}  # not another curve
    with pytest.raises(idtoken.IdTokenError, match="no Ed25519 key"):
        idtoken.verify(sign(key, "Ed25519"), idtoken.import_key_set({"keys": [ed448]}), ALGORITHMS)


def test_critical_header_extensions_are_refused_even_those_joserfc_knows() -> None:
    key = new_key("RS256")
    keys = idtoken.import_key_set(public_jwks(key))
    unencoded = {"alg": "RS256", "kid": "k1", "crit": ["b64"], "b64": False}  # RFC 7797
    signed = f"{b64(json.dumps(unencoded).encode())}.hello"  # the payload as is, unencoded
    signature = key.private_key.sign(signed.encode(), padding.PKCS1v15(), hashes.SHA256())
    token = f"{signed}.{b64(signature)}"
    assert jws.deserialize_compact(token, key, ["RS256"]).payload == b"hello"  # joserfc: valid
    with pytest.raises(idtoken.IdTokenError, match="critical"):
        idtoken.verify(token, keys, ALGORITHMS)
    with pytest.raises(idtoken.IdTokenError, match="critical"):
        idtoken.verify(sign(key, "RS256", crit=["kid"]), keys, ALGORITHMS)


@pytest.mark.parametrize(
    "token",
    [
        "",
        "a.b",
        "a.b.c.d.e",  # JWE
        "e30=.e30.",  # padded base64
        "e30.e30+.",  # standard, not url-safe, alphabet
        f"{b64(b'[]')}.{b64(b'{}')}.",  # header not an object
        b64(b'"alg"') + ".e30.",  # a string that has "alg" in it
        f"{b64(b'not json')}.{b64(b'{}')}.",
        f"{b64(b'[' * 5000)}.{b64(b'{}')}.",  # deep nesting in the header
        f"{b64(json.dumps({'alg': 'RS256'}).encode('utf-16'))}.{b64(b'{}')}.",
        f"{b64(json.dumps({'alg': 'RS256', 'kid': 5}).encode())}.{b64(b'{}')}.",
        "x" * (idtoken.MAX_TOKEN + 1),
    ],
)
def test_malformed_tokens_are_one_clear_error(token: str) -> None:
    keys = idtoken.import_key_set(public_jwks(new_key("RS256")))
    with pytest.raises(idtoken.IdTokenError):
        idtoken.verify(token, keys, ALGORITHMS)


@pytest.mark.parametrize(
    ("claims", "why"),
    [
        ("[" * 20_000 + "]" * 20_000, "not JSON"),  # deep nesting: no RecursionError escapes
        ('{"exp": ' + "9" * 5000 + "}", "not JSON"),  # past Python's int-from-text limit
        ('{"exp": NaN}', "NaN"),  # would pass the expiry check, then break the token's time
        ('{"sub": "alice", "sub": "root"}', "repeat a name"),  # which sub would kubectl see?
    ],
)
def test_hostile_json_is_one_clear_error_even_when_signed(claims: str, why: str) -> None:
    key = new_key("RS256")
    token = signed_raw(key, {"alg": "RS256", "kid": "k1"}, claims)
    with pytest.raises(idtoken.IdTokenError, match=why):
        idtoken.verify(token, idtoken.import_key_set(public_jwks(key)), ALGORITHMS)


def test_a_repeated_header_name_is_refused() -> None:
    key = new_key("RS256")
    header = b64(b'{"alg": "RS256", "kid": "k1", "kid": "k2"}')
    payload = b64(json.dumps(CLAIMS).encode())
    signature = key.private_key.sign(
        f"{header}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256()
    )
    with pytest.raises(idtoken.IdTokenError, match="repeat a name"):
        idtoken.verify(
            f"{header}.{payload}.{b64(signature)}",
            idtoken.import_key_set(public_jwks(key)),
            ALGORITHMS,
        )


def test_bad_keys_are_skipped_and_logged_not_fatal_to_the_set(
    caplog: pytest.LogCaptureFixture,
) -> None:
    good = new_key("RS256", kid="good")
    off_curve = {**public_jwks(new_key("ES256", kid="bad"))["keys"][0], "y": b64(bytes(32))}
    with warnings.catch_warnings():  # joserfc warns as it makes one
        warnings.simplefilter("ignore", SecurityWarning)
        small = RSAKey.generate_key(1024, parameters={"kid": "small"}, private=True)
    jwks = {
        "keys": [
            off_curve,
            public_jwks(small)["keys"][0],  # joserfc would only warn: it is skipped here
            {"kty": "EC", "crv": ["P-256"], "x": "", "y": ""},  # crv not even a string
            {"kty": "PQC", "kid": "future"},  # an unknown kty
            {"kty": "RSA", "kid": "bad-b64", "n": "!!", "e": "AQAB"},
            {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},  # a secret has no place here
            {**public_jwks(good)["keys"][0], "kid": "enc", "use": "enc"},  # quietly left out
            "not a key",
            *public_jwks(good)["keys"],
        ]
    }
    keys = idtoken.import_key_set(jwks)  # warnings are errors in tests: joserfc's did not fire
    assert [k.kid for k in keys] == ["good"]
    for why in ("1024-bit RSA", "not on the curve", "'PQC'", "'oct'", "not base64url", "crv"):
        assert why in caplog.text
    assert "'enc'" not in caplog.text
    assert idtoken.verify(sign(good, "RS256"), keys, ALGORITHMS) == CLAIMS
    with pytest.raises(idtoken.IdTokenError, match="no RS256 key 'small'"):
        idtoken.verify(sign(small, "RS256"), keys, ALGORITHMS)


@pytest.mark.parametrize("jwks", [None, [], {}, {"keys": 5}, {"keys": {}}])
def test_a_jwks_uri_that_returns_no_key_set_is_a_clear_error(jwks: Any) -> None:
    with pytest.raises(idtoken.IdTokenError, match="did not return a JWK set"):
        idtoken.import_key_set(jwks)


_segments = st.one_of(
    st.text(
        alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=+/.", max_size=40
    ),
    st.dictionaries(
        st.text(max_size=5),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
            lambda v: st.lists(v, max_size=3) | st.dictionaries(st.text(max_size=3), v, max_size=3),
            max_leaves=6,
        ),
        max_size=4,
    ).map(lambda d: b64(json.dumps(d).encode())),
)


_FUZZ_KEYS = idtoken.import_key_set(public_jwks(new_key("RS256"), new_key("ES256", "k2")))


@given(st.lists(_segments, min_size=1, max_size=5).map(".".join))
def test_anything_is_a_token_or_one_clear_error(token: str) -> None:
    with contextlib.suppress(idtoken.IdTokenError):
        idtoken.verify(token, _FUZZ_KEYS, ALGORITHMS)


_jwk_values = st.one_of(
    st.none(),
    st.integers(),
    st.text(max_size=8),
    st.lists(st.text(max_size=3), max_size=2),
    st.sampled_from(
        ["RSA", "EC", "OKP", "oct", "P-256", "Ed25519", "AQAB", "sig", "enc", "verify"]
    ),
)


@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(
                ["kty", "crv", "x", "y", "n", "e", "alg", "kid", "use", "key_ops", "k"]
            ),
            _jwk_values,
            max_size=8,
        ),
        max_size=4,
    )
)
def test_any_key_set_imports_or_skips_its_keys(jwks: list[dict[str, Any]]) -> None:
    idtoken.import_key_set({"keys": jwks})


# -- what OIDCClient checks itself, and the key rotation ------------------------------------


class StubClient(OIDCClient):
    """An OIDCClient whose provider is a discovery document and a queue of JWKS answers."""

    def __init__(self, *jwks: dict[str, Any], clock: Clock | None = None) -> None:
        super().__init__(OIDCSettings(issuer=ISSUER, client_id="kubectl"), clock or Clock())
        self._metadata = Metadata(
            issuer=ISSUER,
            authorization_endpoint=f"{ISSUER}/auth",
            token_endpoint=f"{ISSUER}/token",
            jwks_uri=f"{ISSUER}/jwks",
            device_authorization_endpoint=None,
            revocation_endpoint=None,
            end_session_endpoint=None,
            grant_types_supported=(),
            code_challenge_methods_supported=(),
            id_token_signing_alg_values_supported=("RS256", "EdDSA"),
        )
        self.answers = list(jwks)
        self.fetched = 0

    def _get_json(self, url: str, deadline: float | None = None) -> dict[str, Any]:
        assert url == f"{ISSUER}/jwks"
        self.fetched += 1
        return self.answers[min(self.fetched, len(self.answers)) - 1]


NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def claims(**changes: Any) -> dict[str, Any]:
    return {**CLAIMS, "iat": int(NOW.timestamp()), "exp": int(NOW.timestamp()) + 3600, **changes}


def test_a_valid_id_token_is_accepted_and_the_key_set_fetched_once() -> None:
    key = new_key("RS256")
    client = StubClient(public_jwks(key), clock=Clock(NOW))
    for _ in range(3):
        assert client.verify_id_token(sign(key, "RS256", claims()))["sub"] == "alice"
    assert client.fetched == 1


def test_a_rotated_key_is_fetched_once_more_then_refused() -> None:
    old, new = new_key("RS256", kid="old"), new_key("RS256", kid="new")
    client = StubClient(public_jwks(old), public_jwks(new), clock=Clock(NOW))
    assert client.verify_id_token(sign(old, "RS256", claims()))["sub"] == "alice"
    assert client.verify_id_token(sign(new, "RS256", claims()))["sub"] == "alice"
    assert client.fetched == 2
    stranger = new_key("RS256", kid="stranger")
    with pytest.raises(LoginError, match=r"signature does not verify: .*no RS256 key 'stranger'"):
        client.verify_id_token(sign(stranger, "RS256", claims()))
    assert client.fetched == 3  # once more, not in a loop


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"exp": int((NOW - timedelta(minutes=5)).timestamp())}, "it has expired"),
        ({"iss": "https://evil.example"}, "issuer 'https://evil.example' is not"),
        ({"aud": "someone-else"}, "audience 'someone-else' does not include 'kubectl'"),
        ({"aud": ["kubectl", "other"], "azp": "other"}, "authorized party 'other' is not us"),
        ({"iat": int((NOW + timedelta(hours=1)).timestamp())}, "clock is 60 min ahead of"),
    ],
)
def test_a_signed_token_not_meant_for_us_now_is_refused(changes: dict[str, Any], why: str) -> None:
    key = new_key("EdDSA")
    client = StubClient(public_jwks(key), clock=Clock(NOW))
    with pytest.raises(LoginError, match=why):
        client.verify_id_token(sign(key, "EdDSA", claims(**changes)))


def test_the_nonce_must_be_the_one_sent() -> None:
    key = new_key("RS256")
    client = StubClient(public_jwks(key), clock=Clock(NOW))
    token = sign(key, "RS256", claims(nonce="n1"))
    assert client.verify_id_token(token, nonce="n1")["sub"] == "alice"
    with pytest.raises(LoginError, match="nonce is not the one this login sent"):
        client.verify_id_token(token, nonce="n2")
