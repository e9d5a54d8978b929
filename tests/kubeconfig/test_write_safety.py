"""Losing a kubeconfig is the worst bug: SIGKILL mid-write, client-go's lock, real kubectl racing.

The writer child prints each entry's name once ``apply`` has returned: an entry it confirmed
must survive whatever happens next.
"""

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO

import pytest
import yaml

from app.kubeconfig import files
from tests.peers import ROOT, KubetrayEnv, kubectl_binaries, require

WRITER = """
import sys
from app.kubeconfig import edit
from app.kubeconfig.backups import Backups
from app.store.memory_store import MemorySecretStore

path, journal, start = sys.argv[1], sys.argv[2], int(sys.argv[3])
backups = Backups(journal, MemorySecretStore)
for i in range(start, start + 1000):
    e = edit.Edit()
    e.add(path, lambda d, i=i: edit.upsert(d, "contexts", f"ctx-{i}", {"cluster": "c"}))
    edit.apply(e, backups, "test")
    print(f"ctx-{i}", flush=True)
"""


USERS = 600


def _big_kubeconfig(path: Path) -> None:
    """Large enough (≈ 150 KB) that a kill often lands inside a write."""
    users = [
        {"name": f"user-{i}", "user": {"exec": {"command": "p", "args": ["x" * 150]}}}
        for i in range(USERS)
    ]
    doc = {"apiVersion": "v1", "kind": "Config", "users": users, "contexts": []}
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o640)


