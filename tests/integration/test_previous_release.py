"""This kubetray beside the previous release, 0.1.0 (948a89d, taken from git): a downgrade reads
what this version wrote, and this kubetray-exec meeting a running 0.1.0 agent is served by it,
then has it stop, so the next call starts the kubetray installed now.

Needs the repository's history (a shallow clone without 948a89d skips).
"""

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_restart import until
from tests.peers import ROOT, KubetrayEnv

PREVIOUS = "948a89d"
READ_EVERYTHING = """
import json, os, sys
from pathlib import Path
out = Path(sys.argv[1])
os.environ["KUBETRAY_CONFIG_DIR"] = str(out / "config")
import app
from app.broker.consent import Consent
from app.broker.registry import Registry
from app.kubeconfig import records
from app.kubeconfig.backups import Backups
from app.oidc.tokens import TokenSet
from app.settings import Settings
from app.static_credentials import StoredCredentials
from app.store.keyring_store import KeyringSecretStore

class Keyring:
    def __init__(self, items): self.items = items
    def get_password(self, service, key): return self.items.get(key)
    def set_password(self, service, key, value): self.items[key] = value
    def delete(self, service, key): return self.items.pop(key, None) is not None

store = KeyringSecretStore(str(out / "config" / "secrets"))
store._chosen = Keyring(json.loads((out / "keyring.json").read_text()))
stored = StoredCredentials(store, str(out / "config" / "stored.json"))
tokens = next(k for k in store._chosen.items if k.startswith("oidc/"))
print(json.dumps({
    "version": app.__version__,
    "settings": Settings.load().browser_command,
    "identities": sorted(e.identity.name for e in Registry(str(out / "config" / "identities.json")).known()),
    "stored": [stored.load("deploy").token, stored.load("admin").subject],
    "tokens": TokenSet.from_bytes(store.get(tokens)).refresh_token,
    "hosts": [h.host for h in Consent(str(out / "config" / "remote-hosts.json"), None).hosts()],
    "backups": [b.operation for b in Backups(str(out / "state" / "kubeconfig-backups.json"), lambda: store).entries()],
    "imports": [c.user for b in records.Records(store, records.IMPORTS).batches() for c in b],
}))
"""


@pytest.fixture(scope="module")
def previous(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """kubetray 0.1.0's source tree."""
    archive = subprocess.run(
        ["git", "archive", PREVIOUS, "app", "exec_helper"], cwd=ROOT, capture_output=True
    )
    if archive.returncode != 0:
        pytest.skip(f"this clone lacks {PREVIOUS} (0.1.0): {archive.stderr.decode().strip()}")
    tree = tmp_path_factory.mktemp("kubetray-0.1.0")
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    yield tree


def test_a_downgrade_to_0_1_0_reads_what_this_version_wrote(previous: Path, tmp_path: Path) -> None:
    written = tmp_path / "written"
    subprocess.run(
        [sys.executable, "-m", "tests.formats.write", str(written)], cwd=ROOT, check=True
    )
    done = subprocess.run(
        [sys.executable, "-c", READ_EVERYTHING, str(written)],
        cwd=previous,
        env={"PYTHONPATH": str(previous), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    read = json.loads(done.stdout)
    assert read == {
        "version": "0.1.0",
        "settings": "firefox",
        "identities": ["kubectl@dex.example.org", "prod"],
        "stored": ["static-token-0001", "CN=admin"],
        "tokens": "refresh-0001",
        # This version's "always" is per identity, a field 0.1.0 does not know: it asks about
        # build.example.com again rather than serve it every identity. The deny holds.
        "hosts": ["old.example.com"],
        "backups": ["setup"],
        "imports": ["oidc"],
    }


def test_this_helper_is_served_by_a_0_1_0_agent_then_has_it_stop(
    previous: Path, kt: KubetrayEnv, keyring_session: None, name: str
) -> None:
    kt.store_token(name, "static-token")  # written by this version, read by 0.1.0's agent
    old_env = dict(kt.env, PYTHONPATH=str(previous))
    old = subprocess.Popen(
        [sys.executable, "-m", "app", "agent"],
        cwd=previous,
        env=old_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        until(lambda: kt.agent_pid() == old.pid and (kt.runtime / "agent.sock").exists())
        first = kt.run_helper("--stored", name)
        assert first.returncode == 0, first.stderr  # 0.1.0 understands this helper's request
        assert json.loads(first.stdout)["status"]["token"] == "static-token"
        assert old.wait(timeout=30) == 0  # asked to stop once idle, and it did, cleanly
        second = kt.run_helper("--stored", name)  # starts the agent of this version
        assert second.returncode == 0, second.stderr
        status = json.loads(kt.kubetray("status", "--json").stdout)
        assert status["agent"]["pid"] != old.pid and status["agent"]["version"] != "0.1.0"
    finally:
        if old.poll() is None:
            old.kill()
        _, err = old.communicate(timeout=10)
        print(err[-2000:])
