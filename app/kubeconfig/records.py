"""What kubetray changed in users, kept so it can be undone: ``import --undo``, ``unsecure``.

A record holds a user's body before and after, and that can hold secrets (a client secret
in kubelogin's args, the static token ``secure`` moved), so such records live in the secret
store. An import that holds none (an AKS, GKE or EKS user: a tenant, a project, a profile) is
kept in a small journal in the state directory instead, so that ``import`` needs no keyring
for it. Undo puts ``before`` back only where the user still reads ``after``: an entry changed
since then is reported and left alone.
"""

import json
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
    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """Fields of a newer kubetray, kept as they were."""

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
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

    def last(self) -> list[UserChange] | None:
        """The newest import's changes, or None when there is none to undo."""
        rows = self._rows()
        if not rows:
            legacy = self._legacy_batches()
            return legacy[-1] if legacy else None
        row = rows[-1]
        changes = row.get("changes")
        if isinstance(row.get("ref"), str):
            raw = self._store.get(row["ref"])
            try:
                changes = json.loads(raw) if raw else None
            except ValueError:
                changes = None
        if not isinstance(changes, list):
            raise StoreError("kubetray's record of the last import is damaged")
        return [UserChange.from_dict(c) for c in changes]

    def drop_last(self) -> None:
        """Forget the newest import (once undone)."""
        rows = self._rows()
        if not rows:
            legacy = self._legacy()
            legacy.save(legacy.batches()[:-1])
            return
        row = rows.pop()
        self._save_rows(rows)
        if isinstance(row.get("ref"), str):
            self._store.delete(row["ref"])


def undo(batch: list[UserChange]) -> Edit:
    """Put each user back as it was, where it still reads what kubetray wrote."""
    edit = Edit()
    for change in batch:
        edit.add(change.file, replace_user(change.user, change.after, change.before))
    return edit


def still_as_written(view: View, change: UserChange) -> bool:
    """Does the user still read what kubetray wrote (so that undo restores it)?"""
    f = next((f for f in view.files if f.path == change.file), None)
    entry = f.find("users", change.user) if f else None
    return entry is not None and same_user(entry.get("user"), change.after)