@pytest.mark.slow
def test_sigkill_at_random_points_never_loses_the_file(tmp_path: Path) -> None:
    config = tmp_path / "config"
    _big_kubeconfig(config)
    journal = tmp_path / "journal.json"
    rng = random.Random(541)
    confirmed: list[str] = []
    killed_mid_write = 0
    for run in range(30):
        child = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(config), str(journal), str(run * 1000)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        lines: list[str] = []
        first = threading.Event()

        def read(
            out: IO[str] = child.stdout, lines: list[str] = lines, first: threading.Event = first
        ) -> None:
            for line in out:
                lines.append(line)
                first.set()

        reader = threading.Thread(target=read)
        reader.start()
        # past start-up (however slow a loaded machine makes it), somewhere among the writes
        assert first.wait(120), "the writer confirmed no write"
        time.sleep(rng.random() * 0.3)
        child.send_signal(signal.SIGKILL)
        child.wait()
        reader.join()
        child.stdout.close()
        confirmed += [line.strip() for line in lines]
        killed_mid_write += any(p.name.endswith(".tmp") for p in tmp_path.iterdir())
        data = files.read(str(config)).data  # parses: never half a file
        names = {c["name"] for c in data["contexts"]}
        assert set(confirmed) <= names, "a confirmed entry was lost"
        assert len(data["users"]) == USERS
        assert config.stat().st_mode & 0o777 == 0o640
    assert len(confirmed) >= 30, "each writer confirmed a write before its kill"
    # The backups are whole kubeconfigs too; the newest KEEP of them are kept.
    backups = sorted(tmp_path.glob("config.kubetray-*.bak"))
    assert 1 <= len(backups) <= 6
    for b in backups:
        assert len(files.read(str(b)).data["users"]) == USERS
    # A lock or temporary file a killed writer left behind does not block the next one.
    done = subprocess.run(
        [sys.executable, "-c", WRITER.replace("1000)", "1)"), str(config), str(journal), "99999"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "config.lock").exists()
    assert not list(tmp_path.glob("*.tmp"))
    print(f"{killed_mid_write} of 30 kills left a temporary file (a kill inside a write)")


def test_a_lock_kubectl_holds_is_waited_for_then_reported(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text("apiVersion: v1\nkind: Config\n")
    (tmp_path / "config.lock").write_bytes(b"")  # what client-go leaves while it writes
    with (
        pytest.raises(files.KubeconfigError, match=r"config\.lock"),
        files.locked(str(config), wait=0.3),
    ):
        pass
    threading.Timer(0.3, os.unlink, [tmp_path / "config.lock"]).start()
    with files.locked(str(config), wait=5):
        assert (tmp_path / "config.lock").read_bytes().startswith(b"kubetray ")


KILLED_WHILE_LOCKING = """
import os, signal, sys
from app.kubeconfig import files

step = sys.argv[2]
real_link, real_unlink = os.link, os.unlink

def link(src, dst):
    real_link(src, dst)
    if step == "lock-appeared":
        os.kill(os.getpid(), signal.SIGKILL)

def unlink(path):
    if step == "temporary-left" and path.endswith(".tmp"):
        os.kill(os.getpid(), signal.SIGKILL)
    real_unlink(path)

os.link, os.unlink = link, unlink
with files.locked(sys.argv[1]):
    pass
"""


@pytest.mark.parametrize("step", ["lock-appeared", "temporary-left"])
def test_a_writer_killed_while_locking_does_not_block_the_next(tmp_path: Path, step: str) -> None:
    """Killed the instant its lock appears, or before its temporary file is gone: the lock is
    never empty (an empty one passes for kubectl's and is waited for), so the next writer
    recognises it as a dead kubetray's and goes on at once."""
    config = tmp_path / "config"
    config.write_text("apiVersion: v1\nkind: Config\n")
    child = subprocess.run(
        [sys.executable, "-c", KILLED_WHILE_LOCKING, str(config), step], cwd=ROOT, check=False
    )
    assert child.returncode == -signal.SIGKILL
    lock = tmp_path / "config.lock"
    assert lock.read_bytes().startswith(b"kubetray ")
    start = time.monotonic()
    with files.locked(str(config), wait=5):
        assert time.monotonic() - start < 1
    assert not lock.exists()
    files.write_atomic(str(config), config.read_bytes(), 0o600)  # sweeps a dead writer's leftovers
    assert [p.name for p in tmp_path.iterdir()] == ["config"]


def test_a_lock_taken_while_a_stale_one_is_removed_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two writers find the same dead kubetray's lock: the slower one must not delete the lock
    the faster one has taken since (nor kubectl's)."""
    lock = tmp_path / "config.lock"
    lock.write_bytes(f"kubetray 999999 {socket.gethostname()}\n".encode())
    live = f"kubetray {os.getpid()} {socket.gethostname()}\n".encode()

    def meanwhile(_pid: int) -> bool:  # while we judge it dead, another writer replaces it
        lock.unlink()
        lock.write_bytes(live)
        return False

    monkeypatch.setattr(files.atomic_file, "process_alive", meanwhile)
    assert files._remove_if_stale(str(lock)) is False
    assert lock.read_bytes() == live
    assert [p.name for p in tmp_path.iterdir()] == ["config.lock"]


def test_leaving_removes_only_our_own_lock(tmp_path: Path) -> None:
    config = tmp_path / "config"
    with files.locked(str(config)):
        (tmp_path / "config.lock").unlink()  # deleted by hand, as the error message suggests...
        (tmp_path / "config.lock").write_bytes(b"")  # ...and kubectl has taken it since
    assert (tmp_path / "config.lock").read_bytes() == b""


def test_a_lock_with_an_unreadable_host_is_waited_for(tmp_path: Path) -> None:
    (tmp_path / "config.lock").write_bytes(b"kubetray 999999 \xff\n")
    with (
        pytest.raises(files.KubeconfigError, match="locked by another writer"),
        files.locked(str(tmp_path / "config"), wait=0.2),
    ):
        pass


KUBELOGIN = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://c.example"}}]
contexts: []
users:
- name: oidc
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: kubectl
      args: [oidc-login, get-token, --oidc-issuer-url=https://dex.example, --oidc-client-id=k]
"""


@pytest.mark.kubectl
def test_kubectl_set_context_racing_kubetray_import_loses_nothing(
    kt: KubetrayEnv, keyring_session: None, tmp_path: Path
) -> None:
    binaries = kubectl_binaries()
    require("1.33" in binaries, "kubectl 1.33 is not installed")
    config = tmp_path / "kube.yaml"
    config.write_text(KUBELOGIN)
    env = dict(kt.env, KUBECONFIG=str(config))

    def set_context(i: int) -> int:
        for attempt in range(200):  # kubectl fails at once while anyone holds the lock
            done = subprocess.run(
                [binaries["1.33"], "config", "set-context", f"k-{i}", "--cluster=c"],
                env=env,
                capture_output=True,
                text=True,
            )
            if done.returncode == 0:
                return attempt
            assert "lock" in done.stderr, done.stderr
            time.sleep(0.01)
        raise AssertionError(f"kubectl never got the lock for k-{i}")

    # One kubectl at a time: parallel kubectl config commands lose each other's entries
    # (client-go deletes what its stale first read lacks), with or without kubetray.
    with ThreadPoolExecutor(1) as pool:
        retries = pool.map(set_context, range(40))
        for _ in range(3):
            for args in (["import", "--yes"], ["import", "--undo", "--yes"]):
                done = subprocess.run(
                    [sys.executable, "-m", "app", *args],
                    env=env,
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
                assert done.returncode == 0, done.stderr + done.stdout
        waited = sum(retries)
    data = files.read(str(config)).data
    assert {f"k-{i}" for i in range(40)} <= {c["name"] for c in data["contexts"]}
    assert data["users"][0]["user"]["exec"]["command"] == "kubectl"  # undone last
    assert data["clusters"] == [{"name": "c", "cluster": {"server": "https://c.example"}}]
    print(f"kubectl retried {waited} times because kubetray held the lock")


@pytest.mark.kubectl
def test_undo_after_kubectl_rewrote_the_file_puts_the_user_back(
    kt: KubetrayEnv, keyring_session: None, tmp_path: Path
) -> None:
    """kubectl config commands rewrite the whole file with their defaults filled in (`env:
    null`, `provideClusterInfo: false`): the user still reads what kubetray wrote, so
    `kubetray import --undo` puts it back (it left it imported, and said nothing wrong)."""
    binaries = kubectl_binaries()
    require("1.33" in binaries, "kubectl 1.33 is not installed")
    config = tmp_path / "kube.yaml"
    config.write_text(KUBELOGIN)
    env = dict(kt.env, KUBECONFIG=str(config))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
        )

    assert run(sys.executable, "-m", "app", "import", "--yes").returncode == 0
    assert run(binaries["1.33"], "config", "set-context", "k", "--cluster=c").returncode == 0
    assert "provideClusterInfo: false" in config.read_text()  # kubectl's rewrite
    done = run(sys.executable, "-m", "app", "import", "--undo", "--yes")
    assert done.returncode == 0, done.stderr
    data = files.read(str(config)).data
    assert data["users"][0]["user"]["exec"]["command"] == "kubectl"
    assert "k" in {c["name"] for c in data["contexts"]}
