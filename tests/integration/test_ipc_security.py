"""The private IPC: directory and socket modes, refused directories, foreign uids, bad frames."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.agent.server import READ_TIMEOUT
from exec_helper import protocol
from tests.peers import ROOT, V1, KubetrayEnv, StartAgent, kubetray_env, require

NOBODY = 65534


def raw_exchange(path: Path, *frames: bytes, read: bool = True) -> list[dict]:
    """Send raw frames, read until the server closes; return the decoded frames."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(str(path))
        for f in frames:
            s.sendall(f)
        data = b""
        while read:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:  # closed with our bytes unread
                break
            if not chunk:
                break
            data += chunk
    out = []
    while data:
        n = int.from_bytes(data[:4], "big")
        out.append(json.loads(data[4 : 4 + n]))
        data = data[4 + n :]
    return out


def hello(version: int = protocol.PROTOCOL_VERSION) -> bytes:
    return protocol.frame(json.dumps({"op": "hello", "version": version}).encode())


def test_directory_and_socket_are_private(kt: KubetrayEnv, start_agent: StartAgent) -> None:
    proc = start_agent(kt)
    assert kt.runtime.stat().st_mode & 0o777 == 0o700
    assert (kt.runtime / "agent.sock").stat().st_mode & 0o777 == 0o600
    assert (kt.runtime / "agent.lock").stat().st_mode & 0o777 == 0o600
    proc.stop()
    assert not (kt.runtime / "agent.sock").exists()


