"""A stand-in for the local end of ``ssh -R``: a process whose name is ``ssh`` relaying a socket.

The desktop agent tells a forwarded request by its peer process: the ``ssh`` client, whose
command line names the host. This relay is such a process (a link named ``ssh`` to Python,
run as ``ssh -c CODE HOST ...``: Python's ``-c`` reads like ssh's cipher option, so HOST is
where ssh's destination would be), listening where sshd would on the remote host and
recording every byte the agent sends across.
"""

import contextlib
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

RELAY = r"""
import os, socket, sys, threading
host, listen, agent, log = sys.argv[1:5]
old = os.umask(0o177)
server = socket.socket(socket.AF_UNIX)
server.bind(listen)
os.umask(old)
server.listen(64)
lock = threading.Lock()

def pump(src, dst, record):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if record:
                with lock, open(log, "ab") as f:
                    f.write(data)
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

while True:
    client, _ = server.accept()
    upstream = socket.socket(socket.AF_UNIX)
    upstream.connect(agent)
    threading.Thread(target=pump, args=(client, upstream, False), daemon=True).start()
    threading.Thread(target=pump, args=(upstream, client, True), daemon=True).start()
"""


@contextlib.contextmanager
def ssh_relay(tmp: Path, agent_socket: str, host: str = "127.0.0.1") -> Iterator[tuple[Path, Path]]:
    """Yield (the socket a remote kubetray-exec uses, the file of what the agent sent)."""
    link = tmp / "bin" / "ssh"
    link.parent.mkdir(exist_ok=True)
    if not link.exists():
        link.symlink_to(sys.executable)
    short = Path(tempfile.mkdtemp(prefix="fwd-", dir="/tmp"))  # AF_UNIX paths stop at 108 bytes
    listen, log = short / "agent.sock", tmp / "agent-to-remote.bin"
    log.write_bytes(b"")
    proc = subprocess.Popen([str(link), "-c", RELAY, host, str(listen), agent_socket, str(log)])
    try:
        deadline = time.monotonic() + 10
        while not listen.exists():
            assert proc.poll() is None, "the relay exited"
            assert time.monotonic() < deadline, "the relay did not listen"
            time.sleep(0.02)
        yield listen, log
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(short, ignore_errors=True)
