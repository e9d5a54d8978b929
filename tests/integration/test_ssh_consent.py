"""What a host nobody allowed can do through a forward: nothing that lasts. The headless agent
(nobody to ask) serves a host only the identities allowed for it; a burst of requests naming
new issuers, client ids, names and stored credentials writes no file and adds no identity.
The forward's local end is the ``ssh``-named relay (tests/ssh_standin.py), so the agent tells
the request by its peer as it does with OpenSSH."""

import hashlib
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.peers import ROOT, V1, KubetrayEnv, running_agent
from tests.ssh_standin import ssh_relay

pytestmark = pytest.mark.posix_only

TOKEN = "consent-stored-token-4411"


@pytest.fixture
def agent(kt: KubetrayEnv, keyring_session: None, name: str) -> Iterator[str]:
    """The headless agent with one stored credential, ``name``."""
    with running_agent(kt):
        kt.store_token(name, TOKEN)
        yield name
        kt.kubetray("forget", name)


def remote_exec(kt: KubetrayEnv, forwarded: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """kubetray-exec on the 'remote host': only KUBETRAY_AGENT_SOCK leads to the agent."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(kt.home),
        "KUBERNETES_EXEC_INFO": V1,
        "KUBETRAY_AGENT_SOCK": str(forwarded),
        "KUBETRAY_RUNTIME_DIR": str(kt.runtime) + "-remote",
    }
    return subprocess.run(
        [sys.executable, "-m", "exec_helper", *args],
        env=env,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def files(*dirs: Path) -> dict[str, tuple[int, str]]:
    """Every file under ``dirs``: (its inode, its content's hash): a rewrite shows in either."""
    out = {}
    for top in dirs:
        for path in sorted(top.rglob("*")):
            if path.is_file():
                out[str(path)] = (path.stat().st_ino, hashlib.sha256(path.read_bytes()).hexdigest())
    return out


def identities(kt: KubetrayEnv) -> list[str]:
    return sorted(i["name"] for i in kt.kubetray_json("status")["identities"])


def burst(stored: str) -> list[list[str]]:
    """What a host might send: new issuers and client ids (4 KB ones too), a chosen name that
    clashes or impersonates, stored credentials that exist or not."""
    oidc = [
        [
            "--oidc-issuer-url=https://login.attacker.invalid",
            f"--oidc-client-id=client-{n}-" + "x" * (4000 if n % 2 else 0),
            f"--name={['prod-admin', stored, 'corp'][n % 3]}",
        ]
        for n in range(24)
    ]
    named = [["--stored", stored, f"--name=renamed-{n}"] for n in range(4)]
    others = [["--stored", f"prodadmin-{n}"] for n in range(8)]
    return [*oidc, *named, *others]


def test_a_host_nobody_allowed_writes_nothing_and_names_nothing(
    kt: KubetrayEnv, agent: str, tmp_path: Path
) -> None:
    before_files = files(kt.config, kt.state)
    before = identities(kt)
    requests = burst(agent)
    with ssh_relay(tmp_path, str(kt.runtime / "agent.sock"), host="devvm") as (sock, sent):
        with ThreadPoolExecutor(8) as pool:
            done = list(pool.map(lambda args: remote_exec(kt, sock, *args), requests))
        assert TOKEN.encode() not in sent.read_bytes()
    assert all(d.returncode == 1 and d.stdout == "" for d in done)
    assert files(kt.config, kt.state) == before_files  # identities.json too, byte for byte
    assert identities(kt) == before
    assert "prod-admin" not in str(kt.kubetray_json("status"))
    for d in done:  # one line each, saying how the desktop would allow it
        [line] = d.stderr.splitlines()
        assert "nobody is there to ask whether devvm may have a token as" in line, line
        assert "kubetray remote allow devvm " in line
    listed = kt.kubetray("remote", "list")
    assert listed.stdout.splitlines()[0].startswith("devvm: asks"), listed.stdout


def test_an_allowed_identity_is_served_and_only_that_one(
    kt: KubetrayEnv, agent: str, tmp_path: Path
) -> None:
    """`kubetray remote allow HOST IDENTITY`: that identity, to that host. A forwarded --name
    is ignored (the desktop names identities); another identity is still refused."""
    no_identity = kt.kubetray("remote", "allow", "devvm")
    assert no_identity.returncode != 0
    assert "kubetray remote allow devvm IDENTITY" in no_identity.stderr
    assert kt.kubetray("remote", "allow", "devvm", agent).returncode == 0
    before = identities(kt)
    with ssh_relay(tmp_path, str(kt.runtime / "agent.sock"), host="devvm") as (sock, _):
        served = remote_exec(kt, sock, "--stored", agent, "--name=prod-admin")
        assert served.returncode == 0 and TOKEN in served.stdout, served.stderr
        other = remote_exec(kt, sock, "--stored", "prodadmin")
        assert other.returncode == 1 and other.stdout == ""
        assert "kubetray remote allow devvm prodadmin" in other.stderr
    with ssh_relay(tmp_path, str(kt.runtime / "agent.sock"), host="bastion") as (sock, _):
        elsewhere = remote_exec(kt, sock, "--stored", agent)
        assert elsewhere.returncode == 1 and "bastion" in elsewhere.stderr
    assert identities(kt) == before
    listed = kt.kubetray("remote", "list").stdout
    assert "devvm: allowed always" in listed and f"  as {agent}: allowed always" in listed
