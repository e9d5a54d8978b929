"""kubectl on an SSH host, logged in through the desktop's kubetray over a forwarded socket.

Real OpenSSH (tests/sshd.py): a private sshd on 127.0.0.1 and a second local account,
``kubetray-remote``, that stands for the remote host. The test process is the desktop: it runs
the headless agent, ``kubetray ssh`` and so the ``ssh`` client. Real kubectl 1.33 runs as the
remote user with the kubetray-exec that ``kubetray ssh --install-helper`` put there, against
the HTTPS stand-in for the API server; a recording relay on the remote side keeps every byte
that came through the forward.
"""

import base64
import itertools
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.apiserver import NAMESPACES, APIServer
from tests.idp import BROWSE, IdP, browser_available, browser_log, run_idp
from tests.integration.test_oidc import checker, oidc_args
from tests.integration.test_oidc import kubeconfig as local_kubeconfig
from tests.integration.test_oidc import kubectl as local_kubectl
from tests.peers import ROOT, V1, KubetrayEnv, kubectl_binaries, require, running_agent
from tests.pki import CA
from tests.sshd import (
    REMOTE_PYTHON,
    Account,
    SSHServer,
    install_helper_copy,
    listening_socket,
    remote_kubectl,
    run_sshd,
    stale_socket,
)

pytestmark = [pytest.mark.sshd, pytest.mark.posix_only]

TOKEN = "ssh-forwarded-bearer-7c1e"
HOST = "127.0.0.1"
"""What the agent records: the ssh destination ``kubetray-remote@127.0.0.1`` without the user."""
WORK = "kubetray-test"
"""The remote user's directory for what a test puts there (kubeconfig, relay, logs)."""
FRAME_TYPES = {"hello", "message", "keepalive", "prompt", "result"}


@pytest.fixture(scope="session")
def sshd() -> Iterator[SSHServer]:
    with run_sshd() as server:
        yield server


@pytest.fixture
def remote(sshd: SSHServer) -> Iterator[Account]:
    """The remote account as a fresh host would be: no kubetray-exec, no kubeconfig, no agent."""
    account = sshd.remote

    def clean() -> None:
        for path in (
            account.home / ".local" / "bin" / "kubetray-exec",
            account.home / ".local" / "lib" / "kubetray-exec",
            account.home / ".kube",
            account.home / WORK,
            account.runtime_dir,
            Path(account.forwarded_socket),
        ):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)

    clean()
    account.put(f"{WORK}/.keep", "")
    yield account
    clean()


@pytest.fixture
def desktop(kt: KubetrayEnv, keyring_session: None) -> Iterator[KubetrayEnv]:
    """The desktop: kubetray's headless agent running, and `ssh` on PATH recording its command
    line (then running the real one) so that tests can read what `kubetray ssh` ran."""
    wrapper = kt.inputs() / "bin"
    wrapper.mkdir()
    log = kt.inputs() / "ssh-argv.jsonl"
    (wrapper / "ssh").write_text(
        "#!/bin/sh\n"
        f"{sys.executable} -c 'import json,sys; print(json.dumps(sys.argv[1:]))' \"$@\" "
        f">> {shlex.quote(str(log))}\n"
        'exec /usr/bin/ssh "$@"\n'
    )
    (wrapper / "ssh").chmod(0o755)
    kt.env["PATH"] = f"{wrapper}:{kt.env.get('PATH', '/usr/bin:/bin')}"
    kt.env.pop("SSH_AUTH_SOCK", None)
    # Logins open in the tests' real headless browser, the desktop's (they log how often),
    # held back while a test keeps the file hold-browser.
    gate = wrapper / "browser"
    gate.write_text(
        "#!/bin/sh\n"
        f"touch {shlex.quote(str(kt.inputs() / 'browser-asked'))}\n"
        f"while [ -e {shlex.quote(str(kt.inputs() / 'hold-browser'))} ]; do sleep 0.05; done\n"
        f'exec {BROWSE} "$@"\n'
    )
    gate.chmod(0o755)
    kt.env.update(KUBETRAY_BROWSER=str(gate), KUBETRAY_TEST_BROWSER_LOG=str(browser_opened(kt)))
    with running_agent(kt):
        yield kt


