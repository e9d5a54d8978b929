"""The token journal: a refresh's answer on disk, encrypted, a local fsync after it arrives.

A rotating provider's answer is the only copy of the new refresh token: the old one is dead
the moment the provider answered, and presenting it again revokes the grant. A Secret Service
write takes 15 to 99 ms under load (and waits for other identities' writes), so an agent killed
in that window lost the login. The journal closes it to one ``write`` and ``fdatasync`` of a
local file: ``Logins._keep`` records every token set the moment it is the identity's, before
the keyring is asked; the keyring write that follows settles the record, and once every record
is settled the file is cut back to its header. At the next start (the store's first use) the
newest record of each identity is written to the keyring where it differs, and the journal
keeps only what the keyring still lacks: the token store reads those from the journal, never
the keyring's older copy (whose refresh token the provider has already rotated away).

What the journal never does: hold a plaintext token (AES-256-GCM under a key that lives only
in the keyring, read or made once and kept in memory for the agent's life, so a record costs
no keyring round trip), exist where there is no keyring (tokens are in memory only then, as
status and doctor say), or save a refresh the agent was killed in the middle of: once the
request left, the provider may have rotated the token, and no answer means nothing to keep.

The file (``token-journal`` in the state directory, 0600) is format 1: one JSON header line
``{"format": "kubetray token journal", "version": 1, "kubetray": ..., "key": KEY-ID}``, then
records of a 4-byte big-endian length, a 12-byte nonce and the ciphertext with its tag (the
associated data is ``AAD`` and the key id). A record's plaintext is JSON: the store key, the
token set in base64 (null: the identity logged out), and when. A torn last record (a kill in
the middle of a write) is ignored and the rest kept. A newer format is left alone and not
written to (the journal is off; the keyring is written as before). Records under a key the
keyring no longer holds cannot be read by anyone: the file is moved aside, never replaced. A
journal that cannot be rewritten at start (a full disk) is off too, and its file is cut in place
to what the keyring refused, then to its header once the keyring has that: a record must never
outlive a newer keyring write, or the next start would write it back over newer tokens.
kubetray before the journal never opens this file.
"""

import base64
import contextlib
import hashlib
import json
import logging
import os
import struct
import sys
import threading
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from app import atomic_file, formats, jsonfile
from app.errors import AppError
from app.store.secret_store import SecretStore

log = logging.getLogger(__name__)

NAME = "token-journal"
FORMAT = 1
KIND = "kubetray token journal"
KEY_ITEM = "kubetray/journal-key"
"""The keyring item holding the journal's key (JSON, format 1: key, created)."""
AAD = b"kubetray token journal 1/"
ROTATE_AFTER = timedelta(days=30)
"""A key older than this is replaced at a start that leaves the journal empty."""
COMPACT_AT = 256 * 1024
"""Bytes past which unsettled records are rewritten, newest per identity only."""
_LEN = struct.Struct(">I")
_NONCE = 12
MAX_RECORD = 1 << 20
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_BINARY = getattr(os, "O_BINARY", 0)
"""Windows opens a descriptor in text mode unless told: LF would become CRLF in a record (and a
0x1A byte end a read), so every record after it would read as torn."""


class Unreadable(Exception):
    """The journal cannot be read at all (a newer format, a damaged header)."""


def key_id(key: bytes) -> str:
    return hashlib.sha256(b"kubetray journal key id/" + key).hexdigest()[:16]


def seal(key: bytes, store_key: str, value: bytes | None, now: datetime) -> bytes:
    """One record: length, nonce, ciphertext."""
    plain = json.dumps(
        {
            "key": store_key,
            "tokens": base64.b64encode(value).decode() if value is not None else None,
            "at": now.isoformat(),
        }
    ).encode()
    nonce = os.urandom(_NONCE)
    body = nonce + AESGCM(key).encrypt(nonce, plain, AAD + key_id(key).encode())
    return _LEN.pack(len(body)) + body


