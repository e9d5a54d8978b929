"""`kubetray status`: what a person and a script see, with and without an agent."""

import json
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
