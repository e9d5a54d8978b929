"""Notifications through the desktop's own service (org.freedesktop.Notifications on D-Bus), so
they have the desktop's look, history, do-not-disturb and actions such as *Log in*.

They follow the state: at most one per identity on screen (a newer one about it replaces the
last, ``replaces_id``), withdrawn (CloseNotification) when what it asked for is done or moot,
and all of ours withdrawn when the app quits, so no button outlives the program that answers
it. Each has a ``default`` action: a click on the notification itself.

Where there is no such service (Windows, macOS, a bare X session) the tray shows Qt's message
instead (``notify`` returns False, or calls ``otherwise`` a moment later): on Windows 10 and 11
that is the system's own toast (Shell_NotifyIcon, kept in the Action Center), on macOS Qt posts
it to Notification Center; only a bare X session gets a drawn balloon. D-Bus goes through
jeepney (pure Python, already there for the Secret Service).

The GUI thread never waits on the service: Notify and CloseNotification are made in order on a
thread of their own (``notify`` only queues), so a daemon that hangs, or one the bus starts on
demand (xfce4-notifyd), or fails to start, costs the person nothing but the notification.
ActionInvoked and NotificationClosed are read on another thread and handed to Qt as signals.
"""

import itertools
import logging
import queue
import sys
import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.ui import icons

log = logging.getLogger(__name__)

SERVICE = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"
CALL_TIMEOUT = 2.0
NOTIFY_TIMEOUT = 10.0
"""Seconds a Notify may take: the bus may be starting the service (D-Bus activation)."""
CLOSE_WAIT = 3.0
"""Seconds quitting waits for our notifications to be withdrawn."""
DEFAULT = "default"
"""The action key of a click on the notification itself (Desktop Notifications spec)."""


