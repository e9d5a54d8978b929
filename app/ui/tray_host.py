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
"""

import sys
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QSystemTrayIcon

WATCHER = "org.kde.StatusNotifierWatcher"
POLL = 2.0
"""Seconds between looks at the X11 tray selection (a round trip to the X server)."""
GRACE = 3.0
"""Seconds a tray may be gone (a panel restarting) before the window stands in for it."""


class TrayHost(QObject):
    """``available`` now, and ``changed(bool)`` when it flips (going away after GRACE)."""

    changed = Signal(bool)

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

    def _bus_changed(self, registered: bool) -> None:
        self._bus_has_watcher = registered
        self.check()

    def _look(self) -> bool:
        if self._bus_has_watcher:
            return True
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
        self._poll.stop()
        self._gone.stop()
