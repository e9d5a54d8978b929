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


def jwt(exp: float) -> str:
    def part(doc: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part({'sub': 'u', 'exp': exp})}.c2ln"


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
    cred = certificate_credential("n", user.cert_pem + ca.cert_pem, user.key_pem, "c", "k", NOW)
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
        certificate_credential("n", user.cert_pem, other.key_pem, "c", "k", NOW)
    old = ca.issue("old", not_before=NOW - timedelta(days=3), lifetime=timedelta(days=1))
    with pytest.raises(CredentialError, match="expired at"):
        certificate_credential("n", old.cert_pem, old.key_pem, "c", "k", NOW)
    locked = user.key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pw"),
    )
    with pytest.raises(CredentialError, match="is encrypted"):
        certificate_credential("n", user.cert_pem, locked, "c", "k", NOW)
    with pytest.raises(CredentialError, match="no PEM certificate"):
        certificate_credential("n", b"nope", user.key_pem, "c", "k", NOW)
