"""Every user's running kubetray of this installation, for the package's scripts (as root).

An agent answers only its own user (the peer uid is checked), so root cannot ask it anything.
``kubetray restart --all-users`` and ``kubetray stop --all-users`` (run by the .deb's
maintainer scripts and install.sh) find the processes whose program is this installation's
``kubetray`` (also after an upgrade replaced the file: ``/proc/PID/exe`` then ends in
`` (deleted)``), and run the same command as each of their users, with the environment that
says where that user's agent listens (its runtime directory, HOME), read from the process.
Linux only (``/proc``): macOS and Windows installers do this their own way (packaging/).

Another user's process must not hold up a package's install: ``ask_all`` asks every instance at
once and waits ``LIMIT`` seconds in all, however many there are. What a user owns is read as
hostile: the asking command runs as that user (its own socket checks refuse anything not
theirs, so root never connects to, or follows a link in, a user's directory), its output is read
up to ``MAX_OUTPUT`` bytes and shown as printable lines only, and one still running at the
deadline is killed (it is ours; the agent it asked is left as it is) and named as not answering.
"""

import sys

assert sys.platform == "linux"  # tells mypy the rest is Linux-only

import contextlib
import os
import pwd
import selectors
import signal
import subprocess
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

KEPT_ENV = (
    "HOME",
    "USER",
    "LOGNAME",
    "PATH",
    "LANG",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "XDG_STATE_HOME",
    "DBUS_SESSION_BUS_ADDRESS",
    "KUBETRAY_RUNTIME_DIR",
    "KUBETRAY_CONFIG_DIR",
    "KUBETRAY_STATE_DIR",
)
"""What a user's agent is found by (and what its own commands read): copied from its process."""
LIMIT = 15.0
"""How long all the instances may take to answer, together (a restart request takes a moment;
a stop waits up to 10 s for the agent to end)."""
MAX_ENVIRON = 256 * 1024
"""What is read of a process's environment (the variables above come first in practice)."""
MAX_OUTPUT = 16 * 1024
"""What is read of one instance's answer; the rest is dropped."""
MAX_LINES, MAX_LINE = 10, 300
MAX_PER_USER = 8
"""Instances asked of one user (one runtime directory each; a person has one or two)."""
REAP = 1.0
"""How long a killed command may take to go (one stuck in the kernel is left behind)."""


@dataclass(frozen=True)
class Instance:
    """One user's running kubetray (the first process found of that user and runtime dir)."""

    pid: int
    uid: int
    user: str
    env: dict[str, str]


def _program(pid: str) -> str | None:
    try:
        target = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None
    return target.removesuffix(" (deleted)")


def _environ(pid: str) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read(MAX_ENVIRON)
    except OSError:
        return {}
    out = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        name = key.decode("utf-8", "replace")
        if sep and name in KEPT_ENV:
            out[name] = value.decode("utf-8", "surrogateescape")
    return out


def running(program: str) -> Iterator[Instance]:
    """The processes running ``program`` (a path), one per user and runtime directory: also
    those whose file an upgrade replaced, and, install.sh having moved the old directory aside
    before removing it, those running ``<directory>.old/kubetray``."""
    directory, name = os.path.split(program)
    ours = {program, os.path.join(directory + ".old", name)}
    seen: set[tuple[int, str]] = set()
    own = str(os.getpid())
    for pid in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int):
        if pid == own or _program(pid) not in ours:
            continue
        instance = of(int(pid))
        if instance is None:
            continue  # it has just ended
        env = instance.env
        where = env.get("KUBETRAY_RUNTIME_DIR") or env.get("XDG_RUNTIME_DIR") or ""
        if (instance.uid, where) in seen:
            continue  # the same user's agent, already asked (or the command asking it)
        seen.add((instance.uid, where))
        yield instance


def of(pid: int) -> Instance | None:
    """The process ``pid`` as an instance: its user, and the environment it was started with
    (None: it has ended, or its user is unknown)."""
    try:
        uid = os.stat(f"/proc/{pid}").st_uid
        entry = pwd.getpwuid(uid)
    except (OSError, KeyError):
        return None
    env = _environ(str(pid))
    env.setdefault("HOME", entry.pw_dir)
    env.setdefault("USER", entry.pw_name)
    env.setdefault("LOGNAME", entry.pw_name)
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return Instance(pid, uid, entry.pw_name, env)


@dataclass
class Answer:
    """What one instance's command said; ``answered`` False: it had not ended by the deadline."""

    instance: Instance
    answered: bool = False
    code: int | None = None
    output: bytearray = field(default_factory=bytearray)

    def lines(self) -> list[str]:
        """The answer as at most MAX_LINES printable lines (another user wrote them)."""
        text = bytes(self.output).decode("utf-8", "replace")
        out = []
        for raw in text.splitlines():
            line = "".join(c if c.isprintable() else "?" for c in raw).strip()
            if line:
                out.append(line if len(line) <= MAX_LINE else line[:MAX_LINE] + "…")
        if len(out) > MAX_LINES:
            out = [*out[: MAX_LINES - 1], f"({len(out) - MAX_LINES + 1} more lines not shown)"]
        return out or [f"exit {self.code}"]


