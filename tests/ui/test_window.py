"""The main window (pytest-qt, offscreen): every context of a real multi-file KUBECONFIG grouped
by identity, live updates, search, and the actions on a row."""

import os
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QSystemTrayIcon

from app.broker.broker import utcnow
from app.compose import Core
from app.kubeconfig.uses import contexts_by_identity
from app.oidc.settings import OIDCSettings
from app.oidc.tokens import TokenSet
from app.settings import Settings
from app.static_credentials import StoredCredential, StoredCredentials
from app.store.memory_store import MemorySecretStore
from app.ui.controller import TrayController
from app.ui.tray import TrayApp
from app.ui.views import DeviceCodeWindow, DiagnosticsWindow
from app.ui.window import OTHER, MainWindow
from exec_helper.options import resolve
from tests.core import give_tokens, make_core
from tests.idp import run_idp

HELPER = "/opt/kubetray/kubetray-exec"


def exec_user(name: str, args: list[str]) -> dict[str, object]:
    return {
        "name": name,
        "user": {
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": HELPER,
                "args": args,
                "interactiveMode": "IfAvailable",
            }
        },
    }


def write_kubeconfig(tmp_path: Path, issuer: str) -> tuple[str, list[str]]:
    """Two files, as KUBECONFIG lists them: three kubetray users and one of another kind."""
    oidc_args = [
        f"--oidc-issuer-url={issuer}",
        "--oidc-client-id=kubectl",
        "--grant-type=device-code",
    ]
    first = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "eu-1", "cluster": {"server": "https://eu-1.example:6443"}},
            {"name": "us-1", "cluster": {"server": "https://us-1.example:6443"}},
        ],
        "users": [exec_user("ops", ["--stored", "ops"]), exec_user("team", oidc_args)],
        "contexts": [
            {"name": "prod-eu", "context": {"cluster": "eu-1", "user": "ops"}},
            {"name": "prod-us", "context": {"cluster": "us-1", "user": "ops"}},
        ],
    }
    second = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "lab", "cluster": {"server": "https://lab.example:6443"}}],
        "users": [
            {"name": "admin", "user": {"token": "static"}},
        ],
        "contexts": [
            {"name": "dev", "context": {"cluster": "lab", "user": "team"}},
            {"name": "lab-admin", "context": {"cluster": "lab", "user": "admin"}},
        ],
    }
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(yaml.safe_dump(first))
    b.write_text(yaml.safe_dump(second))
    return os.pathsep.join([str(a), str(b)]), oidc_args


@pytest.fixture
def world(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Core, StoredCredentials, MemorySecretStore]]:
    monkeypatch.setenv("KUBETRAY_CONFIG_DIR", str(tmp_path / "config"))
    store = MemorySecretStore()
    core, stored = make_core(tmp_path, store, contexts=contexts_by_identity)
    yield core, stored, store
    core.stop()


def make_view(
    qtbot, world, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, issuer: str
) -> TrayApp:  # type: ignore[no-untyped-def]
    core, _, _ = world
    kubeconfig, oidc_args = write_kubeconfig(tmp_path, issuer)
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    settings = OIDCSettings.from_options(resolve(oidc_args))
    core.logins.identity(settings, "team")
    controller = TrayController(core, Settings(), utcnow)
    return TrayApp(controller, tray=True)


@pytest.fixture
def view(qtbot, world, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TrayApp]:  # type: ignore[no-untyped-def]
    app = make_view(qtbot, world, tmp_path, monkeypatch, "https://idp.invalid")
    yield app
    app.shutdown()
    qtbot.wait(50)


