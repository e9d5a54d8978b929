"""The desktop's light or dark preference, from the XDG desktop portal (Linux).

GNOME (42 and later) says "dark style" only as the portal's ``org.freedesktop.appearance
color-scheme`` (1 prefers dark, 2 prefers light, 0 no preference); its GTK theme stays light.
Qt's GNOME and GTK platform themes read the GTK theme, so kubetray's windows stayed light
under a dark desktop. This reads the portal's setting, and follows it when it changes
(``SettingChanged``), asking Qt for that colour scheme (Fusion then has its dark palette).
Elsewhere (macOS, Windows, KDE) Qt follows the system by itself and this does nothing: no
portal, or a preference of 0, leaves Qt's own choice.

The GUI thread never waits on the bus: the portal is read on a thread of its own and the answer
handed to Qt as a signal (a portal started on demand can take seconds).
"""

import logging
import queue
import sys
import threading
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

log = logging.getLogger(__name__)

PORTAL = "org.freedesktop.portal.Desktop"
PATH = "/org/freedesktop/portal/desktop"
SETTINGS = "org.freedesktop.portal.Settings"
NAMESPACE = "org.freedesktop.appearance"
KEY = "color-scheme"
READ_TIMEOUT = 10.0
"""Seconds the first read may take: the bus may be starting the portal (D-Bus activation)."""

DESKTOPS = ("xcb", "wayland")
"""Qt's platforms on a desktop's display, where the portal is asked."""
SCHEMES = {1: Qt.ColorScheme.Dark, 2: Qt.ColorScheme.Light}
"""The portal's values kubetray acts on; anything else leaves the platform's own scheme."""


def unwrap(value: Any) -> Any:
    """A D-Bus variant's value, however deep: portals before 1.17 answer Read with a variant
    inside a variant (jeepney gives each as (signature, value))."""
    while isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        value = value[1]
    return value


def scheme_of(value: Any) -> Qt.ColorScheme:
    """What the portal's ``color-scheme`` value asks of Qt (Unknown: the platform's choice)."""
    value = unwrap(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return SCHEMES.get(value, Qt.ColorScheme.Unknown)
    return Qt.ColorScheme.Unknown


def _light(palette: QPalette) -> bool:
    return palette.color(QPalette.ColorRole.Window).lightnessF() > 0.5


class Appearance(QObject):
    """Follows the portal's colour scheme for the whole application until ``close``."""

    _read = Signal(object)  # the portal's value (any type), from the reader thread

    def __init__(self) -> None:
        super().__init__()
        self._stop = threading.Event()
        self._router: Any = None
        self._conn: Any = None
        self._set = False  # whether kubetray asked Qt for a scheme (else: Qt's own)
        self._palette_set = False  # whether kubetray set the application's palette
        self._read.connect(self._apply)
        self._thread: threading.Thread | None = None
        # A desktop's display only: offscreen (the tests, a bench) or a headless agent has no
        # look to follow, and asking would start the portal on a bus with no display.
        if sys.platform.startswith("linux") and QGuiApplication.platformName().startswith(DESKTOPS):
            self._thread = threading.Thread(target=self._follow, name="appearance", daemon=True)
            self._thread.start()

    def _apply(self, value: Any) -> None:
        scheme = scheme_of(value)
        if scheme is Qt.ColorScheme.Unknown and not self._set:
            return  # no preference, and none asked before: Qt's own choice stands
        self._set = scheme is not Qt.ColorScheme.Unknown
        log.info("the desktop prefers the %s look", scheme.name.lower())
        QGuiApplication.styleHints().setColorScheme(scheme)  # Unknown: back to Qt's own
        if self._palette_set:  # the one set below for an earlier dark preference
            QApplication.setPalette(QPalette())
            self._palette_set = False
        if scheme is Qt.ColorScheme.Dark and _light(QApplication.palette()):
            # Qt's GTK theme keeps GTK's light palette whatever the scheme: the style's own
            # palette for the scheme (Fusion's dark), where it has one.
            palette = QApplication.style().standardPalette()
            if not _light(palette):
                QApplication.setPalette(palette)
                self._palette_set = True

    def _tell(self, value: Any) -> None:
        if not self._stop.is_set():  # after close() the object may be gone
            self._read.emit(value)

    def _follow(self) -> None:
        from jeepney import DBusAddress, MatchRule, message_bus, new_method_call
        from jeepney.io.threading import DBusRouter, Proxy, open_dbus_connection

        try:
            self._conn = open_dbus_connection("SESSION")
            self._router = DBusRouter(self._conn)
            changes: queue.Queue[Any] = queue.Queue()
            rule = MatchRule(type="signal", interface=SETTINGS, member="SettingChanged", path=PATH)
            Proxy(message_bus, self._router, timeout=2.0).AddMatch(rule)
            self._router.filter(rule, queue=changes)
            ask = new_method_call(
                DBusAddress(PATH, bus_name=PORTAL, interface=SETTINGS),
                "Read",
                "ss",
                (NAMESPACE, KEY),
            )
            reply = self._router.send_and_get_reply(ask, timeout=READ_TIMEOUT)
        except Exception as e:  # no session bus (KeyError), or one that does not answer
            log.debug("no desktop portal to ask for the colour scheme: %s", e)
            return
        if reply.header.message_type.name == "error":  # no portal, or none with the setting
            log.debug("the desktop portal has no colour scheme: %s", reply.body)
        else:
            self._tell(reply.body[0] if reply.body else None)
        while not self._stop.is_set():
            try:
                message = changes.get(timeout=0.5)
            except queue.Empty:
                continue
            namespace, key, value = message.body
            if (namespace, key) == (NAMESPACE, KEY):
                self._tell(value)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
        if self._router is not None:
            self._router.close()
        if self._conn is not None:
            self._conn.close()