def browser_opened(kt: KubetrayEnv) -> Path:
    return kt.inputs() / "browser.jsonl"


def ssh_runs(kt: KubetrayEnv) -> list[list[str]]:
    """The ssh command lines `kubetray ssh` ran (not its `ssh -G` questions)."""
    path = kt.inputs() / "ssh-argv.jsonl"
    runs = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [r for r in runs if "-G" not in r]


def kubectl_133() -> str:
    binaries = kubectl_binaries()
    require("1.33" in binaries, "kubectl 1.33 is not installed")
    return binaries["1.33"]


def kubetray_ssh(
    kt: KubetrayEnv, sshd: SSHServer, account: Account, *command: str, install: bool = False
) -> "subprocess.CompletedProcess[str]":
    """`kubetray ssh [--install-helper] SSH-OPTIONS USER@127.0.0.1 [COMMAND]` on the desktop,
    ssh's options before the host as a person types them."""
    flags = ["--install-helper"] if install else []
    remote_command = [shlex.join(command)] if command else []
    return kt.kubetray("ssh", *flags, *sshd.ssh_options(), account.destination, *remote_command)


def install_helper(kt: KubetrayEnv, sshd: SSHServer, account: Account) -> str:
    """`kubetray ssh --install-helper`: the product puts kubetray-exec on the remote host."""
    done = kubetray_ssh(kt, sshd, account, install=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert account.helper in done.stdout, done.stdout
    package = account.home / ".local" / "lib" / "kubetray-exec" / "exec_helper"
    assert (package / "__main__.py").stat().st_uid == account.uid  # the remote user's own
    assert sshd.check(account, [account.helper, "--version"]).startswith("kubetray-exec ")
    return account.helper


def remote_kubeconfig(
    account: Account, api: APIServer, helper: str, args: list[str], name: str = "kubeconfig"
) -> str:
    """A kubeconfig in the remote home whose user runs the installed helper. The CA is data:
    a path would name a file on the remote host, which the desktop's agent cannot read."""
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "remote",
        "clusters": [
            {
                "name": "remote",
                "cluster": {
                    "server": api.url,
                    "certificate-authority-data": base64.b64encode(api.ca_pem).decode(),
                },
            }
        ],
        "users": [
            {
                "name": "remote",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1",
                        "command": helper,
                        "args": args,
                        "interactiveMode": "Never",
                        "provideClusterInfo": True,
                        "installHint": "kubetray ssh --install-helper HOST (on your desktop)",
                    }
                },
            }
        ],
        "contexts": [{"name": "remote", "context": {"cluster": "remote", "user": "remote"}}],
    }
    return str(account.put(f"{WORK}/{name}", yaml.safe_dump(doc), 0o600))


def get_ns(kubectl: str, config: str) -> list[str]:
    return [kubectl, "--kubeconfig", config, "get", "namespaces", "-o", "name"]


def relayed(account: Account, *command: str) -> list[str]:
    """``command`` run behind the recording relay (tests/ssh_relay.py) on the remote host."""
    script = account.put(f"{WORK}/ssh_relay.py", (ROOT / "tests" / "ssh_relay.py").read_text())
    listen = str(account.home / WORK / "relay.sock")
    return [REMOTE_PYTHON, str(script), listen, str(relay_log(account)), "--", *command]


def relay_log(account: Account) -> Path:
    return account.home / WORK / "from-desktop"