def test_contexts_of_every_file_grouped_by_identity(qtbot, view: TrayApp, world) -> None:  # type: ignore[no-untyped-def]
    _, stored, _ = world
    now = datetime.now(UTC)
    stored.save(
        StoredCredential(
            name="ops", token="t", not_after=now + timedelta(hours=3), subject="CN=ops"
        ),
        now,
    )
    view.show_main_window()
    window = view.main_window
    assert isinstance(window, MainWindow) and window.isVisible()
    rows = window.rows()
    names = [r[0] for r in rows]
    # Identities in bold rows, their contexts under them with their clusters, from both files.
    team = names.index("team")
    assert names[team + 1] == "  dev" and rows[team + 1][4] == "lab"
    assert rows[team][2] == "signed out"
    ops = names.index("ops")
    assert rows[ops][1] == "CN=ops" and rows[ops][2] == "signed in"
    assert rows[ops][3].startswith("2h 59m left")
    assert [r[0] for r in rows[ops + 1 : ops + 3]] == ["  prod-eu", "  prod-us"]
    assert [r[4] for r in rows[ops + 1 : ops + 3]] == ["eu-1", "us-1"]
    # A context kubetray does not sign in is listed too, under its own heading.
    other = names.index(OTHER)
    assert names[other + 1] == "  lab-admin" and rows[other + 1][1] == "user admin"
    assert window.summary.text() == "2 identities, 4 kubeconfig contexts"
    assert not window.search.isVisible()  # few rows: no search field


def test_copy_a_kubectl_line_and_open_diagnostics(qtbot, view: TrayApp) -> None:  # type: ignore[no-untyped-def]
    view.show_main_window()
    window = view.main_window
    assert window is not None
    window.select("dev")
    assert window.copy_button.isEnabled()
    window.copy_button.click()
    assert QGuiApplication.clipboard().text() == "kubectl --context dev get ns"
    assert "kubectl --context dev get ns" in window.notice.text()
    window.select(OTHER)
    assert not window.copy_button.isEnabled() and not window.login_button.isEnabled()
    window.select("team")  # an identity: its first context
    window.copy_button.click()
    assert QGuiApplication.clipboard().text() == "kubectl --context dev get ns"
    window.diagnostics_button.click()
    assert isinstance(view.diagnostics, DiagnosticsWindow) and view.diagnostics.isVisible()


