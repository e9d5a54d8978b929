"""One kubeconfig file: read it, lock it the way client-go does, replace it atomically.

What a write keeps: the file's mode, owner and group (a root kubetray rewriting a user's file
hands it back to that user; another user's file is refused, as ssh refuses such configs), a
symlinked path's link (the target is written, but only when it is a kubeconfig), the format
(JSON stays JSON), every field kubetray does not know and the order of entries and keys. What
a whole-file write does not keep: comments and quoting style (kubectl's own writes drop those
too); an edit of users' bodies alone keeps every other byte (app.kubeconfig.patch).

Reading is bounded too: YAML aliases may expand to at most MAX_NODES values (a kilobyte of
nested aliases otherwise becomes gigabytes once written out as JSON or compared).
"""

import contextlib
import itertools
import json
import os
import re
import secrets
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from app import atomic_file
from app.errors import AppError

LOCK_WAIT = 10.0
"""How long to wait for another writer's ``<file>.lock`` before giving up."""

_LISTS = ("clusters", "users", "contexts")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
MAX_NODES = 1_000_000
"""Values a kubeconfig may hold once aliases are expanded (a 10,000-user file has ≈ 200,000)."""
MAX_DEPTH = 256
"""Brackets open at once: libyaml's recursive composer crashes (SIGSEGV) at ≈ 50,000."""


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
    _check_depth(path, text)
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
    _check_expansion(path, docs)
    if len(docs) > 1 or not isinstance(docs[0], dict):
        raise KubeconfigError(f"{path} is not a kubeconfig (expected one mapping at the top)")
    data: dict[str, Any] = docs[0]
    for kind in _LISTS:
        if data.get(kind) is not None and not isinstance(data[kind], list):
            raise KubeconfigError(f"{path}: {kind} is not a list")
    return data


def _check_depth(path: str, text: str) -> None:
    """Refuse flow collections nested deeper than MAX_DEPTH before libyaml sees them.

    Brackets inside quoted strings count too: it only makes the bound a little stricter.
    """
    brackets = _NOT_BRACKET.sub("", text)
    if len(brackets) <= MAX_DEPTH:
        return
    if max(itertools.accumulate(1 if c in "[{" else -1 for c in brackets)) > MAX_DEPTH:
        raise KubeconfigError(
            f"{path} is not a kubeconfig: it nests lists or mappings more than {MAX_DEPTH} deep",
            "fix the file",
        )


def _check_expansion(path: str, docs: list[Any]) -> None:
    """Refuse documents whose aliases expand beyond MAX_NODES values, or refer to themselves.

    Counted without expanding: each distinct list or mapping once, with its expanded size.
    """
    sizes: dict[int, int] = {}
    open_: set[int] = set()

    def size(node: Any) -> int:
        if not isinstance(node, dict | list):
            return 1
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_:
            raise KubeconfigError(
                f"{path} is not a kubeconfig: a YAML alias refers to itself",
                "fix the file (kubectl cannot read it either)",
            )
        open_.add(key)
        children = [*node.keys(), *node.values()] if isinstance(node, dict) else node
        total = 1
        for child in children:
            total += size(child)
            if total > MAX_NODES:
                raise KubeconfigError(
                    f"{path} is not a kubeconfig: its YAML aliases expand to more than "
                    f"{MAX_NODES:,} values (a 'billion laughs' document)",
                    "kubectl refuses it too (excessive aliasing): write the entries out in full",
                )
        open_.discard(key)
        sizes[key] = total
        return total

    try:
        size(docs)
    except RecursionError:
        raise KubeconfigError(f"{path} is not a kubeconfig: it is nested too deeply") from None


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


def is_kubeconfig(data: dict[str, Any]) -> bool:
    """Content that says it is a kubeconfig (kind Config, or any of its entry lists)."""
    return data.get("kind") == "Config" or any(k in data for k in (*_LISTS, "current-context"))


def check_target(f: KubeconfigFile) -> None:
    """A symlinked kubeconfig is written through only when its target is a kubeconfig already.

    Otherwise a link to a system file (or to a missing one) would have that file replaced.
    """
    if not os.path.islink(f.path):
        return
    if f.text is None or not f.text.strip() or not is_kubeconfig(f.data):
        what = "does not exist" if f.text is None else "is not a kubeconfig"
        raise KubeconfigError(
            f"refusing to write {f.path}: it is a symlink to {f.real}, which {what}",
            f"point the link at a kubeconfig, or remove it (rm {f.path}) to start a new file",
        )


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
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)
    except OSError as e:
        raise KubeconfigError(f"cannot lock {path}: {e.strerror} (making its directory)") from None
    # pid and host name a dead kubetray's lock; the nonce tells this lock from a later one
    mark = f"kubetray {os.getpid()} {socket.gethostname()} {secrets.token_hex(8)}\n".encode()
    deadline = time.monotonic() + wait
    while True:
        try:
            _create_lock(lock, mark)
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
            raise KubeconfigError(f"cannot lock {path}: {e.strerror} ({lock})") from None
        break
    try:
        yield
    finally:
        if _read_lock(lock) == mark:  # ours only: one deleted by hand may be kubectl's now
            with contextlib.suppress(FileNotFoundError):
                os.unlink(lock)


