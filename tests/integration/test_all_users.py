"""``kubetray restart --all-users`` (a package's upgrade, as root) with another local user's
kubetray stopped or hostile: every instance is asked at once, the victim's agent restarts, and
the ones that did not answer are named, one line each, within one bounded wait in all."""

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app import instances_linux
from tests.peers import ROOT, require

VICTIM, OTHER = "kt-allusers-victim", "kt-allusers-other"

HOSTILE = r"""
import os, socket, sys, time
mode, path = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX)
s.bind(path)
s.listen(8)
print("listening", flush=True)
conns = []
while True:
    c, _ = s.accept()
    conns.append(c)  # "silent": accepted, never answered
    if mode == "drip":  # a well-formed frame, one byte at a time
        c.send((1000).to_bytes(4, "big"))
        while True:
            c.send(b" ")
            time.sleep(0.5)
    if mode == "flood":
        try:
            c.sendall(b"\xff" * (64 << 20))
        except OSError:
            pass
"""


def account(name: str) -> pwd.struct_passwd:
    subprocess.run(["useradd", "-m", name], check=True, capture_output=True)
    return pwd.getpwnam(name)


def as_user(
    user: str, home: Path, run: Path, argv: list[str], **kw: object
) -> "subprocess.Popen[str]":
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(ROOT),
        "HOME": str(home),
        "KUBETRAY_RUNTIME_DIR": str(run),
        "KUBETRAY_CONFIG_DIR": str(home / "config"),
        "KUBETRAY_STATE_DIR": str(home / "state"),
    }
    prefix = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups"]
    return subprocess.Popen(
        [*prefix, *argv],
        env=env,
        cwd=ROOT,
        text=True,
        **kw,  # type: ignore[call-overload]
    )


def kubetray(*args: str) -> list[str]:
    """``python -m app ARGS`` as a command a root process runs with an instance's own
    environment (which has no PYTHONPATH: the packaged program needs none)."""
    code = f"import runpy, sys; sys.path.insert(0, {str(ROOT)!r}); sys.argv[0] = 'kubetray'; "
    code += "runpy.run_module('app', run_name='__main__')"
    return [sys.executable, "-c", code, *args]


def status(user: str, home: Path, run: Path) -> dict[str, object] | None:
    done = as_user(user, home, run, kubetray("status", "--json"), stdout=subprocess.PIPE)
    out, _ = done.communicate(timeout=60)
    if done.returncode != 0:
        return None
    return dict(json.loads(out))


def until(check: object, limit: float = 60.0) -> object:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        found = check()  # type: ignore[operator]
        if found:
            return found
        time.sleep(0.2)
    pytest.fail(f"not within {limit:g} s")


@pytest.fixture
def users() -> Iterator[tuple[str, str, Path]]:
    require(os.getuid() == 0, "needs root: it creates two local users (CI runs as root)")
    require(
        shutil.which("useradd") is not None and shutil.which("setpriv") is not None,
        "needs useradd and setpriv",
    )
    for name in (VICTIM, OTHER):
        subprocess.run(["userdel", "-r", name], capture_output=True, check=False)
    base = Path(tempfile.mkdtemp(prefix="kt-allusers-", dir="/tmp"))
    base.chmod(0o755)
    try:
        for name in (VICTIM, OTHER):
            entry = account(name)
            (base / name).mkdir()
            os.chown(base / name, entry.pw_uid, entry.pw_gid)
        yield VICTIM, OTHER, base
    finally:
        for name in (VICTIM, OTHER):
            subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True, check=False)
        time.sleep(0.5)
        for name in (VICTIM, OTHER):
            subprocess.run(["userdel", "-r", name], capture_output=True, check=False)
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
def test_stopped_and_hostile_agents_of_another_user_cost_one_bounded_wait(
    users: tuple[str, str, Path],
) -> None:
    victim, other, base = users
    procs: list[subprocess.Popen[str]] = []

    def agent(user: str, run: Path) -> subprocess.Popen[str]:
        proc = as_user(
            user,
            base / user,
            run,
            [sys.executable, "-m", "app", "agent", "--store", "memory"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        procs.append(proc)
        until(lambda: status(user, base / user, run))
        return proc

    try:
        mine = agent(victim, base / victim / "run")
        before = status(victim, base / victim, base / victim / "run")
        assert before is not None
        stopped = [agent(other, base / other / f"run{i}") for i in range(3)]
        for proc in stopped:
            os.kill(proc.pid, signal.SIGSTOP)
        hostile = {}
        for mode in ("silent", "drip", "flood"):
            run = base / other / f"run-{mode}"
            run.mkdir(mode=0o700)
            os.chown(run, pwd.getpwnam(other).pw_uid, pwd.getpwnam(other).pw_gid)
            proc = as_user(
                other,
                base / other,
                run,
                [sys.executable, "-c", HOSTILE, mode, str(run / "agent.sock")],
                stdout=subprocess.PIPE,
            )
            procs.append(proc)
            assert proc.stdout is not None and proc.stdout.readline() == "listening\n"
            hostile[mode] = proc

        found = [instances_linux.of(p.pid) for p in [mine, *stopped, *hostile.values()]]
        started = time.monotonic()
        lines = instances_linux.ask_everyone(
            [i for i in found if i is not None], kubetray("restart")
        )
        took = time.monotonic() - started
        print(f"asked 7 instances (3 stopped, 3 hostile) in {took:.1f} s", *lines, sep="\n")

        def said(pid: int) -> list[str]:
            return [line for line in lines if f"(pid {pid})" in line]

        assert any("restarts now" in line for line in said(mine.pid)), lines
        for proc in stopped:  # one line each (one may find no socket: it answers that)
            (line,) = said(proc.pid)
            assert "did not answer" not in line or line == (
                f"{other} (pid {proc.pid}) did not answer within {instances_linux.LIMIT:g} s "
                "(it is stopped): left as it is"
            ), lines
        assert sum("did not answer" in line for p in stopped for line in said(p.pid)) >= 2
        for mode in ("silent", "drip"):
            (line,) = said(hostile[mode].pid)
            assert "did not answer within" in line, lines
        assert len(said(hostile["flood"].pid)) == 1, lines  # refused, or did not answer

        def restarted() -> bool:
            now = status(victim, base / victim, base / victim / "run")
            return bool(now and now.get("started") != before.get("started"))

        until(restarted)
        for proc in stopped:  # left as they were: stopped, not killed
            assert instances_linux.state(proc.pid) == "it is stopped"
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(10)
            if proc.stdout is not None:
                proc.stdout.close()


def test_another_users_answer_is_shown_as_a_few_printable_lines() -> None:
    instance = instances_linux.Instance(1, 1000, "mallory", {})
    answer = instances_linux.Answer(instance, answered=True, code=0)
    answer.output += b"kubetray: root (pid 1): \x1b[2Jfine\n" + b"x\n" * 50
    lines = answer.lines()
    assert lines[0] == "kubetray: root (pid 1): ?[2Jfine"
    assert len(lines) == instances_linux.MAX_LINES
    assert lines[-1] == "(42 more lines not shown)"
