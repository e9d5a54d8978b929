"""The kubeconfig commands as a user runs them: real keyring, real kubectl, real provider.

``secure`` must leave no secret byte in the kubeconfig, its backups or kubetray's directories,
and kubectl must keep working through the stored credentials; ``unsecure`` puts them back.
``doctor`` passes on a healthy setup and names each broken condition with its remedy.
"""

import base64
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.apiserver import NAMESPACES, APIServer
from tests.idp import run_idp
from tests.peers import ROOT, KubetrayEnv, StartAgent, kubectl_binaries, require
from tests.pki import CA

TOKEN = "secure-me-token-3f9b1c77d2"
CLIENT_CN = "secure-me-user"


def _kubeconfig(path: Path, api: APIServer, cert: Any) -> None:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "api",
                "cluster": {
                    "server": api.url,
                    "certificate-authority-data": base64.b64encode(api.ca_pem).decode(),
                },
            }
        ],
        "users": [
            {"name": "tok", "user": {"token": TOKEN}},
            {
                "name": "crt",
                "user": {
                    "client-certificate-data": base64.b64encode(cert.cert_pem).decode(),
                    "client-key-data": base64.b64encode(cert.key_pem).decode(),
                },
            },
        ],
        "contexts": [
            {"name": "tok", "context": {"cluster": "api", "user": "tok"}},
            {"name": "crt", "context": {"cluster": "api", "user": "crt"}},
        ],
        "current-context": "tok",
    }
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)


def _secret_needles(cert: Any) -> list[bytes]:
    key_body = b"".join(cert.key_pem.splitlines()[1:-1])
    return [TOKEN.encode(), key_body, base64.b64encode(cert.key_pem), key_body[10:40]]


def _scan(roots: list[Path], needles: list[bytes]) -> list[str]:
    hits = []
    for root in roots:
        for path in [root] if root.is_file() else root.rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                hits += [f"{path}: {n[:12]!r}" for n in needles if n in data]
    return hits


def _kubectl(kt: KubetrayEnv, config: Path, context: str) -> subprocess.CompletedProcess[str]:
    binaries = kubectl_binaries()
    require("1.33" in binaries, "kubectl 1.33 is not installed")
    return subprocess.run(
        [
            binaries["1.33"],
            "--kubeconfig",
            str(config),
            "--context",
            context,
            "get",
            "ns",
            "-o",
            "name",
        ],
        env=kt.env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.kubectl
def test_secure_leaves_no_secret_on_disk_and_kubectl_still_works(
    kt: KubetrayEnv, keyring_session: None, tmp_path: Path
) -> None:
    ca = CA()
    cert = ca.issue(CLIENT_CN)
    kube = tmp_path / "kube"
    kube.mkdir()
    config = kube / "config"
    with APIServer(ca, token=TOKEN, client_cn=CLIENT_CN) as api:
        _kubeconfig(config, api, cert)
        assert _kubectl(kt, config, "tok").returncode == 0
        # A kubetray edit before secure: its backup holds the secrets, so it is not on disk.
        done = kt.kubetray(
            "setup",
            "--issuer=https://idp.example",
            "--client-id=k",
            "--no-probe",  # a provider that does not exist: kubeconfig handling is the point
            "--cluster=api",
            "--context=oidc",
            f"--kubeconfig={config}",
            "--yes",
        )
        assert done.returncode == 0, done.stderr
        assert "its backup is in the OS keyring" in done.stdout
        done = kt.kubetray("secure", "--all", f"--kubeconfig={config}", "--yes")
        assert done.returncode == 0, done.stderr
        assert "tok: now kubetray-exec --stored tok" in done.stdout
        assert "crt: now kubetray-exec --stored crt" in done.stdout
        needles = _secret_needles(cert)
        assert not any(n in (done.stdout + done.stderr).encode() for n in needles)
        assert _scan([kube, kt.config, kt.state], needles) == []
        assert config.stat().st_mode & 0o777 == 0o600
        for context, outcome in (("tok", "token"), ("crt", "cert")):
            got = _kubectl(kt, config, context)
            assert got.returncode == 0, got.stderr
            assert got.stdout.split() == [f"namespace/{n}" for n in NAMESPACES]
            assert api.outcomes()[-1] == outcome
        done = kt.kubetray("unsecure", "--all", f"--kubeconfig={config}", "--yes")
        assert done.returncode == 0, done.stderr
        users = {u["name"]: u["user"] for u in yaml.safe_load(config.read_text())["users"]}
        assert users["tok"] == {"token": TOKEN}
        assert base64.b64decode(users["crt"]["client-key-data"]) == cert.key_pem
        assert _kubectl(kt, config, "crt").returncode == 0
        kt.stop_agent()  # (a running agent lists the identities it served, used or not)
        assert "stored" not in kt.kubetray("status").stdout  # unsecure forgot them


def test_secure_without_yes_off_a_terminal_changes_nothing(
    kt: KubetrayEnv, keyring_session: None, tmp_path: Path
) -> None:
    config = tmp_path / "config"
    config.write_text(yaml.safe_dump({"users": [{"name": "u", "user": {"token": TOKEN}}]}))
    before = config.read_bytes()
    done = kt.kubetray("secure", "u", f"--kubeconfig={config}")
    assert done.returncode == 2 and "add --yes" in done.stderr
    assert TOKEN not in done.stdout and "<redacted>" in done.stdout  # the diff, redacted
    assert config.read_bytes() == before


def _doctor(kt: KubetrayEnv, config: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in kt.env.items() if "PROXY" not in k.upper()}
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "app", "doctor", f"--kubeconfig={config}"],
        env=full,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _setup(kt: KubetrayEnv, config: Path, issuer: str) -> None:
    done = kt.kubetray(
        "setup",
        f"--issuer={issuer}",
        "--client-id=kubectl",
        "--no-probe",  # doctor reports what is wrong with the provider
        "--server=https://127.0.0.1:6443",
        "--context=c",
        f"--kubeconfig={config}",
        "--yes",
    )
    assert done.returncode == 0, done.stderr


