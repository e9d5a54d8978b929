"""Stored credentials: a bearer token, or a client certificate and key, kept in the keyring.

KEP-541's point is that static credentials should not sit in plaintext kubeconfig files. A
stored credential's secret lives in the SecretStore; a small non-secret index (name, kind,
expiry, certificate subject) in the config directory lets ``kubetray status`` list them without
touching the keyring.
"""

import base64
import binascii
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime, timedelta
from typing import Any

from app import formats, jsonfile
from app.errors import AppError, CredentialError, StoreError, UsageError
from app.progress import Progress, quiet
from app.store.secret_store import SecretStore

log = logging.getLogger(__name__)

TOKEN = "token"
CLIENT_CERTIFICATE = "client-certificate"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:-]{0,127}$")
_TOKEN_CHARS = re.compile(r"^[\x21-\x7e]+$")
_KEY_PREFIX = "stored/"
FORMAT = 1
"""A stored credential's format in the keyring (app/formats.py): 0.1.0's, without a number."""
INDEX_FORMAT = 1
"""stored.json's format."""


@dataclass(frozen=True)
class StoredCredential:
    """A credential kubetray serves as it is (no login, no refresh)."""

    name: str
    token: str | None = None
    certificate_pem: str | None = None
    """Leaf first, then any intermediates."""
    key_pem: str | None = None
    not_after: datetime | None = None
    subject: str | None = None
    not_before: datetime | None = None
    """The start of its validity (a certificate's notBefore, a JWT's nbf or iat), if known."""
    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """Fields of a newer kubetray, kept as they were (never a secret of this version's)."""

    @property
    def kind(self) -> str:
        return TOKEN if self.token else CLIENT_CERTIFICATE

    @property
    def lifetime(self) -> timedelta | None:
        if self.not_after is None or self.not_before is None:
            return None
        return self.not_after - self.not_before

    def to_bytes(self) -> bytes:
        """Format 1 is exactly what 0.1.0 wrote (it read it strictly), plus kept fields."""
        doc = asdict(self)
        doc.pop("extra")
        for key in ("not_after", "not_before"):
            value = getattr(self, key)
            doc[key] = value.isoformat() if value else None
        return json.dumps({**self.extra, **doc}).encode()

    @classmethod
    def from_bytes(cls, data: bytes, what: str = "a stored credential") -> "StoredCredential":
        """The credential; NewerFormat for a newer kubetray's; StoreError when damaged."""
        try:
            doc = json.loads(data)
        except (ValueError, RecursionError):
            doc = None
        if not isinstance(doc, dict) or not isinstance(doc.get("name"), str):
            raise StoreError(f"{what} in the keyring is damaged", "store it again")
        formats.check(doc, what, FORMAT)
        known = {f.name for f in fields(cls) if f.name != "extra"}
        values = {k: v for k, v in doc.items() if k in known}
        try:
            for key in ("not_after", "not_before"):
                if values.get(key):
                    values[key] = datetime.fromisoformat(values[key])
            return cls(**values, extra=formats.unknown(doc, known))
        except (TypeError, ValueError):
            raise StoreError(f"{what} in the keyring is damaged", "store it again") from None


@dataclass(frozen=True)
class StoredInfo:
    """The non-secret facts about a stored credential."""

    name: str
    kind: str
    not_after: str | None
    subject: str | None
    stored_at: str
    not_before: str | None = None