def received(account: Account) -> list[bytes]:
    """What the remote side received from the desktop, one bytes per connection, in order."""
    logs = relay_log(account).parent.glob(relay_log(account).name + ".*")
    numbered = [p for p in logs if p.suffix[1:].isdigit()]
    return [p.read_bytes() for p in sorted(numbered, key=lambda p: int(p.suffix[1:]))]


def frames(data: bytes) -> list[dict[str, Any]]:
    """The agent's frames in the bytes of one connection (length-prefixed JSON)."""
    out = []
    while data:
        assert len(data) >= 4, "a truncated frame header"
        n = int.from_bytes(data[:4], "big")
        assert len(data) >= 4 + n, "a truncated frame"
        out.append(json.loads(data[4 : 4 + n]))
        data = data[4 + n :]
    return out


def agent_processes_of(account: Account) -> list[str]:
    """Command lines of ``account``'s processes that look like a kubetray agent."""
    return processes(account.uid, "agent")


def processes(uid: int, arg: str) -> list[str]:
    """Command lines of ``uid``'s processes with ``arg`` as one of their arguments."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            status = (proc / "status").read_text()
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        owner = next((x.split()[1] for x in status.splitlines() if x.startswith("Uid:")), "")
        if owner == str(uid) and arg.encode() in argv:
            found.append(" ".join(a.decode(errors="replace") for a in argv))
    return found


def one_kubetray_line(stderr: str, needle: str) -> str:
    """The line of ``stderr`` that holds ``needle`` (kubectl adds its own lines around, and
    says it again for each of its retries, which the agent answers from memory)."""
    lines = {line for line in stderr.splitlines() if needle in line}
    assert len(lines) == 1, stderr
    return lines.pop()


# -- the rig ---------------------------------------------------------------------------------

PROBE = """
import os, socket
path = os.environ["KUBETRAY_AGENT_SOCK"]
st = os.lstat(path)
s = socket.socket(socket.AF_UNIX)
s.connect(path)
s.sendall(b"hello from " + str(os.getuid()).encode())
s.shutdown(socket.SHUT_WR)
reply = b""
while chunk := s.recv(4096):
    reply += chunk
