"""`kubetray setup` can name the provider's private CA and a listen address, so the kubeconfig
it writes works against such a provider (read back the way kubetray-exec reads it)."""

import base64
from pathlib import Path

from app.kubeconfig import edit, setup
from app.kubeconfig.view import View
from app.oidc.settings import OIDCSettings
from exec_helper.options import resolve
from tests.pki import CA


def test_setup_writes_the_provider_ca_and_listen_address(tmp_path: Path) -> None:
    ca = base64.b64encode(CA().cert_pem).decode()
    config = tmp_path / "config"
    request = setup.Setup(
        issuer="https://idp.example",
        client_id="kubectl",
        helper="/usr/bin/kubetray-exec",
        context="dev",
        server="https://api.example:6443",
        provider_ca_data=ca,
        listen_addresses=("127.0.0.1:8000", "127.0.0.1:18000"),
        name="dev-login",
    )
    plan, _ = setup.plan(request, View.load([str(config)]))
    edit.apply(plan, _NoBackups(), "test")  # type: ignore[arg-type]  # a new file: no backup
    ((_, entry),) = View.load([str(config)]).merged("users")
    args = entry["user"]["exec"]["args"]
    settings = OIDCSettings.from_options(resolve(args))
    assert settings.ca_data == (ca,)
    assert settings.listen_addresses == ("127.0.0.1:8000", "127.0.0.1:18000")
    assert resolve(args).name == "dev-login"


class _NoBackups:
    def save(self, f: object, operation: str) -> None:
        raise AssertionError("a new file has nothing to back up")
