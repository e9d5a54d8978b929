"""A long-running kubetray never loads code from an installation that was replaced under it.

The package's bundle (PyInstaller onedir) imports lazily, by path: Python modules from the
archive appended to the ``kubetray`` program (PYZ) and from ``base_library.zip`` (``encodings``:
a codec such as ``utf-8-sig`` is imported the first time something asks for it), extension
modules from ``_internal``. An upgrade (dpkg, install.sh) puts other files at those paths; an
agent that started before it then read the new archive at the old offsets (``zlib.error``,
``LookupError: utf-8-sig``), and after a removal PyInstaller ended the process ("appears to
have been moved or deleted"), leaving its socket behind.

So, first thing at start (``pin``), an agent or app:

* keeps both archives open and reads them only through those descriptors: the files it
  started with stay readable, whatever is put at their paths (the kernel keeps a replaced or
  deleted file while it is open). Every Python module, whenever it is first imported, comes
  from the build the process runs. This costs no memory: nothing is read in advance.
* imports the extension modules (and the libraries they link) it may need later, listed in
  LATER, so none is loaded from a newer build. Measured in bench/idle.py (``make bench-idle``).
* keeps the data files a library reads late (listed in DATA: botocore's endpoints and models,
  certifi's CA bundle) open, and the code that reads them asks for them here (``read_data``,
  ``data_path``): read when needed, from the files it started with, as the archives are.

Until it restarts into the new build (app/restart.py) it goes on working, logins included.
Other data files (icons, Qt's plugins, loaded at start) are read from the installation as it
is: after an upgrade, the new ones. Windows locks a running program's files: its installer closes
kubetray first (packaging/windows). A development install (not frozen) is left alone.
"""

import importlib
import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

LATER = (
    # Standard library extension modules (the bundle's lib-dynload) that code reached after
    # start imports: OIDC over TLS (ssl, hashlib), JSON, queues, time zones, codecs.
    "_ssl",
    "_hashlib",
    "_json",
    "_queue",
    "_contextvars",
    "_decimal",
    "_bz2",
    "_lzma",
    "_multibytecodec",
    "mmap",
    "resource",
    "termios",
    "_uuid",  # botocore's invocation ids (uuid4), MSAL's correlation ids
    # Third-party extension modules.
    "cryptography.hazmat.bindings._rust",
    "_cffi_backend",
    "yaml._yaml",
    # requests (MSAL imports it, and authlib) decodes bodies with charset_normalizer, whose
    # wheels are compiled (mypyc): its first use was an Entra login's.
    "charset_normalizer.md",
    "charset_normalizer.cd",
)
"""Extension modules a long-running kubetray may import after start (the packaging test
starts the bundled agent and app, deletes the bundle, and then logs in, asks status, adds a
cluster, shows a QR code and a notification, and stops them)."""

DATA = (
    # botocore reads these for every session it makes (app/providers/aws/data.py): the
    # endpoints, partitions and defaults, and the models of the services kubetray calls.
    "botocore/data/*.json",
    "botocore/data/sts/*/*",
    "botocore/data/sso/*/*",
    "botocore/data/sso-oidc/*/*",
    # The CA bundle botocore verifies AWS's certificates with.
    "certifi/cacert.pem",
)
"""Data files (globs in the bundle's ``_internal``) a long-running kubetray reads after start.
Each costs an open descriptor, no memory."""

_pinned: dict[str, str] = {}
"""Archive path → the path that reaches the file this process opened (its descriptor)."""
_read_lock = threading.Lock()


def _descriptor_path(fd: int) -> str:
    # Linux: /proc/self/fd/N opens the file itself anew (its own offset), even once deleted.
    # Elsewhere /dev/fd/N duplicates the descriptor: reads are serialised (shared offset).
    return f"/proc/self/fd/{fd}" if sys.platform == "linux" else f"/dev/fd/{fd}"


def _pin_file(path: str) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        log.warning("cannot keep %s open: %s", path, e)
        return None
    pinned = _descriptor_path(fd)
    _pinned[path] = pinned
    return pinned


def _serialised(fn: Callable[..., Any]) -> Callable[..., Any]:
    if sys.platform == "linux":
        return fn

    def call(*args: Any, **kwargs: Any) -> Any:
        with _read_lock:
            return fn(*args, **kwargs)

    return call


