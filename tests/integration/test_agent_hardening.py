"""A hostile or broken local process against the agent and the helper: slow and idle
connections, malformed requests, unbounded names, a full backlog, nested or escape-laden
KUBERNETES_EXEC_INFO, an agent that cannot start. Real agent, real helper, real sockets.
"""

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from exec_helper import protocol
from tests.integration.test_ipc_security import hello, raw_exchange
from tests.peers import ROOT, V1, KubetrayEnv, StartAgent, require

NO_AGENT = {"KUBETRAY_AGENT_COMMAND": "/bin/false"}


def request(doc: object) -> bytes:
    return protocol.frame(json.dumps(doc).encode())


def single_line(stderr: str) -> str:
    assert stderr.endswith("\n") and stderr.count("\n") == 1, stderr
    assert "Traceback" not in stderr
    return stderr


def test_a_trickled_hello_is_cut_off_by_its_frame_deadline(
    kt: KubetrayEnv, start_agent: StartAgent
) -> None:
    start_agent(kt)
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(kt.runtime / "agent.sock"))
        data = hello()
        cut_off = False
        for i in range(len(data)):  # one byte every 0.6 s: each recv is quick, the frame not
            try:
                s.sendall(data[i : i + 1])
            except (BrokenPipeError, ConnectionResetError):
                cut_off = True
                break
            time.sleep(0.6)
        if not cut_off:
            s.settimeout(10)
            try:
                cut_off = s.recv(65536) == b""
            except ConnectionResetError:
                cut_off = True
    assert cut_off, "the agent waited for a hello trickled over 12 s"


def test_slow_and_idle_connections_do_not_starve_real_calls(
    kt: KubetrayEnv, start_agent: StartAgent, keyring_session: None, name: str
) -> None:
    kt.store_token(name, "starved-token")
    proc = start_agent(kt)
    held: list[socket.socket] = []
    stop_trickle = threading.Event()

    def trickle(s: socket.socket) -> None:
        data = hello()
        for i in range(len(data)):
            if stop_trickle.wait(1.0):
                return
            try:
                s.sendall(data[i : i + 1])
            except OSError:
                return

    try:
        for i in range(200):
            s = socket.socket(socket.AF_UNIX)
            s.connect(str(kt.runtime / "agent.sock"))
            held.append(s)
            if i % 2:
                threading.Thread(target=trickle, args=(s,), daemon=True).start()
        for _ in range(3):
            done = kt.run_helper("--stored", name)
            assert done.returncode == 0 and "starved-token" in done.stdout, done.stderr
    finally:
        stop_trickle.set()
        for s in held:
            s.close()
        proc.stop()
        kt.kubetray("forget", name)


MALFORMED = [
    {"op": "calls", "limit": "abc"},
    {"op": "calls", "limit": -5},
    {"op": ["get_credential"]},
    {"op": "get_credential", "exec_info": 7},
    {"op": "get_credential", "exec_info": V1, "args": "--stored x"},
    {"op": "get_credential", "exec_info": V1, "args": [1, 2]},
    {"op": "get_credential", "exec_info": V1, "args": ["--stored", "x"], "env": {"A": "b"}},
    {"op": "get_credential", "exec_info": V1, "stdin_tty": "yes"},
    {"op": "get_credential", "exec_info": "[" * 5000 + "]" * 5000},
    {"op": "login", "name": {"x": 1}},
    {"op": "logout", "name": 3},
    {"op": "invalidate", "name": ["x"], "extra": [[[]]]},
]


def test_malformed_requests_are_answered_and_never_crash_the_agent(
    kt: KubetrayEnv, start_agent: StartAgent, keyring_session: None
) -> None:
    proc = start_agent(kt)
    sock = kt.runtime / "agent.sock"
    for doc in MALFORMED:
        answer = raw_exchange(sock, hello(), request(doc))
        assert answer and answer[-1]["type"] == "result", doc
        assert answer[-1]["exit"] != 0 and answer[-1]["stderr"], (doc, answer[-1])
    deep = protocol.frame(b"[" * 100_000 + b"]" * 100_000)
    answer = raw_exchange(sock, hello(), deep)
    assert answer[-1]["exit"] == 2 and "malformed request" in answer[-1]["stderr"]
    status = raw_exchange(sock, hello(), request({"op": "status"}))
    assert status[-1]["exit"] == 0
    log = proc.stop()
    assert "Traceback" not in log


def test_names_from_requests_do_not_grow_the_agent(
    kt: KubetrayEnv, start_agent: StartAgent, keyring_session: None
) -> None:
    start_agent(kt)
    sock = kt.runtime / "agent.sock"
    for i in range(100):
        args = ["--stored", f"unknown-{i}"]
        answer = raw_exchange(
            sock, hello(), request({"op": "get_credential", "exec_info": V1, "args": args})
        )
        assert "no stored credential named" in answer[-1]["stderr"]
    huge = "h" * 100_000
    answer = raw_exchange(
        sock,
        hello(),
        request({"op": "get_credential", "exec_info": V1, "args": ["--stored", huge]}),
    )
    assert answer[-1]["exit"] == 2 and len(answer[-1]["stderr"]) < 1000
    answer = raw_exchange(
        sock,
        hello(),
        request({"op": "get_credential", "exec_info": V1, "args": ["--stored", "h" * 200]}),
    )
    assert "invalid credential name" in answer[-1]["stderr"]
    status = json.loads(raw_exchange(sock, hello(), request({"op": "status"}))[-1]["stdout"])
    names = [i["name"] for i in status["identities"]]
    # A name no store holds is not kept once its request failed (its calls are recorded).
    assert not [n for n in names if n.startswith(("unknown-", "h"))], names
    calls = json.loads(
        raw_exchange(sock, hello(), request({"op": "calls", "limit": 1000}))[-1]["stdout"]
    )["calls"]
    assert all(len(json.dumps(c)) < 2000 for c in calls)


