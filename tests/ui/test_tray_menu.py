"""The tray menu stays a menu (issue 24): one line per identity with its actions in a submenu, no
text wider than MENU_TEXT characters (a browser login's URL once made it 1600 px wide), and an
``&`` in a name shows as ``&`` instead of underlining the next letter."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QMenu

from app.broker.broker import utcnow
from app.compose import Core
from app.oidc.browser import Browser
from app.oidc.settings import OIDCSettings
from app.settings import Settings
from app.ui.controller import TrayController
from app.ui.tray import MENU_TEXT, TrayApp, menu_text
from tests.core import make_core
from tests.idp import run_idp


@pytest.fixture
def core(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Core]:
    monkeypatch.setenv("KUBETRAY_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("SSH_CONNECTION", raising=False)
    made, _ = make_core(tmp_path, browser=lambda _c: Browser("true"))  # "opens", shows nothing
    yield made
    made.stop()


@pytest.fixture
def view(qtbot, core: Core) -> Iterator[TrayApp]:  # type: ignore[no-untyped-def]
    app = TrayApp(TrayController(core, Settings(), utcnow), tray=True)
    yield app
    app.shutdown()
    qtbot.wait(50)


def every_menu(menu: QMenu) -> list[QMenu]:
    subs = [sub for a in menu.actions() if isinstance(sub := a.menu(), QMenu)]
    return [menu, *(m for sub in subs for m in every_menu(sub))]


def test_menu_text_is_one_short_line_with_ampersands_shown() -> None:
    url = "https://idp.example/auth?client_id=kubectl&scope=openid&state=" + "x" * 1500
    text = menu_text(f"Open this URL:\n{url}")
    assert len(text.replace("&&", "&")) == MENU_TEXT and "\n" not in text and "…" in text
    assert text.startswith("Open this URL: https://idp") and text.endswith("xxx")
    assert menu_text("dev&ops") == "dev&&ops"


def test_a_browser_login_with_a_long_url_keeps_the_menu_narrow(qtbot, view: TrayApp, core) -> None:  # type: ignore[no-untyped-def]
    with run_idp() as idp:
        settings = OIDCSettings(
            issuer=idp.issuer,
            client_id="kubectl",
            grant_type="authcode",
            extra_params=(("login_hint", "someone-with-a-long-name&more" * 40),),
        )
        name = "R&D cluster"
        core.logins.identity(settings, name)
        view.refresh()
        view.trigger("Log in", name)
        qtbot.wait_until(lambda: bool(view.controller.login_link(name)), timeout=15000)
        link = view.controller.login_link(name)
        assert link is not None and len(link) > 1000
        view.refresh()
        qtbot.wait_until(
            lambda: f"{name} · waiting for browser" in view.action_texts(deep=False), timeout=5000
        )
        assert {"Open login page", "Copy link", "Cancel login"} <= set(view.action_texts())
        view.menu.popup(QPoint(0, 0))
        view.identity_menus[name].popup(QPoint(0, 0))
        qtbot.wait(100)
        for menu in every_menu(view.menu):
            for action in menu.actions():
                shown = action.text().replace("&&", "&")
                assert len(shown) <= MENU_TEXT, shown
                # No letter of it became a shortcut (Qt would underline it, not show "&").
                assert QKeySequence.mnemonic(action.text()).isEmpty(), action.text()
            assert menu.sizeHint().width() < 600, [a.text() for a in menu.actions()]
        view.menu.hide()
        view.trigger("Cancel login", name)
        qtbot.wait_until(lambda: not view.controller.logging_in(name), timeout=10000)


def test_four_identities_make_a_short_menu(qtbot, view: TrayApp, core) -> None:  # type: ignore[no-untyped-def]
    for team in ("dev", "staging", "prod", "ops"):
        core.logins.identity(
            OIDCSettings(issuer=f"https://{team}.idp.invalid", client_id="c"), team
        )
    view.refresh()
    top = view.action_texts(deep=False)
    assert top == [
        "Open kubetray",
        "dev · needs login",
        "staging · needs login",
        "prod · needs login",
        "ops · needs login",
        "Log in to all",
        "Add cluster…",
        "Settings",
        "Diagnostics",
        "About kubetray",
        "Quit kubetray",
    ]
    shown = [a for a in view.menu.actions() if a.isVisible()]
    assert len(shown) <= 14  # with the separators; it was 23
    sub = view.identity_menus["prod"]
    assert [a.text() for a in sub.actions() if a.text() and a.isVisible()] == [
        "prod.idp.invalid",
        "Log in",
        "Remove identity…",
    ]


def test_on_wayland_copy_link_opens_a_small_window_whose_copy_works(
    qtbot, view: TrayApp, core, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """A Wayland compositor gives the clipboard only to a focused window with recent input:
    from the tray's menu or a notification a copy does nothing there, so the menu offers
    *Copy link…*, which opens a small window of ours with the link and a Copy button."""
    from PySide6.QtGui import QGuiApplication

    monkeypatch.setattr("app.ui.tray.clipboard_from_anywhere", lambda: False)
    with run_idp() as idp:
        settings = OIDCSettings(issuer=idp.issuer, client_id="kubectl", grant_type="authcode")
        core.logins.identity(settings, "team")
        view.refresh()
        view.trigger("Log in", "team")
        qtbot.wait_until(lambda: bool(view.controller.login_link("team")), timeout=15000)
        view.refresh()
        assert "Copy link…" in view.action_texts() and "Copy link" not in view.action_texts()
        QGuiApplication.clipboard().setText("before")
        view.trigger("Copy link…", "team")
        window = view.link_windows["team"]
        assert window.isVisible() and QGuiApplication.clipboard().text() == "before"
        link = view.controller.login_link("team")
        assert window.link.text() == link
        window.copy_button.click()  # a click in our own window: the clipboard is ours
        assert QGuiApplication.clipboard().text() == link
        view.trigger("Cancel login", "team")
        qtbot.wait_until(lambda: "team" not in view.link_windows, timeout=10000)