def header(key: bytes) -> bytes:
    doc = formats.stamped({"format": KIND, "key": key_id(key)}, FORMAT)
    return json.dumps(doc, sort_keys=True).encode() + b"\n"


Records = list[tuple[str, bytes | None]]


def parse(data: bytes, key: bytes | None) -> tuple[dict[str, Any], Records, str]:
    """(header, records in order, what was skipped) of a journal's bytes. ``key`` None reads
    the header only. Unreadable on a newer format or a damaged header; records under another
    key raise KeyError (nobody can read them with this key)."""
    line, newline, rest = data.partition(b"\n")
    try:
        doc = json.loads(line) if newline else None
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or doc.get("format") != KIND:
        raise Unreadable("its header is damaged")
    try:
        formats.check(doc, "the token journal", FORMAT)
    except formats.NewerFormat as e:
        raise Unreadable(e.message) from None
    if key is None or not rest:
        return doc, [], ""
    if doc.get("key") != key_id(key):
        raise KeyError(str(doc.get("key")))
    aead, aad = AESGCM(key), AAD + key_id(key).encode()
    records: Records = []
    bodies, skipped = frames(rest)
    for end, body in bodies:
        try:
            plain = json.loads(aead.decrypt(body[:_NONCE], body[_NONCE:], aad))
            value = plain["tokens"]
            records.append(
                (str(plain["key"]), base64.b64decode(value) if value is not None else None)
            )
        except (InvalidTag, ValueError, KeyError, TypeError):
            last = end >= len(rest)
            return doc, records, "a torn last record" if last else f"a damaged record at {end}"
    return doc, records, skipped


def frames(rest: bytes) -> tuple[list[tuple[int, bytes]], str]:
    """The records after the header line, as written: (the offset each ends at, its nonce and
    ciphertext), in order; then what could not be framed (a torn or damaged tail), or ""."""
    out: list[tuple[int, bytes]] = []
    at = 0
    while at < len(rest):
        left = len(rest) - at
        if left < _LEN.size:
            return out, "a torn last record"
        (size,) = _LEN.unpack_from(rest, at)
        if size > MAX_RECORD or size < _NONCE + 16:
            return out, f"a damaged record at byte {at} and {left} bytes after it"
        if left < _LEN.size + size:
            return out, "a torn last record"
        at += _LEN.size + size
        out.append((at, rest[at - size : at]))
    return out, ""


def newest(records: Records) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for key, value in records:
        out[key] = value
    return out


