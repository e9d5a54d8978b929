"""Named-pipe transport for Windows: the client end, and the overlapped connection both ends use.

Written against the Win32 API (``_winapi`` and ``ctypes``) but not run here: kubetray's CI
machines are Linux. The server's user is checked before a byte is sent (a pipe name can be
squatted), and every read waits at most the given timeout.
"""

import _winapi
import ctypes
import sys
from ctypes import wintypes

from exec_helper import paths
from exec_helper.errors import AgentUnavailable, HelperError, UnsafeRuntimeDir
from exec_helper.windows_names import pipe_name

assert sys.platform == "win32"  # tells mypy the rest is Windows-only

_ERROR_FILE_NOT_FOUND = 2
_ERROR_PIPE_BUSY = 231
_ERROR_IO_PENDING = 997
_FILE_FLAG_OVERLAPPED = 0x40000000
_SECURITY_SQOS_PRESENT = 0x00100000
_SECURITY_IDENTIFICATION = 0x00010000
_TOKEN_QUERY = 0x0008
_TOKEN_USER = 1
_PROCESS_QUERY_LIMITED_INFORMATION = 0x1000

kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
advapi32 = ctypes.WinDLL("advapi32", use_last_error=True)


def _process_sid(process: int) -> str:
    token = wintypes.HANDLE()
    if not advapi32.OpenProcessToken(wintypes.HANDLE(process), _TOKEN_QUERY, ctypes.byref(token)):
        raise ctypes.WinError(ctypes.get_last_error())
    try:
        size = wintypes.DWORD()
        advapi32.GetTokenInformation(token, _TOKEN_USER, None, 0, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        if not advapi32.GetTokenInformation(token, _TOKEN_USER, buf, size, ctypes.byref(size)):
            raise ctypes.WinError(ctypes.get_last_error())
        sid_ptr = ctypes.cast(buf, ctypes.POINTER(ctypes.c_void_p))[0]  # TOKEN_USER.User.Sid
        text = wintypes.LPWSTR()
        if not advapi32.ConvertSidToStringSidW(ctypes.c_void_p(sid_ptr), ctypes.byref(text)):
            raise ctypes.WinError(ctypes.get_last_error())
        try:
            return str(text.value)
        finally:
            kernel32.LocalFree(text)
    finally:
        kernel32.CloseHandle(token)


def current_sid() -> str:
    """The string SID of the user running this process."""
    return _process_sid(kernel32.GetCurrentProcess())


def sid_of_pid(pid: int) -> str:
    """The string SID of the user running process ``pid``."""
    handle = kernel32.OpenProcess(_PROCESS_QUERY_LIMITED_INFORMATION, False, pid)
    if not handle:
        raise ctypes.WinError(ctypes.get_last_error())
    try:
        return _process_sid(handle)
    finally:
        kernel32.CloseHandle(handle)


def current_session() -> int:
    """This process's logon session id."""
    session = wintypes.DWORD()
    if not kernel32.ProcessIdToSessionId(kernel32.GetCurrentProcessId(), ctypes.byref(session)):
        raise ctypes.WinError(ctypes.get_last_error())
    return int(session.value)


def agent_pipe() -> str:
    """The pipe of this user's agent in this session."""
    return pipe_name(current_sid(), current_session())


class PipeConnection:
    """One end of a connected pipe with overlapped I/O, so reads can time out."""

    def __init__(self, handle: int) -> None:
        self._handle = handle
        self._timeout_ms = _winapi.INFINITE

    def settimeout(self, seconds: float | None) -> None:
        self._timeout_ms = _winapi.INFINITE if seconds is None else max(1, int(seconds * 1000))

    def _wait(self, ov: "_winapi.Overlapped") -> int:
        result = _winapi.WaitForMultipleObjects([ov.event], False, self._timeout_ms)
        if result == _winapi.WAIT_TIMEOUT:
            ov.cancel()
            raise TimeoutError("timed out")
        transferred, _err = ov.GetOverlappedResult(True)
        return int(transferred)

    def recv(self, size: int) -> bytes:
        ov, err = _winapi.ReadFile(self._handle, size, overlapped=True)
        if err == _ERROR_IO_PENDING:
            self._wait(ov)
        return bytes(ov.getbuffer() or b"")

    def sendall(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            ov, err = _winapi.WriteFile(self._handle, view, overlapped=True)
            sent = (
                self._wait(ov) if err == _ERROR_IO_PENDING else int(ov.GetOverlappedResult(True)[0])
            )
            view = view[sent:]

    def close(self) -> None:
        if self._handle:
            _winapi.CloseHandle(self._handle)
            self._handle = 0


def connect(timeout: float) -> PipeConnection:
    """Connect to this user's agent and check the pipe's server runs as this user."""
    if paths.forwarded_socket() is not None:
        raise HelperError(
            f"{paths.FORWARD_ENV} is set, but a forwarded kubetray agent is reached from Linux "
            "and macOS hosts only: unset it to use the agent on this machine"
        )
    name = agent_pipe()
    while True:
        try:
            handle = _winapi.CreateFile(
                name,
                _winapi.GENERIC_READ | _winapi.GENERIC_WRITE,
                0,
                _winapi.NULL,
                _winapi.OPEN_EXISTING,
                _FILE_FLAG_OVERLAPPED | _SECURITY_SQOS_PRESENT | _SECURITY_IDENTIFICATION,
                _winapi.NULL,
            )
            break
        except OSError as e:
            if e.winerror == _ERROR_FILE_NOT_FOUND:
                raise AgentUnavailable("no kubetray agent is listening") from None
            if e.winerror != _ERROR_PIPE_BUSY:
                raise HelperError(f"cannot open the kubetray agent's pipe: {e}") from None
            _winapi.WaitNamedPipe(name, max(1, int(timeout * 1000)))
    conn = PipeConnection(handle)
    server_pid = wintypes.ULONG()
    if not kernel32.GetNamedPipeServerProcessId(wintypes.HANDLE(handle), ctypes.byref(server_pid)):
        conn.close()
        raise UnsafeRuntimeDir("cannot tell who serves the kubetray pipe")
    if sid_of_pid(server_pid.value) != current_sid():
        conn.close()
        raise UnsafeRuntimeDir("refusing the kubetray agent: it runs as another user")
    conn.settimeout(timeout)
    return conn
