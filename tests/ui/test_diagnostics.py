"""Diagnostics (pytest-qt, offscreen): it opens within the screen, its columns fit the window,
and a selected call shows its whole caller chain and error below the table."""

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from PySide6.QtCore import QRect
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QHeaderView

from app.broker.broker import utcnow
from app.compose import Core
from app.model import Caller, CallRecord
from app.settings import Settings
from app.ui.controller import TrayController
from app.ui.text import call_details, caller_chain
from app.ui.views import SCREEN_SHARE, DiagnosticsWindow
from tests.core import make_core

T0 = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)
LONG_ERROR = (
    "cannot find the provider's host idp.corp.example (the DNS lookup failed); check the issuer "
    "URL for a typo; if the provider is internal, connect the VPN " + "and more " * 30
).strip()
LOCAL = CallRecord(
    time=T0,
    identity="prod",
    cluster="eu-1",
    caller=Caller(
        pid=4242,
        name="kubetray-exec",
        parents=("kubectl", "bash", "tmux: server", "systemd"),
        parent_pid=4200,
    ),
    ok=True,
    error=None,
    latency_ms=7.5,
)
REMOTE = CallRecord(
    time=T0 + timedelta(seconds=5),
    identity="prod",
    cluster="eu-1",
    caller=Caller(pid=5151, name="ssh", parent_pid=777, remote="bastion"),
    ok=False,
    error=LONG_ERROR,
    latency_ms=3012.0,
)


@pytest.fixture
def core(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Core]:
    monkeypatch.setenv("KUBETRAY_CONFIG_DIR", str(tmp_path / "config"))
    core, _ = make_core(tmp_path)
    yield core
    core.stop()


@pytest.fixture
def window(qtbot, core: Core) -> DiagnosticsWindow:  # type: ignore[no-untyped-def]
    core.broker.record(LOCAL)
    core.broker.record(REMOTE)
    controller = TrayController(core, Settings(), utcnow)
    w = DiagnosticsWindow(controller)
    qtbot.add_widget(w)
    w.show()
    qtbot.wait_exposed(w)
    return w


def test_it_opens_within_the_screen_and_its_columns_fit(window: DiagnosticsWindow) -> None:
    screen = window.screen() or QGuiApplication.primaryScreen()
    room: QRect = screen.availableGeometry()
    assert room.contains(window.frameGeometry()), (room, window.frameGeometry())
    assert window.width() <= room.width() * SCREEN_SHARE + 1
    assert window.height() <= room.height() * SCREEN_SHARE + 1
    centre = window.frameGeometry().center()
    assert abs(centre.x() - room.center().x()) <= 2 and abs(centre.y() - room.center().y()) <= 2
    table = window.table
    assert table.rowCount() == 2
    # The long error and caller chain are elided, not a reason to scroll sideways.
    assert table.horizontalScrollBar().maximum() == 0
    header = table.horizontalHeader()
    assert header.sectionResizeMode(window.CALLER) == QHeaderView.ResizeMode.Stretch
    assert table.columnWidth(window.RESULT) <= window.width() // 4
    assert table.item(0, window.RESULT).toolTip() == f"failed: {LONG_ERROR}"


def test_a_selected_call_shows_its_whole_chain_and_error(
    qtbot, window: DiagnosticsWindow, core: Core
) -> None:  # type: ignore[no-untyped-def]
    assert window.detail.isReadOnly() and window.detail.toPlainText() == ""
    window.select(1)  # the local call (newest first)
    text = window.detail.toPlainText()
    assert "kubetray-exec (pid 4242) ← kubectl (pid 4200) ← bash ← tmux: server ← systemd" in text
    assert "Identity\nprod\nCluster\neu-1" in text  # (a table's cells, as plain text)
    assert "Result\nok in 7.5 ms" in text
    window.select(0)  # the forwarded one, with its long error in full
    text = window.detail.toPlainText()
    assert "Caller\nremote: bastion (over SSH)" in text
    assert "through the local ssh (pid 5151); the helper's parent on the host: pid 777" in text
    assert f"Error\n{LONG_ERROR}" in text
    # A new call arrives: the table refills, the selected call stays selected and shown.
    core.broker.record(
        CallRecord(T0 + timedelta(seconds=9), "dev", "lab", Caller(pid=1), True, None, 1)
    )
    window.refresh()
    assert [i.row() for i in window.table.selectionModel().selectedRows()] == [1]
    assert f"Error\n{LONG_ERROR}" in window.detail.toPlainText()


def test_call_text() -> None:
    assert caller_chain(Caller(pid=9)) == "pid 9"
    assert caller_chain(Caller(pid=None)) == "unknown"
    assert caller_chain(REMOTE.caller) == "remote: bastion (over SSH)"
    assert caller_chain(Caller(pid=3, name="kubectl")) == "kubectl (pid 3)"
    details = dict(call_details(LOCAL))
    assert details["Time"].startswith("2025-03-01 ")
    assert "Error" not in details


def test_a_signed_out_identity_has_no_expiry_to_speak_of(
    core: Core, window: DiagnosticsWindow
) -> None:
    from app.oidc.settings import OIDCSettings

    core.logins.identity(OIDCSettings(issuer="https://idp.invalid", client_id="c"), "dev")
    window.refresh()
    [line] = [t for t in window.identities.toPlainText().splitlines() if t.startswith("dev:")]
    assert line == "dev: signed out"  # not "signed out, no expiry"


def test_a_blocked_login_says_why_not_only_signed_out(
    core: Core, window: DiagnosticsWindow, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.model import IdentityStatus, State

    why = "the last login failed: the provider refused the code (try again in 2 min)"
    blocked = IdentityStatus(name="dev", kind="oidc", state=State.NEEDS_LOGIN, error=why)
    monkeypatch.setattr(window._controller, "identities", lambda: [blocked])
    window.refresh()
    [line] = [t for t in window.identities.toPlainText().splitlines() if t.startswith("dev:")]
    assert line == f"dev: signed out: {why}"
