"""Start at login: the autostart entry is replaced like every file kubetray writes, atomically."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app import autostart
from tests.peers import ROOT


@pytest.fixture
def entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "autostart" / "kubetray.desktop"


def test_the_entry_is_written_readable_and_replaced(entry: Path) -> None:
    autostart.set_enabled(True, ["/old/kubetray"])
    autostart.set_enabled(True, ["/new/kubetray"])
    assert "Exec=/new/kubetray\n" in entry.read_text()
    assert entry.stat().st_mode & 0o777 == 0o644  # the session reads it; the umask has no say
    assert os.listdir(entry.parent) == ["kubetray.desktop"]


FILE_SIZE_LIMIT = """
import resource, signal, sys
from app import autostart

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
resource.setrlimit(resource.RLIMIT_FSIZE, (10, 10))
try:
    autostart.set_enabled(True, ["/new/kubetray"])
except OSError as e:
    sys.exit(e.strerror)
"""


def test_a_write_that_fails_midway_leaves_the_entry_that_was_there(entry: Path) -> None:
    """The write fails after 10 bytes (a file size limit, as a full disk would): the entry is
    the old one, whole, not a truncated new one, and no temporary file is left."""
    autostart.set_enabled(True, ["/old/kubetray"])
    before = entry.read_bytes()
    limited = [sys.executable, "-c", FILE_SIZE_LIMIT]  # XDG_CONFIG_HOME is inherited
    child = subprocess.run(limited, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert child.returncode == 1 and "too large" in child.stderr, child.stderr
    assert entry.read_bytes() == before
    assert os.listdir(entry.parent) == ["kubetray.desktop"]
