"""Azure kubelogin's get-token command line and environment, read as Azure kubelogin reads
them (Azure/kubelogin pkg/internal/token/options.go), and each --login mode served or refused
in one line."""

import re

import pytest

from app.providers.entra import clouds
from app.providers.entra import options as o
from app.providers.entra.settings import AKS_CLIENT, AKS_SERVER, from_args, parse
from exec_helper.options import OptionsError

TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
AKS = ["get-token", "--environment", "AzurePublicCloud", "--server-id", AKS_SERVER]
AKS += ["--client-id", AKS_CLIENT, "--tenant-id", TENANT, "--login", "devicecode"]
"""What `az aks get-credentials` writes (the order of the real file)."""


def test_what_aks_writes_is_a_devicecode_login_to_the_aks_server_app() -> None:
    s = parse(AKS, {})
    assert (s.mode, s.server_id, s.client_id, s.tenant_id) == (
        "devicecode",
        AKS_SERVER,
        AKS_CLIENT,
        TENANT,
    )
    assert s.scope == f"{AKS_SERVER}/.default" and s.person and not s.machine
    assert s.authority == f"https://login.microsoftonline.com/{TENANT}"
    assert s.instance_discovery and s.fallback_name == "aks@72f988bf"


def test_devicecode_and_interactive_are_one_identity() -> None:
    browser = [*AKS[:-1], "interactive"]
    assert parse(AKS, {}).key == parse(browser, {}).key
    other_tenant = [a.replace(TENANT, "contoso.onmicrosoft.com") for a in AKS]
    assert parse(AKS, {}).key != parse(other_tenant, {}).key


@pytest.mark.parametrize(
    "spelling",
    [
        ["--login", "spn"],
        ["--login=spn"],
        ["-l", "spn"],
        ["-lspn"],
        ["-l=spn"],
    ],
)
def test_pflag_spellings(spelling: list[str]) -> None:
    a = o.parse(["get-token", "--server-id", "s", *spelling], {})
    assert a.login == "spn" and a.source("login") == "--login"


def test_booleans_repeats_and_durations_as_pflag_has_them() -> None:
    a = o.parse(
        [
            "get-token",
            "--server-id",
            "s",
            "--legacy=false",
            "--timeout",
            "1m30s",
            "-t",
            "a",
            "-t",
            "b",
        ],
        {},
    )
    assert a.legacy is False and a.timeout == 90 and a.tenant_id == "b"
    assert o.parse(["get-token", "--server-id=s", "--legacy"], {}).legacy is True
    with pytest.raises(OptionsError, match=r'invalid argument "maybe" for "--legacy" flag'):
        o.parse(["get-token", "--server-id=s", "--legacy=maybe"], {})
    with pytest.raises(OptionsError, match='time: invalid duration "soon"'):
        o.parse(["get-token", "--server-id=s", "--timeout=soon"], {})


def test_klog_flags_are_accepted_and_unknown_flags_are_not() -> None:
    a = o.parse(["get-token", "-v", "5", "--server-id", "s", "--logtostderr", "--v=3"], {})
    assert a.server_id == "s"
    with pytest.raises(OptionsError, match=r"^unknown flag: --oidc-issuer-url$"):
        o.parse(["get-token", "--server-id", "s", "--oidc-issuer-url", "x"], {})
    with pytest.raises(OptionsError, match="unknown shorthand flag: 'x' in -x"):
        o.parse(["get-token", "--server-id", "s", "-x"], {})
    with pytest.raises(OptionsError, match=r"^flag needs an argument: --tenant-id$"):
        o.parse(["get-token", "--server-id", "s", "--tenant-id"], {})


