"""Without a tray (GNOME without the AppIndicator extension: Fedora's and Debian's default) the
main window is the app: every entry the tray's menu has, for every state an identity can be
in, is a button there that does the same, and closing the window asks (keep running, minimized,
or quit) instead of leaving kubetray running with nothing to see."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QMessageBox, QPushButton

from app.broker.broker import utcnow
from app.compose import Core
from app.oidc.browser import Browser
from app.oidc.settings import OIDCSettings
from app.settings import Settings
from app.ui.controller import TrayController
from app.ui.tray import TrayApp
from app.ui.window import MainWindow
from exec_helper import version
from tests.core import make_core
from tests.idp import run_idp
from tests.ui.modal import when_modal

WINDOW_BUTTON = {
    "Log in": "login_button",
    "Log out": "logout_button",
    "Switch account…": "switch_button",
    "Cancel login": "cancel_button",
    "Open login page": "open_button",
    "Copy link": "copy_link_button",
    "Remove identity…": "remove_button",
    "Log in to all": "all_button",
    "Add cluster…": "add_button",
    "Settings": "settings_button",
    "Diagnostics": "diagnostics_button",
    "About kubetray": "about_button",
    "Quit kubetray": "quit_button",
}
"""Each entry of the tray's menu and the window's button that does the same."""
ONLY_IN_THE_MENU = {"Open kubetray"}
"""What the window needs not offer: it is the window."""


@pytest.fixture
def core(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Core]:
    monkeypatch.setenv("KUBETRAY_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("SSH_CONNECTION", raising=False)
    made, _ = make_core(tmp_path, browser=Browser)
    yield made
    made.stop()


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The person's chosen browser (KUBETRAY_BROWSER): it writes down what it opens."""
    path = tmp_path / "opened.txt"
    path.touch()
    monkeypatch.setenv("KUBETRAY_BROWSER", f'sh -c \'printf "%s\\n" "$0" >> {path}\'')
    return path


@pytest.fixture
def view(qtbot, core: Core) -> Iterator[TrayApp]:  # type: ignore[no-untyped-def]
    app = TrayApp(TrayController(core, Settings(), utcnow), tray=False)
    yield app
    app.shutdown()
    qtbot.wait(50)


def offered(view: TrayApp, name: str) -> set[str]:
    """What the tray's menu offers now: the identity's entries and the global ones."""
    menu = set(view.action_texts(deep=False)) | set(
        a.text() for a in view._actions(view.identity_menus[name]) if a.isEnabled()
    )
    return {t for t in menu if t in WINDOW_BUTTON or t in ONLY_IN_THE_MENU}


def check_the_window_offers(view: TrayApp, name: str) -> MainWindow:
    window = view.main_window
    assert window is not None and window.isVisible() and window.standalone
    window.select(name)
    view.refresh()
    for text in offered(view, name) - ONLY_IN_THE_MENU:
        button: QPushButton = getattr(window, WINDOW_BUTTON[text])
        assert button.isVisible() and button.isEnabled(), text
    return window


def test_every_action_of_the_menu_is_in_the_window_and_does_the_same(
    qtbot, view: TrayApp, core: Core, record: Path
) -> None:  # type: ignore[no-untyped-def]
    with run_idp() as idp:
        core.logins.identity(
            OIDCSettings(issuer=idp.issuer, client_id="kubectl", grant_type="device-code"), "team"
        )
        core.logins.identity(
            OIDCSettings(issuer=idp.issuer, client_id="other", grant_type="device-code"), "lab"
        )
        view.refresh()
        assert view.tray is None
        # Signed out, two of them: Log in, Log in to all, Remove, and the global ones.
        window = check_the_window_offers(view, "team")
        assert {"Log in", "Log in to all", "Quit kubetray"} <= offered(view, "team")
        with qtbot.wait_signal(view.controller.device_code, timeout=15000):
            window.login_button.click()
        # Logging in: Cancel, Open login page, Copy link.
        qtbot.wait_until(lambda: window.cancel_button.isVisible(), timeout=5000)
        window = check_the_window_offers(view, "team")
        assert {"Cancel login", "Open login page", "Copy link"} <= offered(view, "team")
        link = view.controller.login_link("team")
        assert link
        opened = len(record.read_text().splitlines())
        window.open_button.click()
        qtbot.wait_until(lambda: len(record.read_text().splitlines()) > opened, timeout=5000)
        assert record.read_text().splitlines()[-1] == link  # the chosen browser, not xdg-open
        window.copy_link_button.click()
        assert QGuiApplication.clipboard().text() == link
        assert window.notice.text().startswith("Copied the login link")
        with qtbot.wait_signal(view.controller.finished_login, timeout=10000):
            window.cancel_button.click()
        qtbot.wait_until(lambda: window.login_button.isVisible(), timeout=5000)
        assert window.notice.text() == ""  # the link it copied is no use now
        # Log in to all: a login for each signed-out identity, as from the menu.
        window.all_button.click()
        qtbot.wait_until(
            lambda: view.controller.logging_in("team") and view.controller.logging_in("lab"),
            timeout=15000,
        )
        for name in ("team", "lab"):
            view.controller.cancel(name)
        qtbot.wait_until(lambda: not view.controller.logging_in("team"), timeout=10000)
        qtbot.wait_until(lambda: not view.controller.logging_in("lab"), timeout=10000)
        # The global ones.
        window.settings_button.click()
        assert window.settings_dialog is not None and window.settings_dialog.isVisible()
        window.settings_dialog.reject()
        window.add_button.click()
        assert window.add_dialog is not None and window.add_dialog.isVisible()
        window.add_dialog.reject()
        window.diagnostics_button.click()
        assert view.diagnostics is not None and view.diagnostics.isVisible()
        window.about_button.click()  # which kubetray: the version and where it runs from
        assert window.about is not None and window.about.isVisible()
        assert f"kubetray {version.VERSION}" in window.about.text()
        # Remove asks first, then forgets the identity.
        window.select("lab")
        when_modal(lambda box: next(b for b in box.buttons() if b.text() == "Remove").click())
        window.remove_button.click()
        qtbot.wait_until(lambda: core.logins.find("lab") is None, timeout=5000)


