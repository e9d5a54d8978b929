"""``kubetray agent``: the headless agent in the foreground, serving kubetray-exec."""

import logging
import signal
import sys
import threading
from types import FrameType

from app import __version__, compose, frozen, lifecycle, logs, restart, statefiles

log = logging.getLogger(__name__)


def run(store: str | None = None) -> int:
    """Serve until SIGTERM, SIGINT or `kubetray stop`. AgentRunning propagates when another
    agent serves. ``store`` overrides the secret-store setting (keyring, memory, auto)."""
    statefiles.check_directories()
    log_file = None
    if sys.stderr.isatty():  # a person reads it: short lines there, the records in the log
        from exec_helper import paths

        log_file = logs.to_terminal(paths.state_dir(), "agent.log")
    else:  # kubetray-exec sends stderr to agent.log
        logs.to_stderr()
    frozen.pin()  # before anything else: nothing is imported from a replaced installation
    came_from = restart.restarted_from()
    parts = compose.agent(store_kind=store)
    server = parts.server

    def shutdown() -> None:
        lifecycle.end_logins(parts.logins, "stopped")
        server.shutdown()

    def stop(signum: int, _frame: FrameType | None) -> None:
        log.info("stopping on signal %d", signum)
        threading.Thread(target=shutdown, daemon=True).start()

    def stop_request(when_idle: bool) -> None:
        log.info("stopping on request%s", " once no login is in flight" if when_idle else "")
        if when_idle:
            lifecycle.stop_when_idle(parts.logins, server.shutdown)
        else:  # after the answer to `kubetray stop` has left
            threading.Timer(lifecycle.SETTLE, shutdown).start()

    # Before the socket exists: a SIGTERM right after start (the socket already accepts) must
    # still remove it, not kill the process with the socket file left behind.
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    parts.service.on_stop = stop_request
    restarting, watch = restart.wire(parts, finish=server.shutdown, stop=server.shutdown)
    server.listener.open()
    restart.restore_memory(parts)
    parts.start()
    log.info("kubetray agent %s listening on %s", __version__, server.listener.address)
    if log_file is not None:
        print(f"log: {log_file}; Ctrl-C stops the agent", file=sys.stderr, flush=True)
    chosen = parts.store.chosen
    log.info(
        "tokens: %s (session bus: %s)",
        chosen.kind,
        chosen.source or "none looked for",
        extra={"terminal": not chosen.notice},  # the notice says it
    )
    if chosen.notice:  # the reason in plain words (none when the setting chose memory)
        log.info("%s", f"{chosen.notice} ({chosen.reason})" if chosen.reason else chosen.notice)
    # Serve on a thread: the kernel may hand SIGTERM to any thread, and Python runs the handler
    # only when the main thread comes back to it, which a blocking accept() never does.
    restart.note(came_from, parts.service.facts)
    serving = threading.Thread(target=server.serve_forever, name="ipc", daemon=True)
    serving.start()
    watch.start()
    try:
        while serving.is_alive():
            serving.join(0.5)
    finally:
        watch.stop()
        server.listener.close()  # nothing left to close once handed over for a restart
        parts.stop()
    restarting.exec_if_due()
    return 0