def _failures(out: str) -> list[str]:
    return [
        line.split(": ", 1)[0].removeprefix("FAIL").strip()
        for line in out.splitlines()
        if line.startswith("FAIL")
    ]


def test_doctor_passes_on_a_healthy_setup_and_names_each_broken_condition(
    kt: KubetrayEnv, start_agent: StartAgent, keyring_session: None, tmp_path: Path
) -> None:
    config = tmp_path / "kubeconfig"
    with run_idp() as idp:
        _setup(kt, config, idp.issuer)
        agent = start_agent(kt)
        healthy = _doctor(kt, config)
        assert healthy.returncode == 0, healthy.stdout
        assert (
            f"ok    provider {idp.issuer}: PKCE (S256) yes, device code login yes" in healthy.stdout
        )
        assert "ok    keyring: writes, reads and deletes" in healthy.stdout
        # No cluster listens at the kubeconfig's server: a warning, counted, not a problem.
        warnings = [line for line in healthy.stdout.splitlines() if line.startswith("WARN")]
        assert len(warnings) == 1 and "127.0.0.1:6443" in warnings[0], healthy.stdout
        assert healthy.stdout.rstrip().endswith("no problems, 1 warning(s) (see WARN above)")

        # A helper path that is wrong (an uninstalled or moved kubetray).
        broken = config.read_text().replace(str(Path(sys.executable).parent), "/nonexistent")
        wrong = tmp_path / "wrong-helper"
        wrong.write_text(broken)
        done = _doctor(kt, wrong)
        assert done.returncode == 1 and _failures(done.stdout) == ["helper of user c"]
        assert "fix: point kubeconfig at the installed helper" in done.stdout

        # A keyring that is there but locked (a daemon nobody unlocked).
        locked = _doctor_with_locked_keyring(kt, config)
        assert _failures(locked.stdout) == ["keyring"], locked.stdout
        assert "unlock" in locked.stdout.lower()
        agent.stop()
        kt.stop_agent()
        done = _doctor(kt, config)  # no agent: kubetray-exec would start one, so a warning
        assert done.returncode == 0 and _failures(done.stdout) == [], done.stdout
        assert "WARN  agent: not running (kubetray-exec starts it when" in done.stdout
        assert "fix: to start it now: kubetray (the tray app) or kubetray agent" in done.stdout

    unreachable = tmp_path / "unreachable"
    _setup(kt, unreachable, "http://127.0.0.1:9")
    done = _doctor(kt, unreachable)
    assert "provider http://127.0.0.1:9" in " ".join(_failures(done.stdout))
    assert "nothing answers at 127.0.0.1:9 (connection refused)" in done.stdout
    assert "fix: check the port in the issuer URL and that the provider is running" in done.stdout

    with run_idp(dateSkew=300) as skewed:
        config = tmp_path / "skewed"
        _setup(kt, config, skewed.issuer)
        done = _doctor(kt, config)
        assert f"clock vs {skewed.issuer}" in _failures(done.stdout)
        assert re.search(r"clock is (299|300|301) s behind the provider", done.stdout)
        assert "fix: turn on time synchronisation" in done.stdout


def _doctor_with_locked_keyring(kt: KubetrayEnv, config: Path) -> subprocess.CompletedProcess[str]:
    require(shutil.which("dbus-run-session") is not None, "needs dbus-run-session")
    script = (
        "export XDG_RUNTIME_DIR=$(mktemp -d); XDG_DATA_HOME=$(mktemp -d); export XDG_DATA_HOME; "
        "gnome-keyring-daemon --start --components=secrets >/dev/null 2>&1; "
        f"exec {sys.executable} -m app doctor --kubeconfig={config}"
    )
    return subprocess.run(
        ["dbus-run-session", "--", "sh", "-c", script],
        env=kt.env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