def _pin_pyz() -> bool:
    """PyInstaller's PYZ reader (pyimod01_archive.ZlibArchiveReader) opens its file by name
    for every module it extracts: give it the descriptor's name instead."""
    importers = sys.modules.get("pyimod02_importers")
    archive = getattr(importers, "pyz_archive", None)
    filename = getattr(archive, "_filename", None)
    if archive is None or not isinstance(filename, str):
        return False
    pinned = _pin_file(filename)
    if pinned is None:
        return False
    archive._filename = pinned
    archive.extract = _serialised(archive.extract)
    return True


def _pin_base_library() -> bool:
    """zipimport reads base_library.zip by name too (zipimport._get_data): the same, and it
    must never re-read the directory of a newer file (invalidate_caches)."""
    import zipimport

    archives = [p for p in list(zipimport._zip_directory_cache) if p.endswith("base_library.zip")]  # type: ignore[attr-defined]
    if not archives:
        return False
    for path in archives:
        _pin_file(path)
    original = zipimport._get_data  # type: ignore[attr-defined]

    def get_data(archive: str, toc_entry: Any) -> bytes:
        return original(_pinned.get(archive, archive), toc_entry)  # type: ignore[no-any-return]

    zipimport._get_data = _serialised(get_data)  # type: ignore[attr-defined]
    invalidate = zipimport.zipimporter.invalidate_caches

    def invalidate_caches(self: zipimport.zipimporter) -> None:
        if self.archive not in _pinned:  # the pinned directory stays the one read at start
            invalidate(self)

    zipimport.zipimporter.invalidate_caches = invalidate_caches  # type: ignore[method-assign]
    return True


_data: dict[str, int] = {}
"""Data file path (as the bundle names it) → the descriptor opened at start."""


def _pin_data() -> int:
    import glob

    root = getattr(sys, "_MEIPASS", None)
    if not isinstance(root, str):
        return 0
    for pattern in DATA:
        for path in sorted(glob.glob(os.path.join(root, pattern))):
            if os.path.isfile(path):
                try:
                    _data[path] = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
                except OSError as e:
                    log.warning("cannot keep %s open: %s", path, e)
    return len(_data)


def pinned_under(directory: str) -> list[str]:
    """The data files under ``directory`` kept open at start (empty when nothing was pinned:
    a development install, or KUBETRAY_PIN=0), as paths relative to it."""
    prefix = os.path.join(directory, "")
    return [p[len(prefix) :] for p in _data if p.startswith(prefix)]


def read_data(path: str) -> bytes | None:
    """The content of the data file ``path`` as it was when this process started, if it was
    pinned (None otherwise). Positioned reads: no shared offset, any thread."""
    fd = _data.get(path)
    if fd is None or sys.platform == "win32":  # nothing is pinned there (see pin)
        return None
    size = os.fstat(fd).st_size
    chunks, offset = [], 0
    while offset < size:
        chunk = os.pread(fd, size - offset, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def data_path(path: str) -> str:
    """A path that opens the data file ``path`` as it was at start, for libraries that open
    files by name (OpenSSL's CA file): on Linux the descriptor's; elsewhere ``path`` itself
    (/dev/fd/N shares the descriptor's offset, so a second open would read nothing)."""
    fd = _data.get(path)
    if fd is None or sys.platform != "linux":
        return path
    return _descriptor_path(fd)


def _preload() -> list[str]:
    missing = []
    for name in LATER:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)  # not in this bundle (the platform builds it in, or lacks it)
    return missing


PIN_ENV = "KUBETRAY_PIN"
"""``0``: do not pin (bench/idle.py measures what pinning costs; an upgrade may then break a
running kubetray as described above)."""


def pin() -> None:
    """See the module. Only in a bundle, and only once."""
    if not getattr(sys, "frozen", False) or sys.platform == "win32" or _pinned:
        return
    if os.environ.get(PIN_ENV) == "0":
        return
    pyz, base = _pin_pyz(), _pin_base_library()
    data = _pin_data()
    missing = _preload()
    log.debug(
        "pinned the bundle (archive: %s, base library: %s, data files: %d; not here: %s)",
        pyz,
        base,
        data,
        missing,
    )
    if not (pyz and base):
        log.warning("could not pin this bundle's archives: an upgrade may disturb this process")
