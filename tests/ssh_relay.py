"""A recording relay on the remote host, between kubetray-exec and the forwarded agent socket.

Run by the remote user's system Python (stdlib only):
    python3 ssh_relay.py LISTEN LOG -- COMMAND [ARGS...]
Listens on LISTEN, relays each connection to $KUBETRAY_AGENT_SOCK (the forward ssh made), and
runs COMMAND with KUBETRAY_AGENT_SOCK=LISTEN. Every byte that came from the desktop through
the forward is appended to LOG.N (N counts connections from 1) before it is passed on, and the
requests to LOG.N.sent: so LOG.N holds exactly what the remote host received on connection N.
Exits with COMMAND's code.
"""

import contextlib
import os
import socket
import subprocess
import sys
import threading


def pump(source: socket.socket, sink: socket.socket, log_path: str) -> None:
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            with open(log_path, "ab") as log:
                log.write(data)
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def serve(
    listener: socket.socket, upstream: str, log_path: str, pumps: list[threading.Thread]
) -> None:
    count = 0
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        count += 1
        agent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        agent.connect(upstream)
        log = f"{log_path}.{count}"
        for args in ((agent, client, log), (client, agent, log + ".sent")):
            t = threading.Thread(target=pump, args=args, daemon=True)
            t.start()
            pumps.append(t)


def main() -> int:
    listen, log_path, dashes, *command = sys.argv[1:]
    assert dashes == "--" and command, __doc__
    upstream = os.environ["KUBETRAY_AGENT_SOCK"]
    os.umask(0o077)
    if os.path.exists(listen):
        os.unlink(listen)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(listen)
    listener.listen(16)
    pumps: list[threading.Thread] = []
    threading.Thread(target=serve, args=(listener, upstream, log_path, pumps), daemon=True).start()
    try:
        code = subprocess.call(command, env=dict(os.environ, KUBETRAY_AGENT_SOCK=listen))
    finally:
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() above
        listener.close()
        os.unlink(listen)
    for t in list(pumps):
        t.join(5)
    return code


if __name__ == "__main__":
    sys.exit(main())
