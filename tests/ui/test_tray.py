"""The tray app with pytest-qt (offscreen): the menu follows the broker, logins show up in the
desktop, notifications come on the right transitions, and there is a window without a tray."""

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication
from shiboken6 import Shiboken

from app.broker.broker import utcnow
from app.broker.logins import Logins
from app.compose import Core
from app.errors import AppError
from app.model import Identity
from app.oidc.settings import OIDCSettings
from app.oidc.tokens import TokenSet
from app.settings import Settings
from app.static_credentials import StoredCredential, StoredCredentials
from app.store.memory_store import MemorySecretStore
from app.ui.controller import TrayController
from app.ui.tray import TrayApp
from app.ui.views import DeviceCodeWindow
from tests.core import give_tokens, make_core
from tests.fakes import SilentCaller
from tests.idp import IdP, run_idp


@pytest.fixture
def parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Core, Logins, StoredCredentials, MemorySecretStore]]:
    monkeypatch.setenv("KUBETRAY_CONFIG_DIR", str(tmp_path / "config"))
    store = MemorySecretStore()
    core, stored = make_core(tmp_path, store)
    yield core, core.logins, stored, store
    core.stop()


@pytest.fixture
def view(qtbot, parts) -> Iterator[TrayApp]:  # type: ignore[no-untyped-def]
    core, _, _, _ = parts
    controller = TrayController(core, Settings(), utcnow)
    app = TrayApp(controller, tray=True)
    yield app
    app.shutdown()
    qtbot.wait(50)  # let the deferred deletes run while the QApplication is alive


def oidc_identity(idp: IdP, grant: str = "device-code") -> tuple[Identity, OIDCSettings]:
    settings = OIDCSettings(
        issuer=idp.issuer,
        client_id="kubectl",
        scopes=("openid", "email", "groups"),
        grant_type=grant,
    )
    name = "kubectl@" + idp.issuer.removeprefix("http://")
    return Identity(key=f"oidc|{idp.issuer}|kubectl", name=name, kind="oidc"), settings


def approve_device(idp: IdP, code: str, user: str = "alice") -> None:
    """A person at the provider's device page: enter the code, confirm, log in (plain HTTP forms)."""
    import re

    s = requests.Session()

    def form(html: str) -> tuple[str, dict[str, str]]:
        action = re.search(r'<form[^>]*action="([^"]+)"', html)
        fields = dict(re.findall(r'<input[^>]*name="([^"]+)"[^>]*value="([^"]*)"', html))
        return (action.group(1) if action else ""), fields

    page = s.get(f"{idp.issuer}/device?user_code={code}", timeout=10)
    for _ in range(6):
        action, fields = form(page.text)
        if 'name="login"' in page.text:
            fields.update(login=user, password="any")
        elif not action:
            break
        url = action if action.startswith("http") else idp.issuer + action
        page = s.post(url, data=fields, timeout=10)
        if "Sign-in Success" in page.text or "success" in page.url:
            break


def test_menu_follows_broker_state(qtbot, view: TrayApp, parts) -> None:  # type: ignore[no-untyped-def]
    _, _, stored, _ = parts
    assert "No identities yet: add a cluster, or run kubectl" in view.action_texts()
    assert view.state == "none"  # nothing set up yet: its own icon
    now = datetime.now(UTC)
    stored.save(
        StoredCredential(
            name="prod",
            certificate_pem="C",
            key_pem="K",
            not_after=now + timedelta(hours=2),
            subject="CN=ops",
        ),
        now,
    )
    view.refresh()
    texts = view.action_texts()
    assert any(t.startswith("prod · ready · 1h 5") for t in view.action_texts(deep=False))
    assert any(t.startswith("CN=ops · 1h 5") for t in texts)  # its submenu's first line
    assert "Diagnostics" in texts and "Quit kubetray" in texts
    assert view.state == "ok"


