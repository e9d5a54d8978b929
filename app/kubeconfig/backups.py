"""Timestamped backups of kubeconfig files, taken before each kubetray write.

A file without secrets is copied beside itself (``config.kubetray-<time>.bak``, mode 0600). A
file that holds a secret is copied into the secret store instead, so no kubetray backup ever
leaves a token or key in plaintext (``kubetray secure`` would be pointless otherwise). A small
non-secret journal in the state directory lists both kinds; ``kubetray backups`` shows it and
restores from it. The newest KEEP backups of each file are kept.

One write of several files (``secure --all`` over a KUBECONFIG of hundreds of files) backs
them up together: the files with secrets in one store item (``keyring-shared``, a JSON object
of path → text), and one journal write. A keyring write costs tens of milliseconds and grows
with the keyring, so one item per file made such a write minutes long (issue 33). A shared
item goes when no backup in the journal refers to it any more.
"""

import contextlib
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from app import formats, jsonfile
from app.errors import AppError
from app.kubeconfig import files
from app.kubeconfig.files import KubeconfigFile
from app.kubeconfig.secrets import has_secrets
from app.store.secret_store import SecretStore

KEEP = 5
FORMAT = 1
"""The journal's format (app/formats.py). 0.1.0 read its rows strictly: they keep its fields."""
ON_DISK = "file"
IN_STORE = "keyring"
IN_STORE_SHARED = "keyring-shared"
"""In a store item with the other files backed up by the same write (an older kubetray, which
knows only ``keyring``, finds no such backup rather than misreading it)."""
_STORE_PREFIX = "kubeconfig-backup/"
_SHARED_PREFIX = "kubeconfig-backups/"


@dataclass(frozen=True)
class Backup:
    """One backup: of which file, when, by which operation, and where it is."""

    id: str
    file: str
    time: str
    operation: str
    where: str
    """``file``, ``keyring`` or ``keyring-shared``."""
    ref: str
    """The backup file's path, or the secret store key."""
    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """Fields of a newer kubetray, kept as they were."""

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        return {**doc.pop("extra"), **doc}

    @property
    def in_store(self) -> bool:
        """Kept in the secret store (the file held secrets), not on disk."""
        return self.where in (IN_STORE, IN_STORE_SHARED)


