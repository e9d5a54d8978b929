"""kubetray-exec's slow path: help, rejecting bad input locally, starting an agent.

Reached only when the fast path cannot answer, so imports here cost nothing that matters.
"""

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import time

from exec_helper import paths, protocol
from exec_helper.errors import AgentUnavailable, HelperError
from exec_helper.exec_credential import ExecInfoError, parse_exec_info
from exec_helper.options import OptionsError, UnknownArgument, build_parser, resolve

START_TIMEOUT = 10.0
"""An agent's start-up is a second or two; a loaded machine may take longer."""


def print_help(args: list[str]) -> int:
    """``--help`` and ``--version``."""
    if "--version" in args:
        from exec_helper.version import describe

        sys.stdout.write(f"kubetray-exec {describe()}\n")
    else:
        build_parser().print_help(sys.stdout)
    return 0


def retire_older_agent() -> None:
    """The agent is older than 0.2 (its hello names no version): it cannot notice that kubetray
    was upgraded and keeps running the old code. Ask it to stop once no login is in flight (a
    request it knows); the next call starts the kubetray installed now, which reads its logins
    back from the keyring. Not through an SSH forward: that agent is the desktop's business."""
    if paths.forwarded_socket():
        return
    from exec_helper.exchange import exchange

    stop = protocol.encode({"op": "stop", "when_idle": True})
    with contextlib.suppress(HelperError):  # it is going anyway, or the next call asks again
        exchange(stop, talk=False)


def agent_command() -> list[str]:
    """How to start the agent: $KUBETRAY_AGENT_COMMAND, a kubetray beside us, or on PATH."""
    override = os.environ.get("KUBETRAY_AGENT_COMMAND")
    if override:
        return shlex.split(override)
    exe = "kubetray.exe" if sys.platform == "win32" else "kubetray"
    here = os.path.dirname(
        os.path.abspath(sys.executable if getattr(sys, "frozen", False) else sys.argv[0])
    )
    sibling = os.path.join(here, exe)
    if os.access(sibling, os.X_OK):
        return [sibling, "agent"]
    found = shutil.which("kubetray")
    if found:
        return [found, "agent"]
    forwarded = _forwarded_here()
    if forwarded:
        raise HelperError(
            f"no kubetray agent runs on this host, but one is forwarded here over SSH at "
            f"{forwarded}: set {paths.FORWARD_ENV}={forwarded} (the ~/.profile line that "
            f"kubetray ssh-config prints, or AcceptEnv {paths.FORWARD_ENV} in this host's "
            "sshd_config)"
        )
    raise HelperError(
        "no kubetray agent is running and the kubetray program was not found beside "
        f"kubetray-exec ({here}) or on PATH: install kubetray, or start it with: kubetray agent"
    )


def _forwarded_here() -> str | None:
    """The socket `kubetray ssh` forwards to this user, when it is there (SetEnv did not
    arrive: the host's sshd does not accept the variable)."""
    if sys.platform == "win32":
        return None
    import pwd

    try:
        path = paths.FORWARD_PATH.format(user=pwd.getpwuid(os.getuid()).pw_name)
    except KeyError:
        return None
    return path if os.path.exists(path) else None


def _validate(exec_info: str, args: list[str]) -> None:
    """Bad input in kubetray's own flags never costs an agent start. An argument they do not
    know may be a cloud tool's command line (gke-gcloud-auth-plugin's, ...), which only the
    agent's providers read: the agent is started and says what it thinks of it."""
    try:
        info = parse_exec_info(exec_info)
        resolve(args, info.cluster.config if info.cluster else None)
    except UnknownArgument:
        pass
    except (ExecInfoError, OptionsError) as e:
        raise HelperError(str(e)) from None


def start_agent(exec_info: str, args: list[str]) -> None:
    """Start ``kubetray agent`` in the background and wait until it answers."""
    _validate(exec_info, args)  # bad input never costs an agent start
    _spawn()


