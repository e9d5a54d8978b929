"""AKS users end to end: kubeconfigs as `az aks get-credentials` and `kubelogin
convert-kubeconfig` write them, imported by `kubetray import`, run by real kubectl against an
API stand-in that checks what AKS checks (the tenant's v1 issuer, the AKS server app as
audience), with npm oidc-provider dressed as Entra (tests/oidc/entra.mjs) and headless
chromium signing in.
"""

import base64
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.kubeconfig import edit, migrate
from app.kubeconfig.backups import Backups
from app.kubeconfig.view import View
from app.store.memory_store import MemorySecretStore
from tests.apiserver import NAMESPACES, APIServer
from tests.entra import Entra, Person, aks_accepts, fake_tool, run_entra
from tests.idp import browser_available, browser_events, browser_log
from tests.peers import ROOT, KubetrayEnv, StartAgent, kubectl_binaries, require
from tests.pki import CA

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(240)]
FIXTURES = ROOT / "tests" / "kubeconfig" / "azure"
BROWSE = f"{sys.executable} {ROOT / 'tests' / 'oidc' / 'entra_browse.py'}"


@pytest.fixture(scope="module")
def entra() -> Iterator[Entra]:
    with run_entra() as e:
        yield e


@pytest.fixture
def api(entra: Entra) -> Iterator[APIServer]:
    with APIServer(CA(), check_token=aks_accepts(entra)) as server:
        yield server


@pytest.fixture
def browser(kt: KubetrayEnv) -> Path:
    require(
        browser_available(), "needs Debian chromium and Python playwright (make test installs them)"
    )
    log = kt.home.parent / "browser.jsonl"
    kt.env.update(KUBETRAY_BROWSER=BROWSE, KUBETRAY_TEST_BROWSER_LOG=str(log))
    return log


def aks_file(
    kt: KubetrayEnv, api: APIServer, entra: Entra, fixture: str, path: Path, **extra: Any
) -> Path:
    """The fixture with the stand-ins' addresses in it, imported by `kubetray import`, and the
    two flags only a test needs (where its Entra is, and that Entra's test CA) added."""
    doc = yaml.safe_load((FIXTURES / fixture).read_text())
    cluster = doc["clusters"][0]["cluster"]
    cluster["server"] = api.url
    cluster["certificate-authority-data"] = base64.b64encode(api.ca_pem).decode()
    user = doc["users"][0]["user"]
    for key, value in extra.items():
        user["exec"][key] = value
    path.write_text(yaml.safe_dump(doc))
    # kubetray import's own plan and write (its record of imports, which lives in the one
    # keyring all tests share, is left out: tests/unit/test_entra_convert.py has the CLI's).
    plan, changes, skipped = migrate.plan(View.load([str(path)]), str(kt.helper))
    assert [c.user for c in changes] == ["clusterUser_rg-demo_aks-demo"] and not skipped
    edit.apply(plan, Backups(str(tmp_journal(path)), MemorySecretStore), "import")
    doc = yaml.safe_load(path.read_text())
    exec_ = doc["users"][0]["user"]["exec"]
    assert Path(exec_["command"]).name == "kubetray-exec" and Path(exec_["command"]).is_absolute()
    exec_["args"] += [
        "--authority-host",
        entra.base + "/",
        "--certificate-authority",
        str(entra.ca_file),
    ]
    path.write_text(yaml.safe_dump(doc))
    return path


def tmp_journal(path: Path) -> Path:
    return path.parent / "backups.json"


def kubectl(
    kt: KubetrayEnv, config: Path, version: str = "1.33", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    binaries = kubectl_binaries()
    require(version in binaries, f"kubectl {version} is not installed")
    return subprocess.run(
        [binaries[version], "--kubeconfig", str(config), "get", "ns", "-o", "name"],
        env={**kt.env, **(env or {})},
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )


def status(kt: KubetrayEnv) -> dict[str, Any]:
    done = kt.kubetray("status", "--json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_an_imported_aks_user_signs_in_once_in_the_browser_for_every_kubectl(
    kt: KubetrayEnv, entra: Entra, api: APIServer, browser: Path, tmp_path: Path
) -> None:
    config = aks_file(kt, api, entra, "convert-interactive.yaml", tmp_path / "kubeconfig")
    before = entra.counts().get("authorization_code", 0)
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda _: kubectl(kt, config), range(4)))
    for done in runs:
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == [f"namespace/{n}" for n in NAMESPACES]
    assert entra.counts().get("authorization_code", 0) == before + 1  # one login for all four
    (opened,) = [e for e in browser_log(browser) if e["event"] == "opened"]
    assert "response_mode=form_post" in opened["url"]
    (done_,) = browser_events(browser, "done")
    assert done_["posted"] and done_["posted"][0].startswith("http://localhost:")
    # Older kubectl, from memory: no new login.
    again = kubectl(kt, config, "1.27")
    assert again.returncode == 0, again.stderr
    assert entra.counts().get("authorization_code", 0) == before + 1
    assert set(api.outcomes()) == {"token"}
    (row,) = [i for i in status(kt)["identities"] if i["kind"] == "entra"]
    details = dict(row["details"])
    assert details["tenant"] == entra.tenant and details["account"] == "alice@contoso.test"
    assert details["login"] == "interactive" and row["name"] == "aks@72f988bf"


