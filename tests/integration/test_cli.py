"""`kubetray status`: what a person and a script see, with and without an agent."""

import json
import os
from pathlib import Path

from tests.peers import KubetrayEnv


def test_status_without_and_with_an_agent(
    kt: KubetrayEnv, keyring_session: None, name: str, tmp_path: Path
) -> None:
    from tests.pki import CA

    ca = CA()
    user = ca.issue("status-user", org="devs")
    kt.store_certificate(name, user.cert_pem, user.key_pem)
    kt.store_token(name + "t", "status-token")

    idle = kt.kubetray("status")
    assert idle.returncode == 0
    assert "agent: not running" in idle.stdout
    assert name in idle.stdout and "client-certificate" in idle.stdout and "(in 23h" in idle.stdout

    assert kt.run_helper("--stored", name + "t").returncode == 0
    assert kt.run_helper("--stored", "missing-one").returncode == 1
    table = kt.kubetray("status")
    assert f"agent: running (pid {kt.agent_pid()}" in table.stdout
    row = next(line for line in table.stdout.splitlines() if line.startswith(name + "t "))
    assert row.split()[1:4] == ["token", "ready", "-"] and row.split()[-1] == "1"
    assert "missing-one" not in table.stdout  # a typo is not an identity: only its call stays

    doc = json.loads(kt.kubetray("status", "--json").stdout)
    by_name = {i["name"]: i for i in doc["identities"]}
    assert by_name[name]["subject"] == "O=devs,CN=status-user"
    assert by_name[name]["expires"].startswith(
        user.cert.not_valid_after_utc.strftime("%Y-%m-%dT%H:%M")
    )
    assert by_name[name + "t"]["calls"] == 1 and "missing-one" not in by_name
    assert doc["calls"] == {"ok": 1, "failed": 1}
    assert "status-token" not in json.dumps(doc) + table.stdout
    for n in (name, name + "t"):
        kt.kubetray("forget", n)


def test_usage_errors(kt: KubetrayEnv) -> None:
    done = kt.kubetray("store", "x")
    assert done.returncode == 2 and done.stderr.startswith("error: nothing to store\nhint: ")
    done = kt.kubetray("forget", "bad name")
    assert done.returncode == 2 and "invalid credential name" in done.stderr


NOTHING_CONFIGURED = [
    ("--stored", "nosuch"),  # a name never stored
    ("eks", "get-token", "--cluster-name", "x"),  # no AWS credentials
    ("gke-gcloud-auth-plugin", "--use_application_default_credentials"),  # no ADC file
    ("get-token", "--login", "azurecli", "--server-id", "6dae42f8-4368-4678-94ff-3960e28e3630"),
]


def test_typos_and_clouds_with_nothing_configured_leave_no_identity(kt: KubetrayEnv) -> None:
    for k in [k for k in kt.env if k.startswith(("AWS_", "GOOGLE_", "CLOUDSDK_", "AZURE_"))]:
        del kt.env[k]
    kt.env.update(
        AWS_CONFIG_FILE=str(kt.home / "no-aws-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(kt.home / "no-aws-credentials"),
        AWS_EC2_METADATA_DISABLED="true",  # no instance metadata service to wait for
        PATH=os.pathsep.join(p for p in kt.env["PATH"].split(os.pathsep) if not _has_az(p)),
    )
    before = kt.kubetray("status")
    assert "no identities yet" in before.stdout
    for args in NOTHING_CONFIGURED:
        done = kt.run_helper(*args)
        assert done.returncode == 1 and done.stderr.strip(), (args, done.stderr)
    after = kt.kubetray("status", "--json")
    doc = json.loads(after.stdout)
    assert doc["identities"] == [] and doc["calls"] == {"ok": 0, "failed": 4}
    index = json.loads((kt.config / "identities.json").read_text())
    assert index["identities"] == {}
    # A person's login that nobody here can show stays: it awaits them.
    person = ("--oidc-issuer-url", "https://idp.example", "--oidc-client-id", "kubectl")
    assert "login required for kubectl@idp.example" in kt.run_helper(*person).stderr
    names = [i["name"] for i in json.loads(kt.kubetray("status", "--json").stdout)["identities"]]
    assert names == ["kubectl@idp.example"]
    # With no agent running, status still lists what kubetray knows (not "no identities yet").
    kt.stop_agent()
    idle = kt.kubetray("status")
    assert "agent: not running" in idle.stdout and "no identities yet" not in idle.stdout
    row = next(line for line in idle.stdout.splitlines() if line.startswith("kubectl@idp"))
    assert row.split()[1:3] == ["oidc", "stored"], row
    assert not (kt.runtime / "agent.sock").exists()  # status started nothing
    # A name that is not there: the verb it was asked for.
    gone = kt.kubetray("logout", "nosuch")
    assert gone.returncode != 0 and "no identity named 'nosuch' to log out of" in gone.stderr
    kt.stop_agent()


def test_status_into_a_pipe_that_closed_says_nothing(kt: KubetrayEnv) -> None:
    """`kubetray status | head -1`: the reader has gone, as head does; no 'Broken pipe'."""
    import subprocess
    import sys

    from tests.peers import ROOT

    read, write = os.pipe()
    os.close(read)  # the reader is gone before kubetray writes
    try:
        done = subprocess.run(
            [sys.executable, "-m", "app", "status"],
            env=kt.env,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            cwd=ROOT,
            check=False,
        )
    finally:
        os.close(write)
    assert done.returncode == 0 and done.stderr == "", done.stderr


def _has_az(directory: str) -> bool:
    return os.path.exists(os.path.join(directory, "az"))