print(st.st_uid, oct(st.st_mode & 0o777), path, reply.decode())
"""


def allow_as_asked(kt: KubetrayEnv, sshd: SSHServer, remote: Account, command: list[str]) -> None:
    """Run ``command`` on the host once, refused by the headless agent, and allow the identity
    its line names (as a person would: the desktop names a new identity, not the host)."""
    refused = kubetray_ssh(kt, sshd, remote, *command)
    assert refused.returncode != 0, refused.stdout
    line = one_kubetray_line(refused.stderr, "kubetray remote allow")
    found = re.search(rf"kubetray remote allow {re.escape(HOST)} (\S+)", line)
    assert found, line
    assert kt.kubetray("remote", "allow", HOST, found.group(1)).returncode == 0


def echo_once(sock: socket.socket) -> threading.Thread:
    def serve() -> None:
        conn, _ = sock.accept()
        with conn:
            data = b""
            while chunk := conn.recv(4096):
                data += chunk
            conn.sendall(b"desktop heard: " + data)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return t


def test_the_harness_forwards_a_desktop_socket_to_the_remote_user(
    sshd: SSHServer, remote: Account, tmp_path: Path
) -> None:
    """The test rig itself, without kubetray: a real `ssh -R` from the desktop (root) to the
    remote account makes a socket on the remote host, owned by the remote user with mode 600,
    that reaches a socket on the desktop; SetEnv gets through; a socket an earlier session left
    is replaced; the remote user can run the system Python, a kubetray-exec and kubectl 1.33."""
    local = str(tmp_path / "desktop.sock")
    for _ in range(2):  # the second time over the socket the first session left behind
        with listening_socket(local) as listener:
            served = echo_once(listener)
            out = sshd.check(
                remote,
                [REMOTE_PYTHON, "-c", PROBE],
                forward=(remote.forwarded_socket, local),
                setenv={"KUBETRAY_AGENT_SOCK": remote.forwarded_socket},
            )
            served.join(10)
        uid, mode, path, reply = out.split(" ", 3)
        assert (int(uid), mode, path) == (remote.uid, "0o600", remote.forwarded_socket)
        assert reply.strip() == f"desktop heard: hello from {remote.uid}"
    helper = install_helper_copy(remote)
    assert sshd.check(remote, [helper, "--version"]).startswith("kubetray-exec ")
    kubectl = remote_kubectl(sshd, remote, kubectl_133())
    client = json.loads(sshd.check(remote, [kubectl, "version", "--client", "-o", "json"]))
    assert client["clientVersion"]["minor"] == "33"


# -- the remote helper on its own ------------------------------------------------------------


@pytest.mark.parametrize("socket_state", ["missing", "stale"])
def test_a_missing_or_dead_forward_is_one_line_and_starts_no_agent(
    sshd: SSHServer, remote: Account, socket_state: str
) -> None:
    """On the SSH host, KUBETRAY_AGENT_SOCK naming a socket that is not there (the session
    ended) or that nobody answers on (a stale file) makes kubetray-exec say so in one line
    naming the variable, exit 1, and never start a kubetray agent on that host instead."""
    helper = install_helper_copy(remote)  # kubetray ssh --install-helper: the tests below
    path = f"/tmp/kubetray-test-{remote.name}-{socket_state}.sock"
    Path(path).unlink(missing_ok=True)
    if socket_state == "stale":
        stale_socket(path, remote)
    marker = remote.home / WORK / "agent-started"
    starter = remote.put(f"{WORK}/start-agent", f"#!/bin/sh\ntouch {marker}\nsleep 30\n", 0o755)
    try:
        done = sshd.run(
            remote,
            [helper, "--stored", "anything"],
            remote_env={
                "KUBETRAY_AGENT_SOCK": path,
                "KUBERNETES_EXEC_INFO": V1.strip(),
                # What a helper that fell back to starting an agent would run.
                "KUBETRAY_AGENT_COMMAND": str(starter),
            },
        )
    finally:
        Path(path).unlink(missing_ok=True)
    assert done.returncode == 1 and done.stdout == "", done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    line = lines[0]
    assert "KUBETRAY_AGENT_SOCK" in line and path in line
    assert not marker.exists() and "started the kubetray agent" not in done.stderr
    assert not remote.runtime_dir.exists()  # no socket directory of its own either
    assert agent_processes_of(remote) == []


def test_a_forwarded_socket_owned_by_another_user_is_refused(
    sshd: SSHServer, remote: Account
) -> None:
    """KUBETRAY_AGENT_SOCK naming a socket another user of the SSH host owns (one that anyone
    may connect to) is refused before any request goes out: one line saying whose it is."""
    helper = install_helper_copy(remote)  # kubetray ssh --install-helper: the tests below
    path = f"/tmp/kubetray-test-{sshd.other.name}-planted.sock"
    with listening_socket(path, owner=sshd.other, mode=0o666) as planted:
        planted.settimeout(0.5)
        done = sshd.run(
            remote,
            [helper, "--stored", "anything"],
            remote_env={"KUBETRAY_AGENT_SOCK": path, "KUBERNETES_EXEC_INFO": V1.strip()},
        )
        with pytest.raises(TimeoutError):
            planted.accept()[0].close()  # nobody connected to it
    Path(path).unlink(missing_ok=True)
    assert done.returncode == 1 and done.stdout == "", done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    line = lines[0]
    assert f"belongs to uid {sshd.other.uid}" in line and "KUBETRAY_AGENT_SOCK" in line
    assert agent_processes_of(remote) == []


# -- through the desktop's agent -------------------------------------------------------------


@pytest.fixture
def api() -> Iterator[APIServer]:
    with APIServer(CA(), token=TOKEN) as server:
        yield server


@pytest.fixture
def stored(desktop: KubetrayEnv, name: str) -> Iterator[str]:
    desktop.store_token(name, TOKEN)
    yield name
    desktop.kubetray("forget", name)


@pytest.mark.kubectl
def test_kubetray_ssh_gets_remote_kubectl_its_namespaces_from_the_desktop(
    desktop: KubetrayEnv, sshd: SSHServer, remote: Account, api: APIServer, stored: str
) -> None:
    """The whole feature with a stored token: `kubetray ssh --install-helper` puts
    kubetray-exec on the host; `kubetray remote allow` lets the host in; kubectl 1.33 run
    through `kubetray ssh` lists namespaces with the desktop's credential; the call is recorded
    as `remote: 127.0.0.1` in the calls and `kubetray status`; ssh was run with the forward of
    the desktop agent's socket; and no agent was started on the SSH host."""
    kt = desktop
    helper = install_helper(kt, sshd, remote)
    config = remote_kubeconfig(remote, api, helper, ["--stored", stored])
    kubectl = remote_kubectl(sshd, remote, kubectl_133())
    allowed = kt.kubetray("remote", "allow", HOST, stored)
    assert allowed.returncode == 0, allowed.stderr

    done = kubetray_ssh(kt, sshd, remote, *get_ns(kubectl, config))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [f"namespace/{n}" for n in NAMESPACES]
    assert set(api.outcomes()) == {"token"}

    run = ssh_runs(kt)[-1]
    local = str(kt.runtime / "agent.sock")
    pairs = list(itertools.pairwise(run))
    assert ("-R", f"{remote.forwarded_socket}:{local}") in pairs
    assert ("-o", "StreamLocalBindUnlink=yes") in pairs
    assert ("-o", "ExitOnForwardFailure=yes") in pairs
    assert ("-o", f"SetEnv=KUBETRAY_AGENT_SOCK={remote.forwarded_socket}") in pairs
    tail = [*sshd.ssh_options(), remote.destination, shlex.join(get_ns(kubectl, config))]
    assert run[-len(tail) :] == tail  # the person's ssh options, host and command, as given

    records = [c for c in kt.calls() if c["identity"] == stored]
    assert records and all(c["caller"]["remote"] == HOST for c in records), records
    assert all(c["error"] is None for c in records), records
    status = kt.kubetray("status")
    assert f"remote: {HOST}" in status.stdout, status.stdout
    assert not remote.runtime_dir.exists() and agent_processes_of(remote) == []

    # The same through the recording relay: what reached the remote host is the credential.
    again = kubetray_ssh(kt, sshd, remote, *relayed(remote, *get_ns(kubectl, config)))
    assert again.returncode == 0, again.stderr
    connections = [frames(data) for data in received(remote)]
    assert connections
    for answer in connections:
        assert {f.get("type") for f in answer} <= FRAME_TYPES
        [result] = [f for f in answer if f.get("type") == "result"]
        assert result["exit"] == 0
        credential = json.loads(result["stdout"])
        assert credential["kind"] == "ExecCredential" and credential["status"]["token"] == TOKEN