def start_agent_for_cli() -> None:
    """The same, for kubetray's own commands (kubetray login)."""
    _spawn()


def _ours(proc: "subprocess.Popen[bytes]") -> bool:
    """Whether the agent that answered is the one we started. Another agent answered first:
    ours, still starting, would otherwise take the lock once that one stops and live on with
    nobody to serve, so it is stopped. (Its pid is in the lock file once it listens, so an
    agent that answered is never ours when the pids differ.)"""
    if proc.poll() is not None:
        return False  # it lost the race and left
    if sys.platform == "win32":
        return True  # the pipe's first instance is the lock: a loser has exited already
    try:
        with open(os.path.join(paths.runtime_dir(), paths.LOCK_NAME), encoding="utf-8") as f:
            holder = int(f.read().strip() or 0)
    except (OSError, ValueError):
        return False
    if holder != proc.pid:
        proc.terminate()
        return False
    return True


def _said(log_path: str, offset: int) -> str:
    """What an agent that exited wrote to its log: its error and hint lines, else its last."""
    try:
        with open(log_path, "rb") as f:
            f.seek(offset)
            lines = f.read(64 * 1024).decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    lines = [line.strip() for line in lines if line.strip()]
    chosen = [line for line in lines if line.startswith(("error:", "hint:"))] or lines[-1:]
    text = "; ".join(line.removeprefix("error: ").removeprefix("hint: ") for line in chosen)
    return text[:400]


def _spawn() -> None:
    log_dir = paths.state_dir()
    log_path = os.path.join(log_dir, "agent.log")
    cmd = agent_command()
    try:
        os.makedirs(log_dir, mode=0o700, exist_ok=True)
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError as e:  # its log goes there: an agent could not start either
        raise HelperError(paths.unusable_dir("state", log_dir, e)) from None
    with open(log_fd, "ab") as log:
        offset = log.seek(0, os.SEEK_END)
        kwargs: dict[str, object] = {}
        if sys.platform == "win32":
            kwargs["creationflags"] = (
                subprocess.DETACHED_PROCESS | subprocess.CREATE_NEW_PROCESS_GROUP
            )
        else:
            kwargs["start_new_session"] = True
        # The agent outlives this call: it must not pin the caller's directory or keep the
        # caller's request in its environment.
        env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_EXEC_INFO"}
        try:
            # stdout must not be ours: kubectl reads our stdout until every writer closes it.
            proc = subprocess.Popen(
                cmd,
                cwd=log_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                close_fds=True,
                **kwargs,  # type: ignore[call-overload]
            )
        except OSError as e:
            raise HelperError(
                f"could not start the kubetray agent ({shlex.join(cmd)}): {e}"
            ) from None
    timeout = float(os.environ.get("KUBETRAY_AGENT_START_TIMEOUT", START_TIMEOUT))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            from exec_helper.transport import connect

            connect(1.0).close()
            if _ours(proc):  # one line per event: only the helper whose agent serves says it
                sys.stderr.write("kubetray-exec: started the kubetray agent\n")
            return
        except AgentUnavailable:
            pass
        code = proc.poll()
        if code is not None:
            said = _said(log_path, offset)
            # An agent that lost the race to another one exits at once; wait for the winner.
            # Any other exit is final: say why now rather than after the full timeout.
            if "already running" not in said:
                raise HelperError(
                    f"the kubetray agent exited with code {code} at start-up: "
                    f"{said or 'it said nothing'} (log: {log_path})"
                )
        time.sleep(0.01)  # a connect attempt is ~50 µs: poll finely, the answer is what counts
    code = proc.poll()
    state = "is still starting" if code is None else f"exited with code {code}"
    raise HelperError(
        f"the kubetray agent {state} and did not answer within {timeout:.0f} s; "
        f"see {log_path}, or run it in a terminal: kubetray agent"
    )