def check_name(name: str) -> str:
    """A name is what kubeconfig writes after --stored: keep it simple and unambiguous."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        shown = repr(name[:64] + "…" if isinstance(name, str) and len(name) > 64 else name)
        raise UsageError(
            f"invalid credential name {shown}",
            "use letters, digits and . _ @ : - (at most 128), starting with a letter or digit",
        )
    return name


def _jwt_times(token: str) -> tuple[datetime | None, datetime | None]:
    """(start, end) of a JWT-shaped token: ``nbf`` else ``iat``, and ``exp`` (unverified: only
    to tell clients when to ask again); (None, None) for any other token."""
    parts = token.split(".")
    if len(parts) != 3:
        return None, None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error, RecursionError):
        return None, None
    if not isinstance(payload, dict):
        return None, None

    def when(claim: str) -> datetime | None:
        value = payload.get(claim)
        if isinstance(value, int | float) and not isinstance(value, bool):
            try:
                return datetime.fromtimestamp(value, UTC)
            except (OverflowError, OSError, ValueError):
                return None
        return None

    return when("nbf") or when("iat"), when("exp")


def token_credential(name: str, text: str, source: str, now: datetime) -> StoredCredential:
    """Validate a bearer token read from ``source`` (a file name, for messages)."""
    token = text.strip()
    if not token:
        raise CredentialError(f"{source} holds no token", "give the file that holds the token")
    if not _TOKEN_CHARS.match(token):
        raise CredentialError(
            f"the token in {source} has spaces, line breaks or non-ASCII characters inside",
            "a bearer token is one line of printable characters: check the file",
        )
    start, expiry = _jwt_times(token)
    if expiry is not None and expiry <= now:
        raise CredentialError(f"the token in {source} expired at {expiry:%Y-%m-%d %H:%M:%S}Z")
    if start is not None and expiry is not None and start >= expiry:
        start = None  # no usable lifetime: the margin falls back to its floor
    return StoredCredential(name=check_name(name), token=token, not_after=expiry, not_before=start)


def certificate_credential(
    name: str, cert_pem: bytes, key_pem: bytes, cert_source: str, key_source: str, now: datetime
) -> StoredCredential:
    """Validate a client certificate (chain) and its private key, both PEM."""
    # Only here: cryptography's x509 costs the agent's start-up time it rarely needs.
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    try:
        chain = x509.load_pem_x509_certificates(cert_pem)
    except ValueError:
        raise CredentialError(f"{cert_source} holds no PEM certificate") from None
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except TypeError:
        raise CredentialError(
            f"the private key in {key_source} is encrypted",
            "kubectl needs an unencrypted key: decrypt it into a file only you can read, store "
            "it, then delete that file",
        ) from None
    except (ValueError, Exception) as e:
        raise CredentialError(f"{key_source} holds no usable PEM private key ({e})") from None
    leaf = chain[0]
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    der = serialization.Encoding.DER
    if leaf.public_key().public_bytes(der, spki) != key.public_key().public_bytes(der, spki):
        raise CredentialError(
            f"the key in {key_source} does not belong to the certificate in {cert_source}",
            "give the key that was generated with this certificate",
        )
    not_after, not_before = leaf.not_valid_after_utc, leaf.not_valid_before_utc
    if not_after <= now:
        raise CredentialError(
            f"the certificate in {cert_source} expired at {not_after:%Y-%m-%d %H:%M:%S}Z",
            "ask your cluster's administrator for a new one",
        )
    if not_before > now:  # the API server would refuse it: tls: bad certificate
        raise CredentialError(
            f"the certificate in {cert_source} is not valid before {not_before:%Y-%m-%d %H:%M:%S}Z",
            "store it once it is valid, or check this machine's clock",
        )
    pem = serialization.Encoding.PEM
    return StoredCredential(
        name=check_name(name),
        certificate_pem="".join(c.public_bytes(pem).decode() for c in chain),
        key_pem=key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode(),
        not_after=not_after,
        subject=leaf.subject.rfc4514_string(),
        not_before=not_before,
    )


class StoredCredentials:
    """Stored credentials: the secrets in a SecretStore, the index in a JSON file."""

    def __init__(self, store: SecretStore, index_path: str) -> None:
        self._store = store
        self._index_path = index_path
        self._listed: tuple[bytes, list[StoredInfo]] | None = None
        """What list() made last, and the index file's bytes it was made from: the tray asks
        every second, and the file changes only when credentials are stored or removed (by any
        kubetray process). Comparing bytes costs microseconds; parsing and building N entries
        is what grew with N."""

    @property
    def index_path(self) -> str:
        return self._index_path

    def _read_index(self) -> dict[str, dict[str, str | None]]:
        # A missing or damaged index loses only names and dates; the secrets are intact.
        doc = jsonfile.load(self._index_path)
        if isinstance(doc, dict):
            formats.check(doc, self._index_path, INDEX_FORMAT)
        creds = doc.get("credentials") if isinstance(doc, dict) else None
        return dict(creds) if isinstance(creds, dict) else {}

    def _write_index(self, creds: dict[str, dict[str, str | None]]) -> None:
        try:
            formats.save(self._index_path, {"credentials": creds}, INDEX_FORMAT)
        except OSError as e:  # jsonfile removes its temporary file
            raise StoreError(f"cannot write {self._index_path}: {e.strerror or e}") from None

    def save(self, cred: StoredCredential, now: datetime) -> None:
        """Put the secret in the store, then record it in the index."""
        self.save_all([cred], now)

    def save_all(
        self, new: Sequence[StoredCredential], now: datetime, progress: Progress = quiet
    ) -> None:
        """Put each secret in the store, then record them all in the index with one write
        (``secure --all``: one index write for hundreds, not one each). The index is read
        first: a newer kubetray's is refused before anything changes. ``progress`` hears of
        each secret stored."""
        creds = self._read_index()
        for done, cred in enumerate(new, 1):
            self._store.set(_KEY_PREFIX + cred.name, cred.to_bytes())
            progress("stored", done, len(new), cred.name)
        for cred in new:
            creds[cred.name] = {
                "kind": cred.kind,
                "not_after": cred.not_after.isoformat() if cred.not_after else None,
                "not_before": cred.not_before.isoformat() if cred.not_before else None,
                "subject": cred.subject,
                "stored_at": now.isoformat(timespec="seconds"),
            }
        self._write_index(creds)

    def load(self, name: str) -> StoredCredential:
        """The credential called ``name``; CredentialError when there is none."""
        data = self._store.get(_KEY_PREFIX + check_name(name))
        if data is None:
            raise CredentialError(
                f"no stored credential named {name!r}",
                f"store one with: kubetray store {name} --token-file FILE "
                "(or --client-certificate FILE --client-key FILE)",
            )
        return StoredCredential.from_bytes(data, f"the stored credential {name!r}")

    def remove(self, name: str) -> bool:
        """Delete the secret and its index entry; False when neither existed."""
        return bool(self.remove_all([name]))

    def remove_all(self, names: Sequence[str], progress: Progress = quiet) -> list[str]:
        """remove() of each name, with one index write (read first, as for save_all); the
        names that existed."""
        creds = self._read_index()
        removed = []
        for done, name in enumerate(names, 1):
            if self._store.delete(_KEY_PREFIX + check_name(name)):
                removed.append(name)
            progress("removed", done, len(names), name)
        listed = [name for name in names if creds.pop(name, None) is not None]
        if listed:
            self._write_index(creds)
        return list(dict.fromkeys([*removed, *listed]))

    def _list(self) -> list[StoredInfo]:
        try:
            with open(self._index_path, "rb") as f:
                seen: bytes | None = f.read()
        except OSError:
            seen = None
        if seen is not None and self._listed is not None and self._listed[0] == seen:
            return list(self._listed[1])
        out = []
        for name, entry in sorted(self._read_index().items()):
            out.append(
                StoredInfo(
                    name=name,
                    kind=str(entry.get("kind") or TOKEN),
                    not_after=entry.get("not_after"),
                    subject=entry.get("subject"),
                    stored_at=str(entry.get("stored_at") or ""),
                    not_before=entry.get("not_before"),
                )
            )
        self._listed = (seen, out) if seen is not None else None
        return list(out)

    def list(self) -> list[StoredInfo]:
        """What the index knows, sorted by name; none while it cannot be read (status goes
        on, and says why: app/statefiles.py; writes still refuse)."""
        try:
            return self._list()
        except AppError as e:
            log.debug("stored credentials not listed: %s", e.one_line())
            return []
