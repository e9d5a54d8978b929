"""Notifications reach the desktop's own service (a small org.freedesktop.Notifications server on
the tests' private D-Bus session), and its *Log in* action starts a login."""

import contextlib
import os
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
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
from PySide6.QtGui import QGuiApplication

from app.broker.broker import utcnow
from app.broker.logins import Logins
from app.errors import AppError
from app.oidc.tokens import TokenSet
from app.settings import Settings
from app.ui.controller import TrayController
from app.ui.notify import PATH, SERVICE
from app.ui.tray import TrayApp
from tests.core import give_tokens, make_core
from tests.fakes import SilentCaller
from tests.idp import run_idp
from tests.ui.test_tray import oidc_identity

pytestmark = pytest.mark.skipif(
    not os.environ.get("DBUS_SESSION_BUS_ADDRESS"), reason="no D-Bus session: run with-keyring"
)


class NotificationServer:
    """What a desktop's notification daemon does, as far as kubetray can tell: owns the name,
    takes Notify calls and numbers them, and sends ActionInvoked when asked to."""

    def __init__(self, answer: bool = True) -> None:
        """``answer``: False for a service that takes Notify calls but answers them only when
        ``answer_now()`` is called (one that hangs, or that the bus is still starting)."""
        self.received: list[tuple[Any, ...]] = []
        self.closed: list[int] = []
        self.answering = threading.Event()
        if answer:
            self.answering.set()
        self._held: list[Any] = []
        self.conn = open_dbus_connection("SESSION")
        reply = Proxy(message_bus, self.conn).RequestName(SERVICE, 4)  # DO_NOT_QUEUE
        assert reply == (1,), "another notification service owns the name"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            if self.answering.is_set():  # the calls it held, answered now
                for held in self._held:
                    self.conn.send(new_method_return(held, "u", (held.body[1] or 1,)))
                self._held.clear()
            try:
                msg = self.conn.receive(timeout=0.2)
            except TimeoutError:
                continue
            if msg.header.message_type != MessageType.method_call:
                continue
            member = msg.header.fields.get(HeaderFields.member)
            if member == "Notify" and not self.answering.is_set():
                self.received.append(tuple(msg.body))
                self._held.append(msg)
            elif member == "Notify":
                self.received.append(tuple(msg.body))
                replaces = msg.body[1]
                self.conn.send(new_method_return(msg, "u", (replaces or len(self.received),)))
            elif member == "CloseNotification":
                self.closed.append(msg.body[0])
                self.conn.send(new_method_return(msg))
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
        assert actions == ["default", "Log in", "login", "Log in"]  # a click on it: Log in
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
    qtbot.wait_until(lambda: shown == ["Login to x failed"], timeout=5000)
    bodies: list[str] = []  # it has no buttons: it says where they are, the tray's menu
    app.tray.showMessage = lambda _title, body, *_: bodies.append(body)  # type: ignore[method-assign]
    app.show_notification("browser", "x", "The browser did not open for x", "Open it")
    qtbot.wait_until(lambda: bool(bodies), timeout=5000)
    assert bodies == ["Open it (Open login page and Copy link are in kubetray's menu.)"]


def test_a_service_slow_to_answer_holds_nothing_up(qtbot, view) -> None:  # type: ignore[no-untyped-def]
    """The app never waits for the notification service: one that hangs, or that the bus is
    still starting, shows the notification when it answers, and the app goes on meanwhile
    (it used to wait up to 2 s for each, then show Qt's balloon as well)."""
    app, _ = view
    shown: list[str] = []
    assert app.tray is not None
    app.tray.showMessage = lambda title, *_: shown.append(title)  # type: ignore[method-assign]
    server = NotificationServer(answer=False)
    try:
        app.show_notification("failure", "x", "Login to x failed", "because")
        qtbot.wait_until(lambda: len(server.received) == 1, timeout=5000)
        assert not app.desktop_notifications.showing("x")  # asked, and not answered yet
        server.answering.set()  # the service answers: after show_notification returned
        qtbot.wait_until(lambda: app.desktop_notifications.showing("x"), timeout=5000)
        app.withdraw_notification("x")
        qtbot.wait_until(lambda: server.closed == [1], timeout=5000)
        assert shown == []  # the desktop's notification, and no balloon besides
    finally:
        server.close()


def test_a_click_that_comes_before_the_services_answer_is_not_lost(qtbot, view) -> None:  # type: ignore[no-untyped-def]
    """The service may send ActionInvoked before Notify's reply has been read here (another
    thread reads it): the click still acts (CI lost a *Copy link* this way)."""
    app, _ = view
    acted: list[tuple[str, str]] = []
    app.desktop_notifications.action.connect(lambda name, key: acted.append((name, key)))
    server = NotificationServer(answer=False)
    try:
        app.show_notification("failure", "x", "Login to x failed", "because")
        qtbot.wait_until(lambda: len(server.received) == 1, timeout=5000)
        server.invoke(1, "default")  # clicked, and only then the reply with its number
        qtbot.wait(200)
        server.answering.set()
        qtbot.wait_until(lambda: acted == [("x", "default")], timeout=5000)
        server.invoke(7, "default")  # another program's notification: not ours
        qtbot.wait(300)
        assert acted == [("x", "default")]
    finally:
        server.close()


def test_the_persons_own_cancel_notifies_nothing(qtbot, server: NotificationServer, view) -> None:  # type: ignore[no-untyped-def]
    app, logins = view
    with run_idp() as idp:
        identity, settings = oidc_identity(idp)
        logins.identity(settings, identity.name)
        with qtbot.wait_signal(app.controller.device_code, timeout=15000):
            app.controller.log_in(identity.name)  # the person, in the app: no "kubectl needs"
        app.device_windows[identity.name].cancel_button.click()
        qtbot.wait_until(lambda: not app.controller.logging_in(identity.name), timeout=10000)
        qtbot.wait(300)
    assert server.received == [] and app.notifications == []


