"""The installed launcher's fast path (packaging/launcher/fast_path.c), built with ASan and
UBSan (tests/launcher.py), against a stand-in agent that records every frame.

The stand-in is a plain AF_UNIX server in a directory the test controls: it answers the C side's
``cached_credential`` the way each test needs, and the Python fallback's ``get_credential`` with
PYTHON_ANSWER, so what a user sees tells which of the two answered. The last test runs the exec
conformance suite and real kubectl against the sanitizer build with a real agent.
"""

import contextlib
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exec_helper import paths, protocol
from exec_helper.errors import printable
from tests import launcher
from tests.peers import ROOT, V1, KubetrayEnv, StartAgent, require, run_installed_suites

PYTHON_ANSWER = '{"kind":"ExecCredential","status":{"token":"from-python"}}\n'
FAST_ANSWER = '{"kind":"ExecCredential","status":{"token":"from-c"}}\n'
HELLO = protocol.frame(
    protocol.encode({"type": protocol.HELLO, "version": 1, "kubetray": "0.2.0", "build": None})
)
OLD_HELLO = protocol.frame(protocol.encode({"type": protocol.HELLO, "version": 1}))
"""What kubetray 0.1.0's agent says: the launcher leaves it to Python (which asks it to go)."""
NOBODY = 65534


def result(**fields: Any) -> bytes:
    return protocol.frame(protocol.encode({"type": protocol.RESULT, **fields}))


def answered(exit: int = 0, stdout: str = FAST_ANSWER, stderr: str = "") -> bytes:
    return HELLO + result(exit=exit, stdout=stdout, stderr=stderr, answered=True)


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sanitizer launcher, with the bundle's Python and without any."""
    require(shutil.which("cc") is not None, "needs a C compiler (cc)")
    require(launcher._system_libpython().exists(), f"needs {launcher.PYLIB} (libpython3.11)")
    base = tmp_path_factory.mktemp("launcher")
    return {
        "full": launcher.build(base / "full"),
        "no-python": launcher.build(base / "nopy", with_python=False),
    }


class StandIn:
    """An agent stand-in at ``path``: records each connection's bytes and requests; answers
    cached_credential with ``fast`` (None: never, the connection stays open) and
    get_credential with PYTHON_ANSWER."""

    def __init__(self, path: Path, fast: bytes | None) -> None:
        self.fast = fast
        self.received: list[bytes] = []
        self.requests: list[dict[str, Any]] = []
        self.raw_requests: list[bytes] = []
        self._lock = threading.Lock()
        self._server = socket.socket(socket.AF_UNIX)
        self._server.bind(str(path))
        self._server.listen(16)
        self._stop = threading.Event()
        self._serving: list[threading.Thread] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def ops(self) -> list[str]:
        return [r["op"] for r in self.requests]

    def close(self) -> None:
        self._stop.set()
        self._server.close()
        self._thread.join(5)
        for serving in self._serving:  # so that what a connection brought is recorded
            serving.join(5)

    def _accept(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self._server], [], [], 0.05)
            if not ready:
                continue
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            serving = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._serving.append(serving)
            serving.start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(15)
        data = b""
        with conn:
            try:
                frames = self._read_frames(conn, data)
                if frames is None:
                    return
                data, request = frames
                with self._lock:
                    self.raw_requests.append(request)
                    self.requests.append(json.loads(request))
                if json.loads(request)["op"] == protocol.CACHED_CREDENTIAL:
                    if self.fast is not None:
                        conn.sendall(self.fast)
                else:
                    conn.sendall(HELLO + result(exit=0, stdout=PYTHON_ANSWER, stderr=""))
                while chunk := conn.recv(65536):  # until the client hangs up
                    data += chunk
            except OSError:
                pass
            finally:
                with self._lock:
                    self.received.append(data)

    def _read_frames(self, conn: socket.socket, data: bytes) -> tuple[bytes, bytes] | None:
        """Hello and request; the bytes so far are kept even when the client stops short."""
        frames: list[bytes] = []
        offset = 0
        while len(frames) < 2:
            while len(data) - offset < 4 or len(data) - offset - 4 < int.from_bytes(
                data[offset : offset + 4], "big"
            ):
                chunk = conn.recv(65536)
                if not chunk:
                    with self._lock:
                        self.received.append(data)
                    return None
                data += chunk
            n = int.from_bytes(data[offset : offset + 4], "big")
            frames.append(data[offset + 4 : offset + 4 + n])
            offset += 4 + n
        return data, frames[1]


