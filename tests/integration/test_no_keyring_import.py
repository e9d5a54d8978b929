"""A new user without a keyring (no D-Bus session, keyring's fail backend): what import,
secure, doctor, the headless agent and the cloud logins say, as they print it."""

import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.test_headless import headless, scan  # noqa: F401 (a fixture)
from tests.peers import ROOT, KubetrayEnv

EXEC = "client.authentication.k8s.io/v1beta1"
USERS: dict[str, dict[str, Any]] = {
    # as `az aks get-credentials` + `kubelogin convert-kubeconfig -l devicecode` write it
    "aks": {
        "apiVersion": EXEC,
        "command": "kubelogin",
        "args": [
            "get-token",
            "--environment",
            "AzurePublicCloud",
            "--server-id",
            "6dae42f8-4368-4678-94ff-3960e28e3630",
            "--client-id",
            "80faf920-1908-4b52-b5ef-a8e7bedfc67a",
            "--tenant-id",
            "72f988bf-86f1-41af-91ab-2d7cd011db47",
            "--login",
            "devicecode",
        ],
        "interactiveMode": "IfAvailable",
        "provideClusterInfo": False,
    },
    # as `gcloud container clusters get-credentials` writes it
    "gke": {
        "apiVersion": EXEC,
        "command": "gke-gcloud-auth-plugin",
        "installHint": "Install gke-gcloud-auth-plugin for use with kubectl",
        "provideClusterInfo": True,
        "interactiveMode": "IfAvailable",
    },
    # as `aws eks update-kubeconfig --profile dev` writes it
    "eks": {
        "apiVersion": EXEC,
        "command": "aws",
        "args": ["--region", "eu-west-1", "eks", "get-token", "--cluster-name", "demo"],
        "env": [{"name": "AWS_PROFILE", "value": "dev"}],
        "interactiveMode": "IfAvailable",
    },
}


def kubeconfig(path: Path, user: str, body: dict[str, Any]) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": user, "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": user, "user": {"exec": body}}],
        "contexts": [{"name": user, "context": {"cluster": user, "user": user}}],
        "current-context": user,
    }
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("user", sorted(USERS))
def test_import_of_a_cloud_user_needs_no_keyring(
    headless: KubetrayEnv,  # noqa: F811
    user: str,
) -> None:
    kt = headless
    config = kubeconfig(kt.inputs() / f"{user}.yaml", user, USERS[user])
    before = config.read_bytes()
    dry = kt.kubetray("import", "--kubeconfig", str(config), "--dry-run")
    assert dry.returncode == 0 and dry.stderr == "", dry.stderr
    if user == "eks":  # a profile's name is no secret: shown
        assert re.search(r"- name: AWS_PROFILE\n +value: dev\n", dry.stdout), dry.stdout
    done = kt.kubetray("import", "--kubeconfig", str(config), "--yes")
    assert done.returncode == 0, done.stderr
    assert f"imported {user}; undo: kubetray import --kubeconfig {config} --undo" in done.stdout
    written = yaml.safe_load(config.read_text())["users"][0]["user"]["exec"]
    assert written["command"] == str(kt.helper) or "kubetray-exec" in written["command"]
    assert list(config.parent.glob(f"{user}.yaml.kubetray-*.bak"))  # beside it: no secret
    undone = kt.kubetray("import", "--kubeconfig", str(config), "--undo", "--yes")
    assert undone.returncode == 0, undone.stderr
    assert f"restored {user} as before the import" in undone.stdout
    assert config.read_bytes() == before
    listed = kt.kubetray("backups", "--kubeconfig", str(config))  # as every command spells it
    assert listed.returncode == 0 and str(config) in listed.stdout, listed.stderr
    again = kt.kubetray("import", "--kubeconfig", str(config), "--undo", "--yes")
    assert again.stderr == "error: there is no import to undo\n"


def test_an_import_that_needs_the_keyring_says_so_before_the_diff(
    headless: KubetrayEnv,  # noqa: F811
) -> None:
    kt = headless
    body = {**USERS["eks"], "env": [*USERS["eks"]["env"]]}
    body["env"].append({"name": "AWS_SECRET_ACCESS_KEY", "value": "a-secret-access-key"})
    config = kubeconfig(kt.inputs() / "keys.yaml", "eks", body)
    before = config.read_bytes()
    why = (
        "this import needs the OS keyring (the record of this import, for --undo, holds a "
        "secret), but there is no D-Bus session bus, so no Secret Service such as "
        "gnome-keyring, KWallet or KeePassXC"
    )
    dry = kt.kubetray("import", "--kubeconfig", str(config), "--dry-run")
    assert dry.returncode == 0
    assert dry.stderr == f"kubetray: the import would fail: {why}\n"
    assert "value: <redacted>" in dry.stdout and "a-secret-access-key" not in dry.stdout
    done = kt.kubetray("import", "--kubeconfig", str(config), "--yes")
    assert done.returncode == 1 and done.stdout == ""  # no diff that then fails
    assert done.stderr.splitlines()[0] == f"error: {why}"
    assert config.read_bytes() == before
    scan(kt, "a-secret-access-key")


