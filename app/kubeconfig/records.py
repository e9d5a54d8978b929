"""What kubetray changed in users, kept so it can be undone: ``import --undo``, ``unsecure``.

A record holds a user's body before and after, and that can hold secrets (a client secret
in kubelogin's args, the static token ``secure`` moved), so such records live in the secret
store. An import that holds none (an AKS, GKE or EKS user: a tenant, a project, a profile) is
kept in a small journal in the state directory instead, so that ``import`` needs no keyring
for it. Undo puts ``before`` back only where the user still reads ``after``: an entry changed
since then is reported and left alone.
"""

import json
import os
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from app import formats, jsonfile
from app.errors import StoreError
from app.kubeconfig.edit import Edit, replace_user, same_user
from app.kubeconfig.secrets import user_has_secrets
from app.kubeconfig.view import View
from app.store.keyring_store import NoKeyring
from app.store.secret_store import SecretStore

IMPORTS = "kubeconfig/imports"
SECURED = "kubeconfig/secured"
FORMAT = 1
"""The records' format (app/formats.py): 0.1.0's list of batches, read strictly by it, so kept
as it is; a later format would be an object naming its number."""
JOURNAL_FORMAT = 1
"""The import journal's format (app/formats.py): ``{"imports": [row, ...]}``, oldest first."""


@dataclass(frozen=True)
class UserChange:
    """One user of one file, before and after kubetray rewrote it."""

    file: str
    user: str
    before: dict[str, Any]
    after: dict[str, Any]
    stored: str | None = None
    """The stored credential ``secure`` made for it."""
    text: str | None = None
    """The body as the file spelled it before (comments, quoting, folding): an undo puts
    these characters back where the user still reads ``after``."""
    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """Fields of a newer kubetray, kept as they were."""

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        if doc["text"] is None:  # 0.1.0 reads records with cls(**doc): only its fields
            del doc["text"]
        return {**doc.pop("extra"), **doc}

    @classmethod
    def from_dict(cls, doc: object) -> "UserChange":
        names = [f.name for f in fields(cls) if f.name != "extra"]
        if not isinstance(doc, dict) or not all(n in doc for n in names[:4]):
            raise StoreError("kubetray's record of kubeconfig changes is damaged")
        return cls(**{n: doc[n] for n in names if n in doc}, extra=formats.unknown(doc, names))


class Records:
    """A list of batches of user changes under one secret store key."""

    def __init__(self, store: SecretStore, key: str) -> None:
        self._store = store
        self._key = key

    def batches(self) -> list[list[UserChange]]:
        """The batches, oldest first; NewerFormat for a newer kubetray's records."""
        raw = self._store.get(self._key)
        try:
            rows = json.loads(raw) if raw else []
        except (ValueError, RecursionError):
            raise StoreError("kubetray's record of kubeconfig changes is damaged") from None
        if isinstance(rows, dict):  # a later format names itself
            formats.check(rows, "kubetray's record of kubeconfig changes", FORMAT)
            rows = rows.get("batches")
        if not isinstance(rows, list) or not all(isinstance(b, list) for b in rows):
            raise StoreError("kubetray's record of kubeconfig changes is damaged")
        return [[UserChange.from_dict(change) for change in batch] for batch in rows]

    def save(self, batches: list[list[UserChange]]) -> None:
        batches = [b for b in batches if b]
        if not batches:
            self._store.delete(self._key)
            return
        doc = [[c.to_dict() for c in b] for b in batches]
        self._store.set(self._key, json.dumps(doc).encode())

    def push(self, batch: list[UserChange]) -> None:
        self.save([*self.batches(), batch])


def holds_secrets(batch: list[UserChange]) -> bool:
    """Does any change, before or after, carry a secret (so its record needs the keyring)?"""
    return any(user_has_secrets(c.before) or user_has_secrets(c.after) for c in batch)


