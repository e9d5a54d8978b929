"""Timestamped backups of kubeconfig files, taken before each kubetray write.

A file without secrets is copied beside itself (``config.kubetray-<time>.bak``, mode 0600). A
file that holds a secret is copied into the secret store instead, so no kubetray backup ever
leaves a token or key in plaintext (``kubetray secure`` would be pointless otherwise). A small
non-secret journal in the state directory lists both kinds; ``kubetray backups`` shows it and
restores from it. The newest KEEP backups of each file are kept.
"""

import contextlib
import glob
import os
import time
from collections.abc import Callable
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
_STORE_PREFIX = "kubeconfig-backup/"


@dataclass(frozen=True)
class Backup:
    """One backup: of which file, when, by which operation, and where it is."""

    id: str
    file: str
    time: str
    operation: str
    where: str
    """``file`` or ``keyring``."""
    ref: str
    """The backup file's path, or the secret store key."""
    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """Fields of a newer kubetray, kept as they were."""

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        return {**doc.pop("extra"), **doc}


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
        doc = jsonfile.load(self._journal)
        kept = formats.unknown(doc, ("backups",)) if isinstance(doc, dict) else {}
        rows = {"backups": [b.to_dict() for b in backups]}
        jsonfile.save(self._journal, formats.stamped({**kept, **rows}, FORMAT))

    def save(self, f: KubeconfigFile, operation: str) -> Backup:
        """Back up ``f`` as it was read (its text must exist) before it is replaced."""
        assert f.text is not None
        earlier = self.entries()  # a newer kubetray's journal: refused before anything is written
        stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{time.time_ns() % 1_000_000_000:09d}"
        raw = f.text.encode("utf-8")
        if has_secrets(f.data):
            key = f"{_STORE_PREFIX}{f.real}/{stamp}"
            self._secret_store().set(key, raw)
            backup = Backup(stamp, f.real, _iso_now(), operation, IN_STORE, key)
        else:
            path = f"{f.real}.kubetray-{stamp}.bak"
            files.write_atomic(path, raw, 0o600)
            backup = Backup(stamp, f.real, _iso_now(), operation, ON_DISK, path)
        every = [*earlier, backup]
        mine = [b for b in every if b.file == f.real]
        for old in mine[:-KEEP]:
            self._discard(old)
            every.remove(old)
        self._write_journal(every)
        # Backup files a killed kubetray wrote but never listed go too, oldest first.
        listed = {b.ref for b in every}
        strays = sorted(glob.glob(glob.escape(f.real) + ".kubetray-*.bak"))
        for path in [p for p in strays if p not in listed][: max(0, len(strays) - KEEP)]:
            with contextlib.suppress(OSError):
                os.unlink(path)
        return backup

    def _discard(self, backup: Backup) -> None:
        with contextlib.suppress(OSError, AppError):
            if backup.where == IN_STORE:
                self._secret_store().delete(backup.ref)
            else:
                os.unlink(backup.ref)

    def content(self, backup: Backup) -> bytes:
        """The backed-up bytes; AppError when they are gone."""
        try:
            if backup.where == IN_STORE:
                data = self._secret_store().get(backup.ref)
                if data is None:
                    raise FileNotFoundError
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


def _iso_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