@pytest.fixture
def runtime() -> Iterator[Path]:
    """A private runtime directory with a short path (AF_UNIX paths stop at 108 bytes)."""
    parent = Path(tempfile.mkdtemp(prefix="ktf-", dir="/tmp"))
    directory = parent / "run"
    directory.mkdir(mode=0o700)
    try:
        yield directory
    finally:
        shutil.rmtree(parent, ignore_errors=True)


@contextlib.contextmanager
def stand_in(directory: Path, fast: bytes | None) -> Iterator[StandIn]:
    agent = StandIn(directory / paths.SOCKET_NAME, fast)
    try:
        yield agent
    finally:
        agent.close()


def helper_env(runtime: Path, home: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("KUBETRAY_", "KUBERNETES_EXEC", "ASAN_", "UBSAN_"))
    }
    env.update(launcher.SANITIZER_ENV)
    env.update(
        HOME=str(home),
        KUBETRAY_RUNTIME_DIR=str(runtime),
        KUBETRAY_CONFIG_DIR=str(home / "config"),
        KUBETRAY_STATE_DIR=str(home / "state"),
    )
    env.update(extra)
    return env


def run(
    exe: Path, env: dict[str, str], *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    done = subprocess.run(
        [str(exe), *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    assert b"Sanitizer" not in done.stderr, done.stderr.decode(errors="replace")
    return done


# 1. The same request as the Python helper's --------------------------------------------------


def test_the_c_request_is_the_python_request_field_for_field(
    builds: dict[str, Path], runtime: Path, tmp_path: Path
) -> None:
    args = [
        "--stored",
        "prod-ädmin",
        "--oidc-extra-scope=groups 😀",
        'quote" back\\slash \t tab \x7f del \x01 ctl',
        "",
    ]
    env = helper_env(
        runtime,
        tmp_path,
        KUBETRAY_GRANT_TYPE="authcode-keyboard",
        KUBETRAY_NOTE="café\n",
        KUBETRAY_EXEC_TIMEOUT="20",  # INFRA_ENV: how to reach the agent, never sent
        KUBETRAY_STATE_DIR=str(tmp_path / "state"),
        KUBECONFIG=f"{tmp_path}/a:{tmp_path}/b",
        DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/0/bus",
        KUBETRAY_EXEC_FAST="1",
        AWS_PROFILE="dev",  # PASSED_ENV_PREFIXES: the cloud tools' variables
        AZURE_CLIENT_ID="c",
        GOOGLE_APPLICATION_CREDENTIALS="/adc.json",
        AWSPROFILE="not ours",
    )
    with stand_in(runtime, HELLO + result(exit=0, stdout="", stderr="")) as agent:
        done = run(builds["full"], env, *args)
    assert done.stdout.decode() == PYTHON_ANSWER, done.stderr
    assert agent.ops == [protocol.CACHED_CREDENTIAL, protocol.GET_CREDENTIAL]
    fast, slow = agent.requests
    assert list(fast) == ["op", *protocol.REQUEST_FIELDS]
    assert {**fast, "op": None} == {**slow, "op": None}
    # Byte for byte too: one encoding of the request, whoever sends it.
    fast_raw, slow_raw = agent.raw_requests
    assert fast_raw.replace(b'"cached_credential"', b'"get_credential"') == slow_raw
    assert fast["args"] == args
    assert fast["exec_info"] == protocol.NO_EXEC_INFO
    assert fast["ppid"] == os.getpid()
    assert fast["stdin_tty"] is False and fast["stderr_tty"] is False
    names = [e.split("=", 1)[0] for e in fast["env"]]
    assert "KUBECONFIG" in names and "DBUS_SESSION_BUS_ADDRESS" in names
    assert "KUBETRAY_GRANT_TYPE=authcode-keyboard" in fast["env"]
    assert "KUBETRAY_NOTE=café\n" in fast["env"]
    assert not set(names) & set(paths.INFRA_ENV)
    assert {"AWS_PROFILE", "AZURE_CLIENT_ID", "GOOGLE_APPLICATION_CREDENTIALS"} <= set(names)
    assert "AWSPROFILE" not in names


def test_exec_info_is_sent_as_given(builds: dict[str, Path], runtime: Path, tmp_path: Path) -> None:
    info = '{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","spec":{"interactive":false,"cluster":{"server":"https://ä"}}}\n'
    env = helper_env(runtime, tmp_path, KUBERNETES_EXEC_INFO=info)
    with stand_in(runtime, HELLO + result(exit=1, stdout="", stderr="x")) as agent:
        run(builds["full"], env, "--stored", "x")
    fast, slow = agent.requests
    assert fast["exec_info"] == slow["exec_info"] == info


# 2. Answered: printed exactly, without Python -------------------------------------------------

CASES = [
    (0, FAST_ANSWER, ""),
    (256, FAST_ANSWER, ""),  # os._exit(256): status 0
    (-1, "", "the agent says no"),  # status 255
    (3, "x\x00y", "warn \x1b[31mred\x07 del\x7f c1\x85\x9f café 😀\n\n"),
    (0, FAST_ANSWER, "two\nlines\n"),
    (0, "", "\n"),
    (0, FAST_ANSWER, "\x01" * 1024),  # escapes fill the C side's 4 KiB chunk exactly
    (0, FAST_ANSWER * 3000, "é" * 3000 + "\x85" * 3000),
]


@pytest.mark.parametrize(("exit", "stdout", "stderr"), CASES)
@pytest.mark.parametrize("build", ["full", "no-python"])
def test_an_answer_is_printed_exactly_as_python_would(
    builds: dict[str, Path],
    runtime: Path,
    tmp_path: Path,
    build: str,
    exit: int,
    stdout: str,
    stderr: str,
) -> None:
    with stand_in(runtime, answered(exit, stdout, stderr)) as agent:
        done = run(builds[build], helper_env(runtime, tmp_path), "--stored", "x")
    assert agent.ops == [protocol.CACHED_CREDENTIAL]  # and Python never asked
    assert done.returncode == exit & 0xFF
    assert done.stdout == stdout.encode()
    # exec_helper.__main__.print_answer's rule, from its own code.
    expected = printable(stderr.rstrip("\n")) + "\n" if stderr else ""
    assert done.stderr.decode() == expected


def test_without_an_answer_the_python_less_build_fails_as_it_must(
    builds: dict[str, Path], runtime: Path, tmp_path: Path
) -> None:
    """What proves the test above: that build has no Python to fall back to."""
    with stand_in(runtime, HELLO + result(exit=0, stdout=FAST_ANSWER, stderr="")):
        done = run(builds["no-python"], helper_env(runtime, tmp_path), "--stored", "x")
    assert done.returncode == 1
    assert b"cannot load the bundled Python library" in done.stderr


def test_a_real_agent_answers_without_python_once_its_memory_holds_the_credential(
    builds: dict[str, Path],
    kt: KubetrayEnv,
    start_agent: StartAgent,
    keyring_session: None,
    name: str,
) -> None:
    kt.store_token(name, "fast-path-token")
    start_agent(kt)
    env = {**kt.env, **launcher.SANITIZER_ENV, "KUBERNETES_EXEC_INFO": V1}
    # In the keyring only: the agent does not answer at once, and this build has no Python.
    cold = run(builds["no-python"], env, "--stored", name)
    assert b"cannot load the bundled Python library" in cold.stderr
    warm = run(builds["full"], env, "--stored", name)  # Python's get_credential reads it
    assert warm.returncode == 0, warm.stderr
    fast = run(builds["no-python"], env, "--stored", name)
    assert (fast.returncode, fast.stderr) == (0, b"")
    assert fast.stdout == warm.stdout
    assert json.loads(fast.stdout)["status"]["token"] == "fast-path-token"


# 3. Anything else: nothing printed by C, Python asks again ------------------------------------


def frame_of(text: bytes) -> bytes:
    return len(text).to_bytes(4, "big") + text


REPLIES = {
    "answered absent": HELLO + result(exit=0, stdout=FAST_ANSWER, stderr=""),
    "answered false": HELLO + result(exit=0, stdout=FAST_ANSWER, stderr="", answered=False),
    "answered 1": HELLO + result(exit=0, stdout=FAST_ANSWER, stderr="", answered=1),
    "old agent": HELLO
    + result(
        exit=1, stdout="", stderr="the kubetray agent does not know the request 'cached_credential'"
    ),
    "0.1.0's hello": OLD_HELLO + result(exit=0, stdout=FAST_ANSWER, stderr="", answered=True),
    "another version": protocol.frame(protocol.encode({"type": "hello", "version": 2}))
    + result(exit=0, stdout=FAST_ANSWER, stderr="", answered=True),
    "message": HELLO + protocol.frame(protocol.encode({"type": "message", "text": "open this"})),
    "prompt": HELLO
    + protocol.frame(protocol.encode({"type": "prompt", "text": "code?", "secret": False})),
    "keepalive": HELLO + protocol.frame(protocol.encode({"type": "keepalive"})) + answered(),
    "no hello": answered()[len(HELLO) :],
    "garbage": b"HTTP/1.1 400 Bad Request\r\n\r\n",
    "garbled json": HELLO + frame_of(b'{"type":"result","exit":0,"answered":true,"stdout":"x"'),
    "nested": HELLO + frame_of(b'{"type":"result","exit":0,"answered":true,"stdout":{"a":1}}'),
    "exit not an integer": HELLO + frame_of(b'{"type":"result","exit":"0","answered":true}'),
    "lone surrogate": HELLO
    + frame_of(b'{"type":"result","exit":0,"answered":true,"stdout":"\\ud800"}'),
    "raw control": HELLO + frame_of(b'{"type":"result","exit":0,"answered":true,"stdout":"a\nb"}'),
    "not utf-8": HELLO
    + frame_of(b'{"type":"result","exit":0,"answered":true,"stdout":"\xc0\xaf"}'),
    "oversize header": HELLO + b"\xff\xff\xff\xff",
    "truncated": HELLO + (100).to_bytes(4, "big") + b'{"type":"re',
    "closed at once": b"",
}


@pytest.mark.parametrize("reply", list(REPLIES))
def test_anything_but_an_answer_falls_back_to_python(
    builds: dict[str, Path], runtime: Path, tmp_path: Path, reply: str
) -> None:
    with stand_in(runtime, REPLIES[reply]) as agent:
        done = run(builds["full"], helper_env(runtime, tmp_path), "--stored", "x")
    assert agent.ops == [protocol.CACHED_CREDENTIAL, protocol.GET_CREDENTIAL]
    assert (done.returncode, done.stdout.decode(), done.stderr) == (0, PYTHON_ANSWER, b"")


@pytest.mark.parametrize(
    ("setting", "waits"),
    [(None, protocol.CACHED_TIMEOUT), ("1", 1.0), ("60", protocol.CACHED_TIMEOUT)],
)
def test_an_agent_that_never_answers_costs_a_short_wait_then_python_asks(
    builds: dict[str, Path], runtime: Path, tmp_path: Path, setting: str | None, waits: float
) -> None:
    """The whole answer within protocol.CACHED_TIMEOUT (or KUBETRAY_EXEC_TIMEOUT if shorter):
    a stuck agent then gets Python's full request, with its own timeout and words."""
    extra = {paths.TIMEOUT_ENV: setting} if setting else {}
    with stand_in(runtime, None) as agent:
        start = time.monotonic()
        done = run(builds["full"], helper_env(runtime, tmp_path, **extra), "--stored", "x")
        took = time.monotonic() - start
    assert agent.ops == [protocol.CACHED_CREDENTIAL, protocol.GET_CREDENTIAL]
    assert (done.returncode, done.stdout.decode(), done.stderr) == (0, PYTHON_ANSWER, b"")
    # Python's start and its request on top of the wait: well under what a wrong timeout
    # (the 60 s setting) would take, on a loaded machine too
    assert waits <= took < waits + 10


@pytest.mark.parametrize("setting", ["abc", "1_0", "0", "-1", "inf", "0x10", "1e-400"])
def test_a_timeout_python_reads_its_own_way_goes_to_python_only(
    builds: dict[str, Path], runtime: Path, tmp_path: Path, setting: str
) -> None:
    env = helper_env(runtime, tmp_path, **{paths.TIMEOUT_ENV: setting})
    with stand_in(runtime, answered()) as agent:
        run(builds["full"], env, "--stored", "x")
    assert protocol.CACHED_CREDENTIAL not in agent.ops  # Python's answer, whatever it is


@pytest.mark.parametrize(
    ("locale", "fast"),
    [("C.UTF-8", True), ("C", True), ("", True), ("de_DE.ISO-8859-1", False)],
)
def test_non_ascii_arguments_are_sent_by_c_only_where_python_reads_them_as_utf8(
    builds: dict[str, Path], runtime: Path, tmp_path: Path, locale: str, fast: bool
) -> None:
    """Python decodes its arguments with the locale's encoding; C sends their bytes."""
    env = helper_env(runtime, tmp_path)
    for name in ("LC_ALL", "LC_CTYPE", "LANG"):
        env.pop(name, None)
    if locale:
        env["LC_ALL"] = locale
    with stand_in(runtime, answered()) as agent:
        done = run(builds["full"], env, "--stored", "prod-ädmin")
    if fast:
        assert (agent.ops, done.stdout.decode()) == ([protocol.CACHED_CREDENTIAL], FAST_ANSWER)
    else:
        assert (agent.ops, done.stdout.decode()) == ([protocol.GET_CREDENTIAL], PYTHON_ANSWER)


def test_arguments_that_are_not_utf8_go_to_python_only(
    builds: dict[str, Path], runtime: Path, tmp_path: Path
) -> None:
    with stand_in(runtime, answered()) as agent:
        done = subprocess.run(
            [builds["full"], "--stored", b"caf\xe9"],
            env=helper_env(runtime, tmp_path),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
            check=False,
        )
    assert agent.ops == [protocol.GET_CREDENTIAL]
    assert done.stdout.decode() == PYTHON_ANSWER


# 4. Never a byte to the wrong place ---------------------------------------------------------


def refused(done: subprocess.CompletedProcess[bytes], agent_received: list[bytes]) -> None:
    """Nothing reached the listener, and Python said why in its one line."""
    assert all(data == b"" for data in agent_received), agent_received
    assert done.returncode == 1 and done.stdout == b""
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and "refusing" in lines[0], lines


def test_a_runtime_dir_open_to_others_is_never_used(
    builds: dict[str, Path], runtime: Path, tmp_path: Path
) -> None:
    with stand_in(runtime, answered()) as agent:
        runtime.chmod(0o755)
        done = run(builds["full"], helper_env(runtime, tmp_path), "--stored", "x")
    assert agent.received == []
    refused(done, agent.received)


def test_a_symlinked_runtime_dir_is_never_used(
    builds: dict[str, Path], runtime: Path, tmp_path: Path
) -> None:
    link = runtime.parent / "link"
    link.symlink_to(runtime)
    with stand_in(runtime, answered()) as agent:
        done = run(builds["full"], helper_env(link, tmp_path), "--stored", "x")
    assert agent.received == []
    refused(done, agent.received)


def needs_root() -> None:
    require(os.geteuid() == 0, "needs root (chown, another uid)")


def test_a_runtime_dir_of_another_user_is_never_used(
    builds: dict[str, Path], runtime: Path, tmp_path: Path
) -> None:
    needs_root()
    with stand_in(runtime, answered()) as agent:
        os.chown(runtime, NOBODY, NOBODY)
        done = run(builds["full"], helper_env(runtime, tmp_path), "--stored", "x")
    assert agent.received == []
    refused(done, agent.received)


@pytest.mark.parametrize("unsafe", ["socket mode 666", "world-writable directory"])
def test_a_forwarded_socket_others_can_reach_is_never_used(
    builds: dict[str, Path], runtime: Path, tmp_path: Path, unsafe: str
) -> None:
    with stand_in(runtime, answered()) as agent:
        sock = runtime / paths.SOCKET_NAME
        if unsafe == "socket mode 666":
            sock.chmod(0o666)
        else:
            sock.chmod(0o600)
            runtime.chmod(0o777)  # not sticky: anyone could swap the socket
        env = helper_env(runtime, tmp_path, KUBETRAY_AGENT_SOCK=str(sock))
        done = run(builds["full"], env, "--stored", "x")
    assert agent.received == []
    refused(done, agent.received)


OTHER_LISTENER = """
import os, select, socket, sys, tempfile
directory = tempfile.mkdtemp(prefix="ktf-other-", dir="/tmp")
server = socket.socket(socket.AF_UNIX)
server.bind(directory + "/agent.sock")
server.listen(8)
print(directory + "/agent.sock", flush=True)
connections, received = 0, 0
while True:
    ready, _, _ = select.select([server, sys.stdin], [], [], 30)
    if not ready or sys.stdin in ready:
        break
    conn, _ = server.accept()
    connections += 1
    conn.settimeout(5)
    try:
        while chunk := conn.recv(65536):
            received += len(chunk)
    except OSError:
        pass
    conn.close()
print(connections, received, flush=True)
os.rmdir(directory) if not os.listdir(directory) else None
"""


def test_a_listener_running_as_another_user_gets_not_a_byte(
    builds: dict[str, Path], runtime: Path, tmp_path: Path
) -> None:
    """Another uid's socket in our own private directory (as root could put it there): the
    peer check refuses it before anything is sent."""
    needs_root()
    other = subprocess.Popen(
        [sys.executable, "-I", "-c", OTHER_LISTENER],
        user=NOBODY,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd="/",
    )
    assert other.stdout and other.stdin
    try:
        theirs = Path(other.stdout.readline().strip())
        theirs.rename(runtime / paths.SOCKET_NAME)
        done = run(builds["full"], helper_env(runtime, tmp_path), "--stored", "x")
    finally:
        other.stdin.close()
        connections, received = map(int, other.stdout.readline().split())
        other.stdout.close()
        other.wait(10)
        shutil.rmtree(theirs.parent, ignore_errors=True)
    assert connections == 2  # the C side's and the Python helper's, both refused
    assert received == 0
    assert done.returncode == 1 and done.stdout == b""
    assert f"runs as uid {NOBODY}" in done.stderr.decode()


# 5. Straight to Python --------------------------------------------------------------------


def test_the_kill_switch_sends_no_cached_credential(
    builds: dict[str, Path], runtime: Path, tmp_path: Path
) -> None:
    env = helper_env(runtime, tmp_path, KUBETRAY_EXEC_FAST="0")
    with stand_in(runtime, answered()) as agent:
        done = run(builds["full"], env, "--stored", "x")
    assert agent.ops == [protocol.GET_CREDENTIAL]
    assert done.stdout.decode() == PYTHON_ANSWER


@pytest.mark.parametrize(
    "args", [["--version"], ["--stored", "x", "--help"], ["-h"], ["kubelet-credential-provider"]]
)
def test_help_version_and_kubelet_mode_go_straight_to_python(
    builds: dict[str, Path], runtime: Path, tmp_path: Path, args: list[str]
) -> None:
    with stand_in(runtime, answered()) as agent:
        done = run(builds["full"], helper_env(runtime, tmp_path), *args)
    assert protocol.CACHED_CREDENTIAL not in agent.ops
    if args == ["--version"]:
        # The tree's version now (a package build in this run may have written it afresh).
        written = (ROOT / "exec_helper" / "_version.py").read_text()
        now = written.split('VERSION = "', 1)[1].split('"', 1)[0]
        assert done.stdout.decode() == f"kubetray-exec {now}\n"
    elif "kubelet-credential-provider" not in args:
        assert done.returncode == 0 and b"usage" in done.stdout.lower()


# The generated header -----------------------------------------------------------------------

PRINT_HEADER = r"""
#include <stdio.h>
#include "kt_protocol.h"
static void list(const char *name, const char *const *items) {
    printf("%s", name);
    for (; *items; items++) printf(" %s", *items);
    printf("\n");
}
int main(void) {
    static const char *const infra[] = {KT_INFRA_ENV}, *const passed[] = {KT_PASSED_ENV},
                             *const prefixes[] = {KT_PASSED_PREFIXES},
                             *const help[] = {KT_HELP_ARGS};
    printf("%d\n%d\n%u\n%.17g\n", KT_PROTOCOL_VERSION, KT_HEADER_SIZE, KT_MAX_FRAME,
           KT_CACHED_TIMEOUT);
    printf("%s\n%s\n%s\n%s\n%s\n", KT_OP_HELLO, KT_OP_CACHED_CREDENTIAL, KT_TYPE_HELLO,
           KT_TYPE_RESULT, KT_FIELD_ANSWERED);
    printf("%s\n%s\n%s\n%s\n%s\n%s\n%s\n%s\n", KT_NO_EXEC_INFO, KT_SOCKET_NAME, KT_APP,
           KT_ENV_PREFIX, KT_FORWARD_ENV, KT_RUNTIME_ENV, KT_TIMEOUT_ENV, KT_FAST_ENV);
    printf("%s\n%s\n", KT_EXEC_INFO_ENV, KT_KUBELET_MODE);
    printf("%s %s %s %s %s %s %s %s %s %s %s %s %s\n", KT_KEY_OP, KT_KEY_TYPE, KT_KEY_VERSION,
           KT_KEY_KUBETRAY, KT_KEY_EXIT, KT_KEY_STDOUT, KT_KEY_STDERR, KT_KEY_EXEC_INFO, KT_KEY_ARGS, KT_KEY_ENV,
           KT_KEY_STDIN_TTY, KT_KEY_STDERR_TTY, KT_KEY_PPID);
    list("infra", infra);
    list("passed", passed);
    list("prefixes", prefixes);
    list("help", help);
    return 0;
}
"""


def test_the_generated_header_says_what_exec_helper_says(tmp_path: Path) -> None:
    require(shutil.which("cc") is not None, "needs a C compiler (cc)")
    from exec_helper import __main__ as helper

    include = launcher.packaging_build().protocol_header(tmp_path / "include").parent
    (tmp_path / "print.c").write_text(PRINT_HEADER)
    subprocess.run(
        ["cc", *launcher.WARNINGS, f"-I{include}", "print.c", "-o", "print"],
        cwd=tmp_path,
        check=True,
    )
    out = subprocess.run(
        [str(tmp_path / "print")], capture_output=True, text=True, check=True
    ).stdout
    expected = [
        str(protocol.PROTOCOL_VERSION),
        str(protocol.HEADER_SIZE),
        str(protocol.MAX_FRAME),
        f"{protocol.CACHED_TIMEOUT:.17g}",
        protocol.HELLO,
        protocol.CACHED_CREDENTIAL,
        protocol.HELLO,
        protocol.RESULT,
        protocol.ANSWERED,
        protocol.NO_EXEC_INFO,
        paths.SOCKET_NAME,
        paths.APP,
        paths.ENV_PREFIX,
        paths.FORWARD_ENV,
        paths.RUNTIME_ENV,
        paths.TIMEOUT_ENV,
        paths.FAST_ENV,
        helper.EXEC_INFO,
        helper.KUBELET_MODE,
        " ".join(
            [
                "op",
                "type",
                "version",
                "kubetray",
                "exit",
                "stdout",
                "stderr",
                *list(protocol.REQUEST_FIELDS),
            ]
        ),
        " ".join(["infra", *paths.INFRA_ENV]),
        " ".join(["passed", *paths.PASSED_ENV]),
        " ".join(["prefixes", *paths.PASSED_ENV_PREFIXES]),
        " ".join(["help", *helper.HELP_ARGS]),
    ]
    assert out.splitlines() == expected


# The parser under libFuzzer ----------------------------------------------------------------


@pytest.mark.slow
def test_the_answer_parser_survives_fuzzing(tmp_path: Path) -> None:
    require(shutil.which("clang") is not None, "needs clang and libclang-rt-14-dev (libFuzzer)")
    done = launcher.fuzz(tmp_path, 20)
    lines = done.stderr.splitlines()
    print("\n".join(line for line in lines if "DONE" in line or line.startswith("stat::")))
    assert done.returncode == 0, done.stderr[-4000:]
    assert "stat::number_of_executed_units" in done.stderr


# 6. The exec conformance suite and kubectl, against the sanitizer build -------------------


@pytest.mark.slow
@pytest.mark.kubectl
@pytest.mark.timeout(1200)
def test_the_exec_conformance_suite_passes_with_the_sanitizer_build(
    builds: dict[str, Path], tmp_path: Path, keyring_session: None
) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    # Reports go to files: a test that reads the helper's stderr would hide them otherwise.
    env = {
        "ASAN_OPTIONS": f"{launcher.SANITIZER_ENV['ASAN_OPTIONS']}:log_path={reports}/asan",
        "UBSAN_OPTIONS": f"{launcher.SANITIZER_ENV['UBSAN_OPTIONS']}:log_path={reports}/ubsan",
    }
    run_installed_suites(builds["full"].parent, "sanitizer build", timeout=1100, env=env)
    found = {p.name: p.read_text(errors="replace")[:2000] for p in reports.iterdir()}
    assert found == {}, found
