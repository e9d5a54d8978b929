"""An IAM Identity Center login in the tray (pytest-qt, offscreen): the device code with its QR
code in the same window as any kubetray device login, then the portal, account and role in the
menu; the stand-ins are tests/aws's (the IAM Identity Center API driven by botocore's clients,
moto's STS)."""

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from shiboken6 import Shiboken

from app.broker.broker import utcnow
from app.settings import Settings
from app.store.memory_store import MemorySecretStore
from app.ui.controller import TrayController
from app.ui.tray import TrayApp
from app.ui.views import DeviceCodeWindow
from tests.aws import world
from tests.aws.moto_sts import ACCOUNT, MotoSTS
from tests.aws.sso import SsoStandIn
from tests.core import make_core


@pytest.fixture
def stand_ins(tmp_path: Path) -> Iterator[tuple[SsoStandIn, world.AwsFiles]]:
    with MotoSTS() as sts, SsoStandIn(sts) as sso:
        yield sso, world.write(tmp_path / "aws", sso.url, sts.url)


def test_iam_identity_center_login_in_the_tray(
    qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stand_ins
) -> None:  # type: ignore[no-untyped-def]
    from app.providers.aws import AwsProvider

    sso, files = stand_ins
    monkeypatch.setenv("KUBETRAY_CONFIG_DIR", str(tmp_path / "config"))
    core, _ = make_core(tmp_path, MemorySecretStore())
    view = TrayApp(TrayController(core, Settings(), utcnow), tray=True)
    try:
        args = ["--region", "eu-west-1", "eks", "get-token", "--cluster-name", "demo"]
        wanted = AwsProvider().wanted(args, None, files.env(AWS_PROFILE="sso-dev"))
        st = core.logins.identity(wanted.settings)
        assert st.identity.name == "aws-corp"
        view.refresh()
        assert "Log in" in view.action_texts() and view.state == "login"
        with qtbot.wait_signal(view.controller.device_code, timeout=15000):
            view.trigger("Log in")
        window = view.device_windows["aws-corp"]
        assert isinstance(window, DeviceCodeWindow) and window.isVisible()
        code = window.code_label.text()
        assert code in sso.pending_codes() and window.qr.pixmap() is not None
        threading.Thread(target=sso.approve, args=(code,), daemon=True).start()
        qtbot.wait_until(lambda: not view.controller.logging_in("aws-corp"), timeout=20000)
        view.refresh()
        texts = view.action_texts()
        assert "Log out" in texts
        assert any(t.startswith("aws-corp · ready · ") for t in texts), texts
        # the tray's line (elided to the menu's width) starts with the portal and the account
        assert any(t.startswith(f"corp · account {ACCOUNT}") for t in texts), texts
        (status,) = [i for i in core.broker.status() if i.name == "aws-corp"]
        assert ("account", ACCOUNT) in status.details and ("role", "AdministratorAccess") in (
            status.details
        )
        assert status.issuer == files.start_url and status.expires
        qtbot.wait_until(lambda: "aws-corp" not in view.device_windows, timeout=5000)
        assert not Shiboken.isValid(window)
    finally:
        view.shutdown()
        core.stop()
        qtbot.wait(50)
