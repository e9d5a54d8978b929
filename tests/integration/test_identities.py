"""Identities as a person sees them, against the real agent and oidc-provider: spellings of one
login are one identity, named after the kubeconfig user; a restart shows the true state; forget
logs out and removes."""

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.idp import IdP, run_idp
from tests.peers import KubetrayEnv, StartAgent

pytestmark = pytest.mark.usefixtures("keyring_session")


@pytest.fixture
def idp() -> Iterator[IdP]:
    with run_idp(password=True) as provider:
        yield provider


def login_args(issuer: str) -> list[str]:
    return [
        f"--oidc-issuer-url={issuer}",
        "--oidc-client-id=kubectl",
        "--oidc-extra-scope=email",
        "--grant-type=password",
        "--username=alice",
        "--password=pw-alice",
    ]


def write_kubeconfig(path: Path, helper: Path, args: list[str]) -> None:
    exec_ = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": str(helper),
        "args": ["get-token", *args],
        "interactiveMode": "Never",
    }
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "dev", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "dev-alice", "user": {"exec": exec_}}],
                "contexts": [{"name": "dev", "context": {"cluster": "dev", "user": "dev-alice"}}],
                "current-context": "dev",
            }
        )
    )


def oidc_rows(kt: KubetrayEnv) -> list[dict[str, Any]]:
    return [i for i in kt.kubetray_json("status")["identities"] if i["kind"] == "oidc"]


def test_spellings_are_one_identity_named_after_the_kubeconfig_user(
    kt: KubetrayEnv, idp: IdP, tmp_path: Path
) -> None:
    config = tmp_path / "kubeconfig"
    write_kubeconfig(config, kt.helper, login_args(idp.issuer + "/"))
    kt.env["KUBECONFIG"] = str(config)
    first = kt.run_helper(*login_args(idp.issuer + "/"))
    assert first.returncode == 0, first.stderr
    assert "Logged in to dev-alice as alice" in first.stderr
    host = idp.issuer.removeprefix("http://")
    for spelling in (idp.issuer, f"HTTP://{host}//", f"http://{host.upper()}"):
        again = kt.run_helper(*login_args(spelling))
        assert again.returncode == 0 and again.stderr == "", again.stderr
    assert idp.counts().get("password") == 1  # one login for every spelling
    login = kt.kubetray("login", "--", *login_args(idp.issuer))
    assert login.returncode == 0 and "logged in to dev-alice" in login.stdout, login.stderr
    rows = oidc_rows(kt)
    assert [(r["name"], r["contexts"], r["calls"]) for r in rows] == [("dev-alice", ["dev"], 4)]
    table = kt.kubetray("status").stdout
    assert table.count("dev-alice") == 1 and "alice@example.test" in table


def test_a_kubeconfig_of_hundreds_of_files_is_served_and_names_the_identity(
    kt: KubetrayEnv, idp: IdP, tmp_path: Path
) -> None:
    """A platform engineer's KUBECONFIG lists a file per cluster: 300 paths are ~20 KB, which
    the agent once refused as a malformed request (issue 33), failing every kubectl call."""
    teams = tmp_path / "kubeconfigs-of-every-team-this-platform-engineer-works-with"
    config = teams / "zz-dev.yaml"
    teams.mkdir()
    write_kubeconfig(config, kt.helper, login_args(idp.issuer))
    others = [str(teams / f"team-{i:03d}.yaml") for i in range(300)]  # missing: read as empty
    kt.env["KUBECONFIG"] = ":".join([*others, str(config)])
    assert len(kt.env["KUBECONFIG"]) > 16 * 1024
    done = kt.run_helper(*login_args(idp.issuer))
    assert done.returncode == 0, done.stderr
    assert "Logged in to dev-alice as alice" in done.stderr
    assert [(r["name"], r["contexts"]) for r in oidc_rows(kt)] == [("dev-alice", ["dev"])]