class ImportRecords:
    """The record of imports: a journal file lists them, oldest first; an import that holds no
    secret is in its row, one that does is in a secret store item the row names. Imports an
    older kubetray recorded (all in the store item ``IMPORTS``) come before every row."""

    def __init__(self, journal: str, store: SecretStore) -> None:
        self._journal = journal
        self._store = store

    def _rows(self) -> list[dict[str, Any]]:
        doc = jsonfile.load(self._journal)
        if not isinstance(doc, dict):
            return []
        formats.check(doc, self._journal, JOURNAL_FORMAT)
        rows = doc.get("imports")
        return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []

    def _save_rows(self, rows: list[dict[str, Any]]) -> None:
        formats.save(self._journal, {"imports": rows}, JOURNAL_FORMAT)

    def _legacy(self) -> Records:
        return Records(self._store, IMPORTS)

    def _legacy_batches(self) -> list[list[UserChange]]:
        try:
            return self._legacy().batches()
        except NoKeyring:  # without a keyring no kubetray could have recorded one there
            return []

    def push(self, batch: list[UserChange]) -> None:
        """Record one import: in the journal, or in the secret store when it holds a secret."""
        changes = [c.to_dict() for c in batch]
        rows = self._rows()
        row: dict[str, Any] = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        if holds_secrets(batch):
            ref = f"{IMPORTS}/{time.time_ns()}"
            self._store.set(ref, json.dumps(changes).encode())
            row["ref"] = ref
        else:
            row["changes"] = changes
        self._save_rows([*rows, row])

    def note_written(self, written: dict[str, dict[str, str]]) -> None:
        """Say in the newest import's row what it wrote, per file: the SHA-256 of the bytes
        (``digest``) and the backup of what was there (``backup``), so that its undo puts the
        backup's exact bytes back while the file is as the import left it."""
        rows = self._rows()
        if rows and written:
            rows[-1]["files"] = {**rows[-1].get("files", {}), **written}
            self._save_rows(rows)

    def last(self, paths: list[str] | None = None) -> "Found | None":
        """The newest import that changed one of ``paths`` (None: any file), with only its
        changes of those files; None when there is none to undo."""
        wanted = None if paths is None else {_same(p) for p in paths}

        def asked(batch: list[UserChange]) -> list[UserChange]:
            return [c for c in batch if wanted is None or _same(c.file) in wanted]

        rows = self._rows()
        for index, row in reversed(list(enumerate(rows))):
            if changes := asked(self._changes(row)):
                written = row.get("files")
                kept = written if isinstance(written, dict) else {}
                return Found(index, changes, {c.file: kept.get(c.file) for c in changes})
        if rows:  # imports an older kubetray recorded come before every row
            return None
        for index, batch in reversed(list(enumerate(self._legacy_batches()))):
            if changes := asked(batch):
                return Found(-1 - index, changes, {})
        return None

    def _changes(self, row: dict[str, Any]) -> list[UserChange]:
        changes = row.get("changes")
        if isinstance(row.get("ref"), str):
            raw = self._store.get(row["ref"])
            try:
                changes = json.loads(raw) if raw else None
            except ValueError:
                changes = None
        if not isinstance(changes, list):
            raise StoreError("kubetray's record of an import is damaged")
        return [UserChange.from_dict(c) for c in changes]

    def drop(self, found: "Found") -> None:
        """Forget what ``found`` undid: its files' changes; the import's row once none is left."""
        done = {(c.file, c.user) for c in found.changes}
        if found.index < 0:  # an older kubetray's record in the secret store
            legacy = self._legacy()
            batches = legacy.batches()
            i = -1 - found.index
            batches[i] = [c for c in batches[i] if (c.file, c.user) not in done]
            legacy.save(batches)
            return
        rows = self._rows()
        row = rows[found.index]
        left = [c for c in self._changes(row) if (c.file, c.user) not in done]
        files = row.get("files")
        if isinstance(files, dict):
            row["files"] = {k: v for k, v in files.items() if k not in found.written}
        if not left:
            rows.pop(found.index)
            if isinstance(row.get("ref"), str):
                self._store.delete(row["ref"])
        elif isinstance(row.get("ref"), str):
            self._store.set(row["ref"], json.dumps([c.to_dict() for c in left]).encode())
        else:
            row["changes"] = [c.to_dict() for c in left]
        self._save_rows(rows)


@dataclass(frozen=True)
class Found:
    """An import to undo: its place in the record, its changes of the files asked for, and what
    it wrote to each (``{"digest", "backup"}``; None where the record does not say)."""

    index: int
    changes: list[UserChange]
    written: dict[str, Any]


def _same(path: str) -> str:
    return os.path.realpath(os.path.expanduser(path))


def undo(batch: list[UserChange]) -> Edit:
    """Put each user back as it was, where it still reads what kubetray wrote: only those
    users' bodies, spelled as they were, every other byte of the file kept."""
    edit = Edit(minimal=True)
    for change in batch:
        edit.add(change.file, replace_user(change.user, change.after, change.before))
        if change.text is not None:
            edit.verbatim.setdefault(change.file, {})[change.user] = change.text
    return edit


def still_as_written(view: View, change: UserChange) -> bool:
    """Does the user still read what kubetray wrote (so that undo restores it)?"""
    f = next((f for f in view.files if f.path == change.file), None)
    entry = f.find("users", change.user) if f else None
    return entry is not None and same_user(entry.get("user"), change.after)