class Backups:
    """Take, list and restore backups."""

    def __init__(self, journal: str, store: Callable[[], SecretStore]) -> None:
        self._journal = journal
        self._store_factory = store
        self._store: SecretStore | None = None

    def _secret_store(self) -> SecretStore:
        if self._store is None:
            self._store = self._store_factory()
        return self._store

    def entries(self, file: str | None = None) -> list[Backup]:
        """Oldest first; only those of ``file`` when given."""
        doc = jsonfile.load(self._journal)
        if isinstance(doc, dict):
            formats.check(doc, self._journal, FORMAT)
        rows = doc.get("backups") if isinstance(doc, dict) else None
        out = [b for row in rows or [] if (b := _backup(row)) is not None]
        return [b for b in out if file is None or b.file == file]

    def _write_journal(self, backups: list[Backup]) -> None:
        formats.save(self._journal, {"backups": [b.to_dict() for b in backups]}, FORMAT)

    def save(self, f: KubeconfigFile, operation: str) -> Backup:
        """Back up ``f`` as it was read (its text must exist) before it is replaced."""
        return self.save_all([f], operation)[0]

    def save_all(self, fs: Sequence[KubeconfigFile], operation: str) -> list[Backup]:
        """Back up each of ``fs`` as read (their texts must exist), before any is replaced:
        one backup each, in order; those with secrets in one store item when there are several,
        and the journal written once."""
        earlier = self.entries()  # a newer kubetray's journal: refused before anything is written
        stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{time.time_ns() % 1_000_000_000:09d}"
        now = _iso_now()
        secret = {i for i, f in enumerate(fs) if has_secrets(f.data)}
        shared = f"{_SHARED_PREFIX}{stamp}" if len(secret) > 1 else None
        if shared is not None:
            texts = {fs[i].real: fs[i].text for i in sorted(secret)}
            self._secret_store().set(shared, json.dumps(texts).encode("utf-8"))
        taken = []
        for i, f in enumerate(fs):
            assert f.text is not None
            ident = stamp if len(fs) == 1 else f"{stamp}-{i:04d}"
            if shared is not None and i in secret:
                backup = Backup(ident, f.real, now, operation, IN_STORE_SHARED, shared)
            elif i in secret:
                key = f"{_STORE_PREFIX}{f.real}/{stamp}"
                self._secret_store().set(key, f.text.encode("utf-8"))
                backup = Backup(ident, f.real, now, operation, IN_STORE, key)
            else:
                path = f"{f.real}.kubetray-{stamp}.bak"
                files.write_atomic(path, f.text.encode("utf-8"), 0o600)
                backup = Backup(ident, f.real, now, operation, ON_DISK, path)
            taken.append(backup)
        every = [*earlier, *taken]
        by_file: dict[str, list[Backup]] = {}
        for b in every:
            by_file.setdefault(b.file, []).append(b)
        dropped = [old for real in {f.real for f in fs} for old in by_file[real][:-KEEP]]
        if dropped:
            gone = {id(b) for b in dropped}
            every = [b for b in every if id(b) not in gone]
            still = {b.ref for b in every}
            for old in dropped:
                if old.ref not in still:  # a shared item goes with its last backup
                    self._discard(old)
        self._write_journal(every)
        # Backup files a killed kubetray wrote but never listed go too, oldest first.
        listed = {b.ref for b in every}
        listings: dict[str, list[str]] = {}
        for real in dict.fromkeys(f.real for f in fs):
            strays = _backup_files(real, listings)
            for path in [p for p in strays if p not in listed][: max(0, len(strays) - KEEP)]:
                with contextlib.suppress(OSError):
                    os.unlink(path)
        return taken

    def _discard(self, backup: Backup) -> None:
        with contextlib.suppress(OSError, AppError):
            if backup.in_store:
                self._secret_store().delete(backup.ref)
            else:
                os.unlink(backup.ref)

    def content(self, backup: Backup) -> bytes:
        """The backed-up bytes; AppError when they are gone."""
        try:
            if backup.in_store:
                data = self._secret_store().get(backup.ref)
                if data is None:
                    raise FileNotFoundError
                if backup.where == IN_STORE_SHARED:
                    return _member(data, backup)
                return data
            with open(backup.ref, "rb") as f:
                return f.read()
        except FileNotFoundError:
            raise AppError(f"backup {backup.id} of {backup.file} no longer exists") from None


def _backup(row: object) -> Backup | None:
    """A journal row; None for one that lacks what a backup needs (damaged)."""
    if not isinstance(row, dict):
        return None
    names = [f.name for f in fields(Backup) if f.name != "extra"]
    if not all(isinstance(row.get(n), str) for n in names):
        return None
    return Backup(**{n: row[n] for n in names}, extra=formats.unknown(row, names))


def _backup_files(real: str, listings: dict[str, list[str]]) -> list[str]:
    """``<real>.kubetray-*.bak`` beside ``real``, sorted (oldest first). ``listings`` keeps each
    directory's names: hundreds of kubeconfigs in one directory are listed once, not each."""
    directory, base = os.path.split(real)
    if directory not in listings:
        try:
            listings[directory] = os.listdir(directory or ".")
        except OSError:
            listings[directory] = []
    names = listings[directory]
    prefix = base + ".kubetray-"
    return sorted(
        os.path.join(directory, n) for n in names if n.startswith(prefix) and n.endswith(".bak")
    )


def _member(data: bytes, backup: Backup) -> bytes:
    """``backup``'s file in a shared item (see the module)."""
    try:
        texts = json.loads(data)
    except ValueError:
        raise AppError(f"backup {backup.id} of {backup.file} is damaged") from None
    text = texts.get(backup.file) if isinstance(texts, dict) else None
    if not isinstance(text, str):
        raise FileNotFoundError
    return text.encode("utf-8")


def _iso_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
