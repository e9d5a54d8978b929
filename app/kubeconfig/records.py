"""What kubetray changed in users, kept so it can be undone: ``import --undo``, ``unsecure``.

A record holds a user's body before and after, and that can hold secrets (a client secret
in kubelogin's args, the static token ``secure`` moved), so records live in the secret store.
Undo puts ``before`` back only where the user still reads ``after``: an entry changed since
then is reported and left alone.
"""

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from app import formats
from app.errors import StoreError
from app.kubeconfig.edit import Edit, replace_user
from app.kubeconfig.view import View
from app.store.secret_store import SecretStore

IMPORTS = "kubeconfig/imports"
SECURED = "kubeconfig/secured"
FORMAT = 1
"""The records' format (app/formats.py): 0.1.0's list of batches, read strictly by it, so kept
as it is; a later format would be an object naming its number."""


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
    return entry is not None and entry.get("user") == change.after