@pytest.mark.parametrize("command", [["import"], ["secure", "--all"], ["doctor"]])
def test_a_kubeconfig_named_that_does_not_exist_is_one_line(
    kt: KubetrayEnv, command: list[str]
) -> None:
    done = kt.kubetray(*command, "--kubeconfig", "/nope/config")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "error: the kubeconfig /nope/config does not exist\n"


def test_nothing_to_import_names_every_tool_import_converts(kt: KubetrayEnv) -> None:
    config = kt.inputs() / "plain.yaml"
    config.write_text("apiVersion: v1\nkind: Config\n")
    done = kt.kubetray("import", "--kubeconfig", str(config))
    assert done.returncode == 0
    assert done.stdout == (
        "no users of int128/kubelogin, Azure kubelogin, gke-gcloud-auth-plugin, aws eks "
        "get-token or aws-iam-authenticator found: nothing to import\n"
    )


def _helper_lines(kt: KubetrayEnv, *args: str, **env: str) -> list[str]:
    """kubetray-exec's stderr lines, once the agent runs (its start is said once)."""
    kt.run_helper("--stored", "warm-up-the-agent")
    done = kt.run_helper(*args, extra_env=env)
    assert done.returncode != 0 and done.stdout == ""
    return done.stderr.splitlines()


def test_gke_application_default_credentials_missing_is_one_line(
    headless: KubetrayEnv,  # noqa: F811
) -> None:
    kt = headless
    adc = kt.home / ".config" / "gcloud" / "application_default_credentials.json"
    lines = _helper_lines(kt, "gke-gcloud-auth-plugin", "--use_application_default_credentials")
    assert lines == [
        f"no application default credentials at {adc}; run: gcloud auth application-default "
        "login (then kubectl again)"
    ]


@pytest.mark.parametrize(
    ("args", "env", "fix"),
    [
        ([], {"AWS_PROFILE": "nosuch"}, "AWS_PROFILE (the kubeconfig's env)"),
        (["--profile", "nosuch"], {}, "--profile in the kubeconfig's args"),
    ],
)
def test_eks_unknown_profile_is_one_line_with_the_remedy(
    headless: KubetrayEnv,  # noqa: F811
    args: list[str],
    env: dict[str, str],
    fix: str,
) -> None:
    kt = headless
    aws = kt.home / ".aws"
    aws.mkdir()
    (aws / "config").write_text("[profile dev]\nregion = eu-west-1\n")
    lines = _helper_lines(kt, "eks", "get-token", "--cluster-name", "demo", *args, **env)
    assert lines == [
        "the AWS profile 'nosuch' is neither in ~/.aws/config nor in ~/.aws/credentials; "
        f"create it: aws configure sso --profile nosuch, or fix {fix}"
    ]


def test_the_headless_agent_in_a_terminal_prints_short_lines_and_logs_to_its_file(
    headless: KubetrayEnv,  # noqa: F811
) -> None:
    import pexpect

    kt = headless
    agent = pexpect.spawn(
        sys.executable, ["-m", "app", "agent"], env=kt.env, cwd=str(ROOT), encoding="utf-8"
    )
    try:
        agent.expect("Ctrl-C stops the agent", timeout=30)
        out = f"{agent.before}{agent.after}"
        kt.run_helper("--stored", "nosuch")
        stopped = kt.kubetray("stop")
        assert stopped.returncode == 0, stopped.stderr
        agent.expect(pexpect.EOF, timeout=30)
        out += str(agent.before)
    finally:
        agent.close(force=True)
    lines = [line for line in out.replace("\r", "").splitlines() if line]
    log = kt.state / "agent.log"
    assert lines[0].startswith("kubetray agent ") and " listening on " in lines[0]
    assert lines[1:] == [
        f"log: {log}; Ctrl-C stops the agent",
        "no OS keyring here: tokens are kept in memory until the agent stops (there is no D-Bus "
        "session bus, so no Secret Service such as gnome-keyring, KWallet or KeePassXC)",
        "stopping on request",
    ]
    records = log.read_text()  # the records, as kubetray-exec's agents write them
    assert " INFO app.agent.headless: kubetray agent " in records
    assert " INFO app.agent.headless: tokens: memory (session bus: no session bus)" in records
