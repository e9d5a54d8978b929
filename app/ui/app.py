"""`kubetray` (no arguments): the tray app, hosting the same broker and IPC server as the agent."""

import logging
import signal
import sys
import threading

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QApplication

from app import compose
from app.broker.broker import utcnow
from app.settings import Settings
from app.ui.controller import TrayController
from app.ui.tray import TrayApp

log = logging.getLogger("kubetray.app")


class _Bridge(QObject):
    show = Signal()


def run(tray: bool | None = None) -> int:
    """Run the app until Quit. AgentRunning propagates when another agent or app serves."""
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    app = QApplication.instance() or QApplication(sys.argv)
    assert isinstance(app, QApplication)
    app.setApplicationName("kubetray")
    app.setQuitOnLastWindowClosed(False)
    settings = Settings.load()
    parts = compose.agent(default_browser=lambda: settings.browser_command)
    parts.server.listener.open()
    threading.Thread(target=parts.server.serve_forever, name="ipc", daemon=True).start()
    controller = TrayController(parts.broker, parts.logins, settings, utcnow)
    view = TrayApp(controller, tray=tray)
    bridge = _Bridge()
    bridge.show.connect(view.bring_forward)
    parts.service.on_show = bridge.show.emit
    # Let Python see SIGINT/SIGTERM while Qt's loop runs.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: app.quit())
    pulse = QTimer()
    pulse.timeout.connect(lambda: None)
    pulse.start(250)
    log.info("kubetray app listening on %s", parts.server.listener.address)
    try:
        return app.exec()
    finally:
        view.shutdown()
        parts.server.shutdown()
        parts.logins.stop()
