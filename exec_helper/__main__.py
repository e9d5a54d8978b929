"""kubetray-exec: the exec credential plugin a kubeconfig names (KEP-541).

The hot path reads KUBERNETES_EXEC_INFO, makes one round trip to the agent and prints what the
agent answers: the agent parses the input and renders the ExecCredential, so this module loads
only builtins (``_socket``, ``_json``, ``posix``). Help, local validation and starting an agent
are the slow path and import what they like.
"""

import sys

from exec_helper import exchange, paths, protocol
from exec_helper.errors import HelperError, printable
from exec_helper.exchange import exchange_starting_agent

if sys.platform == "win32":
    import os as _os
else:
    import posix as _os  # `os` costs a millisecond of imports; posix is built in

EXEC_INFO = "KUBERNETES_EXEC_INFO"
KUBELET_MODE = "kubelet-credential-provider"
"""The first argument for the kubelet credential provider mode (exec_helper.kubelet)."""
HELP_ARGS = ("-h", "--help", "--version")
"""Arguments that are answered here, never by the agent."""


def _fail(message: str) -> int:
    sys.stderr.write(printable(message) + "\n")
    sys.stderr.flush()
    return 1


def _is_tty(fd: int) -> bool:
    try:
        return _os.isatty(fd)
    except OSError:
        return False


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


def main(argv: list[str] | None = None) -> int:
    """Entry point of kubetray-exec."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == [KUBELET_MODE]:
        from exec_helper.kubelet import run_provider

        return run_provider(args[1:])
    if args == ["--version"]:  # on the hot path: installers and doctor ask it
        from exec_helper.version import describe

        sys.stdout.write(f"kubetray-exec {describe()}\n")
        return 0
    if any(a in args for a in HELP_ARGS):
        from exec_helper.agent_start import print_help

        return print_help(args)
    exec_info = paths.getenv(EXEC_INFO) or protocol.NO_EXEC_INFO
    request = protocol.encode(
        {
            "op": protocol.GET_CREDENTIAL,
            "exec_info": exec_info,
            "args": args,
            "env": paths.kubetray_env(),
            "stdin_tty": _is_tty(0),
            "stderr_tty": _is_tty(2),
            # Over an SSH forward the agent sees only ssh: this tells one kubectl from another.
            "ppid": _os.getppid(),
        }
    )
    try:
        code = print_answer(exchange_starting_agent(request, exec_info, args))
        if exchange.met_older_agent:  # after the answer: kubectl has what it needs
            from exec_helper.agent_start import retire_older_agent

            retire_older_agent()
        return code
    except HelperError as e:
        return _fail(str(e))
    except KeyboardInterrupt:
        return 130
    except RecursionError:
        return _fail(f"{EXEC_INFO} or the agent's answer is nested too deeply")
    except Exception as e:  # the one-line contract holds for what nobody foresaw too
        what = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        return _fail(
            "kubetray-exec could not get a credential: something it did not expect went "
            f"wrong ({what})"
        )


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
