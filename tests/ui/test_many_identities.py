"""Hundreds of identities (issue 33): the tray menu lists the few that matter and a way to the
rest, the main window filters, and a change on one identity shows on its row and its menu
line without the rest being touched."""

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication

from app.broker.broker import utcnow
from app.compose import Core
from app.oidc.settings import OIDCSettings
from app.oidc.tokens import TokenSet
from app.settings import Settings
from app.static_credentials import StoredCredential
from app.store.memory_store import MemorySecretStore
from app.ui.controller import TrayController
from app.ui.tray import MENU_IDENTITIES, TrayApp
from tests.core import give_tokens, make_core

N = 500
PEOPLE = ("dev", "staging", "prod")
"""OIDC identities, signed out: what the person must act on among N - 3 stored tokens."""


@pytest.fixture
def world(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Core, MemorySecretStore]]:
    monkeypatch.setenv("KUBETRAY_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("SSH_CONNECTION", raising=False)
    store = MemorySecretStore()
    core, stored = make_core(tmp_path, store)
    now = datetime.now(UTC)
    stored.save_all(
        [StoredCredential(name=f"bot-{i:03d}", token=f"t{i}") for i in range(N - len(PEOPLE))],
        now,
    )
    for team in PEOPLE:
        core.logins.identity(
            OIDCSettings(issuer=f"https://{team}.idp.invalid", client_id="c"), team
        )
    yield core, store
    core.stop()


@pytest.fixture
def view(qtbot, world) -> Iterator[TrayApp]:  # type: ignore[no-untyped-def]
    app = TrayApp(TrayController(world[0], Settings(), utcnow), tray=True)
    yield app
    app.shutdown()
    qtbot.wait(50)


def identity_lines(view: TrayApp) -> list[str]:
    return [t for t in view.action_texts(deep=False) if " · " in t]


def test_the_menu_lists_the_few_that_matter_and_all_of_them_in_the_window(
    qtbot, view: TrayApp
) -> None:  # type: ignore[no-untyped-def]
    lines = identity_lines(view)
    assert len(lines) == MENU_IDENTITIES
    for team in PEOPLE:  # needing a login comes before any stored token
        assert f"{team} · needs login" in lines
    top = view.action_texts(deep=False)
    assert top.index(f"All {N} identities…") == 1 + MENU_IDENTITIES  # right after them
    assert view.tray is not None and view.tray.toolTip().endswith(f"and {N - 8} more")

    view.trigger(f"All {N} identities…")
    window = view.main_window
    assert window is not None and window.isVisible() and window.search.isVisible()
    qtbot.wait_until(lambda: QApplication.focusWidget() is window.search)
    assert window.summary.text().startswith(f"{N} identities")
    assert len([r for r in window.rows() if not r[0].startswith("  ")]) == N
    qtbot.keyClicks(window.search, "signed out")  # a state narrows to those in it
    assert [r[0] for r in window.rows()] == list(PEOPLE)
    window.search.setText("prod.idp")  # and a provider
    assert [r[0] for r in window.rows()] == ["prod"]
    window.search.clear()
    window.search.setText("bot-49")  # a name's part: bot-490 … bot-496
    assert [r[0] for r in window.rows()] == [f"bot-{i}" for i in range(490, 497)]
    window.search.setText("")
    assert len(window.rows()) == N


def test_a_login_on_one_identity_changes_its_row_and_its_menu_line_only(
    qtbot, view: TrayApp, world
) -> None:  # type: ignore[no-untyped-def]
    core, store = world
    view.show_main_window()
    window = view.main_window
    assert window is not None
    changed: list[int] = []
    window.model.dataChanged.connect(lambda first, *_: changed.append(first.row()))
    view.refresh()
    assert changed == []  # nothing changed: no row is touched
    now = datetime.now(UTC)
    tokens = TokenSet(
        expires_at=now + timedelta(minutes=30),
        issued_at=now,
        id_token="t",
        claims={"email": "pat@example.test"},
    )
    give_tokens(core, store, "prod", tokens)
    qtbot.wait_until(lambda: "prod · ready · 29m left" in identity_lines(view), timeout=3000)
    row = next(r for r in window.rows() if r[0] == "prod")
    assert row[1:4] == ("pat@example.test", "signed in", "29m left")
    prod = [i.name for i in view.controller.identities()].index("prod")
    assert set(changed) == {prod}