def _read_lock(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
    except OSError:
        return None
    try:
        return os.read(fd, 200)
    except OSError:
        return None
    finally:
        os.close(fd)


def _write_fd(fd: int, mark: bytes) -> None:
    try:
        os.write(fd, mark)
        os.fsync(fd)  # a crash must not bring the lock back empty (it would pass for kubectl's)
    finally:
        os.close(fd)


def _create_lock(lock: str, mark: bytes) -> None:
    """Create ``lock`` holding ``mark``, or raise FileExistsError.

    The lock appears with its contents in one step (a hard link to a written temporary file), so
    a kubetray killed while locking never leaves an empty lock, which would pass for kubectl's
    and block every writer. Where links are not supported it is created and then written.
    """
    tmp = atomic_file.temp_name(lock, "lock")
    try:
        _write_fd(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW, 0o600), mark)
        try:
            os.link(tmp, lock)
            return
        except FileExistsError:
            raise
        except OSError:
            pass  # a file system without hard links (FAT, some network shares)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        _write_fd(fd, mark)
    except OSError:
        # A full disk: an empty lock left here would block kubectl until someone deletes it.
        with contextlib.suppress(OSError):
            os.unlink(lock)
        raise


def _remove_if_stale(lock: str) -> bool:
    """Remove a lock that a dead kubetray on this host left behind.

    The lock is moved aside before it is deleted, and deleted only if it still holds what was
    read: a lock another kubetray (or kubectl) took in between is put back.
    """
    seen = _read_lock(lock)
    words = seen.split() if seen else []
    if len(words) not in (3, 4) or words[0] != b"kubetray":
        return False
    if words[2] != socket.gethostname().encode():
        return False
    if not words[1].isdigit() or atomic_file.process_alive(int(words[1])):
        return False
    aside = atomic_file.temp_name(lock, "stale")
    try:
        os.replace(lock, aside)
    except FileNotFoundError:
        return True  # another writer removed it: try again
    except OSError:
        return False
    try:
        if _read_lock(aside) != seen:  # not the one we read: someone's live lock
            with contextlib.suppress(FileExistsError):
                os.link(aside, lock)
            return False
        return True
    finally:
        with contextlib.suppress(OSError):
            os.unlink(aside)


def _owner(path: str, directory: str) -> tuple[int, int] | None:
    """The (uid, gid) a rewrite of ``path`` must carry; None to keep the writer's own.

    As root (sudo kubetray ...) the file keeps its owner and group, and a new file goes to the
    directory's owner: a user's kubeconfig must stay theirs. As anyone else, a file that
    belongs to another user is refused (the replacement would be ours, and they locked out).
    """
    if sys.platform == "win32":
        return None
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    euid = os.geteuid()
    if st is None:
        if euid != 0:
            return None
        parent = os.stat(directory)
        return (parent.st_uid, parent.st_gid) if parent.st_uid != 0 else None
    if euid == 0:
        return st.st_uid, st.st_gid
    if st.st_uid != euid:
        raise KubeconfigError(
            f"refusing to write {path}: it belongs to {_user(st.st_uid)}, not to you "
            f"({_user(euid)}); a rewrite would take it from them",
            "run kubetray as that user (or give it a kubeconfig of your own with --kubeconfig)",
        )
    return st.st_uid, st.st_gid


def _user(uid: int) -> str:
    if sys.platform == "win32":
        return f"uid {uid}"
    import pwd

    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def write_atomic(path: str, content: bytes, mode: int) -> None:
    """Replace ``path`` with ``content`` (atomic_file.write), keeping its owner, group and ``mode``.

    Owner and group carry over as _owner decides; any failure is a KubeconfigError naming ``path``.
    """
    directory = os.path.dirname(path) or "."
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)  # _owner may ask who owns it
        atomic_file.write(path, content, mode, owner=_owner(path, directory))
    except OSError as e:
        raise KubeconfigError(f"cannot write {path}: {e.strerror or e}") from None


def file_mode(path: str) -> int:
    """The mode a rewrite keeps (0600 for a new file, as kubectl makes it)."""
    try:
        return os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        return 0o600
