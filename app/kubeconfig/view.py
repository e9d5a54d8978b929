"""The merged view of KUBECONFIG, with kubectl's rules for which file holds what.

Reading: files in KUBECONFIG order (empty and repeated paths skipped, missing files read as
empty); for a cluster, user or context name the first file that has it wins, and the first
non-empty ``current-context`` wins. Writing: a change goes to the file that holds the entry;
a new entry goes where client-go puts it (the only file, else the first existing one, else the
last).
"""

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from app.kubeconfig import files
from app.kubeconfig.files import KubeconfigFile


def default_paths(environ: Mapping[str, str] | None = None) -> list[str]:
    """The files kubectl reads: $KUBECONFIG's list, else ~/.kube/config."""
    env = os.environ if environ is None else environ
    listed = env.get("KUBECONFIG", "")
    paths = list(dict.fromkeys(p for p in listed.split(os.pathsep) if p))
    if paths:
        return paths
    return [os.path.join(os.path.expanduser("~"), ".kube", "config")]


def default_path() -> str:
    """Where kubectl would write a new entry (the tray's Add-cluster default)."""
    paths = default_paths()
    return _destination(paths)


def _destination(paths: list[str]) -> str:
    if len(paths) == 1:
        return paths[0]
    for path in paths:
        if os.path.exists(path):
            return path
    return paths[-1]


@dataclass
class View:
    """Every file of the merged view, as read."""

    files: list[KubeconfigFile]

    @classmethod
    def load(cls, paths: list[str] | None = None, lock: bool = False) -> "View":
        """Read the files; with ``lock``, each under its lock (kubectl's writes are not atomic)."""
        out = []
        for path in paths or default_paths():
            if lock and os.path.exists(path):
                with files.locked(path):
                    out.append(files.read(path))
            else:
                out.append(files.read(path))
        return cls(out)

    def holder(self, kind: str, name: str) -> KubeconfigFile | None:
        """The file whose entry kubectl uses for ``name``."""
        for f in self.files:
            if f.find(kind, name) is not None:
                return f
        return None

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        """The entry kubectl uses for ``name`` (the whole ``{name, cluster|user|context}``)."""
        holder = self.holder(kind, name)
        return holder.find(kind, name) if holder else None

    def merged(self, kind: str) -> Iterator[tuple[KubeconfigFile, dict[str, Any]]]:
        """The entries kubectl sees, first file wins, in file order."""
        seen: set[str] = set()
        for f in self.files:
            for entry in f.entries(kind):
                name = entry.get("name")
                if isinstance(name, str) and name not in seen:
                    seen.add(name)
                    yield f, entry

    def every(self, kind: str) -> Iterator[tuple[KubeconfigFile, dict[str, Any]]]:
        """Every entry of every file, shadowed ones included."""
        for f in self.files:
            for entry in f.entries(kind):
                yield f, entry

    @property
    def current_context(self) -> str:
        for f in self.files:
            value = f.data.get("current-context")
            if isinstance(value, str) and value:
                return value
        return ""

    def current_context_file(self) -> str:
        """The file a new current-context goes to (the one that sets it, else the default)."""
        for f in self.files:
            if f.data.get("current-context"):
                return f.path
        return self.destination()

    def destination(self) -> str:
        """Where client-go writes an entry that no file has yet."""
        return _destination([f.path for f in self.files])

    def target(self, kind: str, name: str) -> str:
        """The file a change to entry ``name`` goes to."""
        holder = self.holder(kind, name)
        return holder.path if holder else self.destination()
