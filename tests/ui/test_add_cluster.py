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


# -- issue 24: what to fix before anything is asked or written --------------------------------


@pytest.mark.parametrize(
    ("issuer", "said"),
    [
        ("", "Enter the provider's URL (its issuer), e.g. https://"),
        ("idp.example/realms/k8s", "The provider's URL must start with https://, e.g. https://"),
    ],
)
def test_an_empty_or_scheme_less_issuer_is_refused_before_probing(
    qtbot, dialog: AddClusterDialog, issuer: str, said: str
) -> None:  # type: ignore[no-untyped-def]
    dialog.issuer.setText(issuer)
    with qtbot.assert_not_emitted(dialog._controller.probed, wait=300):
        dialog.probe_button.click()
    assert said in dialog.found.text()
    assert dialog.probe_button.isEnabled()


def test_the_words_a_person_uses(qtbot, dialog: AddClusterDialog) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtWidgets import QFormLayout, QLabel

    form = dialog.layout().itemAt(0).layout()  # type: ignore[union-attr]
    assert isinstance(form, QFormLayout)
    labels = [
        w.text()
        for i in range(form.rowCount())
        if (item := form.itemAt(i, QFormLayout.ItemRole.LabelRole)) is not None
        and isinstance(w := item.widget(), QLabel)
    ]
    assert "Local port for the browser login" in labels and "Listen address" not in labels


def _add(qtbot, d: AddClusterDialog, api_url: str, ca_file: Path) -> None:  # type: ignore[no-untyped-def]
    with failing.json_server(200, failing.DISCOVERY) as issuer:
        probe(qtbot, d, issuer)
    d.context.setText("lab")
    d.server.setText(api_url)
    d.ca_file.setText(str(ca_file))
    with qtbot.wait_signal(d._controller.cluster_added, timeout=15000):
        d.buttons.button(d.buttons.StandardButton.Save).click()


def test_an_api_server_the_cluster_ca_does_not_verify_is_not_added(
    qtbot, dialog: AddClusterDialog, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from tests.apiserver import APIServer

    wrong = tmp_path / "wrong-ca.pem"
    wrong.write_bytes(CA("some other CA").cert_pem)
    with APIServer(CA("the cluster's CA")) as api:
        _add(qtbot, dialog, api.url, wrong)
    text = dialog.found.text()
    assert "Not added." in text and "Try it" not in text
    assert "is not signed by the cluster's CA" in text  # doctor's check, in its words
    assert "as Cluster CA file" in text  # what to fix, in the dialog's own terms
    assert not (tmp_path / "kubeconfig").exists()


def test_an_added_cluster_can_be_logged_in_to(
    qtbot, dialog: AddClusterDialog, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from app.model import State
    from app.ui.window import MainWindow
    from tests.apiserver import APIServer

    c = dialog._controller
    with APIServer(CA("the cluster's CA")) as api:
        ca_file = tmp_path / "cluster-ca.pem"
        ca_file.write_bytes(api.ca_pem)
        _add(qtbot, dialog, api.url, ca_file)
    text = dialog.found.text()
    assert "Added context lab" in text and "Could not check" not in text
    assert "Log in to <b>lab</b> now, then try: <code>kubectl --context lab get ns</code>" in text
    # The identity is kubetray's at once: the window's row offers Log in, the tray lists it.
    lab = next(i for i in c.identities() if i.name == "lab")
    assert lab.state is State.NEEDS_LOGIN
    window = MainWindow(c, lambda: None)
    qtbot.add_widget(window)
    window.update_status(c.identities(), c.clock())
    window.select("lab")
    assert window.login_button.isEnabled() and window.login_button.text() == "Log in"
    assert dialog.login_button.text() == "Log in now"
    logins: list[str] = []
    c.log_in = lambda name, again=False: logins.append(name)  # type: ignore[method-assign]
    dialog.login_button.click()
    assert logins == ["lab"] and not dialog.isVisible()


def test_an_unreachable_api_server_is_added_with_a_warning(
    qtbot, dialog: AddClusterDialog, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    ca_file = tmp_path / "ca.pem"
    ca_file.write_bytes(CA().cert_pem)
    _add(qtbot, dialog, failing.closed_port().replace("http://", "https://"), ca_file)
    text = dialog.found.text()
    assert "Added context lab" in text and "Could not check the API server" in text
