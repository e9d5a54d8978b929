"""One kubeconfig file: read it, lock it the way client-go does, replace it atomically.

What a write keeps: the file's mode, a symlinked path's link (the target is written), the
format (JSON stays JSON), every field kubetray does not know and the order of entries and
keys. What it does not keep: comments and quoting style. kubectl's own writes drop those too.
"""

import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from app.errors import AppError

LOCK_WAIT = 10.0
"""How long to wait for another writer's ``<file>.lock`` before giving up."""

_LISTS = ("clusters", "users", "contexts")


class KubeconfigError(AppError):
    """A kubeconfig file cannot be read, locked or written."""


_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ≈ 10 times faster
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Loader(_BaseLoader):  # type: ignore[misc, valid-type]
    """YAML 1.1 as kubectl reads it, except that timestamps stay strings (e.g. gcp expiry)."""


_Loader.yaml_implicit_resolvers = {
    key: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def empty() -> dict[str, Any]:
    """What kubectl writes for a new file."""
    return {
        "apiVersion": "v1",
        "clusters": [],
        "contexts": [],
        "current-context": "",
        "kind": "Config",
        "preferences": {},
        "users": [],
    }


@dataclass
class KubeconfigFile:
    """A file as read: its text (None when missing) and its parsed content."""

    path: str
    """As named in KUBECONFIG (or the default)."""
    real: str
    """Symlinks resolved: where writes go."""
    text: str | None
    data: dict[str, Any]

    @property
    def is_json(self) -> bool:
        return self.text is not None and self.text.lstrip().startswith("{")

    def entries(self, kind: str) -> list[dict[str, Any]]:
        """The named entries of ``clusters``, ``users`` or ``contexts`` (a null list is empty)."""
        value = self.data.get(kind)
        return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []

    def find(self, kind: str, name: str) -> dict[str, Any] | None:
        """The first entry called ``name``: client-go uses the first one too."""
        for entry in self.entries(kind):
            if entry.get("name") == name:
                return entry
        return None


def parse(path: str, text: str) -> dict[str, Any]:
    """The content of a kubeconfig, checked to be one mapping with list-shaped entry lists."""
    if not text.strip():
        return empty()
    try:
        docs = list(yaml.load_all(text, Loader=_Loader))
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        line = f" (line {where.line + 1})" if where else ""
        raise KubeconfigError(
            f"{path} is not valid YAML{line}", "fix the file (kubectl cannot read it either)"
        ) from None
    docs = [d for d in docs if d is not None]
    if not docs:
        return empty()
    if len(docs) > 1 or not isinstance(docs[0], dict):
        raise KubeconfigError(f"{path} is not a kubeconfig (expected one mapping at the top)")
    data: dict[str, Any] = docs[0]
    for kind in _LISTS:
        if data.get(kind) is not None and not isinstance(data[kind], list):
            raise KubeconfigError(f"{path}: {kind} is not a list")
    return data


def read(path: str) -> KubeconfigFile:
    """Read ``path``; a missing file reads as an empty kubeconfig."""
    real = os.path.realpath(path)
    try:
        with open(real, encoding="utf-8-sig", newline="") as f:
            text: str | None = f.read()
    except FileNotFoundError:
        text = None
    except OSError as e:
        raise KubeconfigError(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise KubeconfigError(f"{path} is not UTF-8 text") from None
    return KubeconfigFile(path, real, text, parse(path, text or ""))


def render(data: dict[str, Any], as_json: bool = False) -> str:
    """The file's text: block YAML in the original key order (or indented JSON)."""
    if as_json:
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    return yaml.dump(
        data,
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=1 << 30,
    )


@contextlib.contextmanager
def locked(path: str, wait: float = LOCK_WAIT) -> Iterator[None]:
    """Hold client-go's ``<file>.lock`` (created exclusively; kubectl fails while we hold it).

    Ours carries our pid and host, so a lock left by a killed kubetray is recognised and
    removed. kubectl's own locks are empty: those are waited for, never removed.
    """
    lock = path + ".lock"
    os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)
    mark = f"kubetray {os.getpid()} {socket.gethostname()}\n".encode()
    deadline = time.monotonic() + wait
    while True:
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            if _remove_if_stale(lock):
                continue
            if time.monotonic() >= deadline:
                raise KubeconfigError(
                    f"{path} is locked by another writer ({lock} exists)",
                    f"try again; if no kubectl or kubetray is writing it, delete {lock}",
                ) from None
            time.sleep(0.05)
            continue
        except OSError as e:
            raise KubeconfigError(f"cannot lock {path}: {e.strerror}") from None
        try:
            os.write(fd, mark)
        finally:
            os.close(fd)
        break
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)


def _remove_if_stale(lock: str) -> bool:
    """Remove a lock that a dead kubetray on this host left behind."""
    try:
        with open(lock, "rb") as f:
            words = f.read(200).split()
    except OSError:
        return False
    if len(words) != 3 or words[0] != b"kubetray" or words[2].decode() != socket.gethostname():
        return False
    if not words[1].isdigit() or _alive(int(words[1])):
        return False
    with contextlib.suppress(FileNotFoundError):
        os.unlink(lock)
    return True


def _fsync_dir(directory: str) -> None:
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str, content: bytes, mode: int) -> None:
    """Replace ``path`` with ``content`` so a crash at any point leaves the old or the new file."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, mode=0o700, exist_ok=True)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.kubetray-{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        try:
            if sys.platform != "win32":
                os.fchmod(fd, mode)  # the umask must not loosen or tighten it
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        _fsync_dir(directory)
        _remove_orphans(directory)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise KubeconfigError(f"cannot write {path}: {e.strerror}") from None


def _remove_orphans(directory: str) -> None:
    """Temporary files that a killed kubetray left in ``directory``."""
    for entry in os.listdir(directory):
        if not (entry.startswith(".") and entry.endswith(".tmp") and ".kubetray-" in entry):
            continue
        pid = entry[entry.rindex(".kubetray-") + len(".kubetray-") : -len(".tmp")]
        if pid.isdigit() and not _alive(int(pid)):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(directory, entry))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        pass
    return True


def file_mode(path: str) -> int:
    """The mode a rewrite keeps (0600 for a new file, as kubectl makes it)."""
    try:
        return os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        return 0o600
