"""The IPC wire format shared by kubetray-exec (client) and the agent (server).

A frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON. The client
opens with a ``hello`` frame naming PROTOCOL_VERSION and sends its request right behind it (one
round trip); the server answers ``hello``, then zero or more ``message`` frames (text for the
user's terminal) and one ``result`` frame.

The helper must not pay for ``import json`` (≈7 ms: it pulls in ``re``), so this module carries
a tiny codec built on the C accelerators in ``_json``: it writes objects whose values are
strings, ints, bools, None or lists of strings, and reads *flat* objects (no nesting). Frames
the server sends to the helper are flat by construction.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (hot path)
if TYPE_CHECKING:
    from typing import Any, Protocol

    class Socket(Protocol):
        """What the helper needs of a connection: a socket, or the Windows pipe wrapper."""

        def sendall(self, data: bytes, /) -> None: ...
        def recv(self, size: int, /) -> bytes: ...
        def close(self) -> None: ...


try:
    from _json import encode_basestring_ascii as _quote
    from _json import scanstring as _scanstring
except ImportError:  # pragma: no cover - CPython always has _json
    from json.decoder import scanstring as _scanstring  # type: ignore[attr-defined,no-redef]
    from json.encoder import encode_basestring_ascii as _quote  # type: ignore[no-redef]

PROTOCOL_VERSION = 1
"""The frames' grammar. New fields and new requests keep it: each side ignores fields it does
not know, and an agent answers a request it does not know with exit 1 and a line saying so."""
KUBETRAY = "kubetray"
"""In the agent's hello: its kubetray version (agents before 0.2 send none)."""
BUILD = "build"
"""In the agent's hello: its build id (exec_helper.version), absent for a development install."""
HEADER_SIZE = 4
MAX_FRAME = 4 * 1024 * 1024
"""KUBERNETES_EXEC_INFO carries the cluster CA; Linux caps one env string at 128 KiB anyway."""

HELLO = "hello"
MESSAGE = "message"
"""A line for the user's terminal (login progress: the URL, the device code)."""
KEEPALIVE = "keepalive"
"""The agent is still working (a login in progress): reset the read timeout."""
PROMPT = "prompt"
"""Ask the user (``text``, ``secret``) and answer with ``{"op": "answer", "value": ...}``, or
``{"op": "answer", "cancel": true}`` (with ``"timeout": true`` when nobody answered in time)."""
PROMPT_TIMEOUT = 60.0
"""How long a prompt waits for a person: well before a caller (an IDE, a script) gives up."""
RESULT = "result"

UNLESS_BUILD = "unless_build"
"""In a ``restart`` request: restart only if the agent's build is another (the package's
scripts send the build they installed). The answer says ``"current": true`` when it is the
same. An agent that does not know the field restarts."""

GET_CREDENTIAL = "get_credential"
"""kubetray-exec's request: ``exec_info``, ``args``, ``env``, ``stdin_tty``, ``stderr_tty``,
``ppid`` (see exec_helper.__main__)."""
REQUEST_FIELDS = ("exec_info", "args", "env", "stdin_tty", "stderr_tty", "ppid")
"""A credential request's fields after ``op``, in the order exec_helper.__main__ sends them
(the C launcher sends the same; tests/packaging/test_fast_path.py compares the two)."""
CACHED_CREDENTIAL = "cached_credential"
"""The same fields, answered only if the agent can answer at once from memory: no login,
prompt, message, store read, refresh or consent question. The installed launcher (C) sends it
before it starts Python (packaging/launcher/fast_path.c)."""
CACHED_TIMEOUT = 2.0
"""The longest the launcher waits for the whole answer to ``cached_credential`` (or
KUBETRAY_EXEC_TIMEOUT if shorter) before it leaves the request to Python: an answer from
memory takes a millisecond, so only a stuck agent reaches it."""
ANSWERED = "answered"
"""True in the result of a ``cached_credential`` the agent answered. Absent or false: the agent
did nothing (it needs more, or is older and does not know the request): ask with
``get_credential``."""
NO_EXEC_INFO = (
    '{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential",'
    '"spec":{"interactive":false}}'
)
"""What a caller that sends no KUBERNETES_EXEC_INFO gets (JavaScript's client-node never does):
v1beta1, not interactive, no cluster info, as int128/kubelogin reads it."""


class ProtocolError(ValueError):
    """A frame that is too large, truncated, or not the JSON we expect."""


def frame(payload: bytes) -> bytes:
    """Prefix ``payload`` with its length."""
    if len(payload) > MAX_FRAME:
        raise ProtocolError(f"frame of {len(payload)} bytes exceeds the {MAX_FRAME} byte limit")
    return len(payload).to_bytes(HEADER_SIZE, "big") + payload


def frame_length(header: bytes) -> int:
    """Validate a frame header and return the payload length."""
    n = int.from_bytes(header, "big")
    if n > MAX_FRAME:
        raise ProtocolError(f"frame of {n} bytes exceeds the {MAX_FRAME} byte limit")
    return n


def _encode_value(value: "Any") -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return str(_quote(value))
    if isinstance(value, list | tuple):
        return "[" + ",".join(str(_quote(v)) for v in value) + "]"
    raise TypeError(f"cannot encode {type(value).__name__}")


def encode(obj: "dict[str, Any]") -> bytes:
    """Encode a dict of simple values as compact ASCII JSON."""
    items = ",".join(str(_quote(k)) + ":" + _encode_value(v) for k, v in obj.items())
    return ("{" + items + "}").encode("ascii")


_WS = " \t\n\r"
_NUMBER = "-0123456789"


def decode_flat(text: str) -> "dict[str, Any]":
    """Decode a JSON object whose values are strings, integers, booleans or null."""
    n = len(text)

    def skip(i: int) -> int:
        while i < n and text[i] in _WS:
            i += 1
        return i

    def expect(i: int, ch: str) -> int:
        i = skip(i)
        if i >= n or text[i] != ch:
            raise ProtocolError(f"expected {ch!r} at offset {i}")
        return i + 1

    obj: dict[str, Any] = {}
    i = expect(0, "{")
    i = skip(i)
    if i < n and text[i] == "}":
        return obj
    while True:
        i = expect(i, '"')
        try:
            key, i = _scanstring(text, i)
        except ValueError as e:
            raise ProtocolError(str(e)) from None
        i = skip(expect(i, ":"))
        value: Any
        if i < n and text[i] == '"':
            try:
                value, i = _scanstring(text, i + 1)
            except ValueError as e:
                raise ProtocolError(str(e)) from None
        elif text.startswith("true", i):
            value, i = True, i + 4
        elif text.startswith("false", i):
            value, i = False, i + 5
        elif text.startswith("null", i):
            value, i = None, i + 4
        else:
            j = i
            while j < n and text[j] in _NUMBER:
                j += 1
            if j == i:
                raise ProtocolError(f"unsupported value at offset {i}")
            value, i = int(text[i:j]), j
        obj[key] = value
        i = skip(i)
        if i < n and text[i] == ",":
            i += 1
            continue
        i = expect(i, "}")
        if skip(i) != n:
            raise ProtocolError("trailing data after the object")
        return obj