def test_azure_kubelogins_own_refusals() -> None:
    with pytest.raises(OptionsError, match=r"^server-id is required$"):
        o.parse(["get-token"], {})
    with pytest.raises(
        OptionsError,
        match=r"^'magic' is not a supported login method\. Supported method is one of "
        r"devicecode, interactive, spn, ropc, msi, azurecli, azd, workloadidentity, "
        r"azurepipelines$",
    ):
        o.parse(["get-token", "--server-id", "s", "-l", "magic"], {})
    with pytest.raises(OptionsError, match="should have a trailing slash"):
        o.parse(["get-token", "--server-id", "s", "--authority-host", "https://login.x"], {})
    for host in ("http://login.contoso.example/", "HTTP://127.0.0.1:8443/"):
        with pytest.raises(
            OptionsError,
            match=rf'^authority host "{re.escape(host)}" is not https: kubetray logs in over TLS '
            r"only \(a private CA: add --certificate-authority\)$",
        ):
            parse([*AKS, "--authority-host", host], {})
    with pytest.raises(OptionsError, match="is not https"):  # workloadidentity's variable
        parse(
            [*AKS[:-1], "workloadidentity"],
            {"AZURE_AUTHORITY_HOST": "http://login.x/", "AZURE_FEDERATED_TOKEN_FILE": "/f"},
        )
    with pytest.raises(OptionsError, match="provide the pop-claims flag"):
        o.parse(["get-token", "--server-id", "s", "--pop-enabled"], {})
    with pytest.raises(OptionsError, match=r"^client ID cannot be empty$"):
        parse(["get-token", "--server-id", "s", "--tenant-id", "t"], {})
    with pytest.raises(OptionsError, match=r"^tenant ID cannot be empty$"):
        parse(["get-token", "--server-id", "s", "--client-id", "c"], {})
    with pytest.raises(OptionsError, match=r"^client secret cannot be empty$"):
        parse([*AKS[:-1], "spn"], {})
    with pytest.raises(OptionsError, match=r"^federated token file cannot be empty$"):
        parse([*AKS[:-1], "workloadidentity"], {})
    with pytest.raises(OptionsError, match=r"^password cannot be empty$"):
        parse([*AKS[:-1], "ropc", "--username", "u"], {})


def test_the_environment_wins_over_the_kubeconfig_as_in_azure_kubelogin() -> None:
    env = {
        "AAD_LOGIN_METHOD": "spn",
        "AAD_SERVICE_PRINCIPAL_CLIENT_ID": "from-aad",
        "AZURE_CLIENT_ID": "from-azure",
        "AAD_SERVICE_PRINCIPAL_CLIENT_SECRET": "aad-secret",
        "AZURE_TENANT_ID": "env-tenant",
    }
    a = o.parse(AKS, env)
    assert a.login == "spn" and a.source("login") == "AAD_LOGIN_METHOD"
    assert a.client_id == "from-azure" and a.source("client_id") == "AZURE_CLIENT_ID"
    assert a.client_secret == "aad-secret" and a.tenant_id == "env-tenant"
    assert a.source("server_id") == "--server-id" and a.source("legacy") == "default"
    # A stray AZURE_CLIENT_ID changes which app a person logs in with, as in Azure kubelogin.
    assert o.parse(AKS, {"AZURE_CLIENT_ID": "x"}).client_id == "x"
    # Set but empty still counts (Go's os.LookupEnv).
    assert o.parse(AKS, {"AZURE_TENANT_ID": ""}).tenant_id == ""
    # ...unless the kubeconfig says the environment must not.
    kept = o.parse([*AKS, "--disable-environment-override"], env)
    assert (kept.login, kept.client_id, kept.tenant_id) == ("devicecode", AKS_CLIENT, TENANT)


def test_terraform_names_with_use_azurerm_env_vars() -> None:
    env = {"ARM_CLIENT_ID": "arm", "AZURE_CLIENT_ID": "azure", "ARM_CLIENT_SECRET": "s"}
    a = o.parse([*AKS, "--use-azurerm-env-vars"], env)
    assert a.client_id == "arm" and a.client_secret == "s"


def test_workload_identity_takes_its_variables_after_the_mode_is_known() -> None:
    env = {
        "AAD_LOGIN_METHOD": "workloadidentity",
        "AZURE_FEDERATED_TOKEN_FILE": "/var/run/secrets/azure/tokens/azure-identity-token",
        "AZURE_AUTHORITY_HOST": "https://login.microsoftonline.us/",
        "AZURE_CLIENT_ID": "wi-app",
    }
    s = parse(AKS, env)
    assert s.mode == "workloadidentity" and s.machine and s.client_id == "wi-app"
    assert s.federated_token_file == env["AZURE_FEDERATED_TOKEN_FILE"]
    assert s.authority_host == "https://login.microsoftonline.us/"
    # For other modes AZURE_AUTHORITY_HOST is not read, as in Azure kubelogin.
    assert parse(AKS, {"AZURE_AUTHORITY_HOST": "https://x/"}).authority_host == clouds.PUBLIC
    # In a GitHub Actions job, GitHub's OIDC token stands in for the file.
    gh = parse(
        [*AKS[:-1], "workloadidentity"],
        {"ACTIONS_ID_TOKEN_REQUEST_URL": "https://gh/x?y=1", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "t"},
    )
    assert gh.github_token_request == ("https://gh/x?y=1", "t")