@pytest.mark.parametrize(
    ("desktop", "says", "minimized"),
    [("KDE", "minimized (in the taskbar;", True), ("sway", "without a window", False)],
)
def test_closing_the_window_asks_to_keep_running_or_quit(
    qtbot, view: TrayApp, monkeypatch: pytest.MonkeyPatch, desktop: str, says: str, minimized: bool
) -> None:  # type: ignore[no-untyped-def]
    """Keep running says only what is true of the session: a taskbar where the desktop has
    one, neutral words where none is known (sway showed no taskbar it was promised)."""
    monkeypatch.setenv("XDG_CURRENT_DESKTOP", desktop)
    quits: list[bool] = []
    monkeypatch.setattr("app.ui.window.QApplication.quit", lambda: quits.append(True))
    window = view.main_window
    assert window is not None and window.standalone
    asked: list[tuple[str, str]] = []

    def answer(label: str):  # type: ignore[no-untyped-def]
        def click(box: QMessageBox) -> None:
            asked.append((box.text(), box.informativeText()))
            next(b for b in box.buttons() if b.text() == label).click()

        return click

    when_modal(answer("Keep running"))
    window.ask_close()  # what the window manager's close button leads to
    [(text, details)] = asked
    assert text == "There is no system tray here: this window is kubetray."
    assert says in details and ("taskbar" in details) is minimized, details
    assert quits == []  # still running
    if minimized:
        assert window.isMinimized()
    else:
        assert not window.isVisible()  # no window; kubetray again brings it back
        view.bring_forward()
        assert window.isVisible()
    when_modal(answer("Quit kubetray"))
    window.ask_close()
    assert quits == [True]
    window.quit_button.click()  # and Quit is a button of its own
    assert quits == [True, True]


class Host(QObject):
    """A desktop's tray as TrayApp sees it (tray_host.TrayHost), switched by the test."""

    changed = Signal(bool)
    watcher_back = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.available = False

    def set(self, available: bool) -> None:
        self.available = available
        self.changed.emit(available)

    def stop(self) -> None:
        pass


def test_started_at_login_it_waits_for_the_panel_before_the_window_stands_in(
    qtbot, core: Core
) -> None:  # type: ignore[no-untyped-def]
    host = Host()
    view = TrayApp(
        TrayController(core, Settings(), utcnow),
        host=host,
        wait_for_tray=0.5,  # type: ignore[arg-type]
    )
    try:
        assert view.main_window is None  # not yet: the panel may be on its way
        host.set(True)  # it was: the icon, and no window at all
        qtbot.wait(700)
        assert view.tray is not None and view.main_window is None
        host.set(False)  # the panel went away (after TrayHost's grace): the window is the app
        assert view.tray is None and view.main_window is not None
        assert view.main_window.isVisible() and view.main_window.standalone
    finally:
        view.shutdown()
        qtbot.wait(50)
    late = Host()
    view = TrayApp(TrayController(core, Settings(), utcnow), host=late, wait_for_tray=0.3)  # type: ignore[arg-type]
    try:
        qtbot.wait_until(lambda: view.main_window is not None, timeout=3000)  # no panel came
        assert view.main_window is not None and view.main_window.standalone
    finally:
        view.shutdown()
        qtbot.wait(50)


def test_open_login_page_uses_the_browser_chosen_now(
    qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """README: every Open uses the chosen browser, also after Settings → Browser changed during
    the login (it used to keep the one the login began with)."""
    monkeypatch.setenv("KUBETRAY_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("KUBETRAY_BROWSER", raising=False)
    monkeypatch.delenv("SSH_CONNECTION", raising=False)
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    settings = Settings(browser_command=f'sh -c \'printf "%s\\n" "$0" >> {first}\'')
    core, _ = make_core(
        tmp_path, browser=lambda command: Browser(command or settings.browser_command or None)
    )
    view = TrayApp(TrayController(core, settings, utcnow), tray=False)
    try:
        with run_idp() as idp:
            core.logins.identity(
                OIDCSettings(issuer=idp.issuer, client_id="kubectl", grant_type="device-code"),
                "team",
            )
            view.refresh()
            with qtbot.wait_signal(view.controller.device_code, timeout=15000):
                view.controller.log_in("team")
            link = view.controller.login_link("team")
            assert link
            settings.browser_command = f'sh -c \'printf "%s\\n" "$0" >> {second}\''
            view.open_login_page("team")
            qtbot.wait_until(lambda: second.is_file(), timeout=5000)
            assert second.read_text().splitlines() == [link]
            with qtbot.wait_signal(view.controller.finished_login, timeout=10000):
                view.controller.cancel("team")
    finally:
        view.shutdown()
        core.stop()
        qtbot.wait(50)
