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
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.kubeconfig import files, patch
from app.kubeconfig.backups import Backup, Backups
from app.kubeconfig.secrets import redacted
from app.kubeconfig.view import View
from app.progress import Progress, quiet

Change = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Exact:
    """Bytes to write as they are: a backup put back. ``when``: the SHA-256 the file's bytes
    must have for that (it is as kubetray left it); None: whatever it holds now (a restore)."""

    content: bytes
    when: str | None = None


@dataclass
class Edit:
    """The changes to make, per file (as the view names it). ``exact``: bytes that replace a
    file (when it is as expected; else its ``changes`` are made). ``minimal``: rewrite only the
    users' bodies that change and keep every other byte (an undo), where that can be done."""

    changes: dict[str, list[Change]] = field(default_factory=dict)
    exact: dict[str, Exact] = field(default_factory=dict)
    minimal: bool = False
    verbatim: dict[str, dict[str, str]] = field(default_factory=dict)
    """Per file, users' bodies as text to put back as they are (where they still parse as the
    change's result)."""

    def add(self, path: str, change: Change) -> None:
        self.changes.setdefault(path, []).append(change)

    def paths(self) -> list[str]:
        return sorted({*self.changes, *self.exact})

    def __bool__(self) -> bool:
        return bool(self.changes or self.exact)


@dataclass(frozen=True)
class Written:
    """A file that was rewritten, and its backup (None when the file is new). ``digest``: the
    SHA-256 of the bytes written (an undo knows from it whether the file changed since)."""

    path: str
    backup: Backup | None
    digest: str = ""


def _changed(data: dict[str, Any], changes: list[Change]) -> dict[str, Any]:
    out = copy.deepcopy(data)
    for change in changes:
        change(out)
    return out


def digest(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def _raw(f: files.KubeconfigFile) -> bytes | None:
    """The file's bytes as they are on disk (a BOM included), None when it does not exist."""
    if f.text is None:
        return None
    try:
        with open(f.real, "rb") as raw:
            return raw.read()
    except OSError:
        return f.text.encode("utf-8")


def _new_content(edit: Edit, path: str, f: files.KubeconfigFile) -> bytes | None:
    """The exact bytes ``apply`` writes for ``path`` (None: nothing to change). One function
    for the write and the dry run's diff, so the diff shows exactly what is written."""
    current = _raw(f)
    exact = edit.exact.get(path)
    if exact is not None and (exact.when is None or (current and digest(current) == exact.when)):
        return None if exact.content == current else exact.content
    after = _changed(f.data, edit.changes.get(path, []))
    if after == f.data and f.text is not None:
        return None
    text = None
    if edit.minimal and f.text is not None:
        text = patch.patched(f.text, f.data, after, edit.verbatim.get(path))
    if text is None:
        text = files.render(after, as_json=f.is_json)
        if f.text and "\r\n" in f.text:
            text = text.replace("\n", "\r\n")  # a file edited on Windows stays CRLF
    content = text.encode("utf-8")
    return None if content == current else content


def _masked(text: str, docs: list[dict[str, Any]]) -> str | None:
    """``text`` with every secret value of ``docs`` replaced as ``redacted`` replaces it (a diff
    of exact bytes is printed: what is written, less the secrets); None when a secret is not
    written verbatim (folded, escaped), so masking the text could leave it readable."""
    pairs: dict[str, str] = {}
    for doc in docs:
        _secret_pairs(doc, redacted(doc), pairs)
    for secret in sorted(pairs, key=len, reverse=True):
        text = text.replace(secret, pairs[secret])
    try:
        left = _strings(files.parse("", text)) if pairs else set()
    except files.KubeconfigError:
        return None
    return None if left & set(pairs) else text


def _strings(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set().union(*(_strings(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_strings(v) for v in value)) if value else set()
    return {value} if isinstance(value, str) else set()


def _secret_pairs(value: Any, shown: Any, out: dict[str, str]) -> None:
    if isinstance(value, dict) and isinstance(shown, dict):
        for k, v in value.items():
            _secret_pairs(v, shown.get(k), out)
    elif isinstance(value, list) and isinstance(shown, list) and len(value) == len(shown):
        for v, s in zip(value, shown, strict=True):
            _secret_pairs(v, s, out)
    elif isinstance(value, str) and value != shown and value:
        out[value] = shown if isinstance(shown, str) else "REDACTED"


def diff(edit: Edit, view: View) -> str:
    """A unified diff of the bytes ``apply`` would write, with every secret redacted."""
    by_path = {f.path: f for f in view.files}
    chunks: list[str] = []
    for path in edit.paths():
        f = by_path.get(path) or files.read(path)
        content = _new_content(edit, path, f)
        if content is None:
            continue
        new_text = content.decode("utf-8", "replace")
        docs = [f.data]
        with contextlib.suppress(files.KubeconfigError):
            docs.append(files.parse(path, new_text))
        old = _masked(f.text, docs) if f.text is not None else ""
        new = _masked(new_text, docs)
        if old is None or new is None:  # a secret not written verbatim: show it re-rendered
            old = files.render(redacted(docs[0])) if f.text is not None else ""
            new = files.render(redacted(docs[-1]))
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
        changed: list[tuple[str, files.KubeconfigFile, bytes]] = []
        for path in edit.paths():
            locks.enter_context(files.locked(path))
            f = files.read(path)
            content = _new_content(edit, path, f)
            if content is None:
                continue
            files.check_target(f)
            changed.append((path, f, content))
        existing = [f for _, f, _ in changed if f.text is not None]
        taken = iter(backups.save_all(existing, operation) if existing else [])
        written = []
        for path, f, content in changed:
            backup = next(taken) if f.text is not None else None
            files.write_atomic(f.real, content, files.file_mode(f.real))
            written.append(Written(path, backup, digest(content)))
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
