"""The login dialog and Settings (pytest-qt, offscreen): sizes and words (issue 24)."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtWidgets import QDialog, QLabel

from app.broker.broker import utcnow
from app.broker.consent import Consent
from app.oidc.settings import OIDCSettings
from app.settings import Settings
from app.ui.controller import LoginFacts, TrayController
from app.ui.dialogs import LoginDialog, SettingsDialog, ask_login
from tests.core import make_core
from tests.ui.modal import when_modal


@pytest.fixture
def controller(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TrayController]:
    monkeypatch.setenv("KUBETRAY_CONFIG_DIR", str(tmp_path / "config"))
    core, _ = make_core(tmp_path)
    settings = OIDCSettings(issuer="https://idp.example.test/realms/k8s", client_id="kubectl")
    core.logins.identity(settings, "team")
    c = TrayController(core, Settings(), utcnow)
    yield c
    c.detach()
    core.stop()


def test_the_login_dialog_names_whose_login_and_takes_both_answers(qtbot) -> None:  # type: ignore[no-untyped-def]
    facts = LoginFacts(
        "team", "idp.example.test", "kubectl (or kubetray login), through kubetray-exec"
    )
    d = LoginDialog(facts, "Username: ", False, with_password=True)
    qtbot.add_widget(d)
    d.show()
    assert d.width() >= 440 and d.height() >= 120  # not 200 by 94
    intro = d.intro.text()
    assert "<b>team</b>" in intro and "idp.example.test" in intro and "Asked by kubectl" in intro
    labels = [w.text() for w in d.findChildren(QLabel)]
    assert "Username" in labels and "Password" in labels
    assert d.password.isVisible() and d.answer.isVisible()


def test_username_and_password_prompts_are_one_dialog(qtbot, controller: TrayController) -> None:  # type: ignore[no-untyped-def]
    shown: list[str] = []

    def fill(d: QDialog) -> None:
        assert isinstance(d, LoginDialog)
        shown.append(d.intro.text())
        d.answer.setText("alice")
        d.password.setText("pw-alice")
        d.accept()

    when_modal(fill)  # type: ignore[arg-type]
    assert ask_login(controller, "team", "Username: ", False) == "alice"
    # The provider's second prompt is answered from the same dialog: no second one.
    assert ask_login(controller, "team", "Password: ", True) == "pw-alice"
    assert len(shown) == 1 and "idp.example.test" in shown[0]
    # Handed out once: a later password prompt asks again.
    when_modal(lambda d: d.reject())
    assert ask_login(controller, "team", "Password: ", True) is None


def test_settings_is_wide_and_its_host_buttons_wait_for_a_selection(
    qtbot, controller: TrayController
) -> None:  # type: ignore[no-untyped-def]
    d = SettingsDialog(controller)
    qtbot.add_widget(d)
    d.show()
    assert d.width() >= 600
    assert d.remote_buttons and not any(b.isEnabled() for b in d.remote_buttons)
    assert "No SSH host has asked yet." in d.remote.item(0).text()
    wrapped = [w for w in d.findChildren(QLabel) if "SSH hosts" in w.text()]
    assert wrapped and wrapped[0].wordWrap()


def test_settings_lists_each_host_with_the_identities_it_may_have(
    qtbot, controller: TrayController, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Always allow needs an identity (a host row has none); Ask again on an identity forgets
    that one only."""
    consent = controller.broker.consent = Consent(str(tmp_path / "remote-hosts.json"), utcnow)
    consent.allow("devvm", "dev")
    consent.allow("devvm", "ops")
    d = SettingsDialog(controller)
    qtbot.add_widget(d)
    d.show()
    rows = [d.remote.item(i).text() for i in range(d.remote.count())]
    assert rows == [
        "devvm: allowed always",
        "    as dev: allowed always",
        "    as ops: allowed always",
    ]
    allow, deny, forget = d.remote_buttons
    d.remote.setCurrentRow(0)
    assert not allow.isEnabled() and deny.isEnabled() and forget.isEnabled()
    d.remote.setCurrentRow(2)
    assert allow.isEnabled()
    forget.click()
    assert [d.remote.item(i).text() for i in range(d.remote.count())] == [
        "devvm: allowed always",
        "    as dev: allowed always",
    ]
    assert consent.granted("devvm", "dev") and not consent.granted("devvm", "ops")


def test_settings_are_not_saved_over_a_settings_file_kubetray_cannot_use(
    qtbot, controller: TrayController, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Edited by hand while the dialog was open: the dialog says which setting and stays."""
    d = SettingsDialog(controller)
    qtbot.add_widget(d)
    d.show()
    path = tmp_path / "config" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"notify_expiring": "no"}')
    d.margin.setValue(600)
    d.save()
    assert d.isVisible() and d.result() != QDialog.DialogCode.Accepted
    assert d.problem.isVisible()
    shown = d.problem.text().replace("\u200b", "")  # break points in the long path
    assert f'the setting notify_expiring in {path} is "no", not true or false' in shown
    assert path.read_text() == '{"notify_expiring": "no"}'
