"""kubetray-exec: the exec credential plugin a kubeconfig names (KEP-541).

The hot path reads KUBERNETES_EXEC_INFO, makes one round trip to the agent and prints what the
agent answers: the agent parses the input and renders the ExecCredential, so this module loads
only builtins (``_socket``, ``_json``, ``posix``). Help, local validation and starting an agent
are the slow path and import what they like.
"""

import sys

from exec_helper import paths, protocol
from exec_helper.errors import AgentUnavailable, HelperError, printable

if sys.platform == "win32":
    import os as _os
else:
    import posix as _os  # `os` costs a millisecond of imports; posix is built in

EXEC_INFO = "KUBERNETES_EXEC_INFO"
FRAME_TIMEOUT = 30.0
"""No consumer but the kubelet has a timeout, so the helper has its own (checklist #40);
KUBETRAY_EXEC_TIMEOUT overrides it (seconds between two frames from the agent)."""


def _fail(message: str) -> int:
    sys.stderr.write(printable(message) + "\n")
    sys.stderr.flush()
    return 1


def _is_tty(fd: int) -> bool:
    try:
        return _os.isatty(fd)
    except OSError:
        return False


def _read_frame(sock: "protocol.Socket", buf: bytearray) -> bytes:
    while len(buf) < protocol.HEADER_SIZE:
        chunk = sock.recv(65536)
        if not chunk:
            raise HelperError("the kubetray agent closed the connection without an answer")
        buf += chunk
    end = protocol.HEADER_SIZE + protocol.frame_length(bytes(buf[: protocol.HEADER_SIZE]))
    while len(buf) < end:
        chunk = sock.recv(65536)
        if not chunk:
            raise HelperError("the kubetray agent closed the connection mid-answer")
        buf += chunk
    data = bytes(buf[protocol.HEADER_SIZE : end])
    del buf[:end]
    return data


def _timeout() -> float:
    value = paths.getenv("KUBETRAY_EXEC_TIMEOUT")
    try:
        return float(value) if value else FRAME_TIMEOUT
    except ValueError:
        return FRAME_TIMEOUT


def exchange_starting_agent(
    request: bytes, exec_info: str, args: list[str]
) -> "tuple[int, str, str]":
    """exchange(), starting the agent first when nobody answers (only then is launch imported)."""
    try:
        return exchange(request)
    except AgentUnavailable:
        from exec_helper.launch import start_agent

        start_agent(exec_info, args)
        return exchange(request)


def print_answer(answer: "tuple[int, str, str]") -> int:
    """Write the agent's stdout and stderr as given; return its exit code."""
    code, out, err = answer
    if out:
        sys.stdout.buffer.write(out.encode("utf-8"))
        sys.stdout.flush()
    if err:
        sys.stderr.write(printable(err.rstrip("\n")) + "\n")
        sys.stderr.flush()
    return code


def exchange(request: bytes) -> "tuple[int, str, str]":
    """One exchange with the agent: (exit code, stdout, stderr) as it decided them.

    Progress messages go to stderr as they come; prompts are answered on the terminal.
    """
    from exec_helper.transport import connect

    timeout = _timeout()
    sock = connect(timeout)
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
                sys.stderr.write(printable(str(msg.get("text", "")), keep="\n") + "\n")
                sys.stderr.flush()
            elif kind == protocol.PROMPT:
                from exec_helper.prompt import answer

                sock.sendall(protocol.frame(answer(msg)))
            elif kind not in (protocol.HELLO, protocol.KEEPALIVE):
                raise HelperError(f"the kubetray agent sent an unexpected {kind!r} frame")
    except TimeoutError:
        raise HelperError(
            f"the kubetray agent did not answer within {timeout:g} s; "
            "see kubetray status, or restart it with: kubetray agent"
        ) from None
    except protocol.ProtocolError as e:
        raise HelperError(f"garbled answer from the kubetray agent: {e}") from None
    except OSError as e:
        raise HelperError(f"lost the connection to the kubetray agent: {e.strerror or e}") from None
    finally:
        sock.close()


def main(argv: list[str] | None = None) -> int:
    """Entry point of kubetray-exec."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["kubelet-credential-provider"]:
        from exec_helper.kubelet import run_provider

        return run_provider(args[1:])
    if args == ["--version"]:  # on the hot path: installers and doctor ask it
        sys.stdout.write(f"kubetray-exec {protocol.VERSION}\n")
        return 0
    if "-h" in args or "--help" in args or "--version" in args:
        from exec_helper.launch import print_help

        return print_help(args)
    exec_info = paths.getenv(EXEC_INFO)
    if not exec_info:
        return _fail(
            f"{EXEC_INFO} env var is unset or empty: kubetray-exec is run by kubectl from a "
            "kubeconfig exec entry (see kubetray-exec --help)"
        )
    request = protocol.encode(
        {
            "op": "get_credential",
            "exec_info": exec_info,
            "args": args,
            "env": paths.kubetray_env(),
            "stdin_tty": _is_tty(0),
            "stderr_tty": _is_tty(2),
        }
    )
    try:
        return print_answer(exchange_starting_agent(request, exec_info, args))
    except HelperError as e:
        return _fail(str(e))
    except KeyboardInterrupt:
        return 130
    except RecursionError:
        return _fail(f"{EXEC_INFO} or the agent's answer is nested too deeply")
    except Exception as e:  # the one-line contract holds for what nobody foresaw too
        return _fail(f"kubetray-exec failed: {type(e).__name__}: {e}")


def run() -> None:
    """Run as a program: flush, then leave without interpreter teardown.

    kubectl waits for the process to exit, and tearing down modules costs the better part of a
    millisecond that nobody needs: everything worth keeping is already written.
    """
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        _os._exit(code)


if __name__ == "__main__":
    run()
