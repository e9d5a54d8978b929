"""What the OIDC engine refuses: foreign callbacks, reused codes, bad id_tokens, wrong issuers."""

import base64
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import requests

from app.oidc.client import OIDCClient
from app.oidc.errors import ClockSkew, LoginError
from app.oidc.loopback import LoopbackListener
from app.oidc.settings import OIDCSettings
from tests.idp import IdP, run_idp


@pytest.fixture(scope="module")
def idp() -> Iterator[IdP]:
    with run_idp(password=True) as provider:
        yield provider


def client(idp: IdP, client_id: str = "kubectl", clock=lambda: datetime.now(UTC)) -> OIDCClient:  # type: ignore[no-untyped-def]
    return OIDCClient(
        OIDCSettings(issuer=idp.issuer, client_id=client_id, scopes=("openid", "email")), clock
    )


def password_tokens(idp: IdP, client_id: str = "kubectl") -> dict:
    response = requests.post(
        idp.issuer + "/token",
        data={
            "grant_type": "password",
            "username": "dave",
            "password": "pw-dave",
            "client_id": client_id,
            "scope": "openid email",
        },
        timeout=10,
    )
    response.raise_for_status()
    return dict(response.json())


def get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return e.code


def test_callback_with_a_foreign_state_is_refused() -> None:
    listener = LoopbackListener(state="the-real-state")
    try:
        assert get(listener.redirect_uri + "?code=stolen&state=attacker") == 400
        assert get(listener.redirect_uri + "?code=c") == 400
        waiter: list[str | Exception] = []
        thread = threading.Thread(target=lambda: waiter.append(listener.wait(5)))
        thread.start()
        time.sleep(0.2)
        assert waiter == []  # still waiting: the foreign callbacks did not end the login
        assert get(listener.redirect_uri + "?code=good&state=the-real-state") == 200
        thread.join(5)
        assert waiter == ["good"]
    finally:
        listener.close()


def test_provider_error_on_the_callback_fails_the_login() -> None:
    listener = LoopbackListener(state="s")
    try:
        assert (
            get(
                listener.redirect_uri
                + "?error=access_denied&error_description=user+said+no&state=s"
            )
            == 200
        )
        with pytest.raises(LoginError, match="refused the login: user said no"):
            listener.wait(5)
    finally:
        listener.close()


def test_a_valid_id_token_is_accepted(idp: IdP) -> None:
    claims = client(idp).verify_id_token(password_tokens(idp)["id_token"])
    assert (
        claims["sub"] == "dave"
        and claims["aud"] == "kubectl"
        and claims["email"] == "dave@example.test"
    )


@pytest.mark.parametrize("alg", ["PS256", "ES256", "EdDSA", "Ed25519"])
def test_id_tokens_signed_with_each_algorithm_the_provider_offers_verify(alg: str) -> None:
    """oidc-provider's other id_token algorithms, keys from its own JWKS: one forged claim fails."""
    with run_idp(password=True, signingAlg=alg) as provider:
        token = password_tokens(provider)["id_token"]
        assert json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))["alg"] == alg
        assert client(provider).verify_id_token(token)["sub"] == "dave"
        header, payload, signature = token.split(".")
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        forged = base64.urlsafe_b64encode(json.dumps({**claims, "sub": "admin"}).encode())
        with pytest.raises(LoginError, match="signature does not verify"):
            client(provider).verify_id_token(f"{header}.{forged.decode().rstrip('=')}.{signature}")


def test_wrong_audience_is_refused(idp: IdP) -> None:
    other = password_tokens(idp, client_id="other-audience")["id_token"]
    with pytest.raises(LoginError, match="audience 'other-audience' does not include 'kubectl'"):
        client(idp).verify_id_token(other)


def test_forged_id_tokens_are_refused(idp: IdP) -> None:
    token = password_tokens(idp)["id_token"]
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["sub"] = "admin"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    with pytest.raises(LoginError, match="signature does not verify"):
        client(idp).verify_id_token(f"{header}.{forged}.{signature}")
    none_header = base64.urlsafe_b64encode(b'{"alg":"none"}').decode().rstrip("=")
    with pytest.raises(LoginError, match="signature does not verify"):
        client(idp).verify_id_token(f"{none_header}.{payload}.")


def test_expired_id_token_is_refused(idp: IdP) -> None:
    token = password_tokens(idp)["id_token"]
    later = lambda: datetime.now(UTC) + timedelta(hours=2)  # noqa: E731 - the provider's TTL is 1 h
    # A token that has expired when it arrives is refused; its iat is the provider's clock, so
    # the person is told how far that clock is from this machine's (issue 29), not just "expired".
    with pytest.raises(ClockSkew, match=r"2 h 0 min behind .*has already expired here") as refused:
        client(idp, clock=later).verify_id_token(token)
    assert -7300 < refused.value.offset < -7100


def test_nonce_must_match(idp: IdP) -> None:
    token = password_tokens(idp)["id_token"]
    with pytest.raises(LoginError, match="nonce is not the one this login sent"):
        client(idp).verify_id_token(token, nonce="expected-nonce")


def test_issuer_mismatch_is_refused(idp: IdP) -> None:
    wrong = OIDCClient(
        OIDCSettings(issuer=idp.issuer + "/evil", client_id="kubectl"), lambda: datetime.now(UTC)
    )
    with pytest.raises(LoginError):
        wrong.metadata()


def test_a_used_refresh_token_is_refused_by_the_provider(idp: IdP) -> None:
    """Why refreshes are single-flight: a rotated refresh token must never be presented again."""
    c = client(idp)
    from app.oidc.tokens import TokenSet

    first = password_tokens(idp)
    now = datetime.now(UTC)
    tokens = TokenSet(expires_at=now, issued_at=now, refresh_token=first["refresh_token"])
    c.refresh(tokens)
    with pytest.raises(LoginError, match="invalid_grant"):
        c.refresh(tokens)


def test_a_provider_that_is_not_there_is_said_before_a_password_is_asked() -> None:
    class Terminal:
        def __init__(self) -> None:
            self.asked: list[str] = []

        def prompt(self, text: str, secret: bool) -> str:
            self.asked.append(text)
            return "typed"

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # a port nobody listens on
    issuer = f"http://127.0.0.1:{closed.getsockname()[1]}"
    terminal = Terminal()
    try:
        oidc = OIDCClient(
            OIDCSettings(issuer=issuer, client_id="kubectl"), lambda: datetime.now(UTC)
        )
        with pytest.raises(LoginError, match="nothing answers"):
            oidc.password(terminal)  # type: ignore[arg-type]
    finally:
        closed.close()
    assert terminal.asked == []
