"""Add cluster (pytest-qt, offscreen): each network failure in a person's words, on real sockets,
and a confirmation with the kubectl line to try once the cluster is written."""

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from app.broker.broker import utcnow
from app.settings import Settings
from app.ui.controller import TrayController
from app.ui.dialogs import AddClusterDialog
from tests import failing
from tests.core import make_core
from tests.pki import CA


@pytest.fixture
def dialog(qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AddClusterDialog]:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("KUBETRAY_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    core, _ = make_core(tmp_path)
    controller = TrayController(core, Settings(), utcnow)
    d = AddClusterDialog(controller)
    qtbot.add_widget(d)
    d.show()
    d.client_id.setText("kubectl")
    yield d
    core.stop()


def probe(qtbot, d: AddClusterDialog, issuer: str) -> str:  # type: ignore[no-untyped-def]
    d.issuer.setText(issuer)
    with qtbot.wait_signal(d._controller.probed, timeout=20000):
        d.probe_button.click()
    text = d.found.text()
    assert "Errno" not in text and "urlopen" not in text and "Traceback" not in text
    return text


def test_dns_failure(qtbot, dialog: AddClusterDialog) -> None:  # type: ignore[no-untyped-def]
    text = probe(qtbot, dialog, failing.UNRESOLVABLE)
    assert "cannot find the provider's host idp.kubetray-test.invalid" in text
    assert "check the issuer URL for a typo" in text
    assert not dialog.buttons.button(dialog.buttons.StandardButton.Save).isEnabled()


def test_connection_refused(qtbot, dialog: AddClusterDialog) -> None:  # type: ignore[no-untyped-def]
    issuer = failing.closed_port()
    text = probe(qtbot, dialog, issuer)
    assert f"nothing answers at {issuer.removeprefix('http://')} (connection refused)" in text


def test_timeout(qtbot, dialog: AddClusterDialog, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr("app.oidc.client.TIMEOUT", 1.0)  # the wait itself is not the point
    with failing.silent_server() as issuer:
        text = probe(qtbot, dialog, issuer)
    assert "did not answer in time" in text and "HTTPS_PROXY" in text


def test_http_error_with_description(qtbot, dialog: AddClusterDialog) -> None:  # type: ignore[no-untyped-def]
    with failing.json_server(404, failing.REALM_MISSING) as issuer:
        text = probe(qtbot, dialog, issuer + "/realms/nope")
    assert "HTTP 404" in text and "Realm does not exist" in text


def test_untrusted_ca_then_provider_ca_then_written_and_confirmed(
    qtbot, dialog: AddClusterDialog, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    ca = CA("private provider CA")
    with failing.json_server(200, failing.DISCOVERY, ca=ca) as issuer:
        text = probe(qtbot, dialog, issuer)
        assert "the provider's CA is not trusted" in text
        assert "as Provider CA file" in text  # the dialog's own field, not a CLI flag
        ca_file = tmp_path / "provider-ca.pem"
        ca_file.write_bytes(ca.cert_pem)
        dialog.provider_ca.setText(str(ca_file))
        text = probe(qtbot, dialog, issuer)
        assert "supports:" in text
    dialog.context.setText("lab")
    dialog.server.setText("https://lab.example:6443")
    save = dialog.buttons.button(dialog.buttons.StandardButton.Save)
    assert save.isEnabled()
    with qtbot.wait_signal(dialog._controller.cluster_added, timeout=10000):
        save.click()
    assert dialog.isVisible()  # it stays open to say what it did
    assert "Added context lab" in dialog.found.text()
    assert dialog.done_line == "kubectl --context lab get ns"
    assert "kubectl --context lab get ns" in dialog.found.text()
    written = yaml.safe_load((tmp_path / "kubeconfig").read_text())
    assert [c["name"] for c in written["contexts"]] == ["lab"]
