"""The app for real: Add cluster writes a kubeconfig that kubectl uses, and the app itself (not
the headless agent) serves kubectl with a browser login against oidc-provider."""

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from app.broker.broker import utcnow
from app.settings import Settings
from app.ui.controller import TrayController
from app.ui.dialogs import AddClusterDialog
from tests.apiserver import NAMESPACES, APIServer
from tests.idp import BROWSE, IdP, browser_available, browser_log, run_idp
from tests.integration.test_oidc import checker, kubectl
from tests.peers import ROOT, KubetrayEnv, require
from tests.pki import CA


@pytest.fixture
def idp() -> Iterator[IdP]:
    with run_idp() as provider:
        yield provider


def test_add_cluster_probes_and_writes_a_kubeconfig_kubectl_uses(
    qtbot,
    kt: KubetrayEnv,
    idp: IdP,
    keyring_session: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # type: ignore[no-untyped-def]
    require(browser_available(), "needs Debian chromium and Python playwright")
    from app.oidc.browser import Browser
    from tests.core import make_core

    core, _ = make_core(tmp_path, browser=Browser)
    controller = TrayController(core, Settings(), utcnow)
    config = tmp_path / "kube" / "config"
    with APIServer(CA(), check_token=checker(idp)) as api:
        (tmp_path / "ca.crt").write_bytes(api.ca_pem)
        dialog = AddClusterDialog(controller)
        qtbot.add_widget(dialog)
        dialog.context.setText("demo")
        dialog.server.setText(api.url)
        dialog.ca_file.setText(str(tmp_path / "ca.crt"))
        dialog.issuer.setText(idp.issuer)
        dialog.client_id.setText("kubectl")
        dialog.kubeconfig.setText(str(config))
        with qtbot.wait_signal(controller.probed, timeout=10000):
            dialog.probe_button.click()
        found = dialog.found.text()
        assert "✔ secure browser login (PKCE)" in found
        assert "✔ login with a code on another device" in found
        assert "✔ staying signed in (refresh tokens)" in found
        assert "✔ cancelling tokens on log out" in found
        with qtbot.wait_signal(controller.cluster_added, timeout=10000):
            dialog.buttons.accepted.emit()
        doc = yaml.safe_load(config.read_text())
        user = doc["users"][0]["user"]["exec"]
        assert Path(user["command"]).is_absolute() and user["command"].endswith("kubetray-exec")
        assert (
            f"--oidc-issuer-url={idp.issuer}" in user["args"]
            and "--oidc-extra-scope=offline_access" in user["args"]
        )
        assert doc["current-context"] == "demo" and config.stat().st_mode & 0o777 == 0o600
        kt.env.update(KUBETRAY_BROWSER=BROWSE, KUBETRAY_TEST_BROWSER_LOG=str(tmp_path / "b.jsonl"))
        done = kubectl(kt, config)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == [f"namespace/{n}" for n in NAMESPACES]
    core.stop()


def test_the_app_serves_kubectl_with_a_browser_login(
    kt: KubetrayEnv, idp: IdP, keyring_session: None, tmp_path: Path
) -> None:
    require(browser_available(), "needs Debian chromium and Python playwright")
    log = tmp_path / "browser.jsonl"
    kt.env.update(
        KUBETRAY_BROWSER=BROWSE, KUBETRAY_TEST_BROWSER_LOG=str(log), QT_QPA_PLATFORM="offscreen"
    )
    app = subprocess.Popen(
        [sys.executable, "-m", "app"],
        env=kt.env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while kt.agent_pid() != app.pid:
            assert app.poll() is None, app.communicate()[1]
            assert time.monotonic() < deadline, "the app did not start"
            time.sleep(0.1)
        from tests.integration.test_oidc import kubeconfig, oidc_args

        with APIServer(CA(), check_token=checker(idp)) as api:
            config = kubeconfig(kt, api, oidc_args(idp), tmp_path / "kubeconfig")
            done = kubectl(kt, config)
        assert done.returncode == 0, done.stderr
        assert "kubetray-exec: started" not in done.stderr  # the app answered, no agent started
        status = json.loads(kt.kubetray("status", "--json").stdout)
        assert status["agent"]["pid"] == app.pid
        assert len([e for e in browser_log(log) if e["event"] == "opened"]) == 1
    finally:
        app.terminate()
        app.communicate(timeout=20)