@pytest.mark.parametrize(
    ("environment", "host"),
    [
        ("AzurePublicCloud", "https://login.microsoftonline.com/"),
        ("azurecloud", "https://login.microsoftonline.com/"),
        ("AzureUSGovernmentCloud", "https://login.microsoftonline.us/"),
        ("AZUREUSGOVERNMENT", "https://login.microsoftonline.us/"),
        ("AzureChinaCloud", "https://login.chinacloudapi.cn/"),
    ],
)
def test_environment_names_the_cloud(environment: str, host: str) -> None:
    s = parse([a if a != "AzurePublicCloud" else environment for a in AKS], {})
    assert s.authority_host == host and not s.notes and s.instance_discovery


def test_an_unknown_environment_is_the_public_cloud_and_said_so() -> None:
    s = parse([a if a != "AzurePublicCloud" else "AzureGermanCloud" for a in AKS], {})
    assert s.authority_host == clouds.PUBLIC
    assert s.notes and "--environment AzureGermanCloud is no cloud" in s.notes[0]


def test_authority_host_wins_and_turns_instance_discovery_off_for_hosts_not_microsofts() -> None:
    s = parse([*AKS, "--authority-host", "https://adfs.contoso.example/"], {})
    assert s.authority == f"https://adfs.contoso.example/{TENANT}"
    assert not s.instance_discovery
    assert not parse([*AKS, "--disable-instance-discovery"], {}).instance_discovery


def test_scope_is_azure_kubelogins() -> None:
    assert o.scope(AKS_SERVER) == f"{AKS_SERVER}/.default"
    assert o.scope("api://my-app/") == "api://my-app/.default"
    assert o.scope("api://my-app/.default") == "api://my-app/.default"


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--login", "azurepipelines"], "works only inside an Azure Pipelines job"),
        (["--pop-enabled", "--pop-claims", "u=/subscriptions/x"], "Azure Arc-enabled clusters"),
        (["--legacy"], "retired AKS Azure AD v1 integration"),
    ],
)
def test_modes_kubetray_does_not_serve_are_one_line_that_says_what_to_use(
    extra: list[str], says: str
) -> None:
    with pytest.raises(OptionsError) as refused:
        parse([*AKS, *extra], {})
    line = str(refused.value)
    assert says in line and "\n" not in line
    assert "kubelogin" in line  # where to go instead


@pytest.mark.parametrize(
    "mode",
    ["devicecode", "interactive", "spn", "ropc", "msi", "azurecli", "azd", "workloadidentity"],
)
def test_every_other_mode_is_served(mode: str) -> None:
    env = {
        "AZURE_CLIENT_SECRET": "s",
        "AZURE_USERNAME": "u",
        "AZURE_PASSWORD": "p",
        "AZURE_FEDERATED_TOKEN_FILE": "/f",
    }
    s = parse([*AKS[:-1], mode], env)
    assert s.mode == mode
    assert s.machine == (mode not in ("devicecode", "interactive"))


def test_recognises_azure_kubelogin_and_not_int128s() -> None:
    assert o.recognises(AKS)
    assert o.recognises(["get-token", "--login", "azurecli", "--server-id", AKS_SERVER])
    assert o.recognises(["get-token", "-l", "spn", "--server-id", "x"])
    assert not o.recognises(["get-token", "--oidc-issuer-url=https://x", "--oidc-client-id=y"])
    assert not o.recognises(["oidc-login", "get-token", "--oidc-issuer-url=https://x"])
    assert not o.recognises([])


def test_secrets_stay_out_of_repr_and_the_index() -> None:
    s = parse([*AKS[:-1], "spn", "--client-secret", "hunter2"], {"AZURE_PASSWORD": "pw"})
    assert "hunter2" not in repr(s) and "hunter2" not in repr(
        o.parse(AKS, {"AZURE_CLIENT_SECRET": "hunter2"})
    )
    doc = s.to_dict()
    assert "hunter2" not in str(doc) and "client_secret" not in doc
    back = type(s).from_dict(doc)
    assert back.key == s.key and back.client_secret is None


