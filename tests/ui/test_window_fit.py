"""Every window fits a 1280x720 screen whatever it shows: issue 30 measured the main window at
1481 to 1890 px wide on a 1280 px screen with a long login URL or error, with *Remove
identity…* cut off. Long links are elided (whole in the tooltip and behind the link), long
words in errors break."""

import html
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QLabel, QPushButton, QWidget

from app.broker.broker import utcnow
from app.compose import Core
from app.errors import AppError
from app.model import OIDC, Caller, CallRecord, IdentityStatus, Question, State
from app.settings import Settings
from app.ui.controller import LoginFacts, TrayController
from app.ui.dialogs import AddClusterDialog, ConsentDialog, LoginDialog
from app.ui.text import elide
from app.ui.tray import TrayApp
from app.ui.views import DeviceCodeWindow, DiagnosticsWindow, LinkWindow
from app.ui.window import LINK_TEXT
from tests.core import make_core

SCREEN = (1280, 720)
URL = "https://idp.example.com/realms/engineering/protocol/openid-connect/auth?" + "&".join(
    f"param{i}=" + "v" * 40 for i in range(40)
)
TOKEN = "eyJhbGciOiJSUzI1NiJ9" + "x" * 300
ERROR = (
    f"the provider refused the token request (invalid_grant): {TOKEN} was not accepted at "
    f"{URL[:300]}; " + "and the reason goes on " * 12
)


@pytest.fixture
def controller(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TrayController]:
    monkeypatch.setenv("KUBETRAY_CONFIG_DIR", str(tmp_path / "config"))
    core: Core
    core, _ = make_core(tmp_path)
    yield TrayController(core, Settings(), utcnow)
    core.stop()


def fits(window: QWidget) -> None:
    """Laid out as small as it may be, it is within the screen, and so is every button."""
    window.show()
    hint = window.minimumSizeHint()
    assert hint.width() <= SCREEN[0] and hint.height() <= SCREEN[1], (type(window), hint)
    window.resize(min(window.sizeHint().width(), SCREEN[0]), min(hint.height(), SCREEN[1]))
    for button in window.findChildren(QPushButton):
        if button.isVisible():
            right = button.mapTo(window, button.rect().topRight()).x()
            assert right <= window.width(), (button.text(), right, window.width())


def link_lines(label: QLabel) -> int:
    """On how many lines ``label`` shows its (elided) link, laid out as wide as it is."""
    doc = QTextDocument()
    doc.setDefaultFont(label.font())
    doc.setHtml(label.text())
    doc.setTextWidth(label.contentsRect().width())
    doc.size()  # lays it out
    text = doc.toPlainText()
    first = text.index(elide(URL, LINK_TEXT))
    last = first + LINK_TEXT - 1
    spans = []  # (start, end) in the document of every laid-out line
    block = doc.begin()
    while block.isValid():
        layout = block.layout()
        for i in range(layout.lineCount()):
            line = layout.lineAt(i)
            spans.append((block.position() + line.textStart(), line.textLength()))
        block = block.next()
    return sum(1 for at, length in spans if at <= last and first < at + length)


def long_statuses() -> list[IdentityStatus]:
    return [
        IdentityStatus(
            name="team-" + "platform" * 8,
            kind=OIDC,
            state=State.LOGGING_IN,
            issuer="https://idp.example.com",
            clusters=("https://" + "api" * 30 + ".example:6443",),
        ),
        IdentityStatus(
            name="ops",
            kind=OIDC,
            state=State.NEEDS_LOGIN,
            issuer="https://idp.example.com",
            error=ERROR,
        ),
    ]


