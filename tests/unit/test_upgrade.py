"""Noticing an upgrade (app/upgrade.py) and handing the socket over (app/agent/listener_unix.py)."""

import json
import os
import socket
import sys
from pathlib import Path

import pytest

from app import upgrade
from app.upgrade import REMOVED, REPLACED, Change, Installation


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def build_file(path: Path, version: str, build: str) -> None:
    part = path.with_suffix(".part")
    part.write_text(json.dumps({"version": version, "build": build}) + "\n")
    os.replace(part, path)


def test_another_build_is_acted_on_once_it_has_settled(tmp_path: Path) -> None:
    path, clock = tmp_path / "kubetray-build.json", Clock()
    build_file(path, "1.0.0", "one")
    inst = Installation(str(path), "one", clock)
    assert inst.check() is None
    build_file(path, "1.0.1", "two")  # dpkg renames the rest of the package meanwhile
    assert inst.check() is None
    clock.now += upgrade.SETTLED_FOR
    assert inst.check() == Change(REPLACED, "1.0.1", "two")
    build_file(path, "1.0.0", "one")  # put back (a downgrade to this very build)
    assert inst.check() is None


def test_a_build_file_that_stays_missing_is_a_removal(tmp_path: Path) -> None:
    path, clock = tmp_path / "kubetray-build.json", Clock()
    build_file(path, "1.0.0", "one")
    inst = Installation(str(path), "one", clock)
    path.unlink()  # install.sh between its two renames, or apt remove
    assert inst.check() is None
    build_file(path, "1.0.0", "one")
    assert inst.check() is None  # it came back: no removal
    path.unlink()
    assert inst.check() is None
    clock.now += upgrade.GONE_FOR
    assert inst.check() == Change(REMOVED)


def test_a_development_install_is_never_watched(tmp_path: Path) -> None:
    assert not Installation(None, None).watched
    assert Installation(str(tmp_path / "x"), None).check() is None


def test_a_damaged_build_file_is_looked_at_again(tmp_path: Path) -> None:
    path, clock = tmp_path / "kubetray-build.json", Clock()
    build_file(path, "1.0.0", "one")
    inst = Installation(str(path), "one", clock)
    path.write_text("{not json")
    assert inst.check() is None
    build_file(path, "2.0.0", "two")
    assert inst.check() is None  # seen now: it settles from here
    clock.now += upgrade.SETTLED_FOR
    assert inst.check() == Change(REPLACED, "2.0.0", "two")


@pytest.mark.posix_only
def test_a_handed_over_socket_keeps_its_callers(tmp_path: Path) -> None:
    """The listener handed over across exec: a caller that connected meanwhile is served by
    the process that takes it over; the lock stays held; a child never takes it."""
    import subprocess

    run = tmp_path / "run"
    adopt = (
        "import os, sys; from app.agent.listener_unix import UnixListener\n"
        "lst = UnixListener(sys.argv[1]); lst.open(); print(lst.adopted, flush=True)\n"
        "conn, peer = lst.accept(); conn.sendall(conn.recv(5)); conn.close()\n"
    )
    from app.agent.listener_unix import UnixListener

    first = UnixListener(str(run))
    first.open()
    caller = socket.socket(socket.AF_UNIX)
    caller.connect(first.address)  # waits in the backlog: nobody accepts for now
    caller.sendall(b"hello")
    sock_fd, lock_fd = first.hand_over()
    first.close()  # nothing left to close: the socket stays, listening
    assert (run / "agent.sock").exists()
    env = dict(os.environ, KUBETRAY_LISTEN_FDS=f"{sock_fd},{lock_fd}")
    env["KUBETRAY_LISTEN_PID"] = "1"  # another process's: not taken
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.environ.get('KUBETRAY_LISTEN_FDS'))"],
        env=env,
        pass_fds=(sock_fd, lock_fd),
        capture_output=True,
        text=True,
        check=True,
    )
    assert child.stdout.strip() == f"{sock_fd},{lock_fd}"
    # exec keeps the pid: the process that takes over is given its own pid in the variable.
    launcher = (
        "import os, sys; os.environ['KUBETRAY_LISTEN_PID'] = str(os.getpid()); "
        f"exec(compile({adopt!r}, 'adopt', 'exec'))"
    )
    taker = subprocess.run(
        [sys.executable, "-c", launcher, str(run)],
        env={**env, "PYTHONPATH": str(Path(__file__).parents[2])},
        pass_fds=(sock_fd, lock_fd),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert taker.stdout.strip() == "True", taker.stderr
    assert caller.recv(5) == b"hello"  # served by the new process, never refused
    caller.close()
    os.close(sock_fd)
    os.close(lock_fd)
