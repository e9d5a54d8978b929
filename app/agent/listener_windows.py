"""The agent's named pipe on Windows: user-only DACL, first instance only, local clients only.

Written against the Win32 API but not run here (CI is Linux); the naming and the security
descriptor are tested on every platform through exec_helper.windows_names.
"""

import _winapi
import ctypes
import sys
import threading
from ctypes import wintypes

assert sys.platform == "win32"  # tells mypy the rest is Windows-only

from app.agent.server import Peer
from app.errors import AgentRunning
from exec_helper.transport_windows import (
    PipeConnection,
    advapi32,
    agent_pipe,
    current_sid,
    kernel32,
    sid_of_pid,
)
from exec_helper.windows_names import security_descriptor_sddl

_FILE_FLAG_FIRST_PIPE_INSTANCE = 0x00080000
_PIPE_TYPE_BYTE = 0x00000000
_PIPE_READMODE_BYTE = 0x00000000
_PIPE_REJECT_REMOTE_CLIENTS = 0x00000008
_ERROR_ACCESS_DENIED = 5
_BUFFER = 65536


class _SecurityAttributes(ctypes.Structure):
    _fields_ = [
        ("nLength", wintypes.DWORD),
        ("lpSecurityDescriptor", ctypes.c_void_p),
        ("bInheritHandle", wintypes.BOOL),
    ]


class PipeListener:
    """Creates pipe instances one after another; each accept() waits for the next client."""

    def __init__(self) -> None:
        self.address = agent_pipe()
        self._sid = current_sid()
        self._first = True
        self._stop = threading.Event()
        self._closing = threading.Lock()
        self._stop_event = int(kernel32.CreateEventW(None, True, False, None))
        descriptor = ctypes.c_void_p()
        if not advapi32.ConvertStringSecurityDescriptorToSecurityDescriptorW(
            security_descriptor_sddl(self._sid), 1, ctypes.byref(descriptor), None
        ):
            raise ctypes.WinError(ctypes.get_last_error())
        self._attributes = _SecurityAttributes(
            ctypes.sizeof(_SecurityAttributes), descriptor.value, False
        )

    def _instance(self) -> int:
        mode = _winapi.PIPE_ACCESS_DUPLEX | _winapi.FILE_FLAG_OVERLAPPED
        if self._first:
            mode |= _FILE_FLAG_FIRST_PIPE_INSTANCE
        try:
            handle = _winapi.CreateNamedPipe(
                self.address,
                mode,
                _PIPE_TYPE_BYTE
                | _PIPE_READMODE_BYTE
                | _winapi.PIPE_WAIT
                | _PIPE_REJECT_REMOTE_CLIENTS,
                _winapi.PIPE_UNLIMITED_INSTANCES,
                _BUFFER,
                _BUFFER,
                _winapi.NMPWAIT_WAIT_FOREVER,
                ctypes.addressof(self._attributes),
            )
        except OSError as e:
            if self._first and e.winerror == _ERROR_ACCESS_DENIED:
                raise AgentRunning(
                    "a kubetray agent is already running for this user and session",
                    "kubetray status shows what it serves",
                ) from None
            raise
        self._first = False
        return int(handle)

    def open(self) -> None:
        """Create the first instance now, so a second agent fails at once."""
        self._pending = self._instance()

    def accept(self) -> tuple[PipeConnection, Peer]:
        handle, self._pending = self._pending, self._instance()
        # CPython sets the event itself when the client connected before we asked.
        ov = _winapi.ConnectNamedPipe(handle, overlapped=True)
        which = _winapi.WaitForMultipleObjects(
            [ov.event, self._stop_event], False, _winapi.INFINITE
        )
        if which == _winapi.WAIT_OBJECT_0 + 1:
            ov.cancel()
            _winapi.CloseHandle(handle)
            raise OSError("listener closed")
        ov.GetOverlappedResult(True)
        pid = wintypes.ULONG()
        kernel32.GetNamedPipeClientProcessId(wintypes.HANDLE(handle), ctypes.byref(pid))
        try:
            same = sid_of_pid(pid.value) == self._sid
        except OSError:
            same = False
        return PipeConnection(handle), Peer(pid=pid.value, same_user=same, who=f"pid {pid.value}")

    def close(self) -> None:
        kernel32.SetEvent(self._stop_event)
        with self._closing:  # the signal's thread and serve_forever's finally both close
            pending, self._pending = getattr(self, "_pending", 0), 0
            if pending:
                _winapi.CloseHandle(pending)
