"""Change kubeconfig files safely: plan, show the diff, then apply under client-go's lock.

A change is a function that edits one file's parsed content in place. ``apply`` runs it again
on the file's latest content while holding ``<file>.lock``, so an entry kubectl wrote between
the plan and the write is kept. Each changed file is backed up first, then replaced atomically.
The files of one edit are locked together and backed up together before the first is replaced:
one backup write for hundreds of files (see app.kubeconfig.backups), each of what it replaces.
"""

import contextlib
import copy
import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.kubeconfig import files
from app.kubeconfig.backups import Backup, Backups
from app.kubeconfig.secrets import redacted
from app.kubeconfig.view import View
from app.progress import Progress, quiet

Change = Callable[[dict[str, Any]], None]


@dataclass
class Edit:
    """The changes to make, per file (as the view names it)."""

    changes: dict[str, list[Change]] = field(default_factory=dict)

    def add(self, path: str, change: Change) -> None:
        self.changes.setdefault(path, []).append(change)

    def __bool__(self) -> bool:
        return bool(self.changes)


@dataclass(frozen=True)
class Written:
    """A file that was rewritten, and its backup (None when the file is new)."""

    path: str
    backup: Backup | None


def _changed(data: dict[str, Any], changes: list[Change]) -> dict[str, Any]:
    out = copy.deepcopy(data)
    for change in changes:
        change(out)
    return out


def diff(edit: Edit, view: View) -> str:
    """A unified diff of what ``apply`` would write, with every secret redacted."""
    by_path = {f.path: f for f in view.files}
    chunks: list[str] = []
    for path, changes in edit.changes.items():
        f = by_path.get(path) or files.read(path)
        after = _changed(f.data, changes)
        if after == f.data:
            continue
        old = files.render(redacted(f.data)) if f.text is not None else ""
        new = files.render(redacted(after))
        chunks.extend(
            difflib.unified_diff(
                old.splitlines(keepends=True),
                new.splitlines(keepends=True),
                fromfile=path if f.text is not None else "/dev/null",
                tofile=path,
            )
        )
    return "".join(chunks)


def apply(
    edit: Edit, backups: Backups, operation: str, progress: Progress = quiet
) -> list[Written]:
    """Lock every file, re-read and change each, back them all up, then replace each; return
    what was written. ``progress`` hears of each file written."""
    with contextlib.ExitStack() as locks:
        changed: list[tuple[str, files.KubeconfigFile, dict[str, Any]]] = []
        for path in sorted(edit.changes):
            locks.enter_context(files.locked(path))
            f = files.read(path)
            after = _changed(f.data, edit.changes[path])
            if after == f.data and f.text is not None:
                continue
            files.check_target(f)
            changed.append((path, f, after))
        existing = [f for _, f, _ in changed if f.text is not None]
        taken = iter(backups.save_all(existing, operation) if existing else [])
        written = []
        for path, f, after in changed:
            backup = next(taken) if f.text is not None else None
            text = files.render(after, as_json=f.is_json)
            if f.text and "\r\n" in f.text:
                text = text.replace("\n", "\r\n")  # a file edited on Windows stays CRLF
            files.write_atomic(f.real, text.encode("utf-8"), files.file_mode(f.real))
            written.append(Written(path, backup))
            progress("wrote", len(written), len(changed), path)
    return written


def find(data: dict[str, Any], kind: str, name: str) -> dict[str, Any] | None:
    """The first entry of ``kind`` called ``name`` in one file's content."""
    entries = data.get(kind)
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("name") == name:
            return entry
    return None


def upsert(data: dict[str, Any], kind: str, name: str, value: dict[str, Any]) -> None:
    """Set entry ``name``'s body (``cluster``, ``user`` or ``context``), adding it if missing."""
    body, value = kind[:-1], copy.deepcopy(value)
    entry = find(data, kind, name)
    if entry is not None:
        entry[body] = value
        return
    if not isinstance(data.get(kind), list):
        data[kind] = []
    data[kind].append({"name": name, body: value})


def _as_read(value: Any) -> Any:
    """A user body as kubectl reads it: what kubectl's own writes add (``env: null``,
    ``provideClusterInfo: false``, any key set to null, and for a v1beta1 exec entry
    ``interactiveMode: IfAvailable``, its default there) means what its absence means."""
    if isinstance(value, dict):
        beta = str(value.get("apiVersion", "")).endswith("/v1beta1")
        return {
            k: _as_read(v)
            for k, v in value.items()
            if v is not None
            and not (k == "provideClusterInfo" and v is False)
            and not (k == "interactiveMode" and v == "IfAvailable" and beta)
        }
    if isinstance(value, list):
        return [_as_read(v) for v in value]
    return value


def same_user(a: Any, b: Any) -> bool:
    """Whether two user bodies mean the same to kubectl (a `kubectl config` command in between
    rewrites the whole file with its defaults filled in)."""
    return bool(_as_read(a) == _as_read(b))


def replace_user(user: str, expected: dict[str, Any], new: dict[str, Any]) -> Change:
    """A change that sets ``user``'s body to ``new`` only if it still reads ``expected``."""

    def change(data: dict[str, Any]) -> None:
        entry = find(data, "users", user)
        if entry is not None and same_user(entry.get("user"), expected):
            entry["user"] = copy.deepcopy(new)

    return change