def test_device_code_in_a_terminal_shows_entras_message(
    kt: KubetrayEnv, entra: Entra, api: APIServer, tmp_path: Path
) -> None:
    import pexpect

    for var in ("DISPLAY", "WAYLAND_DISPLAY", "KUBETRAY_BROWSER"):
        kt.env.pop(var, None)
    config = aks_file(kt, api, entra, "aks-get-credentials.yaml", tmp_path / "kubeconfig")
    binaries = kubectl_binaries()
    require("1.33" in binaries, "kubectl 1.33 is not installed")
    child = pexpect.spawn(
        binaries["1.33"],
        ["--kubeconfig", str(config), "get", "ns", "-o", "name"],
        env=dict(kt.env),
        encoding="utf-8",
        timeout=90,
    )
    pattern = r"open the page (\S+) and enter the code (\S+) to authenticate"
    if child.expect([pattern, pexpect.EOF]) == 1:
        pytest.fail(f"no device code; the terminal showed:\n{child.before}")
    uri, code = child.match.group(1), child.match.group(2)
    assert child.before.rstrip().endswith("To sign in, use a web browser to")
    Person(entra, "bob").enter_code(uri, code)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    assert "namespace/kubetray-proof" in child.before
    (row,) = [i for i in status(kt)["identities"] if i["kind"] == "entra"]
    assert dict(row["details"])["account"] == "bob@contoso.test"


def test_a_service_principal_from_the_callers_environment_needs_nobody(
    kt: KubetrayEnv, entra: Entra, api: APIServer, tmp_path: Path
) -> None:
    config = aks_file(kt, api, entra, "convert-spn.yaml", tmp_path / "kubeconfig")
    secret = entra.sp_secret["client_secret"]
    env = {"AZURE_CLIENT_ID": entra.sp_secret["client_id"], "AZURE_CLIENT_SECRET": secret}
    done = kubectl(kt, config, env=env)
    assert done.returncode == 0, done.stderr
    assert entra.seen("/token")[-1]["params"]["grant_type"] == "client_credentials"
    shown = kt.kubetray("status", "--json").stdout
    (row,) = [i for i in json.loads(shown)["identities"] if i["kind"] == "entra"]
    assert dict(row["details"])["login"] == "spn" and row["who"] == entra.sp_secret["client_id"]
    assert "AZURE_CLIENT_ID in the caller's environment set the client id" in (row["note"] or "")
    logs = "".join(p.read_text(errors="replace") for p in kt.state.rglob("*.log"))
    assert secret not in shown and secret not in logs and secret not in done.stderr


def test_the_azure_cli_login_is_served_by_running_az_once_for_many_kubectl(
    kt: KubetrayEnv, entra: Entra, api: APIServer, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "tools"
    bin_dir.mkdir()
    state = fake_tool(entra, "az", bin_dir)
    (state / "logged-in").touch()
    kt.env["PATH"] = f"{bin_dir}:{kt.env['PATH']}"  # the agent the helper starts inherits it
    config = aks_file(kt, api, entra, "convert-azurecli.yaml", tmp_path / "kubeconfig")
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda _: kubectl(kt, config), range(4)))
    assert all(r.returncode == 0 for r in runs), [r.stderr for r in runs]
    calls = (state / "calls.jsonl").read_text().splitlines()
    assert len(calls) == 1, calls  # one az for four kubectl
    assert set(api.outcomes()) == {"token"}


