"""The agent's token store is the user's, not the first caller's (issue 21, item 4).

A program started by systemd, cron, an IDE's launcher or `env -i` has no session bus. The
agent it starts must still find the user's keyring: on the systemd user bus at
$XDG_RUNTIME_DIR/bus, or through a later caller that has a session bus. Real gnome-keyring in
the D-Bus session `scripts/with-keyring` makes; a real agent and oidc-provider.
"""

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.idp import IdP, run_idp
from tests.peers import V1, KubetrayEnv

pytestmark = pytest.mark.usefixtures("keyring_session")
TOKEN = "kt-store-source-token-0123456789"


@pytest.fixture
def idp() -> Iterator[IdP]:
    with run_idp(password=True) as provider:
        yield provider


def bus_socket() -> str:
    """The path of the test session's bus socket (dbus-run-session listens on a path)."""
    address = os.environ["DBUS_SESSION_BUS_ADDRESS"]
    assert address.startswith("unix:path="), address
    return address.removeprefix("unix:path=").split(",")[0]


def bare(kt: KubetrayEnv, runtime: Path) -> dict[str, str]:
    """What a program that `env -i` started has: no session bus; only kubetray's directories
    (the test's own), PATH, HOME, and an XDG_RUNTIME_DIR of our choosing."""
    keep = ("PATH", "HOME", "PYTHONPATH", "LANG")
    env = {k: v for k, v in kt.env.items() if k in keep or k.startswith("KUBETRAY_")}
    return dict(env, XDG_RUNTIME_DIR=str(runtime))


def helper(kt: KubetrayEnv, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(kt.helper), *args],
        env=dict(env, KUBERNETES_EXEC_INFO=V1),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def agent_facts(kt: KubetrayEnv) -> dict[str, str]:
    return kt.kubetray_json("status")["agent"]  # type: ignore[no-any-return]


def test_an_agent_started_without_a_bus_finds_the_systemd_user_bus(
    kt: KubetrayEnv, tmp_path: Path, name: str
) -> None:
    kt.store_token(name, TOKEN)
    runtime = tmp_path / "xdg"
    runtime.mkdir(mode=0o700)
    (runtime / "bus").symlink_to(bus_socket())  # where systemd puts the user's bus
    done = helper(kt, bare(kt, runtime), "--stored", name)
    assert done.returncode == 0 and TOKEN in done.stdout, done.stderr
    facts = agent_facts(kt)
    assert facts["store"] == "keyring"
    assert facts["store_source"] == f"the systemd user bus ({runtime / 'bus'})"
    status = kt.kubetray("status")
    assert f"tokens: the OS keyring (session bus: the systemd user bus ({runtime / 'bus'}))" in (
        status.stdout
    )


def test_a_caller_with_a_keyring_is_never_told_there_is_none(
    kt: KubetrayEnv, idp: IdP, tmp_path: Path, name: str
) -> None:
    kt.store_token(name, TOKEN)
    runtime = tmp_path / "xdg"
    runtime.mkdir(mode=0o700)  # no bus there: the first caller truly has no keyring
    oidc = [
        f"--oidc-issuer-url={idp.issuer}",
        "--oidc-client-id=kubectl",
        "--grant-type=password",
        "--username=alice",
        "--password=pw-alice",
        "--oidc-extra-scope=offline_access",
    ]
    first = helper(kt, bare(kt, runtime), *oidc)  # starts the agent: tokens in memory
    assert first.returncode == 0, first.stderr
    assert "tokens are kept in memory" in first.stderr
    assert agent_facts(kt)["store"] == "memory"
    refused = helper(kt, bare(kt, runtime), "--stored", name)
    assert refused.returncode == 1 and "no OS keyring here: " in refused.stderr  # true for it
    # A caller that has the user's session bus: served from the keyring, never told "none".
    second = helper(kt, kt.env, "--stored", name)
    assert second.returncode == 0 and TOKEN in second.stdout, second.stderr
    facts = agent_facts(kt)
    assert (facts["store"], facts["store_source"]) == ("keyring", "a caller's session bus")
    assert facts["store_notice"] is None
    # The login made while tokens were in memory moved with them: it outlives the agent.
    kt.stop_agent()
    again = helper(kt, kt.env, *oidc)
    assert again.returncode == 0, again.stderr
    assert "Logging in" not in again.stderr and idp.counts().get("password") == 1