def test_redirect_url_must_come_back_to_this_machine() -> None:
    ok = parse([*AKS[:-1], "interactive", "--redirect-url", "http://localhost:8400"], {})
    assert ok.redirect_url == "http://localhost:8400"
    with pytest.raises(OptionsError, match="not a loopback http URL"):
        parse([*AKS[:-1], "interactive", "--redirect-url", "https://app.example/cb"], {})


def test_tool_modes_key_on_the_callers_azure_profile() -> None:
    cli = [*AKS[:-1], "azurecli"]
    a = parse(cli, {"AZURE_CONFIG_DIR": "/home/u/.azure-work"})
    b = parse(cli, {"AZURE_CONFIG_DIR": "/home/u/.azure-personal"})
    assert a.key != b.key and a.azure_config_dir == "/home/u/.azure-work"
    assert from_args(o.parse(cli, {}), {"PATH": "/opt/az/bin"}).tool_path == "/opt/az/bin"


def test_reading_an_azure_command_line_loads_no_msal() -> None:
    """msal (and requests with it) is loaded only when an Entra identity needs tokens: every
    agent reads command lines and describes identities without it."""
    import subprocess
    import sys

    code = (
        "import sys; from app.providers import default; ps = default(); "
        f"w = ps.wanted({AKS!r}, None, {{}}); p = ps.of(w.settings); "
        "p.describe(w.settings, None); p.note(w.settings, None); "
        "print(sorted(m for m in ('msal', 'requests', 'jwt') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_os_broker_is_the_callers_choice_and_only_on_windows_and_macos(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from app.providers.entra import os_broker

    assert parse(AKS, {}).broker and not parse(AKS, {"KUBETRAY_ENTRA_BROKER": "0"}).broker
    assert parse(AKS, {}).key == parse(AKS, {"KUBETRAY_ENTRA_BROKER": "0"}).key  # how, not who
    monkeypatch.setattr(os_broker.importlib.util, "find_spec", lambda name: object())
    for platform, on in (("linux", False), ("win32", True), ("darwin", True)):
        monkeypatch.setattr(os_broker.sys, "platform", platform)
        assert os_broker.enabled(True) is on and os_broker.enabled(False) is False


def test_entras_refusals_and_silences_as_kubetrays_errors() -> None:
    from app.oidc.errors import ProviderUnavailable, RefreshRefused
    from app.oidc.http import TransportError
    from app.providers.entra import errors

    url = f"https://login.microsoftonline.com/{TENANT}"
    sent = errors.from_exception(TransportError("timed out", reason=TimeoutError()), url)
    refused = errors.from_exception(TransportError("no", reason=ConnectionRefusedError()), url)
    gateway = errors.from_exception(TransportError("HTTP 504", status=504), url)
    assert isinstance(sent, ProviderUnavailable) and sent.unsure  # may have been rotated
    assert isinstance(refused, ProviderUnavailable) and not refused.unsure
    assert isinstance(gateway, ProviderUnavailable) and gateway.unsure
    mfa = {
        "error": "invalid_grant",
        "error_description": "AADSTS50076: Due to a configuration change made by your "
        "administrator, you must use multi-factor authentication to access 'x'. Trace ID: t "
        "Correlation ID: c Timestamp: 2026-11-21 12:00:00Z",
        "suberror": "basic_action",
        "claims": '{"access_token":{"capolids":{"essential":true,"values":["p"]}}}',
    }
    error = errors.from_result(mfa, "refresh")
    assert isinstance(error, errors.InteractionRequired) and error.claims == mfa["claims"]
    assert error.message.endswith("access 'x'.)") and "Trace ID" not in error.message
    expired = errors.from_result(
        {"error": "invalid_grant", "error_description": "AADSTS700082: x"}, "refresh"
    )
    assert type(expired) is RefreshRefused and expired.hint == "log in again"
    busy = errors.from_result({"error": "temporarily_unavailable"}, "refresh")
    assert isinstance(busy, ProviderUnavailable)
    machine = errors.from_result(mfa, "token request", machine=True)
    assert isinstance(machine, errors.CredentialRefused) and "devicecode" in str(machine.hint)
