"""kubetray's version and build, both programs' and every package's, from one place.

The version is git's: setuptools-scm (pyproject.toml, ``[tool.setuptools_scm]``) reads the
release tag, or ``git describe`` between tags (``0.2.1.dev4+g1a2b3c4``), or, in a checkout
without tags, the base version ``fallback_version`` plus the commit count and hash. It writes
``exec_helper/_version.py`` when kubetray is installed from the source tree (``make install``)
and when a package is built (packaging/build.py).

A package also carries ``kubetray-build.json`` beside its libraries: the version and a build id
that is new for every build (two builds of one commit differ). Nothing runs git after the
build. A running agent or app compares the build id of the files installed where it was
started with its own (app/upgrade.py); a different one means the installation was replaced
(a package upgrade) and it restarts itself once idle.

A development install (``make install``, editable) has no build file: its build is None and it
never restarts on its own. ``KUBETRAY_BUILD_FILE`` names a build file for such a tree (the
tests use it to replace an "installation" under a running agent).

Not on kubetray-exec's hot path, but ``--version`` imports it: builtins only, like the hot
path (no ``json``, no ``os``: several milliseconds of imports).
"""

import sys

from exec_helper import paths, protocol

BUILD_FILE = "kubetray-build.json"
BUILD_FILE_ENV = paths.RESTART_ENV[2]
UNKNOWN = "0+unknown"
"""A source tree nobody installed (``pip install -e .`` writes ``_version.py``)."""


def build_file() -> str | None:
    """The build file of this installation, None for a development install."""
    override = paths.getenv(BUILD_FILE_ENV)
    if override:
        return override
    if not getattr(sys, "frozen", False):
        return None
    # The app (PyInstaller) knows its library directory; the helper (packaging/launcher) runs
    # from <libraries>/kubetray-exec-lib/exec_helper/version.pyc.
    sep = "\\" if sys.platform == "win32" else "/"
    base = getattr(sys, "_MEIPASS", None) or __file__.rsplit(sep, 3)[0]
    return base + sep + BUILD_FILE


def read_build(path: str) -> tuple[str, str] | None:
    """(version, build id) from a build file; None when it is missing or unreadable."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = protocol.decode_flat(f.read(4096))  # one flat object: no json needed
    except (OSError, ValueError):
        return None
    version, build = doc.get("version"), doc.get("build")
    if not (isinstance(version, str) and isinstance(build, str) and version and build):
        return None
    return version, build


def _source_version() -> str:
    try:
        from exec_helper._version import VERSION
    except ImportError:
        return UNKNOWN
    return str(VERSION)


def _current() -> tuple[str, str | None]:
    path = build_file()
    found = read_build(path) if path else None
    if found is not None:
        return found
    return _source_version(), None


VERSION, BUILD = _current()
"""This process's version and build id (None: a development install), read once at start:
after an upgrade the files say otherwise, the running code does not."""


def describe() -> str:
    """``0.2.0`` or ``0.2.0 (build 20261125T170502Z-3f9a1c)`` for --version and status."""
    return f"{VERSION} (build {BUILD})" if BUILD else VERSION
