"""kubectl on an SSH host, logged in through the desktop's kubetray over a forwarded socket.

Real OpenSSH (tests/sshd.py): a private sshd on 127.0.0.1 and a second local account,
``kubetray-remote``, that stands for the remote host. The test process is the desktop: it runs
the agent, ``kubetray ssh`` and so the ``ssh`` client. Real kubectl 1.33 runs as the remote user
with the kubetray-exec that ``kubetray ssh --install-helper`` put there, against the HTTPS
stand-in for the API server.
"""

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.peers import kubectl_binaries, require
from tests.sshd import (
    REMOTE_PYTHON,
    SSHServer,
    install_helper_copy,
    listening_socket,
    remote_kubectl,
    run_sshd,
)

pytestmark = [pytest.mark.sshd, pytest.mark.posix_only]


@pytest.fixture(scope="session")
def sshd() -> Iterator[SSHServer]:
    with run_sshd() as server:
        yield server


def kubectl_133() -> str:
    binaries = kubectl_binaries()
    require("1.33" in binaries, "kubectl 1.33 is not installed")
    return binaries["1.33"]


PROBE = """
import os, socket, sys
path = os.environ["KUBETRAY_AGENT_SOCK"]
st = os.lstat(path)
s = socket.socket(socket.AF_UNIX)
s.connect(path)
s.sendall(b"hello from " + str(os.getuid()).encode())
s.shutdown(socket.SHUT_WR)
reply = b""
while chunk := s.recv(4096):
    reply += chunk
print(st.st_uid, oct(st.st_mode & 0o777), path, reply.decode())
"""


def echo_once(sock: "object") -> threading.Thread:
    import socket

    assert isinstance(sock, socket.socket)

    def serve() -> None:
        conn, _ = sock.accept()
        with conn:
            data = b""
            while chunk := conn.recv(4096):
                data += chunk
            conn.sendall(b"desktop heard: " + data)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return t


def test_the_harness_forwards_a_desktop_socket_to_the_remote_user(
    sshd: SSHServer, tmp_path: Path
) -> None:
    """The test rig itself: a real `ssh -R` from the desktop (root) to the remote account makes
    a socket on the remote host owned by the remote user (mode 600) that reaches a socket on the
    desktop; SetEnv gets through; a socket left by an earlier session is replaced; the remote
    user can run the system Python and kubectl 1.33."""
    remote = sshd.remote
    local = str(tmp_path / "desktop.sock")
    for _ in range(2):  # the second time over the socket the first session left behind
        listener = listening_socket(local)
        with listener:
            served = echo_once(listener)
            out = sshd.check(
                remote,
                [REMOTE_PYTHON, "-c", PROBE],
                forward=(remote.forwarded_socket, local),
                setenv={"KUBETRAY_AGENT_SOCK": remote.forwarded_socket},
            )
            served.join(10)
        uid, mode, path, reply = out.split(" ", 3)
        assert (int(uid), mode, path) == (remote.uid, "0o600", remote.forwarded_socket)
        assert reply.strip() == f"desktop heard: hello from {remote.uid}"
    helper = install_helper_copy(remote)
    version = sshd.check(remote, [helper, "--version"])
    assert version.startswith("kubetray-exec ")
    kubectl = remote_kubectl(sshd, remote, kubectl_133())
    client = json.loads(sshd.check(remote, [kubectl, "version", "--client", "-o", "json"]))
    assert client["clientVersion"]["minor"] == "33"