def test_remove_identity_from_the_menu(qtbot, view: TrayApp, parts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, logins, _, _ = parts
    settings = OIDCSettings(issuer="https://idp.invalid", client_id="c")
    logins.identity(settings, "team-dev")
    view.refresh()
    texts = view.action_texts()
    assert "team-dev · needs login" in texts and "Remove identity…" in texts
    assert view.state == "login"
    from tests.ui.modal import when_modal

    asked: list[str] = []

    def cancel(box) -> None:  # type: ignore[no-untyped-def]
        asked.append(box.text())
        box.reject()

    when_modal(cancel)  # the menu asks first, as the window does
    view.trigger("Remove identity…", "team-dev")
    assert asked == ["Remove team-dev from kubetray?"] and logins.find("team-dev") is not None

    def remove(box) -> None:  # type: ignore[no-untyped-def]
        next(b for b in box.buttons() if b.text() == "Remove").click()

    when_modal(remove)
    view.trigger("Remove identity…", "team-dev")
    qtbot.wait_until(
        lambda: not any(t.startswith("team-dev") for t in view.action_texts()), timeout=5000
    )
    assert logins.find("team-dev") is None and view.state == "none"


def test_device_code_login_in_the_desktop(qtbot, view: TrayApp, parts) -> None:  # type: ignore[no-untyped-def]
    _, logins, _, _ = parts
    with run_idp() as idp:
        identity, settings = oidc_identity(idp)
        logins.identity(settings, identity.name)
        view.refresh()
        assert "Log in" in view.action_texts() and view.state == "login"
        with qtbot.wait_signal(view.controller.device_code, timeout=15000):
            view.trigger("Log in")
        window = view.device_windows[identity.name]
        assert isinstance(window, DeviceCodeWindow) and window.isVisible()
        qtbot.wait(200)
        device_windows = [
            w for w in QApplication.topLevelWidgets() if isinstance(w, DeviceCodeWindow)
        ]
        assert device_windows == [window]  # one login, one window
        code = window.code_label.text()
        assert len(code.replace("-", "")) >= 8 and window.qr.pixmap() is not None
        window.copy_button.click()
        assert QGuiApplication.clipboard().text() == code
        assert view.action_texts().count("Cancel login") == 1  # the in-progress entry
        approve_device(idp, code)
        qtbot.wait_until(lambda: not view.controller.logging_in(identity.name), timeout=20000)
        view.refresh()
        texts = view.action_texts()
        assert "Log out" in texts and "Switch account…" in texts
        assert any(t.startswith("alice@example.test [devs, team-alice] · ") for t in texts)
        assert any(t.startswith(f"{identity.name} · ready · ") for t in texts)
        qtbot.wait_until(lambda: identity.name not in view.device_windows, timeout=5000)
        assert not Shiboken.isValid(window)  # closed and gone, on the GUI thread


def test_cancel_stops_the_login_and_waiting_callers_fail_fast(qtbot, view: TrayApp, parts) -> None:  # type: ignore[no-untyped-def]
    _, logins, _, _ = parts
    with run_idp() as idp:
        identity, settings = oidc_identity(idp)
        errors: list[str] = []

        def caller() -> None:
            try:
                logins.token(logins.identity(settings, identity.name), SilentCaller())
            except AppError as e:
                errors.append(e.one_line())

        with qtbot.wait_signal(view.controller.device_code, timeout=15000):
            threading.Thread(target=caller, daemon=True).start()
        window = view.device_windows[identity.name]
        window.cancel_button.click()
        qtbot.wait_until(lambda: bool(errors), timeout=10000)
        assert errors == ["the login was cancelled"]
        start = time.monotonic()
        with pytest.raises(AppError, match="login required for"):
            logins.token(logins.identity(settings, identity.name), SilentCaller())
        assert time.monotonic() - start < 1
        qtbot.wait(300)  # whatever the cancel and the retry would notify has arrived
        # kubectl started it: said once, with how; the person's own cancel: nothing more.
        assert [(n[0], n[1]) for n in view.notifications] == [
            ("waiting", f"kubectl needs you to log in to {identity.name}")
        ]
        assert view.notifications[0][2].startswith("Enter the code ")


def test_expiring_without_refresh_is_notified_once(qtbot, view: TrayApp, parts) -> None:  # type: ignore[no-untyped-def]
    core, logins, _, store = parts
    settings = OIDCSettings(issuer="https://idp.invalid", client_id="c")
    logins.identity(settings, "c@idp.invalid")
    now = datetime.now(UTC)
    tokens = TokenSet(
        expires_at=now + timedelta(minutes=8), issued_at=now - timedelta(hours=1), id_token="t"
    )
    give_tokens(core, store, "c@idp.invalid", tokens)
    view.tick()
    view.tick()
    expiring = [n for n in view.notifications if n[0] == "expiring"]
    assert len(expiring) == 1 and expiring[0][1].startswith("c@idp.invalid expires in 7 min")


def test_no_tray_the_main_window_stands_in(qtbot, parts) -> None:  # type: ignore[no-untyped-def]
    core, _, stored, _ = parts
    now = datetime.now(UTC)
    stored.save(StoredCredential(name="dev", token="t"), now)
    controller = TrayController(core, Settings(), utcnow)
    controller.store_notice = "no OS keyring here: tokens are kept in memory until the agent stops"
    view = TrayApp(controller, tray=False)  # no tray (GNOME without AppIndicator)
    try:
        window = view.main_window
        assert view.tray is None and window is not None and window.isVisible()
        assert window.standalone and window.quit_button.isVisible()
        assert "tokens are kept in memory" in window.store_notice.text()
        assert window.rows()[0][0] == "dev"
        view.show_notification("failure", "x", "Login to x failed", "because")
        # No desktop service here either: the bus says so at once, and the window shows it.
        qtbot.wait_until(lambda: "Login to x failed" in window.notice.text(), timeout=5000)
    finally:
        view.shutdown()
        qtbot.wait(50)


def test_settings_persist_and_take_effect(
    qtbot, view: TrayApp, parts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    from app.settings import Settings as Saved
    from app.ui.dialogs import SettingsDialog

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    _, logins, _, _ = parts
    dialog = SettingsDialog(view.controller)
    qtbot.add_widget(dialog)
    dialog.start_at_login.setChecked(True)
    dialog.browser.setText("firefox --new-window")
    dialog.margin.setValue(600)
    dialog.notify_expiring.setChecked(False)
    dialog.save()
    saved = Saved.load()
    assert saved.start_at_login and saved.browser_command == "firefox --new-window"
    assert saved.refresh_margin_seconds == 600 and not saved.notify_expiring
    assert logins.margin == timedelta(minutes=10)
    entry = (tmp_path / "xdg" / "autostart" / "kubetray.desktop").read_text()
    assert "Exec=" in entry and "X-GNOME-Autostart-enabled=true" in entry
    # Started with the session, often before the panel: it waits for the tray (--at-login).
    assert entry.split("Exec=")[1].splitlines()[0].endswith(" app --at-login")
    dialog.start_at_login.setChecked(False)
    dialog.save()
    assert not (tmp_path / "xdg" / "autostart" / "kubetray.desktop").exists()


def test_a_failed_browser_is_notified_and_the_entry_offers_the_link(
    qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    from app.oidc.browser import Browser
    from app.store.choice import MEMORY_NOTICE

    monkeypatch.delenv("SSH_CONNECTION", raising=False)
    core, _ = make_core(tmp_path, browser=lambda _c: Browser("false"))
    logins = core.logins
    controller = TrayController(core, Settings(), utcnow)
    controller.store_notice = MEMORY_NOTICE
    view = TrayApp(controller, tray=True)
    try:
        [notice] = [t for t in view.action_texts() if t.startswith("No OS keyring here")]
        assert len(notice) <= 60 and notice.endswith("until the agent stops")
        with run_idp() as idp:
            identity, settings = oidc_identity(idp, grant="authcode")
            logins.identity(settings, identity.name)
            view.refresh()
            view.trigger("Log in")
            qtbot.wait_until(
                lambda: any(n[0] == "browser" for n in view.notifications), timeout=15000
            )
            [(_, title, text)] = [n for n in view.notifications if n[0] == "browser"]
            assert title == f"The browser did not open for {identity.name}"
            # Short, with no URL in it: the link is behind Open login page and Copy link.
            assert text == (
                "Open the login page, or copy the link into a browser. (false exited with code 1)"
            )
            view.refresh()
            texts = view.action_texts()
            assert "Open login page" in texts and "Cancel login" in texts
            view.trigger("Copy link")
            link = QGuiApplication.clipboard().text()
            assert link.startswith(f"{idp.issuer}/auth?")
            view.trigger("Cancel login")
            qtbot.wait_until(lambda: not controller.logging_in(identity.name), timeout=10000)
    finally:
        view.shutdown()
        core.stop()
        qtbot.wait(50)


def test_what_a_login_thread_sends_after_quit_is_dropped(qtbot, parts) -> None:  # type: ignore[no-untyped-def]
    """A notification or device code queued by a login thread just before Quit reaches a closed
    view: it is dropped, not shown on a destroyed tray icon (an exception in Qt's event loop)."""
    core, _, _, _ = parts
    controller = TrayController(core, Settings(), utcnow)
    app = TrayApp(controller, tray=True)

    def login_thread() -> None:  # signals from another thread are queued for the GUI thread
        controller.notify.emit("failure", "dex", "Login failed for dex", "cancelled")
        controller.device_code.emit("dex", "ABCD-EFGH", "https://idp.example/device")

    sender = threading.Thread(target=login_thread)
    sender.start()
    sender.join()
    app.shutdown()
    qtbot.wait(50)  # the queued calls are delivered now
    assert app.notifications == [] and app.device_windows == {}


OFFSCREEN_WARNINGS = {
    # QSystemTrayIcon::show() connects to a signal of the platform's native interface that only
    # the xcb plugin has; Qt asks whatever plugin runs, and offscreen has no such signal.
    "QObject::connect: No such signal QPlatformNativeInterface::systemTrayWindowChanged(QScreen*)",
    # Showing a window (the main window stands in for a tray) asks the plugin to pass size
    # hints to a window manager and to raise it; offscreen has none and says so.
    "This plugin does not support propagateSizeHints()",
    "This plugin does not support raise()",
}
"""Qt warnings the offscreen platform plugin prints whatever kubetray does: ignored, and only
these (a desktop's xcb, wayland, cocoa or windows plugin prints neither)."""


@pytest.mark.parametrize("tray", [True, False], ids=["tray", "window"])
def test_no_qt_warnings_at_start_up(qtbot, qtlog, parts, request, tray: bool) -> None:  # type: ignore[no-untyped-def]
    if not hasattr(request.node, "qt_log_capture"):
        pytest.skip("pytest-qt captures Qt messages only when pytest captures output (no -s)")
    core, _, _, _ = parts
    app = TrayApp(TrayController(core, Settings(), utcnow), tray=tray)
    try:
        qtbot.wait(1100)  # the first tick: the icon and the menu are refreshed once
    finally:
        app.shutdown()
        qtbot.wait(50)
    warnings = [r.message for r in qtlog.records if r.matches_level("WARNING")]
    assert "QSystemTrayIcon::setVisible: No Icon set" not in warnings
    assert [w for w in warnings if w not in OFFSCREEN_WARNINGS] == []


def test_diagnostics_says_which_kubetray_this_is(view: TrayApp) -> None:
    from exec_helper import version

    view.show_diagnostics()
    assert view.diagnostics is not None
    assert version.VERSION in view.diagnostics.windowTitle()
    assert f"kubetray {version.VERSION}" in view.diagnostics.figures.text()
    assert version.VERSION in view.diagnostics.figures.toolTip()