def test_az_is_the_one_on_the_caller_s_path_not_the_agent_s(
    kt: KubetrayEnv, entra: Entra, api: APIServer, tmp_path: Path, start_agent: StartAgent
) -> None:
    """The agent was started by something else (the desktop, another shell): the `az` that
    serves kubectl is the one kubectl's own PATH finds, as Azure kubelogin runs it."""
    start_agent(kt)  # its PATH has no az
    bin_dir = tmp_path / "tools"
    bin_dir.mkdir()
    state = fake_tool(entra, "az", bin_dir)
    (state / "logged-in").touch()
    config = aks_file(kt, api, entra, "convert-azurecli.yaml", tmp_path / "kubeconfig")
    run = kubectl(kt, config, env={"PATH": f"{bin_dir}:{kt.env['PATH']}"})
    assert run.returncode == 0, run.stderr
    assert len((state / "calls.jsonl").read_text().splitlines()) == 1
    assert set(api.outcomes()) == {"token"}


def test_a_mode_kubetray_does_not_serve_fails_in_one_line_saying_what_to_use(
    kt: KubetrayEnv, entra: Entra, api: APIServer, tmp_path: Path
) -> None:
    path = tmp_path / "kubeconfig"
    shutil.copy(FIXTURES / "convert-azurecli.yaml", path)
    doc = yaml.safe_load(path.read_text())
    exec_ = doc["users"][0]["user"]["exec"]
    exec_["command"] = str(kt.helper)
    exec_["args"] = ["get-token", "--login", "azurepipelines", "--server-id", "x", "-t", "t"]
    doc["clusters"][0]["cluster"]["server"] = api.url
    doc["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(
        api.ca_pem
    ).decode()
    path.write_text(yaml.safe_dump(doc))
    done = kubectl(kt, path)
    assert done.returncode != 0
    line = next((x for x in done.stderr.splitlines() if "azurepipelines" in x), done.stderr)
    assert "works only inside an Azure Pipelines job" in line and "kubelogin" in line


def test_the_login_survives_an_agent_restart_through_the_keyring(
    kt: KubetrayEnv,
    entra: Entra,
    api: APIServer,
    browser: Path,
    tmp_path: Path,
    keyring_session: None,
) -> None:
    config = aks_file(kt, api, entra, "convert-interactive.yaml", tmp_path / "kubeconfig")
    assert kubectl(kt, config).returncode == 0
    kt.stop_agent()
    done = kubectl(kt, config)
    assert done.returncode == 0, done.stderr
    assert len([e for e in browser_log(browser) if e["event"] == "opened"]) == 1
    (row,) = [i for i in status(kt)["identities"] if i["kind"] == "entra"]
    assert row["store_error"] is None and row["who"] == "alice@contoso.test"


@pytest.mark.slow
def test_refresh_ahead_keeps_kubectl_served_with_no_new_login(
    kt: KubetrayEnv, api: APIServer, browser: Path, tmp_path: Path
) -> None:
    import time

    with (
        run_entra(ttl={"AccessToken": 12}) as short,
        APIServer(CA(), check_token=aks_accepts(short)) as api2,
    ):
        config = aks_file(kt, api2, short, "convert-interactive.yaml", tmp_path / "kubeconfig")
        assert kubectl(kt, config).returncode == 0
        first = status(kt)["identities"][0]
        time.sleep(14)  # past the first token's end: the agent refreshed ahead meanwhile
        done = kubectl(kt, config)
        assert done.returncode == 0, done.stderr
        (row,) = [i for i in status(kt)["identities"] if i["kind"] == "entra"]
        assert row["refreshes"] >= 1 and row["expires"] > first["expires"]
        assert short.counts().get("refresh_token", 0) >= 1
        assert short.counts().get("authorization_code", 0) == 1  # still the one login
        assert len([e for e in browser_log(browser) if e["event"] == "opened"]) == 1


def test_doctor_checks_the_login_host_the_tenant_and_the_clock(
    kt: KubetrayEnv, entra: Entra, api: APIServer, tmp_path: Path
) -> None:
    config = aks_file(kt, api, entra, "aks-get-credentials.yaml", tmp_path / "kubeconfig")
    kt.env["KUBECONFIG"] = str(config)
    done = kt.kubetray("doctor")
    lines = done.stdout.splitlines()
    host = entra.base.removeprefix("https://")
    assert any(f"Entra {host}" in x and "answers" in x for x in lines), done.stdout
    assert any(f"tenant {entra.tenant}" in x and "exists there" in x for x in lines), done.stdout
    assert any(f"clock vs Entra {host}" in x for x in lines), done.stdout
