"""Validation of what `kubetray store` accepts."""

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest
from cryptography.hazmat.primitives import serialization

from app.errors import CredentialError, UsageError
from app.static_credentials import (
    StoredCredential,
    certificate_credential,
    check_name,
    token_credential,
)
from tests.pki import CA

NOW = datetime.now(UTC)


def jwt(exp: float, **claims: object) -> str:
    def part(doc: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part({'sub': 'u', 'exp': exp, **claims})}.c2ln"


def test_tokens() -> None:
    assert token_credential("n", "  abc.def\n", "f", NOW).token == "abc.def"
    future = token_credential("n", jwt((NOW + timedelta(hours=1)).timestamp()), "f", NOW)
    assert future.not_after is not None and future.not_after > NOW
    with pytest.raises(CredentialError, match="expired at"):
        token_credential("n", jwt((NOW - timedelta(seconds=1)).timestamp()), "f", NOW)
    with pytest.raises(CredentialError, match="holds no token"):
        token_credential("n", "\n\n", "f", NOW)
    with pytest.raises(CredentialError, match="line breaks"):
        token_credential("n", "a\nb", "f", NOW)


def test_names() -> None:
    assert check_name("prod-eu_1@corp:admin") == "prod-eu_1@corp:admin"
    for bad in ("", "-x", "a b", "a/b", "x" * 200):
        with pytest.raises(UsageError):
            check_name(bad)


def test_certificates() -> None:
    ca = CA()
    user = ca.issue("alice", org="devs")
    now = datetime.now(UTC)  # the test's moment: collection may have taken minutes
    cred = certificate_credential("n", user.cert_pem + ca.cert_pem, user.key_pem, "c", "k", now)
    assert cred.certificate_pem is not None and cred.certificate_pem.startswith(
        user.cert_pem.decode()
    )
    assert cred.key_pem is not None and cred.key_pem.startswith(
        "-----BEGIN PRIVATE KEY-----"
    )  # PKCS#8
    assert cred.subject == "O=devs,CN=alice"
    assert cred.not_after == user.cert.not_valid_after_utc
    assert StoredCredential.from_bytes(cred.to_bytes()) == cred

    other = ca.issue("bob")
    with pytest.raises(CredentialError, match="does not belong"):
        certificate_credential("n", user.cert_pem, other.key_pem, "c", "k", now)
    old = ca.issue("old", not_before=now - timedelta(days=3), lifetime=timedelta(days=1))
    with pytest.raises(CredentialError, match="expired at"):
        certificate_credential("n", old.cert_pem, old.key_pem, "c", "k", now)
    locked = user.key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pw"),
    )
    with pytest.raises(CredentialError, match="is encrypted"):
        certificate_credential("n", user.cert_pem, locked, "c", "k", now)
    with pytest.raises(CredentialError, match="no PEM certificate"):
        certificate_credential("n", b"nope", user.key_pem, "c", "k", now)


def test_a_jwts_lifetime_is_known() -> None:
    issued, exp = NOW - timedelta(minutes=10), NOW + timedelta(minutes=50)
    cred = token_credential("n", jwt(exp.timestamp(), iat=issued.timestamp()), "f", NOW)
    assert cred.not_before is not None and cred.not_after is not None
    assert cred.lifetime == timedelta(hours=1)
    nbf = token_credential("n", jwt(exp.timestamp(), iat=0, nbf=issued.timestamp()), "f", NOW)
    assert nbf.not_before == cred.not_before  # nbf, when there is one, says when it starts
    for junk in ("x", True, 1e300, [1]):
        odd = token_credential("n", jwt(exp.timestamp(), iat=junk), "f", NOW)
        assert odd.not_before is None and odd.lifetime is None


def test_a_certificate_not_valid_yet_is_refused_with_its_start() -> None:
    now = datetime.now(UTC)  # the test's moment: collection may have taken minutes
    ca = CA()
    later = ca.issue("alice", not_before=now + timedelta(hours=2))
    with pytest.raises(CredentialError) as e:
        certificate_credential("n", later.cert_pem, later.key_pem, "cert.pem", "k", now)
    start = later.cert.not_valid_before_utc
    assert (
        e.value.message
        == f"the certificate in cert.pem is not valid before {start:%Y-%m-%d %H:%M:%S}Z"
    )
    assert e.value.hint and "clock" in e.value.hint
    now_valid = certificate_credential("n", later.cert_pem, later.key_pem, "c", "k", start)
    assert now_valid.not_before == start and now_valid.lifetime == timedelta(days=1)


def test_the_list_follows_what_another_process_stores_and_removes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The tray lists stored credentials every second from what it read last; a credential
    stored or removed by a `kubetray store` in another process shows at the next list."""
    from app.static_credentials import StoredCredentials
    from app.store.memory_store import MemorySecretStore

    store, index = MemorySecretStore(), str(tmp_path / "stored.json")
    tray, cli = StoredCredentials(store, index), StoredCredentials(store, index)
    assert tray.list() == []
    cli.save(StoredCredential(name="a", token="t1", not_after=NOW + timedelta(days=1)), NOW)
    assert [i.name for i in tray.list()] == ["a"]
    cli.save(StoredCredential(name="b", token="t2"), NOW)
    listed = tray.list()
    assert [i.name for i in listed] == ["a", "b"]
    listed.clear()  # a caller's list is its own
    assert [i.name for i in tray.list()] == ["a", "b"]
    cli.remove("a")
    assert [i.name for i in tray.list()] == ["b"]