@pytest.mark.parametrize("program", [["agent"], []], ids=["agent", "app"])
def test_a_sigterm_as_soon_as_the_socket_exists_still_removes_it(
    kt: KubetrayEnv, program: list[str]
) -> None:
    """systemd, a logout or `kill` right after start: a clean stop, no socket file left."""
    sock = kt.runtime / "agent.sock"
    for _ in range(5):
        agent = subprocess.Popen(
            [sys.executable, "-m", "app", *program],
            env={**kt.env, "QT_QPA_PLATFORM": "offscreen"},
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 30
        while not sock.exists() and agent.poll() is None and time.monotonic() < deadline:
            time.sleep(0.0005)
        agent.send_signal(signal.SIGTERM)
        _, err = agent.communicate(timeout=30)
        assert agent.returncode == 0, err
        assert not sock.exists()


def test_loose_directory_of_ours_is_refused_by_helper_and_tightened_by_agent(
    kt: KubetrayEnv,
    start_agent: StartAgent,
) -> None:
    kt.runtime.mkdir(mode=0o755)
    kt.runtime.chmod(0o755)
    done = kt.run_helper("--stored", "x", extra_env={"KUBETRAY_AGENT_COMMAND": "/bin/false"})
    assert done.returncode == 1 and "mode 755 lets others in" in done.stderr
    start_agent(kt)
    assert kt.runtime.stat().st_mode & 0o777 == 0o700


def test_symlinked_directory_is_refused(kt: KubetrayEnv, tmp_path: Path) -> None:
    real = tmp_path / "elsewhere"
    real.mkdir(mode=0o700)
    kt.runtime.symlink_to(real)
    done = kt.run_helper("--stored", "x")
    assert done.returncode == 1 and "is a symlink" in done.stderr
    agent = kt.kubetray("agent")
    assert agent.returncode == 1 and "symlink" in agent.stderr
    assert list(real.iterdir()) == []


def test_foreign_owned_directory_is_refused(kt: KubetrayEnv) -> None:
    require(os.getuid() == 0, "needs root to make a directory another user owns")
    kt.runtime.mkdir(mode=0o700)
    os.chown(kt.runtime, NOBODY, NOBODY)
    done = kt.run_helper("--stored", "x")
    assert done.returncode == 1 and f"belongs to uid {NOBODY}" in done.stderr
    agent = kt.kubetray("agent")
    assert agent.returncode == 1 and f"belongs to uid {NOBODY}" in agent.stderr


def test_another_uid_gets_nothing(kt: KubetrayEnv, start_agent: StartAgent) -> None:
    require(os.getuid() == 0 and shutil.which("setpriv") is not None, "needs root and setpriv")
    proc = start_agent(kt)
    as_nobody = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    client = (
        "import socket,sys; s=socket.socket(socket.AF_UNIX); s.settimeout(5); "
        "s.connect(sys.argv[1]); s.sendall(bytes.fromhex(sys.argv[2])); "
        "print(repr(s.recv(65536)))"
    )
    frames = (hello() + protocol.frame(json.dumps({"op": "status"}).encode())).hex()
    sock = str(kt.runtime / "agent.sock")
    blocked = subprocess.run(
        [*as_nobody, sys.executable, "-I", "-c", client, sock, frames],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert blocked.returncode != 0 and "PermissionError" in blocked.stderr  # 0700 directory
    # Even with the directory and socket opened up by mistake, the peer uid check holds.
    kt.runtime.parent.chmod(0o755)
    kt.runtime.chmod(0o755)
    (kt.runtime / "agent.sock").chmod(0o777)
    opened = subprocess.run(
        [*as_nobody, sys.executable, "-I", "-c", client, sock, frames],
        capture_output=True,
        text=True,
        timeout=20,
    )
    # Dropped before a byte is read: the client sees EOF, a reset, or a broken pipe.
    refused = ("ConnectionResetError", "BrokenPipeError")
    assert opened.stdout.strip() == "b''" or any(r in opened.stderr for r in refused)
    log = proc.stop()
    assert f"refused a connection from uid {NOBODY}" in log


def test_oversized_garbage_and_hello_less_frames_are_dropped(
    kt: KubetrayEnv, start_agent: StartAgent, keyring_session: None
) -> None:
    proc = start_agent(kt)
    sock = kt.runtime / "agent.sock"
    too_big = (protocol.MAX_FRAME + 1).to_bytes(4, "big")
    assert raw_exchange(sock, too_big) == []
    assert raw_exchange(sock, protocol.frame(b"\xff\x00 not json")) == []
    assert raw_exchange(sock, protocol.frame(b"[1,2]")) == []
    assert raw_exchange(sock, protocol.frame(json.dumps({"op": "status"}).encode())) == []
    answer = raw_exchange(sock, hello(99), protocol.frame(b"{}"))
    assert answer[-1]["exit"] == 1 and "restart the agent" in answer[-1]["stderr"]
    answer = raw_exchange(sock, hello(), protocol.frame(json.dumps({"op": "read_secret"}).encode()))
    assert (
        answer[-1]["exit"] == 1
        and "does not know the request 'read_secret'" in answer[-1]["stderr"]
    )
    status = raw_exchange(sock, hello(), protocol.frame(json.dumps({"op": "status"}).encode()))
    assert (
        status[0]["type"] == "hello"
        and json.loads(status[-1]["stdout"])["agent"]["pid"] == proc.pid
    )


def test_silent_client_blocks_nobody(
    kt: KubetrayEnv, start_agent: StartAgent, keyring_session: None, name: str
) -> None:
    kt.store_token(name, "silent-test-token")
    proc = start_agent(kt)
    silent = [socket.socket(socket.AF_UNIX) for _ in range(5)]
    try:
        for s in silent:
            s.connect(str(kt.runtime / "agent.sock"))
        start = time.monotonic()
        done = kt.run_helper("--stored", name)
        assert done.returncode == 0 and "silent-test-token" in done.stdout
        assert time.monotonic() - start < READ_TIMEOUT  # not after a silent one's timeout
        silent[0].settimeout(15)
        assert silent[0].recv(1) == b""  # the agent hangs up on it after its read timeout
    finally:
        for s in silent:
            s.close()
        proc.stop()
        kt.kubetray("forget", name)


def test_one_agent_per_user_and_stale_socket_replaced(
    kt: KubetrayEnv, start_agent: StartAgent
) -> None:
    first = start_agent(kt)
    second = kt.kubetray("agent")
    assert second.returncode == 1
    assert f"already running for this user (pid {first.pid})" in second.stderr
    first.process.kill()  # SIGKILL: the socket file stays behind
    first.process.wait()
    assert (kt.runtime / "agent.sock").exists()
    third = start_agent(kt)
    answer = raw_exchange(
        kt.runtime / "agent.sock",
        hello(),
        protocol.frame(json.dumps({"op": "status"}).encode()),
    )
    assert json.loads(answer[-1]["stdout"])["agent"]["pid"] == third.pid


def test_helper_refuses_an_agent_of_another_uid(tmp_path: Path) -> None:
    require(os.getuid() == 0 and shutil.which("setpriv") is not None, "needs root and setpriv")
    with kubetray_env(tmp_path) as kt:
        kt.runtime.mkdir(mode=0o700)
        squatter = (
            "import socket,sys,time; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); "
            "s.listen(); print('up', flush=True); time.sleep(20)"
        )
        kt.runtime.parent.chmod(0o755)
        os.chmod(kt.runtime, 0o777)  # let nobody create its socket in our directory...
        proc = subprocess.Popen(
            [
                "setpriv",
                f"--reuid={NOBODY}",
                f"--regid={NOBODY}",
                "--clear-groups",
                sys.executable,
                "-I",
                "-c",
                squatter,
                str(kt.runtime / "agent.sock"),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
            os.chmod(kt.runtime, 0o700)  # ...then make the directory look private again
            done = kt.run_helper("--stored", "x", exec_info=V1)
            assert done.returncode == 1
            assert f"refusing the kubetray agent: it runs as uid {NOBODY}" in done.stderr
        finally:
            proc.kill()
            proc.communicate()
