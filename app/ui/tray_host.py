"""Whether the desktop has a tray for kubetray's icon now, and when that changes.

At login the autostarted app often starts before the panel, and a panel can restart or be
removed while kubetray runs. Qt's QSystemTrayIcon.isSystemTrayAvailable() answers for the
moment it is asked (Qt 6.11 looks again each time: a StatusNotifierWatcher on D-Bus, else on
X11 an XEmbed tray, the `_NET_SYSTEM_TRAY_Sn` selection), so this watches for changes:

* **StatusNotifierItem hosts** (KDE Plasma, GNOME Shell with the AppIndicator extension,
  waybar, xfce4-panel's plugin): the session bus's NameOwnerChanged for
  ``org.kde.StatusNotifierWatcher``, through QtDBus' QDBusServiceWatcher (no thread of ours).
* **XEmbed trays** (X11 only: trayer, stalonetray, older panels): the selection cannot be
  watched from Python, so it is looked at every POLL seconds while no watcher is on the bus.
  On Wayland and elsewhere nothing is polled.

A tray that goes away is reported only after GRACE seconds without one, so a panel that
restarts does not bring the window up and down.

A watcher that appears counts once it answers on its object, not when it takes its name: some
take the name first and export the object a moment later (status-notifier-watcher, taffybar's,
does requestName then export), and Qt registers its item once, at once, and only warns when
that fails, so the icon would never show. When a watcher that came back within GRACE answers,
the icon Qt registered too early is shown anew, and so registered again (``watcher_back``). All of
it is asynchronous: the GUI thread never waits on a panel.
"""

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QSystemTrayIcon

if TYPE_CHECKING:
    from PySide6.QtDBus import QDBusPendingCallWatcher

WATCHER = "org.kde.StatusNotifierWatcher"
WATCHER_PATH = "/StatusNotifierWatcher"
ANSWER_WAIT = 10.0
"""Seconds a watcher that has its name may take to answer; then it counts all the same (Qt's
registration is tried as it always was)."""
ASK_EVERY = 0.1
"""Seconds between two asks to a watcher that has its name but not yet its object."""
POLL = 2.0
"""Seconds between looks at the X11 tray selection (a round trip to the X server)."""
GRACE = 3.0
"""Seconds a tray may be gone (a panel restarting) before the window stands in for it."""