def test_a_full_backlog_gives_one_line(kt: KubetrayEnv) -> None:
    kt.runtime.mkdir(mode=0o700)
    kt.runtime.chmod(0o700)
    squat = socket.socket(socket.AF_UNIX)
    squat.bind(str(kt.runtime / "agent.sock"))
    squat.listen(0)  # an agent that never accepts: its queue fills at once
    fillers = []
    try:
        for _ in range(4):
            s = socket.socket(socket.AF_UNIX)
            s.setblocking(False)
            try:
                s.connect(str(kt.runtime / "agent.sock"))
            except BlockingIOError:
                s.close()
                break
            fillers.append(s)
        done = kt.run_helper("--stored", "x", extra_env=NO_AGENT)
        assert done.returncode == 1
        assert "queue is full" in single_line(done.stderr)
    finally:
        for s in fillers:
            s.close()
        squat.close()


def test_deeply_nested_exec_info_gives_one_line(kt: KubetrayEnv) -> None:
    nested = '{"kind":"ExecCredential","spec":' + "[" * 50_000 + "]" * 50_000 + "}"
    done = kt.run_helper("--stored", "x", exec_info=nested, extra_env=NO_AGENT)
    assert done.returncode == 1
    assert "nested too deeply" in single_line(done.stderr)


def test_terminal_escapes_from_exec_info_are_shown_escaped(
    kt: KubetrayEnv, start_agent: StartAgent, keyring_session: None
) -> None:
    evil = V1.replace("/v1", "/v9\\u001b]0;pwned\\u0007\\u001b[2J")  # JSON escapes
    done = kt.run_helper("--stored", "x", exec_info=evil, extra_env=NO_AGENT)  # checked locally
    assert done.returncode == 1 and "\x1b" not in done.stderr and "\x07" not in done.stderr
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in single_line(done.stderr)
    start_agent(kt)  # and as the agent answers it
    done = kt.run_helper("--stored", "x", exec_info=evil)
    assert done.returncode == 1 and "\x1b" not in done.stderr
    assert "\\x1b[2J" in single_line(done.stderr)


def test_an_agent_that_cannot_start_is_reported_at_once(kt: KubetrayEnv, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    env = dict(KUBETRAY_RUNTIME_DIR=str(blocker / "run"), KUBETRAY_AGENT_START_TIMEOUT="600")
    done = kt.run_helper("--stored", "x", extra_env=env, timeout=60)  # not 600 s
    assert done.returncode == 1
    line = single_line(done.stderr.replace("kubetray-exec: started the kubetray agent\n", ""))
    assert "the kubetray agent exited with code 1 at start-up" in line
    assert f"cannot create the socket directory {blocker / 'run'}" in line


def test_a_squatted_socket_directory_is_refused_with_the_reason() -> None:
    require(os.getuid() == 0 and shutil.which("setpriv") is not None, "needs root and setpriv")
    from tests.kubeconfig.test_hardening import OTHER

    try:
        other = pwd.getpwnam(OTHER)
    except KeyError:
        subprocess.run(["useradd", "-m", OTHER], check=True, capture_output=True)
        other = pwd.getpwnam(OTHER)
    base = Path(tempfile.mkdtemp(prefix="kt-squat-", dir="/tmp"))
    try:
        base.chmod(0o755)
        squatted = base / f"kubetray-{other.pw_uid}"
        squatted.mkdir(mode=0o700)  # root got there first
        mine = base / "other"
        mine.mkdir()
        os.chown(mine, other.pw_uid, other.pw_gid)
        env = {
            "PATH": os.environ["PATH"],
            "PYTHONPATH": str(ROOT),
            "HOME": str(mine),
            "KUBETRAY_RUNTIME_DIR": str(squatted),
            "KUBETRAY_CONFIG_DIR": str(mine / "config"),
            "KUBETRAY_STATE_DIR": str(mine / "state"),
        }
        done = subprocess.run(
            [
                "setpriv",
                f"--reuid={OTHER}",
                f"--regid={OTHER}",
                "--init-groups",
                sys.executable,
                "-m",
                "app",
                "agent",
            ],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 1
        assert (
            f"refusing the kubetray socket directory {squatted}: it belongs to uid 0" in done.stderr
        )
        assert "Errno" not in done.stderr and "Traceback" not in done.stderr
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_sigterm_stops_the_agent_whichever_thread_receives_it(
    kt: KubetrayEnv, start_agent: StartAgent
) -> None:
    """The kernel may deliver a process's SIGTERM to any of its threads; the agent still stops
    at once (its main thread used to sit in accept() and never ran the handler)."""
    import ctypes
    import platform

    if platform.machine() != "x86_64":
        pytest.skip("tgkill's syscall number is x86_64's here")
    proc = start_agent(kt)
    idle = socket.socket(socket.AF_UNIX)
    try:
        idle.connect(str(kt.runtime / "agent.sock"))  # a connection thread to aim at
        time.sleep(0.3)
        tids = [int(t) for t in os.listdir(f"/proc/{proc.pid}/task") if int(t) != proc.pid]
        assert tids, "the agent has no thread but its main one"
        libc = ctypes.CDLL(None, use_errno=True)
        sys_tgkill = 234  # x86_64
        assert libc.syscall(sys_tgkill, proc.pid, tids[-1], 15) == 0
        assert proc.process.wait(timeout=5) == 0
    finally:
        idle.close()