@pytest.mark.kubectl
def test_the_headless_agent_refuses_a_host_nobody_allowed_and_a_denied_one(
    desktop: KubetrayEnv, sshd: SSHServer, remote: Account, api: APIServer, stored: str
) -> None:
    """The headless agent has nobody to ask: kubectl on a host not allowed gets one clear
    kubetray line saying how to allow it, and no credential; after `kubetray remote allow` it
    works; after `kubetray remote deny` it is refused again."""
    kt = desktop
    helper = install_helper(kt, sshd, remote)
    config = remote_kubeconfig(remote, api, helper, ["--stored", stored])
    command = get_ns(remote_kubectl(sshd, remote, kubectl_133()), config)

    refused = kubetray_ssh(kt, sshd, remote, *command)
    assert refused.returncode != 0 and refused.stdout == ""
    line = one_kubetray_line(refused.stderr, "kubetray remote allow")
    assert f"kubetray remote allow {HOST} {stored}" in line and TOKEN not in refused.stderr
    assert api.outcomes() == []  # nothing went out unauthenticated either

    assert kt.kubetray("remote", "allow", HOST, stored).returncode == 0
    served = kubetray_ssh(kt, sshd, remote, *command)
    assert served.returncode == 0, served.stderr

    assert kt.kubetray("remote", "deny", HOST).returncode == 0
    denied = kubetray_ssh(kt, sshd, remote, *command)
    assert denied.returncode != 0 and denied.stdout == ""
    line = one_kubetray_line(denied.stderr, "kubetray remote allow")
    assert HOST in line
    refusals = [c for c in kt.calls() if c["caller"].get("remote") == HOST and c["error"]]
    assert refusals, kt.calls()
    listed = kt.kubetray("remote", "list")
    assert f"{HOST}: denied" in listed.stdout, listed.stdout


