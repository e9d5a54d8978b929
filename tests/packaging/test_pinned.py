"""A running bundle needs nothing from its installed files after start (app/frozen.py).

An upgrade replaces the files of a running agent or app, and it goes on until it can restart
(a login in flight finishes first). The strongest form of that: its whole installation is
deleted. The bundled agent and app then still log in (OIDC: discovery, TLS-free HTTP here,
id_token checks, the keyring), show a device code with its QR code and a notification, answer
status, log out (revocation) and stop cleanly. Before kubetray 0.2 each of these failed
(zlib.error, LookupError for utf-8-sig, "appears to have been moved or deleted").
"""

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.idp import run_idp
from tests.integration.test_oidc import oidc_args
from tests.integration.test_restart import until
from tests.peers import KubetrayEnv


def mapped(pid: int, under: str) -> set[str]:
    return {
        line.split()[-1]
        for line in Path(f"/proc/{pid}/maps").read_text().splitlines()
        if line.split()[-1].startswith(under)
    }


@pytest.mark.slow
@pytest.mark.parametrize("program", ["agent", "app"])
def test_a_running_bundle_works_on_after_its_files_are_deleted(
    bundle: Path, kt: KubetrayEnv, keyring_session: None, tmp_path: Path, program: str
) -> None:
    installed = tmp_path / "opt"
    shutil.copytree(bundle, installed / "kubetray", symlinks=True)
    command = [str(installed / "kubetray" / "kubetray"), *(["agent"] if program == "agent" else [])]
    env = dict(kt.env, QT_QPA_PLATFORM="offscreen")
    err = tmp_path / "stderr"
    with open(err, "w") as sink:
        proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=sink)
    try:
        until(lambda: kt.agent_pid() == proc.pid and (kt.runtime / "agent.sock").exists())
        time.sleep(1)  # the app's window and icons, the agent's first read of the keyring
        before = mapped(proc.pid, str(installed))
        shutil.rmtree(installed)  # the installation is gone; the process runs on

        with run_idp(password=True) as idp:
            carol = oidc_args(idp, "--grant-type=password", "--username=carol")
            login = kt.run_helper(*carol, "--password=pw-carol")
            assert login.returncode == 0, login.stderr
            status = kt.kubetray("status")
            assert status.returncode == 0 and "carol@example.test" in status.stdout, status

            # A device code: the app shows it with its QR code, and notifies; then cancelled.
            device = subprocess.Popen(
                [*kt_cli(kt), "login", "--", *oidc_args(idp, "--grant-type=device-code")],
                env=kt.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            until(lambda: "logging in" in kt.kubetray("status").stdout)
            name = next(
                line.split()[0]
                for line in kt.kubetray("status").stdout.splitlines()
                if "logging in" in line
            )
            assert kt.kubetray("cancel", name).returncode == 0
            _, said = device.communicate(timeout=60)
            assert "user_code=" in said or "code" in said.lower(), said

            logout = kt.kubetray("logout", next(iter(_names(kt, "carol"))))
            assert logout.returncode == 0, logout.stderr

        assert proc.poll() is None
        after = mapped(proc.pid, str(installed))
        assert after <= before, after - before  # nothing loaded from the deleted files
        stopped = kt.kubetray("stop")
        assert stopped.returncode == 0, stopped.stderr
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    log = err.read_text()
    assert "Traceback" not in log and "moved or deleted" not in log, log[-3000:]


def kt_cli(kt: KubetrayEnv) -> list[str]:
    import sys

    return [sys.executable, "-m", "app"]


def _names(kt: KubetrayEnv, who: str) -> list[str]:
    return [
        line.split()[0]
        for line in kt.kubetray("status").stdout.splitlines()
        if f"{who}@example.test" in line
    ]
