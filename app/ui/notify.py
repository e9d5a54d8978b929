"""Notifications through the desktop's own service (org.freedesktop.Notifications on D-Bus), so
they have the desktop's look, history, do-not-disturb and actions such as *Log in*.

Where there is no such service (Windows, macOS, a bare X session) ``notify`` returns False and
the tray shows Qt's message instead: on Windows 10 and 11 that is the system's own toast
(Shell_NotifyIcon, kept in the Action Center), on macOS Qt posts it to Notification Center;
only a bare X session gets a drawn balloon. Actions (*Log in*) exist on Linux only; a click on
the message elsewhere starts the login it names. D-Bus goes through jeepney (pure Python,
already there for the Secret Service); the action signals are read on a thread and handed to
Qt as a signal.
"""

import logging
import sys
import threading
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.ui import icons

log = logging.getLogger(__name__)

SERVICE = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"
CALL_TIMEOUT = 2.0


class DesktopNotifications(QObject):
    """The desktop's notification service, when the session has one."""

    action = Signal(str, str)  # the name given to notify(), the action's key

    def __init__(self) -> None:
        super().__init__()
        self._conn: Any = None
        self._names: dict[int, str] = {}
        self._last: dict[str, int] = {}
        self._stop = threading.Event()
        self._listener: threading.Thread | None = None
        if not sys.platform.startswith("linux"):
            return
        try:
            from jeepney.io.blocking import open_dbus_connection

            self._conn = open_dbus_connection("SESSION")
        except KeyError:  # jeepney's way of saying DBUS_SESSION_BUS_ADDRESS is not set
            log.info(
                "no D-Bus session (DBUS_SESSION_BUS_ADDRESS is not set): notifications are Qt's own"
            )
        except Exception as e:  # a session bus that does not answer: the balloon will do
            log.info("the D-Bus session did not answer (%s): notifications are Qt's own", e)
            return
        self._listener = threading.Thread(target=self._listen, name="notify", daemon=True)
        self._listener.start()

    def available(self) -> bool:
        """Whether a notification service runs in this session now."""
        if self._conn is None:
            return False
        from jeepney import message_bus
        from jeepney.io.blocking import Proxy

        try:
            owned = Proxy(message_bus, self._conn, timeout=CALL_TIMEOUT).NameHasOwner(SERVICE)
        except Exception:
            return False
        return bool(owned[0])

    def notify(
        self, name: str, title: str, text: str, actions: tuple[tuple[str, str], ...] = ()
    ) -> bool:
        """Show a notification; ``actions`` are (key, label). False when there is no service."""
        if not self.available():
            return False
        from jeepney import DBusAddress, new_method_call

        flat = [part for key, label in actions for part in (key, label)]
        icon = icons.app_icon_file().as_uri()
        hints: dict[str, tuple[str, Any]] = {
            "desktop-entry": ("s", "kubetray"),
            "image-path": ("s", icon),
        }
        # One notification per identity on screen: a newer one about it replaces the last.
        replaces = self._last.get(name, 0)
        message = new_method_call(
            DBusAddress(PATH, bus_name=SERVICE, interface=SERVICE),
            "Notify",
            "susssasa{sv}i",
            ("kubetray", replaces, icon, title, text, flat, hints, -1),
        )
        try:
            reply = self._conn.send_and_get_reply(message, timeout=CALL_TIMEOUT)
            (ident,) = reply.body
        except Exception as e:
            log.info("the notification service did not take the notification: %s", e)
            return False
        self._names[int(ident)] = name
        self._last[name] = int(ident)
        return True

    def _listen(self) -> None:
        """Read ActionInvoked on a connection of its own (the main one answers calls)."""
        from jeepney import HeaderFields, MatchRule, message_bus
        from jeepney.io.blocking import Proxy, open_dbus_connection

        try:
            conn = open_dbus_connection("SESSION")
            rule = MatchRule(type="signal", interface=SERVICE, member="ActionInvoked")
            Proxy(message_bus, conn, timeout=CALL_TIMEOUT).AddMatch(rule)
        except Exception as e:
            log.info("cannot listen for notification actions: %s", e)
            return
        with conn:
            while not self._stop.is_set():
                try:
                    message = conn.receive(timeout=0.5)
                except TimeoutError:
                    continue
                except Exception:
                    return
                fields = message.header.fields
                if fields.get(HeaderFields.member) != "ActionInvoked":
                    continue
                ident, key = message.body
                name = self._names.get(int(ident))
                if name is not None:
                    self.action.emit(name, str(key))

    def close(self) -> None:
        self._stop.set()
        if self._listener is not None:
            self._listener.join(2)
        if self._conn is not None:
            self._conn.close()
            self._conn = None