class TrayHost(QObject):
    """``available`` now, and ``changed(bool)`` when it flips (going away after GRACE)."""

    changed = Signal(bool)
    watcher_back = Signal()
    """A watcher answers now that may have missed the icon's registration (it came back within
    GRACE, and Qt registered at once): an icon that is shown should be shown anew."""

    def __init__(
        self,
        probe: Callable[[], bool] = QSystemTrayIcon.isSystemTrayAvailable,
        poll: float = POLL,
        grace: float = GRACE,
    ) -> None:
        super().__init__()
        self._probe = probe
        self._watcher: QObject | None = None
        self._bus_has_watcher = False
        """A StatusNotifierWatcher is on the bus and answers (or took too long to)."""
        self._starting = False
        """A watcher has the name and has not answered yet: nothing changes meanwhile."""
        self._generation = 0
        """Counts watchers that appeared: an answer meant for an earlier one is dropped."""
        self._asking_since = 0.0
        self._register_again = False
        """Qt may have registered its item while the watcher could not answer yet."""
        self._calls: set[QDBusPendingCallWatcher] = set()
        self._watch_bus()
        self.available = self._look()
        self._poll = QTimer(self)
        self._poll.timeout.connect(self.check)
        if sys.platform != "linux" or QGuiApplication.platformName() == "xcb":
            self._poll.start(int(poll * 1000))
        self._gone = QTimer(self)
        self._gone.setSingleShot(True)
        self._gone.setInterval(int(grace * 1000))
        self._gone.timeout.connect(self._confirm_gone)

    def _watch_bus(self) -> None:
        if not sys.platform.startswith("linux"):
            return
        from PySide6.QtDBus import QDBusConnection, QDBusServiceWatcher

        bus = QDBusConnection.sessionBus()
        if not bus.isConnected():
            return
        watcher = QDBusServiceWatcher(
            WATCHER,
            bus,
            QDBusServiceWatcher.WatchModeFlag.WatchForRegistration
            | QDBusServiceWatcher.WatchModeFlag.WatchForUnregistration,
            self,
        )
        watcher.serviceRegistered.connect(lambda _name: self._bus_changed(True))
        watcher.serviceUnregistered.connect(lambda _name: self._bus_changed(False))
        self._watcher = watcher
        interface = bus.interface()
        if interface is not None:
            reply = interface.isServiceRegistered(WATCHER)
            self._bus_has_watcher = bool(reply.value()) if reply.isValid() else False
        if self._bus_has_watcher:
            # Counted at once (the usual start: the panel has long been there); should it be
            # starting this very moment, its answer registers the icon again.
            self._generation += 1
            self._asking_since = time.monotonic()
            self._ask_watcher(self._generation)

    def _bus_changed(self, registered: bool) -> None:
        self._generation += 1
        self._bus_has_watcher = False
        self._starting = registered
        if registered:
            self._register_again = True  # Qt registers on its own when a watcher appears
            self._asking_since = time.monotonic()
            self._ask_watcher(self._generation)
        self.check()

    def _ask_watcher(self, generation: int) -> None:
        """Ask the watcher for its ProtocolVersion: any answer means its object is there."""
        from PySide6.QtDBus import QDBusConnection, QDBusMessage, QDBusPendingCallWatcher

        ask = QDBusMessage.createMethodCall(
            WATCHER, WATCHER_PATH, "org.freedesktop.DBus.Properties", "Get"
        )
        ask.setArguments([WATCHER, "ProtocolVersion"])
        call = QDBusPendingCallWatcher(QDBusConnection.sessionBus().asyncCall(ask, 2000), self)
        self._calls.add(call)
        call.finished.connect(lambda done: self._answered(done, generation))

    def _answered(self, call: "QDBusPendingCallWatcher", generation: int) -> None:
        self._calls.discard(call)
        failed = call.isError()
        call.deleteLater()
        if generation != self._generation:
            return  # that watcher has gone since (or another took its place)
        if failed:
            self._register_again = True
            if time.monotonic() - self._asking_since < ANSWER_WAIT:
                QTimer.singleShot(int(ASK_EVERY * 1000), self, lambda: self._retry(generation))
                return
        was = self.available
        self._starting = False
        self._bus_has_watcher = True
        self.check()  # a tray that was not there: the icon is made now, and Qt registers it
        if was and self._register_again:
            self.watcher_back.emit()
        self._register_again = False

    def _retry(self, generation: int) -> None:
        if generation == self._generation:
            self._ask_watcher(generation)

    def _look(self) -> bool:
        if self._bus_has_watcher:
            return True
        if self._starting:
            return self.available  # as it was, until the watcher answers
        if sys.platform.startswith("linux") and QGuiApplication.platformName() != "xcb":
            # Qt's answer here would open a D-Bus connection of its own each time, and only
            # a StatusNotifierWatcher can host an icon on Wayland: the bus said there is none.
            return False
        return bool(self._probe())

    def check(self) -> None:
        """Look now (also called by the poll and by the bus watcher)."""
        now = self._look()
        if now and not self.available:
            self._gone.stop()
            self.available = True
            self.changed.emit(True)
        elif now:
            self._gone.stop()  # back within the grace: nothing happened, as far as anyone sees
        elif self.available and not self._gone.isActive():
            self._gone.start()

    def _confirm_gone(self) -> None:
        if not self._look() and self.available:
            self.available = False
            self.changed.emit(False)

    def stop(self) -> None:
        self._generation += 1  # answers still on their way change nothing
        self._poll.stop()
        self._gone.stop()


TASKBARS = {
    "KDE": "the taskbar",
    "XFCE": "the taskbar",
    "LXQT": "the taskbar",
    "LXDE": "the taskbar",
    "MATE": "the taskbar",
    "X-CINNAMON": "the taskbar",
    "CINNAMON": "the taskbar",
    "BUDGIE": "the taskbar",
    "DEEPIN": "the dock",
    "UNITY": "the dock",
    "PANTHEON": "the dock",
    "GNOME": "the Activities overview",
}
"""Where each desktop (XDG_CURRENT_DESKTOP) shows a minimized window."""


def where_minimized(desktop: str | None = None) -> str | None:
    """Where a person finds a minimized window of ours again, in their words, or None where
    that is not known (a bare window manager, sway: nothing shows it, or it cannot minimize)."""
    if sys.platform == "darwin":
        return "the Dock"
    if sys.platform == "win32":
        return "the taskbar"
    import os

    names = (desktop if desktop is not None else os.environ.get("XDG_CURRENT_DESKTOP", "")).upper()
    for name in names.split(":"):
        if name in TASKBARS:
            return TASKBARS[name]
    return None