def test_the_main_window_with_a_long_link_and_a_long_error(
    qtbot, controller: TrayController, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    statuses = long_statuses()
    monkeypatch.setattr(controller, "identities", lambda: statuses)
    monkeypatch.setattr(controller, "login_link", lambda name: URL if name != "ops" else None)
    view = TrayApp(controller, tray=False)  # no tray: the window has every button
    try:
        window = view.main_window
        assert window is not None
        view.refresh()
        window.select(statuses[0].name)  # the login in flight: its link in the detail line
        shown = window.detail.text()
        assert "…" in shown and html.escape(URL) in shown  # elided, the whole link behind it
        assert link_lines(window.detail) == 1  # never cut mid-URL (the fresh-eyes run: it was)
        fits(window)
        assert link_lines(window.detail) == 1
        window.select("ops")  # the long error, whole in the detail line
        assert "invalid_grant" in window.detail.text()
        fits(window)
        view.show_notification("failure", "ops", "Login to ops failed", ERROR)
        qtbot.wait_until(lambda: "Login to ops failed" in window.notice.text(), timeout=5000)
        fits(window)
        texts = view.action_texts()
        for text in texts:  # the menu too: one short line each
            assert len(text) <= 60, text
        assert any(t.startswith("Used for apiapi") for t in texts)  # the clusters it served
    finally:
        view.shutdown()
        qtbot.wait(50)


def test_the_other_windows_with_long_texts(qtbot, controller: TrayController) -> None:  # type: ignore[no-untyped-def]
    windows: list[QWidget] = [
        DeviceCodeWindow(controller, "team", "ABCD-EFGH", URL),
        LinkWindow(controller, "team", URL),
        LoginDialog(
            LoginFacts("team-" + "x" * 200, "idp.example.com", "kubectl"), "Password", True
        ),
        ConsentDialog(controller, Question("devvm-" + "y" * 200, URL[:400], "alice")),
    ]
    add = AddClusterDialog(controller)
    add._show_probe(AppError(ERROR, hint=f"see {URL}"))
    windows.append(add)
    for window in windows:
        qtbot.add_widget(window)
        fits(window)


def test_diagnostics_with_a_long_error(qtbot, controller: TrayController, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    record = CallRecord(
        time=datetime.now(UTC),
        identity="ops",
        cluster=URL[:200],
        caller=Caller(pid=42, name="kubectl", parents=("bash",) * 20),
        ok=False,
        error=ERROR,
        latency_ms=3.2,
    )
    monkeypatch.setattr(controller, "calls", lambda limit: [record])
    monkeypatch.setattr(controller, "identities", long_statuses)
    window = DiagnosticsWindow(controller)
    qtbot.add_widget(window)
    window.select(0)
    fits(window)


def test_without_a_tray_the_notice_points_to_the_window_s_buttons(
    qtbot, controller: TrayController, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    statuses = long_statuses()
    monkeypatch.setattr(controller, "identities", lambda: statuses)
    monkeypatch.setattr(controller, "login_link", lambda name: URL)
    view = TrayApp(controller, tray=False)
    try:
        window = view.main_window
        assert window is not None and not view.desktop_notifications.available()
        view.refresh()
        window.select("ops")
        name = statuses[0].name
        view.show_notification("browser", name, f"The browser did not open for {name}", "Open")
        qtbot.wait_until(lambda: "did not open" in window.notice.text(), timeout=5000)
        notice = window.notice.text()
        assert "are the buttons above" in notice and "menu" not in notice
        assert window.selected_text() == name  # the buttons act on it
        assert window.open_button.isVisible() and window.copy_link_button.isVisible()
        view.show_notification("waiting", "gone", "kubectl needs you to log in to gone", "x")
        qtbot.wait_until(lambda: "gone" in window.notice.text(), timeout=5000)
        assert "(Select gone: Open login page and Copy link are the buttons above.)" in (
            window.notice.text()
        )
        fits(window)
    finally:
        view.shutdown()
        qtbot.wait(50)


def test_without_a_tray_the_notice_goes_once_the_login_is_done(
    qtbot, controller: TrayController, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """The window's notice stands in for a notification, and goes when one would: "the
    browser did not open … the buttons above" must not stay once those buttons are gone."""
    statuses = long_statuses()
    monkeypatch.setattr(controller, "identities", lambda: statuses)
    monkeypatch.setattr(controller, "login_link", lambda name: URL)
    view = TrayApp(controller, tray=False)
    try:
        window = view.main_window
        assert window is not None and not view.desktop_notifications.available()
        name, other = statuses[0].name, statuses[1].name
        view.show_notification("browser", name, f"The browser did not open for {name}", "Open")
        qtbot.wait_until(lambda: "did not open" in window.notice.text(), timeout=5000)
        controller.finished_login.emit(other, "")  # another identity's login: not this one's
        qtbot.wait(50)
        assert "did not open" in window.notice.text()
        with qtbot.wait_signal(controller.finished_login, timeout=5000):
            controller.finished_login.emit(name, "")  # signed in (or cancelled)
        qtbot.wait_until(lambda: window.notice.text() == "", timeout=5000)
        view.show_notification("browser", other, f"The browser did not open for {other}", "x")
        qtbot.wait_until(lambda: other in window.notice.text(), timeout=5000)
        said = window.notice.text()
        view.withdraw_notification(name)  # about another identity: this notice stays
        assert window.notice.text() == said
    finally:
        view.shutdown()
        qtbot.wait(50)
