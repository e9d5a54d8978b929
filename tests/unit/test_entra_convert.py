"""`kubetray import` of Azure kubelogin users, on kubeconfigs as the tools write them
(tests/kubeconfig/azure): every flag kept, each one refused mode left with its reason."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from app.kubeconfig.setup import INSTALL_HINT
from app.providers.entra import convert
from app.providers.entra.settings import AKS_CLIENT, AKS_SERVER, parse

FIXTURES = Path(__file__).parents[1] / "kubeconfig" / "azure"
HELPER = "/opt/kubetray/kubetray-exec"
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
NAME = "clusterUser_rg-demo_aks-demo"


def user(fixture: str) -> dict[str, Any]:
    doc = yaml.safe_load((FIXTURES / fixture).read_text())
    return dict(doc["users"][0]["user"])


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
def test_an_exec_user_keeps_its_command_line_and_only_changes_command(fixture: str) -> None:
    before = user(fixture)
    after, why = convert.plan(before, NAME, HELPER)
    assert why is None and after is not None
    exec_ = after["exec"]
    assert exec_["command"] == HELPER and exec_["installHint"] == INSTALL_HINT
    assert exec_["args"] == [*before["exec"]["args"], f"--name={NAME}"]
    for key in ("apiVersion", "env", "provideClusterInfo"):
        assert exec_.get(key) == before["exec"].get(key)
    assert before["exec"]["command"] == "kubelogin"  # the input is left alone


def test_the_converted_command_line_means_what_it_meant() -> None:
    after, _ = convert.plan(user("aks-get-credentials.yaml"), NAME, HELPER)
    assert after is not None
    s = parse(after["exec"]["args"], {})
    assert (s.mode, s.server_id, s.client_id, s.tenant_id, s.name) == (
        "devicecode",
        AKS_SERVER,
        AKS_CLIENT,
        TENANT,
        NAME,
    )
    assert s.authority_host == "https://login.microsoftonline.com/"


def test_an_old_azure_auth_provider_becomes_what_convert_kubeconfig_writes() -> None:
    after, why = convert.plan(user("legacy-auth-provider.yaml"), NAME, HELPER)
    assert why is None and after is not None and "auth-provider" not in after
    assert after["exec"]["args"] == [
        "get-token",
        "--login",
        "devicecode",
        "--server-id",
        AKS_SERVER,
        "--client-id",
        AKS_CLIENT,
        "--tenant-id",
        TENANT,
        "--environment",
        "AzurePublicCloud",
        f"--name={NAME}",
    ]
    assert after["exec"]["apiVersion"] == "client.authentication.k8s.io/v1beta1"
    assert parse(after["exec"]["args"], {}).mode == "devicecode"


def test_an_azure_ad_v1_cluster_stays_with_azure_kubelogin_and_says_why() -> None:
    after, why = convert.plan(user("legacy-aad-v1.yaml"), NAME, HELPER)
    assert after is None and why and "retired AKS Azure AD v1 integration" in why


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--login", "azurepipelines"], "Azure Pipelines"),
        (["--pop-enabled", "--pop-claims", "u=/subscriptions/s/x"], "Azure Arc"),
        (["--login", "nonsense"], "is not a supported login method"),
    ],
)
def test_users_kubetray_cannot_serve_are_left_with_the_reason(extra: list[str], says: str) -> None:
    before = user("aks-get-credentials.yaml")
    before["exec"]["args"] = [*before["exec"]["args"], *extra]
    after, why = convert.plan(before, NAME, HELPER)
    assert after is None and why and says in why


def test_a_secret_kept_for_run_time_is_not_asked_for_at_import() -> None:
    after, why = convert.plan(user("convert-spn.yaml"), NAME, HELPER)  # secret from the env
    assert why is None and after is not None


@pytest.mark.parametrize(
    "other",
    [
        {
            "exec": {
                "command": "kubelogin",
                "args": ["get-token", "--oidc-issuer-url=https://x", "--oidc-client-id=k"],
            }
        },
        {"exec": {"command": "gke-gcloud-auth-plugin"}},
        {"exec": {"command": "aws", "args": ["eks", "get-token", "--cluster-name", "c"]}},
        {"auth-provider": {"name": "gcp", "config": {}}},
        {"token": "abc"},
    ],
)
def test_other_users_are_not_azure_kubelogins(other: dict[str, Any]) -> None:
    assert convert.plan(other, "u", HELPER) == (None, None)


def test_windows_and_installed_paths_of_kubelogin_are_recognised() -> None:
    for command in ("C:\\Users\\me\\.azure-kubelogin\\kubelogin.exe", "/usr/local/bin/KUBELOGIN"):
        before = user("convert-azurecli.yaml")
        before["exec"]["command"] = command
        after, _ = convert.plan(before, NAME, HELPER)
        assert after is not None and after["exec"]["command"] == HELPER


def test_a_name_already_given_is_kept() -> None:
    before = user("convert-azurecli.yaml")
    before["exec"]["args"].append("--name=prod")
    after, _ = convert.plan(before, NAME, HELPER)
    assert after is not None and after["exec"]["args"][-1] == "--name=prod"
