"""Notifications reach the desktop's own service (a small org.freedesktop.Notifications server on
the tests' private D-Bus session), and its *Log in* action starts a login."""

import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from jeepney import (
    DBusAddress,
    HeaderFields,
    MessageType,
    message_bus,
    new_method_return,
    new_signal,
)
from jeepney.io.blocking import Proxy, open_dbus_connection

from app.broker.broker import utcnow
from app.broker.logins import Logins
from app.settings import Settings
from app.ui.controller import TrayController
from app.ui.notify import PATH, SERVICE
from app.ui.tray import TrayApp
from tests.core import make_core
from tests.idp import run_idp
from tests.ui.test_tray import oidc_identity

pytestmark = pytest.mark.skipif(
    not os.environ.get("DBUS_SESSION_BUS_ADDRESS"), reason="no D-Bus session: run with-keyring"
)


class NotificationServer:
    """What a desktop's notification daemon does, as far as kubetray can tell: owns the name,
    takes Notify calls and numbers them, and sends ActionInvoked when asked to."""

    def __init__(self) -> None:
        self.received: list[tuple[Any, ...]] = []
        self.conn = open_dbus_connection("SESSION")
        reply = Proxy(message_bus, self.conn).RequestName(SERVICE, 4)  # DO_NOT_QUEUE
        assert reply == (1,), "another notification service owns the name"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                msg = self.conn.receive(timeout=0.2)
            except TimeoutError:
                continue
            if msg.header.message_type != MessageType.method_call:
                continue
            member = msg.header.fields.get(HeaderFields.member)
            if member == "Notify":
                self.received.append(tuple(msg.body))
                self.conn.send(new_method_return(msg, "u", (len(self.received),)))
            elif member == "GetCapabilities":
                self.conn.send(new_method_return(msg, "as", (["actions", "body"],)))

    def invoke(self, ident: int, key: str) -> None:
        """The person clicked the action ``key`` of notification ``ident``."""
        where = DBusAddress(PATH, interface=SERVICE)
        self.conn.send(new_signal(where, "ActionInvoked", "us", (ident, key)))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        Proxy(message_bus, self.conn).ReleaseName(SERVICE)
        self.conn.close()


@pytest.fixture
def server() -> Iterator[NotificationServer]:
    s = NotificationServer()
    yield s
    s.close()


@pytest.fixture
def view(qtbot, tmp_path, monkeypatch) -> Iterator[tuple[TrayApp, Logins]]:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("KUBETRAY_CONFIG_DIR", str(tmp_path / "config"))
    core, _ = make_core(tmp_path)
    app = TrayApp(TrayController(core, Settings(), utcnow), tray=True)
    yield app, core.logins
    app.shutdown()
    core.stop()
    qtbot.wait(50)


def test_the_desktop_service_gets_it_and_log_in_starts_a_login(
    qtbot, server: NotificationServer, view
) -> None:  # type: ignore[no-untyped-def]
    app, logins = view
    with run_idp() as idp:
        identity, settings = oidc_identity(idp)
        logins.identity(settings, identity.name)
        app.controller.needs_login.emit(identity.name, "kubectl asked for a token")
        qtbot.wait_until(lambda: bool(server.received), timeout=5000)
        appname, _replaces, _icon, summary, body, actions, _hints, _timeout = server.received[0]
        assert appname == "kubetray"
        assert summary == f"kubectl needs you to log in to {identity.name}"
        assert body == "kubectl asked for a token"
        assert actions == ["login", "Log in"]
        with qtbot.wait_signal(app.controller.device_code, timeout=15000):
            server.invoke(1, "login")  # the person clicks *Log in* in the desktop's notification
        assert identity.name in app.device_windows
        app.controller.cancel(identity.name)
        qtbot.wait_until(lambda: not app.controller.logging_in(identity.name), timeout=5000)


def test_without_a_service_the_balloon_stands_in(qtbot, view) -> None:  # type: ignore[no-untyped-def]
    app, _ = view
    assert not app.desktop_notifications.available()
    shown: list[str] = []
    assert app.tray is not None
    app.tray.showMessage = lambda title, *_: shown.append(title)  # type: ignore[method-assign]
    app.show_notification("failure", "x", "Login to x failed", "because")
    assert shown == ["Login to x failed"]
