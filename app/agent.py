"""``kubetray agent``: the headless broker in the foreground, serving kubetray-exec."""

import logging
import signal
import sys
import threading
from types import FrameType

from app import __version__, compose

log = logging.getLogger("kubetray.agent")


def run() -> int:
    """Serve until SIGTERM or SIGINT. AgentRunning propagates when another agent serves."""
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    parts = compose.agent()
    server = parts.server
    server.listener.open()

    def stop(signum: int, _frame: FrameType | None) -> None:
        log.info("stopping on signal %d", signum)
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info("kubetray agent %s listening on %s", __version__, server.listener.address)
    try:
        server.serve_forever()
    finally:
        server.listener.close()
        parts.logins.stop()
    return 0
