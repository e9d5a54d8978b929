"""Windows: the installer closes kubetray and starts it again (Restart Manager). Not run here.

Windows locks a running program's files, so an installer cannot replace them under it; Inno
Setup (packaging/windows/kubetray.iss, ``CloseApplications`` and ``RestartApplications``) asks
the Restart Manager to close the programs that use them and, after the install, to start again
those that registered for it (RegisterApplicationRestart), with the same command line. The app
and the agent register at start; on the close they receive (WM_CLOSE, Ctrl+C) they stop as on
``kubetray stop``, and their logins come back from the Credential Manager.
"""

import sys

assert sys.platform == "win32"  # tells mypy the rest is Windows-only

import ctypes
import logging
import subprocess

log = logging.getLogger(__name__)

RESTART_NO_CRASH, RESTART_NO_HANG = 1, 2
"""Restart after an update only: Windows Error Reporting must not restart a crash or hang."""


def register_for_restart() -> None:
    """Ask Windows to start this program again, with its arguments, after an installer
    closed it."""
    args = subprocess.list2cmdline(sys.argv[1:])
    result = ctypes.windll.kernel32.RegisterApplicationRestart(  # type: ignore[attr-defined]
        ctypes.c_wchar_p(args or None), RESTART_NO_CRASH | RESTART_NO_HANG
    )
    if result != 0:  # S_OK
        log.info("RegisterApplicationRestart failed (HRESULT %#x)", result & 0xFFFFFFFF)