class TokenJournal:
    """The journal of one agent: ``open`` once (replays, compacts; a keyring round trip),
    then ``record`` before each store write and ``settled`` after it."""

    def __init__(self, path: str, keyring: SecretStore, clock: Any = None) -> None:
        self.path = path
        self._keyring = keyring
        self._clock = clock or (lambda: datetime.now(UTC))
        self._lock = threading.Lock()
        self._key: bytes | None = None
        self._fd: int | None = None
        self._base = 0
        """Bytes of the header: what the file is cut back to once everything is settled."""
        self._size = 0
        self._outstanding: dict[str, bytes | None] = {}
        self.opened = False
        self.off: str | None = None
        """Why the journal is not used (a newer format, a file that cannot be written)."""

    # -- start ------------------------------------------------------------------------------

    def open(self) -> None:
        """Replay what a killed agent left, compact, and get ready to record. Raises the
        keyring's AppError when it cannot be asked (the next use of the store tries again)."""
        with self._lock:
            if self.opened:
                return
            try:
                data = _read(self.path)
            except OSError as e:
                self._give_up(f"cannot read {self.path}: {e.strerror or e}")
                return
            try:
                if data:
                    parse(data, None)
            except Unreadable as e:
                self._give_up(f"{self.path} is left as it is: {e}")
                return
            try:
                key, created = self._load_key()
            except formats.NewerFormat as e:
                self._give_up(e.message)
                return
            replayed: dict[str, bytes | None] = {}
            if data:
                try:
                    _, records, skipped = parse(data, key)
                except KeyError:
                    records, skipped = [], ""
                    if len(data) > data.index(b"\n") + 1:
                        aside = jsonfile.rename_aside(self.path)
                        log.warning(
                            "the token journal was written under a key the keyring no longer "
                            "holds; moved to %s (its tokens cannot be read)",
                            aside,
                        )
                if skipped:
                    log.info("token journal: ignored %s", skipped)
                replayed = newest(records)
            left = self._settle_replayed(replayed)
            if not left and created is not None and self._clock() - created > ROTATE_AFTER:
                key = self._new_key()
            self._key = key
            self._outstanding = left
            try:
                self._rewrite()
            except OSError as e:
                self._give_up(f"cannot write {self.path}: {e.strerror or e}")
                self._shrink_in_place(data, key)
                return
            self.opened = True

    def _shrink_in_place(self, data: bytes, key: bytes) -> None:
        """The journal is off (it could not be rewritten: a full disk, a directory that refuses
        new files): cut the file it read down to its header and what the keyring refused, in
        place, which needs no free space. A record the keyring took must not stay, or the next
        start would write it back over the newer tokens the keyring gets meanwhile."""
        if not data:
            return
        base = data.index(b"\n") + 1
        body = b"".join(seal(key, k, v, self._clock()) for k, v in self._outstanding.items())
        if _cut(self.path, base, body):
            self._base = base if body else 0  # records on disk, cut once the keyring has them

    def _give_up(self, why: str) -> None:
        log.warning("token journal off: %s", why)
        self.off = why
        self.opened = True

    def _load_key(self) -> tuple[bytes, datetime | None]:
        """The journal key from the keyring, made (and stored) when there is none."""
        raw = self._keyring.get(KEY_ITEM)
        if raw is not None:
            try:
                doc = json.loads(raw)
                formats.check(doc, "the token journal's key", 1)
                key = base64.b64decode(doc["key"])
                created = datetime.fromisoformat(doc["created"])
                if len(key) == 32:
                    return key, created
            except formats.NewerFormat:
                raise
            except (ValueError, KeyError, TypeError):
                log.warning("the token journal's key in the keyring is damaged: a new one")
        return self._new_key(), None

    def _new_key(self) -> bytes:
        key = AESGCM.generate_key(bit_length=256)
        doc = formats.stamped(
            {"key": base64.b64encode(key).decode(), "created": self._clock().isoformat()}, 1
        )
        self._keyring.set(KEY_ITEM, json.dumps(doc).encode())
        return key

    def _settle_replayed(self, replayed: Mapping[str, bytes | None]) -> dict[str, bytes | None]:
        """Write to the keyring each newest record it lacks; what it refused stays."""
        left: dict[str, bytes | None] = {}
        for store_key, value in replayed.items():
            try:
                try:
                    current = self._keyring.get(store_key)
                except AppError:  # unreadable (a lost sealed file): the journal's is newer
                    current = b"" if value is not None else None
                if current == value:
                    continue
                if value is None:
                    self._keyring.delete(store_key)
                else:
                    self._keyring.set(store_key, value)
                log.info("token journal: tokens a killed agent had not saved are in the keyring")
            except AppError as e:
                log.warning("token journal: the keyring refused replayed tokens: %s", e.message)
                left[store_key] = value
        return left

    def _rewrite(self) -> None:
        """The file anew: header, then one record per unsettled identity; reopened to append."""
        assert self._key is not None
        head = header(self._key)
        now = self._clock()
        body = b"".join(seal(self._key, k, v, now) for k, v in self._outstanding.items())
        atomic_file.write(self.path, head + body, 0o600)
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | _NOFOLLOW | _BINARY)
        self._base, self._size = len(head), len(head) + len(body)

    # -- while the agent runs ---------------------------------------------------------------

    @property
    def active(self) -> bool:
        return self.opened and self.off is None and self._fd is not None

    def record(self, store_key: str, value: bytes | None) -> bool:
        """Put ``value`` (None: logged out) on disk for ``store_key``, synced; False when the
        journal is not in use or the disk refused (the keyring write still follows)."""
        with self._lock:
            self._outstanding.pop(store_key, None)  # older than ``value``: never read again
            if not self.active or self._key is None or self._fd is None:
                return False
            blob = seal(self._key, store_key, value, self._clock())
            try:
                written = os.write(self._fd, blob)
                if written != len(blob):
                    raise OSError(f"a short write ({written} of {len(blob)} bytes)")
                _sync(self._fd)
            except OSError as e:
                log.warning("token journal: cannot record (the keyring write follows): %s", e)
                try:
                    self._rewrite()  # without that record, and no torn one before the next
                except OSError:
                    with contextlib.suppress(OSError):
                        os.ftruncate(self._fd, self._size)  # the torn tail at least: no space
                return False
            self._outstanding[store_key] = value
            self._size += len(blob)
            return True

    def settled(self, store_key: str, value: bytes | None) -> None:
        """The store now holds ``value`` for ``store_key``: its record is no longer needed;
        with none left, the file goes back to its header."""
        with self._lock:
            if not self.active or self._fd is None:
                # Off: nothing was recorded since the start, so the store's ``value`` is newer
                # than what the journal kept; once nothing is left, the file keeps nothing.
                self._outstanding.pop(store_key, None)
                if self.off and not self._outstanding and self._base:
                    _cut(self.path, self._base)
                    self._base = 0
                return
            if store_key in self._outstanding and self._outstanding[store_key] == value:
                del self._outstanding[store_key]
            try:
                if not self._outstanding and self._size > self._base:
                    os.ftruncate(self._fd, self._base)
                    _sync(self._fd)
                    self._size = self._base
                elif self._size > COMPACT_AT:
                    self._rewrite()
            except OSError as e:
                log.warning("token journal: cannot compact: %s", e)

    def pending(self, store_key: str) -> tuple[bool, bytes | None]:
        """(True, value) when the journal holds tokens for ``store_key`` the keyring has not
        taken yet (a replay it refused, a write under way): those are the newest, and the
        keyring's copy may carry a refresh token the provider has rotated away."""
        with self._lock:
            if store_key in self._outstanding:
                return True, self._outstanding[store_key]
            return False, None

    def state(self) -> str:
        """For status and doctor."""
        if self.off:
            return f"off: {self.off}"
        if not self.opened:
            return "not open yet"
        return f"on ({len(self._outstanding)} unsaved)" if self._outstanding else "on"

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self._fd)
                self._fd = None


def _read(path: str) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _BINARY)
    except FileNotFoundError:
        return b""
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _cut(path: str, size: int, then: bytes = b"") -> bool:
    """Cut ``path`` to ``size`` bytes in place and write ``then`` after them, synced (a full
    disk allows it: the bytes go where freed ones were). False when it could not be done."""
    try:
        fd = os.open(path, os.O_WRONLY | _NOFOLLOW | _BINARY)
    except FileNotFoundError:
        return False  # moved aside, or gone: nothing to replay
    except OSError as e:
        log.warning("token journal: cannot cut %s back: %s", path, e.strerror or e)
        return False
    try:
        os.ftruncate(fd, size)
        if then:
            os.lseek(fd, size, os.SEEK_SET)
            if os.write(fd, then) != len(then):
                raise OSError("a short write")
        _sync(fd)
        return True
    except OSError as e:
        log.warning("token journal: cannot cut %s back: %s", path, e)
        return False
    finally:
        os.close(fd)


def _sync(fd: int) -> None:
    if sys.platform == "linux":
        os.fdatasync(fd)
    else:
        os.fsync(fd)