class DesktopNotifications(QObject):
    """The desktop's notification service, when the session has one."""

    action = Signal(str, str)  # the name given to notify(), the action's key
    _closed = Signal(int)  # a notification the service closed (expired, dismissed, ours)
    _done = Signal(int, bool)  # a notify() call's number, and whether the service showed it

    def __init__(self) -> None:
        super().__init__()
        self._conn: Any = None
        self._router: Any = None
        self._lock = threading.Lock()
        self._names: dict[int, str] = {}
        self._last: dict[str, int] = {}
        self._asking = False  # a Notify call waits for its reply (the caller thread)
        self._early: dict[int, str] = {}
        """An action on a number not known yet, while Notify's reply is on its way to us."""
        self._stop = threading.Event()
        self._listener: threading.Thread | None = None
        self._jobs: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._caller: threading.Thread | None = None
        self._otherwise: dict[int, Callable[[], None]] = {}
        """What to do instead, by notify() call, until the service said (GUI thread only)."""
        self._count = itertools.count(1)
        self._closed.connect(self._forget)
        self._done.connect(self._shown_or_not)
        if not sys.platform.startswith("linux"):
            return
        try:
            from jeepney.io.threading import DBusRouter, open_dbus_connection

            self._conn = open_dbus_connection("SESSION")
            self._router = DBusRouter(self._conn)
        except KeyError:  # jeepney's way of saying DBUS_SESSION_BUS_ADDRESS is not set
            log.info(
                "no D-Bus session (DBUS_SESSION_BUS_ADDRESS is not set): notifications are Qt's own"
            )
            return
        except Exception as e:  # a session bus that does not answer: the balloon will do
            log.info("the D-Bus session did not answer (%s): notifications are Qt's own", e)
            return
        self._listener = threading.Thread(target=self._listen, name="notify", daemon=True)
        self._listener.start()
        self._caller = threading.Thread(target=self._call_in_turn, name="notify-calls", daemon=True)
        self._caller.start()

    def available(self) -> bool:
        """Whether a notification service runs in this session now (a round trip to the bus:
        not for the GUI thread)."""
        if self._router is None:
            return False
        from jeepney import message_bus
        from jeepney.io.threading import Proxy

        try:
            owned = Proxy(message_bus, self._router, timeout=CALL_TIMEOUT).NameHasOwner(SERVICE)
        except Exception:
            return False
        return bool(owned[0])

    def showing(self, name: str) -> bool:
        """Whether a notification about ``name`` is on screen (as far as the service said)."""
        with self._lock:
            return name in self._last

    def notify(
        self,
        name: str,
        title: str,
        text: str,
        actions: tuple[tuple[str, str], ...] = (),
        otherwise: Callable[[], None] | None = None,
        expires_ms: int = -1,
    ) -> bool:
        """Show a notification about ``name``, replacing the last one about it; ``actions`` are
        (key, label), ``DEFAULT`` for a click on the notification. Returns at once: False when
        there is no session bus; when the service turns out not to be there, or fails,
        ``otherwise`` is called (on the GUI thread). ``expires_ms``: how long the service
        shows it (-1: its own default; mako's is for ever)."""
        if self._caller is None:
            return False
        number = next(self._count)
        if otherwise is not None:
            self._otherwise[number] = otherwise
        flat = [part for key, label in actions for part in (key, label)]
        icon = icons.app_icon_file().as_uri()
        hints: dict[str, tuple[str, Any]] = {
            "desktop-entry": ("s", "kubetray"),
            "image-path": ("s", icon),
        }

        def show() -> None:
            with self._lock:
                replaces = self._last.get(name, 0)
                self._asking = True
            body = ("kubetray", replaces, icon, title, text, flat, hints, expires_ms)
            reply = self._call("Notify", "susssasa{sv}i", body, NOTIFY_TIMEOUT)
            early_key = None
            with self._lock:  # one step: the listener sees the number known, or still asked
                self._asking = False
                early, self._early = self._early, {}
                if reply is not None:
                    ident = int(reply[0])
                    self._names[ident] = name
                    self._last[name] = ident
                    early_key = early.get(ident)
            if early_key is not None:  # answered before its reply was read here
                self.action.emit(name, early_key)
            self._done.emit(number, reply is not None)

        self._jobs.put(show)
        return True

    def withdraw(self, name: str) -> None:
        """Take the notification about ``name`` off the screen (its question is answered)."""
        if self._caller is None:
            return

        def close() -> None:
            with self._lock:
                ident = self._last.pop(name, None)
                if ident is not None:
                    self._names.pop(ident, None)
            if ident is not None:
                self._call("CloseNotification", "u", (ident,))

        self._jobs.put(close)

    def _call_in_turn(self) -> None:
        """Make the queued calls, one after the other (a replacement after what it replaces)."""
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                job()
            except Exception:  # a bug of ours must not end the notifications
                log.exception("a notification call failed")

    def _call(
        self, method: str, signature: str, body: tuple[Any, ...], timeout: float = CALL_TIMEOUT
    ) -> tuple[Any, ...] | None:
        from jeepney import DBusAddress, new_method_call

        if self._router is None:
            return None
        message = new_method_call(
            DBusAddress(PATH, bus_name=SERVICE, interface=SERVICE), method, signature, body
        )
        try:
            reply = self._router.send_and_get_reply(message, timeout=timeout)
            if reply.header.message_type.name == "error":
                raise RuntimeError(reply.body[0] if reply.body else "an error")
            return tuple(reply.body)
        except Exception as e:
            log.info("the notification service did not answer %s: %s", method, e)
            return None

    def _shown_or_not(self, number: int, shown: bool) -> None:
        otherwise = self._otherwise.pop(number, None)
        if not shown and otherwise is not None:
            otherwise()

    def _forget(self, ident: int) -> None:
        with self._lock:
            name = self._names.pop(ident, None)
            if name is not None and self._last.get(name) == ident:
                del self._last[name]

    def _listen(self) -> None:
        """Read ActionInvoked and NotificationClosed. On the connection that sent Notify: some
        services (dunst, GNOME Shell) send them to the notification's sender only."""
        from jeepney import HeaderFields, MatchRule, message_bus
        from jeepney.io.threading import Proxy

        signals: queue.Queue[Any] = queue.Queue()
        try:
            bus = Proxy(message_bus, self._router, timeout=CALL_TIMEOUT)
            for member in ("ActionInvoked", "NotificationClosed"):
                rule = MatchRule(type="signal", interface=SERVICE, member=member)
                bus.AddMatch(rule)  # the services that send them to everyone
                self._router.filter(rule, queue=signals)
        except Exception as e:
            log.info("cannot listen for notification actions: %s", e)
            return
        while not self._stop.is_set():
            try:
                message = signals.get(timeout=0.5)
            except queue.Empty:
                continue
            member = message.header.fields.get(HeaderFields.member)
            if member == "NotificationClosed":
                self._closed.emit(int(message.body[0]))
            elif member == "ActionInvoked":
                ident, key = message.body
                with self._lock:
                    name = self._names.get(int(ident))
                    if name is None and self._asking and len(self._early) < 64:
                        # The service can send it before the caller thread has read Notify's
                        # reply: kept for show() to hand on if the number turns out ours.
                        self._early[int(ident)] = str(key)
                if name is not None:
                    self.action.emit(name, str(key))

    def close(self) -> None:
        """Withdraw every notification of ours (the app is quitting; the calls queued before go
        first, for CLOSE_WAIT at most), then let go of the bus."""
        if self._caller is not None:

            def withdraw_all() -> None:  # after what is queued: a notification on its way too
                with self._lock:
                    idents = list(self._last.values())
                    self._last.clear()
                    self._names.clear()
                for ident in idents:
                    self._call("CloseNotification", "u", (ident,))

            self._jobs.put(withdraw_all)
            self._jobs.put(None)
            self._caller.join(CLOSE_WAIT)
            self._caller = None
        self._stop.set()
        if self._listener is not None:
            self._listener.join(2)
        if self._router is not None:
            self._router.close()
            self._router = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
