"""A running bundle needs nothing from its installed files after start (app/frozen.py).

An upgrade replaces the files of a running agent or app, and it goes on until it can restart
(a login in flight finishes first). The strongest form of that: its whole installation is
deleted (all but the build file, whose absence would mean an uninstall). The bundled agent
and app then still log in (OIDC: discovery, TLS-free HTTP here, id_token checks, the
keyring), show a device code with its QR code and a notification, answer status, log out
(revocation) and stop cleanly. Before kubetray 0.2 each of these failed
(zlib.error, LookupError for utf-8-sig, "appears to have been moved or deleted").
"""

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.aws import world
from tests.aws.moto_sts import ACCOUNT, MotoSTS
from tests.entra import AKS_CLIENT, AKS_SERVER, TENANT, run_entra
from tests.idp import run_idp
from tests.integration.test_oidc import oidc_args
from tests.integration.test_restart import until
from tests.peers import KubetrayEnv, steady


def delete_installation(installed: Path) -> None:
    """Every file of the installation goes but its build file, put back as it was: a build
    file that stays missing is an uninstall, and the process then stops once idle, by design
    (app/upgrade.py; within 20 to 30 s, which a slow stand-in's start once outlasted)."""
    build = installed / "kubetray" / "_internal" / "kubetray-build.json"
    kept = build.read_bytes()
    shutil.rmtree(installed)
    build.parent.mkdir(parents=True)
    build.write_bytes(kept)


def mapped(pid: int, under: str) -> set[str]:
    """The files under ``under`` that ``pid`` maps, deleted ones by their old path."""
    paths = set()
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6:
            paths.add(fields[5].removesuffix(" (deleted)"))
    return {p for p in paths if p.startswith(under)}


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
        until(lambda: kt.agent_pid() == proc.pid and (kt.runtime / "agent.sock").exists(), 60)
        # the app's window and icons, the agent's first read of the keyring: what it maps once
        # two reads a second apart agree
        before = steady(lambda: mapped(proc.pid, str(installed)), 60, "what it maps", pause=1)
        delete_installation(installed)  # the process runs on

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
        assert after and after <= before, after - before  # nothing loaded from the deleted files
        stopped = kt.kubetray("stop")
        assert stopped.returncode == 0, stopped.stderr
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    log = err.read_text()
    assert "Traceback" not in log and "moved or deleted" not in log, log[-3000:]


@pytest.fixture
def bundled_agent(bundle: Path, kt: KubetrayEnv, tmp_path: Path) -> Iterator[Path]:
    """The bundled agent, started from a copy of the bundle that is then deleted; yields the
    agent's stderr (checked for tracebacks by the caller)."""
    installed = tmp_path / "opt"
    shutil.copytree(bundle, installed / "kubetray", symlinks=True)
    err = tmp_path / "stderr"
    with open(err, "w") as sink:
        proc = subprocess.Popen(
            [str(installed / "kubetray" / "kubetray"), "agent"],
            env=kt.env,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    try:
        until(lambda: kt.agent_pid() == proc.pid and (kt.runtime / "agent.sock").exists())
        time.sleep(1)
        delete_installation(installed)  # the agent runs on
        yield err
        assert proc.poll() is None
        stopped = kt.kubetray("stop")
        assert stopped.returncode == 0, stopped.stderr
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_cloud_logins_work_after_the_bundle_is_deleted(
    bundled_agent: Path, kt: KubetrayEnv, keyring_session: None, tmp_path: Path
) -> None:
    """The cloud providers load more late than OIDC: botocore its models and endpoints (JSON
    data files beside its modules), MSAL and its HTTP stack. An AWS role assumed at STS and
    signed into an EKS token, then an Entra service principal's token, both first asked for
    after the installation was deleted."""
    with MotoSTS() as sts:
        keys = sts.user_keys(f"u{os.urandom(4).hex()}")
        files = world.write(tmp_path / "aws", "http://127.0.0.1:9", sts.url, keys=keys)
        role = f"arn:aws:iam::{ACCOUNT}:role/eks-admin"
        aws = kt.run_helper(
            *("--region", "us-east-1", "eks", "get-token", "--cluster-name", "demo"),
            *("--output", "json", "--role", role),
            extra_env=files.env(AWS_PROFILE="dev"),
        )
        assert aws.returncode == 0, aws.stderr
        assert json.loads(aws.stdout)["status"]["token"].startswith("k8s-aws-v1.")

    with run_entra() as entra:
        secret = entra.sp_secret
        az = kt.run_helper(
            *("get-token", "--login", "spn", "--server-id", AKS_SERVER),
            *("--client-id", AKS_CLIENT, "--tenant-id", TENANT),
            *("--environment", "AzurePublicCloud", "--authority-host", entra.base + "/"),
            *("--certificate-authority", str(entra.ca_file)),
            extra_env={
                "AZURE_CLIENT_ID": secret["client_id"],
                "AZURE_CLIENT_SECRET": secret["client_secret"],
            },
        )
        assert az.returncode == 0, az.stderr
        assert json.loads(az.stdout)["status"]["token"].count(".") == 2  # a JWT
        assert entra.seen("/token")[-1]["params"]["grant_type"] == "client_credentials"
    log = bundled_agent.read_text()
    assert "Traceback" not in log, log[-3000:]


def kt_cli(kt: KubetrayEnv) -> list[str]:
    import sys

    return [sys.executable, "-m", "app"]


def _names(kt: KubetrayEnv, who: str) -> list[str]:
    return [
        line.split()[0]
        for line in kt.kubetray("status").stdout.splitlines()
        if f"{who}@example.test" in line
    ]
