"""One exchange with the agent, for every client: kubetray-exec, its kubelet mode and kubetray's
own commands (status, login, ...). Hello and request go out in one write; the agent's
messages go to stderr as they come, its prompts are answered on the terminal, and its result
frame ends the exchange.

On the helper's hot path: only builtins and this package's small modules.
"""

import sys

from exec_helper import paths, protocol
from exec_helper.errors import AgentGone, AgentUnavailable, HelperError, printable

FRAME_TIMEOUT = 30.0
"""No consumer but the kubelet has a timeout, so the helper has its own (checklist #40);
KUBETRAY_EXEC_TIMEOUT overrides it (seconds between two frames from the agent)."""

Answer = tuple[int, str, str]
"""(exit code, stdout, stderr) as the agent decided them."""
met_older_agent = False
"""The agent answered with a hello that names no kubetray version: one from before 0.2, which
cannot notice an upgrade by itself (kubetray-exec then asks it to restart, see __main__)."""


def _read_frame(sock: "protocol.Socket", buf: bytearray) -> bytes:
    while len(buf) < protocol.HEADER_SIZE:
        chunk = sock.recv(65536)
        if not chunk:
            raise AgentGone("the kubetray agent closed the connection without an answer")
        buf += chunk
    end = protocol.HEADER_SIZE + protocol.frame_length(bytes(buf[: protocol.HEADER_SIZE]))
    while len(buf) < end:
        chunk = sock.recv(65536)
        if not chunk:
            raise AgentGone("the kubetray agent closed the connection mid-answer")
        buf += chunk
    data = bytes(buf[protocol.HEADER_SIZE : end])
    del buf[:end]
    return data


def _timeout() -> float:
    value = paths.getenv(paths.TIMEOUT_ENV)
    try:
        return float(value) if value else FRAME_TIMEOUT
    except ValueError:
        return FRAME_TIMEOUT


def exchange(request: bytes, talk: bool = True) -> Answer:
    """Send ``request`` (an encoded JSON object) and return the agent's answer.

    ``talk``: show the agent's messages on stderr and answer its prompts (else both are
    dropped: a prompt then goes unanswered and the agent gives up on it). AgentGone: the agent
    went away with the request and before anyone answered a prompt of its (so asking again
    asks nobody twice).
    """
    from exec_helper.transport import connect

    timeout = _timeout()
    sock = connect(timeout)
    answered = False
    try:
        hello = protocol.encode({"op": protocol.HELLO, "version": protocol.PROTOCOL_VERSION})
        sock.sendall(protocol.frame(hello) + protocol.frame(request))
        buf = bytearray()
        while True:
            msg = protocol.decode_flat(_read_frame(sock, buf).decode("utf-8"))
            kind = msg.get("type")
            if kind == protocol.RESULT:
                code = msg.get("exit")
                return (
                    code if isinstance(code, int) else 1,
                    str(msg.get("stdout") or ""),
                    str(msg.get("stderr") or ""),
                )
            if kind == protocol.MESSAGE:
                if talk:
                    sys.stderr.write(printable(str(msg.get("text", "")), keep="\n") + "\n")
                    sys.stderr.flush()
            elif kind == protocol.PROMPT:
                if talk:
                    from exec_helper.prompt import answer

                    answered = True
                    sock.sendall(protocol.frame(answer(msg)))
            elif kind == protocol.HELLO:
                if protocol.KUBETRAY not in msg:
                    global met_older_agent  # noqa: PLW0603 - one fact for __main__ to act on
                    met_older_agent = True
            elif kind != protocol.KEEPALIVE:
                raise HelperError(f"the kubetray agent sent an unexpected {kind!r} frame")
    except TimeoutError:
        raise HelperError(
            f"the kubetray agent did not answer within {timeout:g} s; "
            "see kubetray status, or restart it with: kubetray agent"
        ) from None
    except protocol.ProtocolError as e:
        raise HelperError(f"garbled answer from the kubetray agent: {e}") from None
    except AgentGone as e:
        raise (HelperError(str(e)) if answered else e) from None
    except OSError as e:
        lost = f"lost the connection to the kubetray agent: {e.strerror or e}"
        if isinstance(e, ConnectionError) and not answered:
            raise AgentGone(lost) from None
        raise HelperError(lost) from None
    finally:
        sock.close()


def exchange_starting_agent(request: bytes, exec_info: str, args: list[str]) -> Answer:
    """exchange(), starting the agent first when nobody answers (only then is launch imported),
    and once more against a fresh agent when the one that took the request died with it."""
    try:
        return _exchange_or_start(request, exec_info, args)
    except AgentGone:
        return _exchange_or_start(request, exec_info, args)


def _exchange_or_start(request: bytes, exec_info: str, args: list[str]) -> Answer:
    try:
        return exchange(request)
    except AgentUnavailable:
        from exec_helper.agent_start import start_agent

        start_agent(exec_info, args)
        return exchange(request)
