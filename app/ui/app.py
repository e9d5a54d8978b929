"""`kubetray` (no arguments): the tray app, hosting the same broker and IPC server as the agent."""

import contextlib
import logging
import signal
import sys
import threading

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QApplication

from app import (
    __version__,
    atomic_file,
    autostart,
    compose,
    frozen,
    installation,
    lifecycle,
    logs,
    restart,
    statefiles,
)
from app.broker.broker import utcnow
from app.settings import Settings
from app.ui import icons
from app.ui.appearance import Appearance
from app.ui.collector import GuiCollector
from app.ui.controller import TrayController
from app.ui.tray import TrayApp, dispose
from exec_helper import paths

log = logging.getLogger(__name__)


class _Bridge(QObject):
    show = Signal()
    quit = Signal()
    probe = Signal()


AT_LOGIN_WAIT = 10.0
"""Seconds the app started at login waits for the panel's tray before its window stands in
(the autostarted app often starts before the panel)."""


def install_symbolic_icons() -> None:
    """Put the named one-colour icons where a panel looks the tray icon up by its name to
    recolour it (Linux: the user's hicolor theme), written only when missing or different.
    Where that fails the icon's pixels still show."""
    if not sys.platform.startswith("linux"):
        return
    target = icons.user_icon_dir()
    try:
        target.mkdir(parents=True, exist_ok=True)  # a shared folder: not atomic_file's 0700
        for state in icons.STATES:
            source = icons.symbolic_file(state).read_bytes()
            path = target / icons.symbolic_file(state).name
            if not path.is_file() or path.read_bytes() != source:
                atomic_file.write(str(path), source, 0o644)
    except OSError as e:
        log.info("cannot put the tray icons in %s (%s): panels show their pixels", target, e)


def run(tray: bool | None = None, store: str | None = None, at_login: bool = False) -> int:
    """Run the app until Quit. AgentRunning propagates when another agent or app serves.

    ``store`` overrides the secret-store setting (keyring, memory, auto). ``at_login``: started
    with the session (autostart), so a tray may still be on its way.
    """
    # Before anything starts: a directory or settings it cannot use is one line (AppError).
    statefiles.check_directories()
    settings = Settings.load()
    if sys.stderr.isatty():  # a person reads it: short lines there, the records in the log
        log_file = logs.to_terminal(paths.state_dir(), "app.log")
    else:  # a session's journal, or kubetray-exec's agent.log: the records in full
        logs.to_stderr()
        log_file = logs.to_file(paths.state_dir(), "app.log")
    frozen.pin()  # before anything else: nothing is imported from a replaced installation
    came_from = restart.restarted_from()
    app = QApplication.instance() or QApplication(sys.argv)
    assert isinstance(app, QApplication)
    app.setApplicationName("kubetray")
    app.setDesktopFileName("kubetray")  # Wayland and the notification daemons find the entry
    app.setWindowIcon(icons.app_icon())
    app.setQuitOnLastWindowClosed(False)
    appearance = Appearance()  # GNOME's dark style (the portal's): Qt's themes miss it
    collector = GuiCollector()  # cycles are freed on this thread, between events
    collector.start()
    install_symbolic_icons()
    if settings.start_at_login:  # an entry an older kubetray wrote becomes this one's
        with contextlib.suppress(OSError):
            autostart.refresh(installation.login_command())
    parts = compose.agent(
        default_browser=lambda: settings.browser_command, store_kind=store or settings.secret_store
    )
    # Before the socket exists: a SIGINT/SIGTERM from now on ends the app cleanly (the socket
    # removed), also one that arrives before Qt's loop runs, when quit() alone would be lost.
    stop_asked = threading.Event()

    def on_signal(*_: object) -> None:
        stop_asked.set()
        app.quit()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    bridge = _Bridge()
    closing = threading.Event()
    windows_open: list[bool] = [True]  # until the GUI thread has looked

    def busy() -> bool:  # asked by the restart's thread: the GUI thread looks, later
        if closing.is_set():
            return True
        bridge.probe.emit()
        return windows_open[0]

    restarting, watch = restart.wire(
        parts, finish=bridge.quit.emit, stop=bridge.quit.emit, busy=busy
    )
    parts.server.listener.open()
    restart.restore_memory(parts)
    parts.start()
    restart.note(came_from, parts.service.facts)
    threading.Thread(target=parts.server.serve_forever, name="ipc", daemon=True).start()
    controller = TrayController(parts.core, settings, utcnow)
    controller.store_notice = parts.store.notice
    parts.store.on_move.append(lambda: setattr(controller, "store_notice", None))
    view = TrayApp(controller, tray=tray, wait_for_tray=AT_LOGIN_WAIT if at_login else 0.0)

    def look() -> None:  # a person's open window is never closed under them by a restart
        windows_open[0] = bool(view.open_windows())

    bridge.probe.connect(look)
    bridge.show.connect(view.bring_forward)
    bridge.quit.connect(app.quit)
    parts.service.on_show = bridge.show.emit

    def say_kind(in_tray: bool) -> None:
        parts.service.facts["kind"] = "the tray app" if in_tray else "the app window"
        log.info("%s", "the icon is in the tray" if in_tray else "no tray: the window stands in")

    say_kind(view.tray is not None)
    view.tray_changed.connect(say_kind)

    def stop_request(when_idle: bool) -> None:
        if when_idle:
            lifecycle.stop_when_idle(parts.logins, bridge.quit.emit)
        else:
            bridge.quit.emit()

    parts.service.on_stop = stop_request
    pulse = QTimer()  # lets Python see SIGINT/SIGTERM while Qt's loop runs
    pulse.timeout.connect(lambda: None)
    pulse.start(250)
    log.info("kubetray app listening on %s", parts.server.listener.address)
    if log_file:
        log.info("this log is also in %s", log_file)
    if came_from is not None and came_from.updated:  # said once, as a notification
        text = f"kubetray was updated to {__version__}"
        log.info("told the person: %s", text)
        view.show_notification("updated", "", "kubetray was updated", text)
    watch.start()
    try:
        code = 0 if stop_asked.is_set() else app.exec()
    finally:
        closing.set()
        watch.stop()
        # Worker threads first: nothing may emit into an object that is about to go.
        parts.service.on_show = None
        parts.service.on_stop = None
        parts.server.shutdown()
        # Callers waiting for a login hear why it ended, instead of a dropped connection.
        lifecycle.end_logins(parts.logins, "quit")
        pulse.stop()
        # Then Qt's objects, in a fixed order, each through shiboken (see tray.dispose):
        # windows and dialogs, the tray icon, the menu (view.shutdown), the bridge, the timer.
        view.shutdown()
        parts.stop()
        appearance.close()
        # The collector goes too; automatic collection stays off until the process ends or
        # execs its restart (a collection amid the teardown below is what it keeps away).
        for obj in (bridge, pulse, controller, appearance, collector):
            dispose(obj)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        # Events queued by threads before they stopped reach nothing now; the QApplication
        # goes last, here, rather than whenever the interpreter's finalisation gets to it.
        app.processEvents()
        app.shutdown()
    restarting.exec_if_due()
    return code
