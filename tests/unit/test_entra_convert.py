"""`kubetray import` of Azure kubelogin users, on kubeconfigs as the tools write them
(tests/kubeconfig/azure): every flag kept, each mode kubetray refuses left with its reason."""

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.kubeconfig import files, migrate
from app.kubeconfig.setup import INSTALL_HINT
from app.kubeconfig.view import View
from app.providers.entra.settings import AKS_CLIENT, AKS_SERVER, parse

FIXTURES = Path(__file__).parents[1] / "kubeconfig" / "azure"
HELPER = "/opt/kubetray/kubetray-exec"
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
NAME = "clusterUser_rg-demo_aks-demo"


def imported(tmp_path: Path, fixture: str, edit: Any = None) -> tuple[dict[str, Any], Any, Any]:
    """(the user before, the user after import or None, why it was left or None)."""
    path = tmp_path / "config"
    shutil.copy(FIXTURES / fixture, path)
    if edit is not None:
        doc = yaml.safe_load(path.read_text())
        edit(doc["users"][0]["user"])
        path.write_text(yaml.safe_dump(doc))
    before = files.read(str(path)).data["users"][0]["user"]
    _, changes, skipped = migrate.plan(View.load([str(path)]), HELPER)
    after = changes[0].after if changes else None
    why = skipped[0].reason if skipped else None
    return before, after, why


@pytest.mark.parametrize(
    "fixture",
    [
        "aks-get-credentials.yaml",
        "convert-azurecli.yaml",
        "convert-devicecode.yaml",
        "convert-interactive.yaml",
        "convert-spn.yaml",
        "convert-workloadidentity.yaml",
        "convert-msi.yaml",
        "hand-written-spn.yaml",
    ],
)
def test_an_exec_user_keeps_its_command_line_and_only_changes_command(
    tmp_path: Path, fixture: str
) -> None:
    before, after, why = imported(tmp_path, fixture)
    assert why is None and after is not None
    exec_ = after["exec"]
    assert exec_["command"] == HELPER and exec_["installHint"] == INSTALL_HINT
    assert exec_["args"] == before["exec"]["args"]  # every flag, in its order, nothing added
    for key in ("apiVersion", "env", "provideClusterInfo"):
        assert exec_.get(key) == before["exec"].get(key)


def test_the_converted_command_line_means_what_it_meant(tmp_path: Path) -> None:
    _, after, _ = imported(tmp_path, "aks-get-credentials.yaml")
    s = parse(after["exec"]["args"], {})
    assert (s.mode, s.server_id, s.client_id, s.tenant_id) == (
        "devicecode",
        AKS_SERVER,
        AKS_CLIENT,
        TENANT,
    )
    assert s.authority_host == "https://login.microsoftonline.com/"


def test_an_old_azure_auth_provider_becomes_what_convert_kubeconfig_writes(
    tmp_path: Path,
) -> None:
    before, after, why = imported(tmp_path, "legacy-auth-provider.yaml")
    assert why is None and after is not None and "auth-provider" not in after
    assert after["exec"] == {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "provideClusterInfo": False,
        "command": HELPER,
        "installHint": INSTALL_HINT,
        "args": [
            "get-token", "--login", "devicecode", "--server-id", AKS_SERVER, "--client-id",
            AKS_CLIENT, "--tenant-id", TENANT, "--environment", "AzurePublicCloud",
        ],
    }  # fmt: skip
    assert "auth-provider" in before


def test_an_azure_ad_v1_cluster_stays_with_azure_kubelogin_and_says_why(tmp_path: Path) -> None:
    _, after, why = imported(tmp_path, "legacy-aad-v1.yaml")
    assert after is None and why and "retired AKS Azure AD v1 integration" in why


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--login", "azurepipelines"], "Azure Pipelines"),
        (["--pop-enabled", "--pop-claims", "u=/subscriptions/s/x"], "Azure Arc"),
        (["--login", "nonsense"], "is not a supported login method"),
    ],
)
def test_users_kubetray_cannot_serve_are_left_with_the_reason(
    tmp_path: Path, extra: list[str], says: str
) -> None:
    def add(user: dict[str, Any]) -> None:
        user["exec"]["args"] += extra

    _, after, why = imported(tmp_path, "aks-get-credentials.yaml", add)
    assert after is None and why and says in why


@pytest.mark.parametrize(
    "other",
    [
        {"exec": {"command": "kubectl", "args": ["get-token", "--server-id", "x"]}},
        {"exec": {"command": "doctl", "args": ["kubernetes", "cluster", "kubeconfig"]}},
        {"exec": {"command": "kubelogin", "args": ["remove-tokens"]}},
        {"auth-provider": {"name": "oidc", "config": {}}},
        {"token": "abc"},
    ],
)
def test_other_users_are_left_alone(tmp_path: Path, other: dict[str, Any]) -> None:
    def swap(user: dict[str, Any]) -> None:
        user.clear()
        user.update(other)

    assert imported(tmp_path, "aks-get-credentials.yaml", swap)[1:] == (None, None)


def test_int128_kubelogin_is_not_azures(tmp_path: Path) -> None:
    def swap(user: dict[str, Any]) -> None:
        user["exec"]["args"] = ["get-token", "--oidc-issuer-url=https://x", "--oidc-client-id=k"]

    _, after, _ = imported(tmp_path, "aks-get-credentials.yaml", swap)
    assert after is not None and "--name=" + NAME in after["exec"]["args"]  # OIDC's import


@pytest.mark.parametrize(
    "command", ["C:\\Users\\me\\.azure-kubelogin\\kubelogin.exe", "/usr/local/bin/KUBELOGIN"]
)
def test_windows_and_installed_paths_of_kubelogin_are_recognised(
    tmp_path: Path, command: str
) -> None:
    def where(user: dict[str, Any]) -> None:
        user["exec"]["command"] = command

    _, after, _ = imported(tmp_path, "convert-azurecli.yaml", where)
    assert after is not None and after["exec"]["command"] == HELPER