def test_a_restarted_agent_shows_the_true_state_before_any_call(
    kt: KubetrayEnv, start_agent: StartAgent, idp: IdP, tmp_path: Path
) -> None:
    assert kt.run_helper(*login_args(idp.issuer)).returncode == 0
    name = oidc_rows(kt)[0]["name"]
    kt.stop_agent()
    start_agent(kt)
    deadline = time.monotonic() + 15
    rows: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        rows = oidc_rows(kt)
        if rows and rows[0]["state"] == "ready":
            break
        time.sleep(0.1)
    assert [(r["name"], r["state"], r["calls"], r["who"]) for r in rows] == [
        (name, "ready", 0, "alice@example.test")
    ]


def test_forget_logs_out_and_removes_the_identity(kt: KubetrayEnv, idp: IdP) -> None:
    assert kt.run_helper(*login_args(idp.issuer)).returncode == 0
    name = oidc_rows(kt)[0]["name"]
    done = kt.kubetray("forget", name)
    assert done.returncode == 0 and f"logged out of {name} and removed it" in done.stdout
    assert oidc_rows(kt) == []
    assert idp.counts().get("revoked") == 1
    index = json.loads((kt.config / "identities.json").read_text())
    assert index["identities"] == {}
    missing = kt.kubetray("forget", name)
    assert missing.returncode != 0 and "no stored credential or OIDC identity" in missing.stderr


def test_the_callers_browser_is_used_not_the_agents(
    kt: KubetrayEnv, idp: IdP, tmp_path: Path
) -> None:
    def browser(marker: Path) -> str:
        return f"{sys.executable} -c \"import sys; open('{marker}', 'w').write(sys.argv[1])\""

    first, second = tmp_path / "first-browser", tmp_path / "second-browser"
    args = [f"--oidc-issuer-url={idp.issuer}", "--oidc-client-id=kubectl"]
    kt.env["KUBETRAY_BROWSER"] = browser(first)  # the agent starts with this one
    assert kt.run_helper(*login_args(idp.issuer)).returncode == 0  # agent up, no browser
    done = kt.run_helper(
        *args,
        "--authentication-timeout-sec=2",
        extra_env={"KUBETRAY_BROWSER": browser(second)},
    )
    assert done.returncode == 1  # nobody logs in: the point is which browser opened
    assert second.read_text().startswith(f"{idp.issuer}/auth?") and not first.exists()


def test_kubectl_kubeconfig_flag_names_the_identity_too(
    kt: KubetrayEnv, idp: IdP, tmp_path: Path
) -> None:
    """`kubectl --kubeconfig FILE` puts FILE in no environment variable: the agent reads it from
    the running kubectl, so the identity is still named after the kubeconfig user."""
    from tests.peers import kubectl_binaries, require

    binaries = kubectl_binaries()
    require("1.33" in binaries, "kubectl 1.33 is not installed")
    config = tmp_path / "work" / "kubeconfig"
    config.parent.mkdir()
    write_kubeconfig(config, kt.helper, login_args(idp.issuer))
    kt.env.pop("KUBECONFIG", None)
    subprocess.run(  # a relative --kubeconfig, as typed in that directory
        [binaries["1.33"], "--kubeconfig", "kubeconfig", "get", "ns", "--request-timeout=2s"],
        env=kt.env,
        cwd=config.parent,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert idp.counts().get("password") == 1  # the plugin ran (the server itself is not there)
    assert [r["name"] for r in oidc_rows(kt)] == ["dev-alice"]


def test_a_caller_without_kubeconfig_still_gets_the_kubeconfig_users_name(
    kt: KubetrayEnv, idp: IdP, tmp_path: Path, start_agent: StartAgent
) -> None:
    """client-node and Python's config_file= pass no KUBECONFIG: kubectl's default file names
    the identity, even when the agent was started by a caller with another KUBECONFIG."""
    other = tmp_path / "other"
    write_kubeconfig(other, kt.helper, ["--stored=unrelated"])
    kt.env["KUBECONFIG"] = str(other)
    start_agent(kt)
    default = Path(kt.env["HOME"]) / ".kube" / "config"
    default.parent.mkdir(parents=True, exist_ok=True)
    write_kubeconfig(default, kt.helper, login_args(idp.issuer))
    del kt.env["KUBECONFIG"]
    done = kt.run_helper(*login_args(idp.issuer))
    assert done.returncode == 0, done.stderr
    assert [r["name"] for r in oidc_rows(kt)] == ["dev-alice"]