@pytest.mark.kubectl
def test_the_printed_ssh_config_forwards_the_agent(
    desktop: KubetrayEnv, sshd: SSHServer, remote: Account, api: APIServer, stored: str
) -> None:
    """`kubetray ssh-config HOST` prints the ~/.ssh/config block (RemoteForward of the desktop
    agent's socket to a per-user path there, StreamLocalBindUnlink, SetEnv of
    KUBETRAY_AGENT_SOCK, and the shell-profile line for hosts without AcceptEnv); plain ssh
    with that block gets kubectl on the host its namespaces."""
    kt = desktop
    printed = kt.kubetray("ssh-config", HOST, "--user", remote.name)
    assert printed.returncode == 0, printed.stderr
    text = printed.stdout
    local = str(kt.runtime / "agent.sock")
    options = [line.split(None, 1) for line in text.splitlines() if line.strip()]
    settings = {o[0]: o[1] for o in options if len(o) == 2 and not o[0].startswith("#")}
    assert settings["Host"] == HOST
    assert settings["RemoteForward"].split() == [remote.forwarded_socket, local]
    assert settings["StreamLocalBindUnlink"] == "yes"
    assert settings["SetEnv"] == f"KUBETRAY_AGENT_SOCK={remote.forwarded_socket}"
    comments = [line for line in text.splitlines() if line.lstrip().startswith("#")]
    assert any("export KUBETRAY_AGENT_SOCK=" in c for c in comments), text
    assert any("AcceptEnv KUBETRAY_AGENT_SOCK" in c for c in comments), text

    helper = install_helper(kt, sshd, remote)
    config = remote_kubeconfig(remote, api, helper, ["--stored", stored])
    assert kt.kubetray("remote", "allow", HOST, stored).returncode == 0
    ssh_config = kt.inputs() / "ssh_config"
    ssh_config.write_text(
        text
        + "\nHost *\n"
        + f"    User {remote.name}\n    Port {sshd.port}\n    IdentityFile {sshd.client_key}\n"
        + "    IdentitiesOnly yes\n    IdentityAgent none\n    BatchMode yes\n"
        + "    StrictHostKeyChecking no\n    UserKnownHostsFile /dev/null\n    LogLevel ERROR\n"
    )
    command = shlex.join(get_ns(remote_kubectl(sshd, remote, kubectl_133()), config))
    done = subprocess.run(
        ["ssh", "-F", str(ssh_config), HOST, command],
        env=kt.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [f"namespace/{n}" for n in NAMESPACES]
    assert any(c["caller"]["remote"] == HOST for c in kt.calls() if c["identity"] == stored)

    # `kubetray ssh` with that configuration does not forward the socket a second time.
    again = kt.kubetray("ssh", "--", "-F", str(ssh_config), HOST, command)
    assert again.returncode == 0, again.stderr
    assert again.stdout.split() == [f"namespace/{n}" for n in NAMESPACES]
    run = ssh_runs(kt)[-1]
    assert "-R" not in run and f"SetEnv=KUBETRAY_AGENT_SOCK={remote.forwarded_socket}" in run


# -- an OIDC login for a remote caller --------------------------------------------------------

CLIENT_ID = "kubectl-remote"
CLIENT_SECRET = "kubectl-remote-client-secret-5d2a"
CONFIDENTIAL = {
    "client_id": CLIENT_ID,
    "client_secret": CLIENT_SECRET,
    "token_endpoint_auth_method": "client_secret_basic",
    "application_type": "native",
    "redirect_uris": ["http://127.0.0.1/", "http://localhost:8000", "http://localhost:18000"],
    "grant_types": ["authorization_code", "refresh_token"],
    "response_types": ["code"],
}


@pytest.fixture
def idp() -> Iterator[IdP]:
    with run_idp(extraClients=[CONFIDENTIAL]) as provider:
        yield provider


def kept_token_sets(kt: KubetrayEnv) -> list[Any]:
    """Every OIDC token set the desktop's agent keeps in the keyring (this run's D-Bus session)."""
    import secretstorage

    from app.errors import AppError
    from app.oidc.tokens import TokenSet
    from app.store.keyring_store import SERVICE, KeyringSecretStore

    store = KeyringSecretStore(str(kt.config / "secrets"))
    connection = secretstorage.dbus_init()
    try:
        collection = secretstorage.get_default_collection(connection)
        keys = [
            item.get_attributes().get("username", "")
            for item in collection.search_items({"service": SERVICE})
        ]
    finally:
        connection.close()
    found = []
    for key in keys:
        if key.startswith("oidc/"):
            try:  # the keyring is the whole run's: other tests' sealed files are gone
                data = store.get(key)
            except AppError:
                continue
            if data is not None:
                found.append(TokenSet.from_bytes(data))
    return found


@pytest.mark.kubectl
def test_a_remote_kubectl_logs_in_in_the_desktop_browser_and_gets_only_the_token(
    desktop: KubetrayEnv, sshd: SSHServer, remote: Account, idp: IdP
) -> None:
    """OIDC for kubectl on the SSH host: its first command opens the login in the desktop's
    browser, once, and the remote terminal reads the same progress a local one would; a second
    command is served without a login. Across the forward go the id token and nothing else the
    desktop keeps: not the refresh token, not the client secret."""
    require(browser_available(), "needs Debian chromium and Python playwright")
    kt = desktop
    with APIServer(CA(), check_token=checker(idp, audience=CLIENT_ID)) as api:
        helper = install_helper(kt, sshd, remote)
        args = oidc_args(idp)
        args[args.index("--oidc-client-id=kubectl")] = f"--oidc-client-id={CLIENT_ID}"
        args.append(f"--oidc-client-secret={CLIENT_SECRET}")
        config = remote_kubeconfig(remote, api, helper, args)
        kubectl = remote_kubectl(sshd, remote, kubectl_133())
        allow_as_asked(kt, sshd, remote, get_ns(kubectl, config))

        first = kubetray_ssh(kt, sshd, remote, *relayed(remote, *get_ns(kubectl, config)))
        assert first.returncode == 0, first.stderr
        assert first.stdout.split() == [f"namespace/{n}" for n in NAMESPACES]
        assert "Logged in to" in first.stderr, first.stderr
        second = kubetray_ssh(kt, sshd, remote, *get_ns(kubectl, config))
        assert second.returncode == 0 and second.stderr == "", second.stderr
    opened = [e for e in browser_log(browser_opened(kt)) if e["event"] == "opened"]
    assert len(opened) == 1, opened
    assert idp.counts().get("authorization_code") == 1

    connections = received(remote)
    data = b"".join(connections)
    answers = [frames(c) for c in connections]
    assert answers and all({f.get("type") for f in a} <= FRAME_TYPES for a in answers)
    results = [f for a in answers for f in a if f.get("type") == "result" and f["exit"] == 0]
    assert results
    handed = json.loads(results[0]["stdout"])["status"]["token"]
    [tokens] = [t for t in kept_token_sets(kt) if t.id_token == handed]
    assert tokens.refresh_token, "the provider issued a refresh token; the desktop keeps it"
    assert tokens.refresh_token.encode() not in data
    assert CLIENT_SECRET.encode() not in data
    assert b"refresh_token" not in data
    if tokens.access_token and tokens.access_token != handed:
        assert tokens.access_token.encode() not in data  # only the token kubectl uses
    assert re.search(rb"eyJ[\w-]+\.[\w-]+\.[\w-]+", data)  # the id token did cross


@pytest.mark.kubectl
def test_one_login_serves_a_local_and_a_remote_kubectl_asking_at_once(
    desktop: KubetrayEnv, sshd: SSHServer, remote: Account, idp: IdP, tmp_path: Path
) -> None:
    """The README's way: `kubetray setup --helper-command` writes the SSH host's kubeconfig
    (its ~/.kube/config there). kubectl on the desktop and kubectl on the SSH host then need the
    same OIDC identity at the same moment: one browser login on the desktop serves both
    (single-flight holds across local and forwarded callers)."""
    require(browser_available(), "needs Debian chromium and Python playwright")
    kt = desktop
    with APIServer(CA(), check_token=checker(idp)) as api:
        helper = install_helper(kt, sshd, remote)
        ca, written = kt.inputs() / "ca.crt", kt.inputs() / "remote-kubeconfig"
        ca.write_bytes(api.ca_pem)
        setup = kt.kubetray(
            "setup",
            *("--issuer", idp.issuer, "--client-id", "kubectl"),
            *("--scope", "email", "--scope", "groups"),
            *("--server", api.url, "--certificate-authority", str(ca)),
            *("--helper-command", helper, "--kubeconfig", str(written), "--yes"),
        )
        assert setup.returncode == 0, setup.stdout + setup.stderr
        assert "certificate-authority-data" in written.read_text()  # no desktop path in it
        remote.put(".kube/config", written.read_bytes(), 0o600)  # kubectl's default there
        kubectl = remote_kubectl(sshd, remote, kubectl_133())
        local_config = local_kubeconfig(kt, api, oidc_args(idp), tmp_path / "kubeconfig")
        allow_as_asked(kt, sshd, remote, [kubectl, "get", "namespaces", "-o", "name"])
        hold = kt.inputs() / "hold-browser"
        hold.touch()  # the login waits until both callers wait for it
        with ThreadPoolExecutor(2) as pool:
            remote_run = pool.submit(
                kubetray_ssh, kt, sshd, remote, kubectl, "get", "namespaces", "-o", "name"
            )
            local_run = pool.submit(local_kubectl, kt, local_config)
            try:
                deadline = time.monotonic() + 60
                while not (
                    (kt.inputs() / "browser-asked").exists()
                    and processes(remote.uid, helper)
                    and processes(os.getuid(), str(kt.helper))
                ):
                    assert time.monotonic() < deadline, "the two kubectls never waited together"
                    assert not (remote_run.done() or local_run.done()), "one finished alone"
                    time.sleep(0.05)
            finally:
                hold.unlink()
            there, here = remote_run.result(timeout=180), local_run.result(timeout=180)
    assert there.returncode == 0, kt.kubetray("remote", "list").stdout + there.stderr
    assert here.returncode == 0, here.stderr
    assert there.stdout == here.stdout
    opened = [e for e in browser_log(browser_opened(kt)) if e["event"] == "opened"]
    assert len(opened) == 1, opened
    assert idp.counts().get("authorization_code") == 1
    records = kt.calls()
    assert {c["caller"].get("remote") for c in records if c["error"] is None} == {None, HOST}