def state(pid: int) -> str:
    """What the process is doing, in words, when that explains silence ("" otherwise)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read(4096)
    except OSError:
        return "it has ended"
    code = raw.rpartition(b")")[2].split()[:1]
    return {b"T": "it is stopped", b"t": "it is stopped (traced)", b"D": "it is stuck"}.get(
        code[0] if code else b"", ""
    )


def ask_all(
    instances: Iterable[Instance], command: list[str], limit: float = LIMIT
) -> list[Answer]:
    """Run ``command`` as each instance's user, all at once; ``limit`` seconds in all."""
    deadline = time.monotonic() + limit
    answers: list[Answer] = []
    running: dict[int, tuple[subprocess.Popen[bytes], Answer]] = {}
    started: list[subprocess.Popen[bytes]] = []
    with selectors.DefaultSelector() as sel:
        for instance in instances:
            answer = Answer(instance)
            answers.append(answer)
            try:
                proc = _start_as(instance, command)
            except (OSError, subprocess.SubprocessError, KeyError) as e:
                answer.answered, answer.output[:] = True, f"could not ask it: {e}".encode()
                continue
            assert proc.stdout is not None
            os.set_blocking(proc.stdout.fileno(), False)
            sel.register(proc.stdout, selectors.EVENT_READ, answer)
            running[proc.pid] = (proc, answer)
            started.append(proc)
        while running and (left := deadline - time.monotonic()) > 0:
            for key, _ in sel.select(min(left, 0.1)):
                answer = key.data
                chunk = _read(key.fileobj.fileno(), MAX_OUTPUT - len(answer.output))  # type: ignore[union-attr]
                if chunk is None:
                    continue
                answer.output += chunk
                if not chunk or len(answer.output) >= MAX_OUTPUT:
                    sel.unregister(key.fileobj)  # at its end, or enough said
            for pid, (proc, answer) in list(running.items()):
                if proc.poll() is not None:
                    # ended: what it wrote is in the pipe now (a process it left behind that
                    # keeps the pipe open is not waited for)
                    with contextlib.suppress(KeyError, ValueError):
                        sel.unregister(proc.stdout)  # type: ignore[arg-type]
                        assert proc.stdout is not None
                        answer.output += (
                            _read(proc.stdout.fileno(), MAX_OUTPUT - len(answer.output)) or b""
                        )
                    answer.answered, answer.code = True, proc.returncode
                    del running[pid]
    for proc, _ in running.values():
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: the command and its children
    reap = time.monotonic() + REAP
    for proc, _ in running.values():
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(max(0.0, reap - time.monotonic()))
        if proc.returncode is None:  # stuck in the kernel: left behind, Popen must not warn
            proc.returncode = -signal.SIGKILL
    for proc in started:
        if proc.stdout is not None:
            proc.stdout.close()
    return answers


def _read(fd: int, most: int) -> bytes | None:
    """Up to ``most`` bytes; b"" at the end, None when nothing is there yet."""
    if most <= 0:
        return b""
    try:
        return os.read(fd, min(most, 65536))
    except (BlockingIOError, InterruptedError):
        return None
    except OSError:  # the pipe is gone
        return b""


def _start_as(instance: Instance, command: list[str]) -> "subprocess.Popen[bytes]":
    """``command`` as the instance's user (its uid, group and groups), with its environment,
    in a session of its own (killed as one), answering on one pipe."""
    entry = pwd.getpwuid(instance.uid)
    return subprocess.Popen(
        command,
        user=instance.uid,
        group=entry.pw_gid,
        extra_groups=os.getgrouplist(entry.pw_name, entry.pw_gid),
        env=instance.env,
        cwd="/",
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def ask_everyone(
    instances: Iterable[Instance], command: list[str], limit: float = LIMIT
) -> list[str]:
    """``command`` as the user of each of ``instances`` (``running(program)``), all at once:
    a line per thing to say, each naming the user and the pid (``--all-users``)."""
    asked: list[Instance] = []
    skipped: dict[str, int] = {}
    for instance in instances:
        if sum(1 for i in asked if i.uid == instance.uid) < MAX_PER_USER:
            asked.append(instance)
        else:
            skipped[instance.user] = skipped.get(instance.user, 0) + 1
    lines = []
    for answer in ask_all(asked, command, limit):
        who = f"{answer.instance.user} (pid {answer.instance.pid})"
        if answer.answered:
            lines += [f"{who}: {line}" for line in answer.lines()]
        else:
            why = state(answer.instance.pid)
            lines.append(
                f"{who} did not answer within {limit:g} s{f' ({why})' if why else ''}: "
                "left as it is"
            )
    for user, count in skipped.items():
        lines.append(f"{user}: {count} more processes not asked (at most {MAX_PER_USER} a user)")
    if not asked:
        lines.append("no user runs kubetray now")
    return lines