def test_window_updates_live(qtbot, view: TrayApp, world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    core, stored, store = world
    view.show_main_window()
    window = view.main_window
    assert window is not None
    # Named in the kubeconfig, nothing stored yet: listed, and said to be kubetray's.
    rows = {r[0]: r for r in window.rows()}
    assert "ops" not in rows and rows["  prod-eu"][1] == "user ops (kubetray, not used yet)"
    now = datetime.now(UTC)
    stored.save(StoredCredential(name="ops", token="t"), now)
    qtbot.wait_until(lambda: "ops" in [r[0] for r in window.rows()], timeout=3000)
    # A token arrives for the OIDC identity: the core says so, and the row follows.
    tokens = TokenSet(
        expires_at=now + timedelta(hours=1),
        issued_at=now,
        id_token="t",
        claims={"email": "alice@example.test"},
    )
    give_tokens(core, store, "team", tokens)
    qtbot.wait_until(lambda: ("team", "alice@example.test") in [r[:2] for r in window.rows()])
    window.select("team")
    assert window.logout_button.isEnabled() and window.login_button.text() == "Log in again"
    # A new context in the second file shows up without reopening the window.
    second = Path(os.environ["KUBECONFIG"].split(os.pathsep)[1])
    doc = yaml.safe_load(second.read_text())
    doc["contexts"].append({"name": "dev-2", "context": {"cluster": "lab", "user": "team"}})
    second.write_text(yaml.safe_dump(doc))
    qtbot.wait_until(lambda: "  dev-2" in [r[0] for r in window.rows()], timeout=5000)
    assert window.selected_text() == "team"  # the selection survived


def test_search_when_there_are_many(qtbot, view: TrayApp, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    second = Path(os.environ["KUBECONFIG"].split(os.pathsep)[1])
    doc = yaml.safe_load(second.read_text())
    for i in range(10):
        doc["contexts"].append({"name": f"lab-{i}", "context": {"cluster": "lab", "user": "admin"}})
    second.write_text(yaml.safe_dump(doc))
    view.show_main_window()
    window = view.main_window
    assert window is not None and window.search.isVisible()
    window.search.setText("eu-1")  # a cluster finds its contexts, under their identity
    assert [r[0] for r in window.rows()] == [OTHER, "  prod-eu"]
    window.search.setText("team")  # an identity shows all its contexts
    assert [r[0] for r in window.rows()] == ["team", "  dev"]
    window.search.clear()
    assert len(window.rows()) == 2 + 1 + 3 + 10


def test_left_click_menu_entry_and_second_start_open_it(qtbot, view: TrayApp) -> None:  # type: ignore[no-untyped-def]
    assert view.action_texts()[0] == "Open kubetray"
    assert view.tray is not None and not view.tray.icon().isNull()
    view.tray.activated.emit(QSystemTrayIcon.ActivationReason.Context)
    assert view.main_window is None  # right click: the menu, not the window
    view.tray.activated.emit(QSystemTrayIcon.ActivationReason.Trigger)
    assert view.main_window is not None and view.main_window.isVisible()
    view.main_window.close()
    view.trigger("Open kubetray")
    assert view.main_window.isVisible()
    view.main_window.close()
    view.bring_forward()  # what a second `kubetray` asks for
    assert view.main_window.isVisible()


def test_log_in_from_the_window_starts_a_login(
    qtbot, world, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    with run_idp() as idp:
        view = make_view(qtbot, world, tmp_path, monkeypatch, idp.issuer)
        try:
            view.show_main_window()
            window = view.main_window
            assert window is not None
            window.select("dev")  # a context: its identity logs in
            assert window.login_button.isEnabled() and not window.logout_button.isEnabled()
            with qtbot.wait_signal(view.controller.device_code, timeout=15000):
                window.login_button.click()
            assert isinstance(view.device_windows["team"], DeviceCodeWindow)
            qtbot.wait_until(lambda: not window.login_button.isEnabled(), timeout=3000)
            view.controller.cancel("team")
        finally:
            view.shutdown()
            qtbot.wait(50)


# -- issue 24: the window as a person uses it ------------------------------------------------


def test_a_minimized_window_comes_back(qtbot, view: TrayApp) -> None:  # type: ignore[no-untyped-def]
    view.show_main_window()
    window = view.main_window
    assert window is not None
    window.showMinimized()
    assert window.isMinimized()
    view.bring_forward()  # a second `kubetray`, or the tray's left click
    assert not window.isMinimized() and window.isVisible()
    window.showMinimized()
    view.tray.activated.emit(QSystemTrayIcon.ActivationReason.Trigger)  # type: ignore[union-attr]
    assert not window.isMinimized() and window.isVisible()


def test_first_row_selected_hint_icon_and_plurals(qtbot, view: TrayApp) -> None:  # type: ignore[no-untyped-def]
    view.show_main_window()
    window = view.main_window
    assert window is not None
    assert window.selected_text() == window.rows()[0][0] == "team"
    assert window.summary.text() == "1 identity, 4 kubeconfig contexts"
    # The selected row says what to do, and the buttons do it.
    assert "is signed out: click <b>Log in</b>" in window.detail.text()
    assert window.login_button.isEnabled() and window.remove_button.isEnabled()
    window.select(OTHER)
    assert "do not use kubetray" in window.detail.text()
    assert not window.windowIcon().isNull()
    for button in (window.add_button, window.settings_button, window.diagnostics_button):
        assert button.isVisible() and button.isEnabled()
    # Remove is in the second row, at the far end: not next to Switch account.
    assert window.remove_button.parentWidget() is window
    assert window.remove_button.y() > window.switch_button.y()


def test_add_cluster_and_settings_open_from_the_window(qtbot, view: TrayApp) -> None:  # type: ignore[no-untyped-def]
    view.show_main_window()
    window = view.main_window
    assert window is not None
    window.add_button.click()
    assert window.add_dialog is not None and window.add_dialog.isVisible()
    window.add_dialog.reject()
    window.settings_button.click()
    assert window.settings_dialog is not None and window.settings_dialog.isVisible()
    window.settings_dialog.reject()


def test_a_failed_login_says_why_in_its_row(qtbot, view: TrayApp) -> None:  # type: ignore[no-untyped-def]
    view.show_main_window()
    window = view.main_window
    assert window is not None
    with qtbot.wait_signal(view.controller.finished_login, timeout=15000):
        view.controller.log_in("team")  # idp.invalid: no such host
    view.refresh()
    row = next(r for r in window.rows() if r[0] == "team")
    assert row[2].startswith("login failed: ") and "idp.invalid" in row[2]
    assert "failed: failed" not in row[2]  # said once (issue 39 read "failed: failed:")
    window.select("team")
    assert "idp.invalid" in window.detail.text()


def test_remove_asks_first(qtbot, view: TrayApp) -> None:  # type: ignore[no-untyped-def]
    from tests.ui.modal import reject_noting, when_modal

    view.show_main_window()
    window = view.main_window
    assert window is not None
    window.select("team")
    asked: list[str] = []
    when_modal(reject_noting(asked))
    window.remove_button.click()
    assert asked and "Remove team from kubetray?" in asked[0] and "contexts stay" in asked[0]
    assert "team" in [i.name for i in view.controller.identities()]  # cancelled: still there

    def remove(box) -> None:  # type: ignore[no-untyped-def]
        next(b for b in box.buttons() if b.text() == "Remove").click()

    when_modal(remove)
    window.remove_button.click()
    qtbot.wait_until(lambda: "team" not in [i.name for i in view.controller.identities()])


def test_switch_account_asks_when_the_provider_cannot_offer_another(
    qtbot, world, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    from tests import failing
    from tests.ui.modal import reject_noting, when_modal

    with failing.json_server(200, failing.DISCOVERY) as issuer:  # no prompt_values_supported
        view = make_view(qtbot, world, tmp_path, monkeypatch, issuer)
        try:
            view.show_main_window()
            window = view.main_window
            assert window is not None
            window.select("team")
            asked: list[str] = []
            when_modal(reject_noting(asked))
            with qtbot.wait_signal(view.controller.switch_checked, timeout=10000):
                window.switch_button.click()
            qtbot.wait_until(lambda: bool(asked), timeout=5000)
            assert "cannot offer to pick another account" in asked[0]
            assert "log out at the provider's page" in asked[0].lower()
            assert not view.controller.logging_in("team")  # nothing started behind the question
        finally:
            view.shutdown()
            qtbot.wait(50)


def test_a_login_in_progress_can_be_finished_or_cancelled_from_the_window(
    qtbot, world, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    record = tmp_path / "opened.txt"
    record.touch()
    # The person's chosen browser (KUBETRAY_BROWSER): it writes down what it was asked to open.
    monkeypatch.setenv("KUBETRAY_BROWSER", f'sh -c \'printf "%s\\n" "$0" >> {record}\'')
    from app.oidc.browser import Browser

    core, stored = make_core(tmp_path / "core", browser=Browser, contexts=contexts_by_identity)
    with run_idp() as idp:
        view = make_view(qtbot, (core, stored, None), tmp_path, monkeypatch, idp.issuer)
        try:
            view.show_main_window()
            window = view.main_window
            assert window is not None
            window.select("team")
            with qtbot.wait_signal(view.controller.device_code, timeout=15000):
                window.login_button.click()
            qtbot.wait_until(lambda: window.cancel_button.isVisible(), timeout=3000)
            link = view.controller.login_link("team")
            assert link
            assert not window.login_button.isVisible()
            for button in (window.cancel_button, window.open_button, window.copy_link_button):
                assert button.isEnabled(), button.text()
            assert link in window.detail.text()
            window.copy_link_button.click()
            assert QGuiApplication.clipboard().text() == link
            before = record.read_text().splitlines()
            window.open_button.click()
            qtbot.wait_until(
                lambda: len(record.read_text().splitlines()) > len(before), timeout=5000
            )
            assert record.read_text().splitlines()[len(before) :] == [link]
            with qtbot.wait_signal(view.controller.finished_login, timeout=10000):
                window.cancel_button.click()
            view.refresh()
            qtbot.wait_until(lambda: window.login_button.isVisible(), timeout=3000)
            assert window.login_button.isEnabled() and not window.cancel_button.isVisible()
        finally:
            view.shutdown()
            core.stop()
            qtbot.wait(50)


def test_the_tray_asks_the_core_only_when_told_or_when_a_minute_turns(
    qtbot, view: TrayApp, world, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """The core says what changed (issue 39): idle, the tray does not ask for status every
    second; a change in the core, or a kubeconfig written by another program, shows at once."""
    core, _, store = world
    now = datetime.now(UTC)
    tokens = TokenSet(  # 30 min 40 s left: the next minute turns in 40 s
        expires_at=now + timedelta(minutes=30, seconds=40),
        issued_at=now,
        id_token="t",
        claims={"email": "alice@example.test"},
    )
    give_tokens(core, store, "team", tokens)
    view.show_main_window()
    window = view.main_window
    assert window is not None
    qtbot.wait_until(lambda: ("team", "alice@example.test") in [r[:2] for r in window.rows()])
    qtbot.wait(500)  # the look the tokens' arrival asked for
    asked: list[float] = []
    status = view.controller.identities

    def counted() -> list:  # type: ignore[type-arg]
        asked.append(time.monotonic())
        return status()

    view.controller.identities = counted  # type: ignore[method-assign]
    qtbot.wait(3000)
    assert asked == []  # idle: asked every second before

    def burst() -> None:  # a kubectl loop's calls, each a change: one look, or two
        for _ in range(30):
            core.logins.changes.tell()

    threading.Thread(target=burst).start()
    qtbot.wait_until(lambda: len(asked) >= 1, timeout=2000)
    qtbot.wait(500)
    assert len(asked) <= 2, asked
    # Another program renames a context in a kubeconfig file (written whole, renamed in).
    first = Path(os.environ["KUBECONFIG"].split(os.pathsep)[0])
    text = first.read_text().replace("prod-us", "prod-west")
    (first.parent / "new").write_text(text)
    os.replace(first.parent / "new", first)
    qtbot.wait_until(lambda: "  prod-west" in [r[0] for r in window.rows()], timeout=3000)
    # And edits it in place, as `kubectl config` does.
    first.write_text(first.read_text().replace("prod-west", "prod-east"))
    qtbot.wait_until(lambda: "  prod-east" in [r[0] for r in window.rows()], timeout=3000)


def test_the_next_look_falls_when_the_views_text_would_change() -> None:
    from app.model import IdentityStatus, State
    from app.ui.tray import IDLE_LOOK, next_change

    now = datetime(2026, 1, 1, tzinfo=UTC)
    margin = timedelta(seconds=90)

    def one(left: timedelta | None) -> list[IdentityStatus]:
        expires = (now + left).isoformat() if left is not None else None
        return [IdentityStatus(name="x", kind="oidc", state=State.READY, expires=expires)]

    assert next_change([], now, margin) == IDLE_LOOK
    assert next_change(one(None), now, margin) == IDLE_LOOK  # never expires
    assert next_change(one(timedelta(minutes=30, seconds=40)), now, margin) == pytest.approx(40.05)
    assert next_change(one(timedelta(seconds=45)), now, margin) == 1.0  # "45s left"
    assert next_change(one(timedelta(seconds=-5)), now, margin) == IDLE_LOOK  # "expired" stays
    # 2 min 10 s left: it enters the 90 s margin ("expiring") in 40 s, its minute turns in 10 s
    assert next_change(one(timedelta(minutes=2, seconds=10)), now, margin) == pytest.approx(10.05)
    assert next_change(one(timedelta(minutes=2, seconds=50)), now, margin) == pytest.approx(50.05)
    assert next_change(one(timedelta(minutes=2, seconds=5)), now, timedelta(seconds=123)) == (
        pytest.approx(2.05)
    )