def test_a_login_kubectl_starts_is_told_once_with_how(
    qtbot, server: NotificationServer, view
) -> None:  # type: ignore[no-untyped-def]
    app, logins = view
    with run_idp() as idp:
        identity, settings = oidc_identity(idp)
        errors: list[str] = []

        def kubectl() -> None:
            try:
                logins.token(logins.identity(settings, identity.name), SilentCaller())
            except AppError as e:
                errors.append(e.message)

        threading.Thread(target=kubectl, daemon=True).start()
        qtbot.wait_until(lambda: len(server.received) == 1, timeout=15000)
        _app, _replaces, icon, summary, body, actions, hints, _t = server.received[0]
        assert summary == f"kubectl needs you to log in to {identity.name}"
        assert body.startswith("Enter the code ") and body.endswith(f" at {idp.issuer[7:]}.")
        assert actions[2:] == ["open", "Open login page", "copy", "Copy link"]
        assert actions[:2] == ["default", "Open login page"]
        assert icon.startswith("file://") and Path(icon[7:]).is_file()
        assert hints["image-path"] == ("s", icon)
        server.invoke(1, "copy")
        qtbot.wait_until(
            lambda: QGuiApplication.clipboard().text().startswith(f"{idp.issuer}/device"),
            timeout=5000,
        )
        app.device_windows[identity.name].cancel_button.click()  # the person says no
        qtbot.wait_until(lambda: bool(errors), timeout=10000)
        kubectl()  # kubectl's retry: the login is blocked after the cancel
        qtbot.wait(300)
    assert len(server.received) == 1, server.received[1:]


def test_the_browser_that_did_not_open_is_short_and_has_the_link(
    qtbot, server: NotificationServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    from app.oidc.browser import Browser

    monkeypatch.setenv("KUBETRAY_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("SSH_CONNECTION", raising=False)
    core, _ = make_core(tmp_path, browser=lambda _c: Browser("false"))
    app = TrayApp(TrayController(core, Settings(), utcnow), tray=True)
    try:
        with run_idp() as idp:
            identity, settings = oidc_identity(idp, grant="authcode")
            core.logins.identity(settings, identity.name)

            def kubectl() -> None:  # kubectl asks: told that it waits, then that it failed
                with contextlib.suppress(AppError):
                    st = core.logins.identity(settings, identity.name)
                    core.logins.token(st, SilentCaller())

            threading.Thread(target=kubectl, daemon=True).start()
            # "Waiting for the login in your browser" may come before the failure
            failed = f"The browser did not open for {identity.name}"
            qtbot.wait_until(
                lambda: bool(server.received) and server.received[-1][3] == failed, timeout=15000
            )
            _a, replaces, _i, _s, body, actions, _h, _t = server.received[-1]
            assert body.startswith("Open the login page, or copy the link into a browser.")
            assert "http" not in body and len(body) < 120 and "\n" not in body
            assert actions[2:] == ["open", "Open login page", "copy", "Copy link"]
            if len(server.received) == 2:  # the waiting one, replaced on screen
                assert replaces == 1
            server.invoke(1, "copy")  # one notification about it, replaced in place
            qtbot.wait_until(
                lambda: QGuiApplication.clipboard().text().startswith(f"{idp.issuer}/auth?"),
                timeout=5000,
            )
            app.controller.cancel(identity.name)
            qtbot.wait_until(lambda: not app.controller.logging_in(identity.name), timeout=10000)
    finally:
        app.shutdown()
        core.stop()
        qtbot.wait(50)


def test_a_refused_refresh_is_notified_once(qtbot, server: NotificationServer, view) -> None:  # type: ignore[no-untyped-def]
    app, logins = view
    core = app.controller
    with run_idp() as idp:
        identity, settings = oidc_identity(idp)
        logins.identity(settings, identity.name)
        now = datetime.now(UTC)
        tokens = TokenSet(
            expires_at=now + timedelta(minutes=1),
            issued_at=now - timedelta(hours=1),
            id_token="t",
            refresh_token="revoked-long-ago",  # oidc-provider answers invalid_grant
        )
        give_tokens(core, core.logins._store, identity.name, tokens)  # type: ignore[arg-type]
        logins.start()  # refresh ahead: due already
        qtbot.wait_until(lambda: bool(server.received), timeout=15000)
        qtbot.wait(1000)
    [(_app, _r, _icon, summary, body, actions, _h, _t)] = server.received
    assert summary == f"{identity.name} needs a new login"
    assert body.startswith("The provider refused to refresh it (") and "invalid_grant" in body
    assert actions == ["default", "Log in", "login", "Log in"]


def test_a_notification_that_only_tells_expires_and_a_question_stays(
    qtbot, server: NotificationServer, view
) -> None:  # type: ignore[no-untyped-def]
    """ "kubetray was updated" asks nothing, so nothing makes it moot: it asks the service to
    let it go after 20 s (mako kept it for ever). A question waits for the person."""
    app, _ = view
    app.show_notification("updated", "", "kubetray was updated", "kubetray was updated to 9.9")
    app.show_notification("login", "dev", "kubectl needs you to log in to dev", "asked")
    qtbot.wait_until(lambda: len(server.received) == 2, timeout=5000)
    assert [r[3] for r in server.received] == [
        "kubetray was updated",
        "kubectl needs you to log in to dev",
    ]
    assert [r[-1] for r in server.received] == [20_000, -1]
