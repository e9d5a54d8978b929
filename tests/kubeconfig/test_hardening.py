"""Hostile kubeconfigs and hostile disks: alias bombs, deep nesting, other users' files, symlinks
to system files, a full disk. Each must end in one clear line, with every file as it was.
"""

import base64
import contextlib
import json
import os
import pwd
import resource
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.peers import ROOT, KubetrayEnv, require
from tests.pki import CA

OTHER = "kt-other"
SETUP = ["setup", "--issuer", "https://idp.example", "--client-id", "k"]
SETUP += ["--server", "https://c.example", "--context", "c", "--yes", "--no-probe"]
TOKEN_USER = {"name": "static", "user": {"token": "static-secret-token"}}


def kubeconfig(users: list[dict[str, object]] | None = None, **extra: object) -> str:
    doc = {"apiVersion": "v1", "kind": "Config", "clusters": [], "contexts": []}
    doc["users"] = users or []
    doc.update(extra)
    return json.dumps(doc, indent=1) + "\n"


def limited(gib: float = 1.0):  # type: ignore[no-untyped-def]
    """preexec_fn: cap the child's address space, so a runaway expansion fails fast."""

    def apply() -> None:
        limit = int(gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def run(
    kt: KubetrayEnv, *args: str, user: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "app", *args]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", *cmd]
    return subprocess.run(
        cmd,
        env=env or kt.env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limited(),
    )


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) in (1, 2) and lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr
    return stderr


@pytest.fixture
def other_user() -> pwd.struct_passwd:
    """A second local account (created once; the test machine runs as root)."""
    require(os.getuid() == 0 and shutil.which("setpriv") is not None, "needs root and setpriv")
    try:
        return pwd.getpwnam(OTHER)
    except KeyError:
        subprocess.run(["useradd", "-m", OTHER], check=True, capture_output=True)
        return pwd.getpwnam(OTHER)


def billion_laughs() -> str:
    """≈ 1 KB of flow-style YAML (valid JSON but for the anchors) that expands to 10^11 values."""
    parts = ['{"apiVersion": "v1", "kind": "Config", "users": [']
    parts.append('{"name": "static", "user": {"token": "static-secret-token"}}],')
    parts.append('"x": {"a0": &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]')
    for i in range(1, 11):
        parts.append(f', "a{i}": &a{i} [' + ",".join([f"*a{i - 1}"] * 10) + "]")
    return "".join(parts) + "}}\n"


def test_alias_bomb_in_json_style_is_refused_in_one_line(
    kt: KubetrayEnv, keyring_session: None, tmp_path: Path
) -> None:
    config = tmp_path / "bomb.json"
    text = billion_laughs()
    assert len(text) < 1200
    config.write_text(text)
    done = run(kt, "secure", "--all", f"--kubeconfig={config}", "--yes")
    assert done.returncode == 1
    assert "YAML aliases expand to more than" in one_error_line(done.stderr)
    assert str(config) in done.stderr
    assert config.read_text() == text


def test_deep_nesting_is_refused_instead_of_crashing(kt: KubetrayEnv, tmp_path: Path) -> None:
    config = tmp_path / "deep.yaml"
    config.write_text("x: " + "[" * 60_000 + "]" * 60_000 + "\n")  # libyaml segfaults here
    done = run(kt, "import", f"--kubeconfig={config}", "--yes")
    assert done.returncode == 1, (done.returncode, done.stderr[-300:])
    assert "nests lists or mappings more than" in one_error_line(done.stderr)


def test_root_keeps_the_owner_group_and_mode_of_a_users_file(
    kt: KubetrayEnv, other_user: pwd.struct_passwd, tmp_path: Path
) -> None:
    home = tmp_path / "home-of-other"
    home.mkdir()
    config = home / "config"
    config.write_text(kubeconfig())
    os.chown(config, other_user.pw_uid, other_user.pw_gid)
    config.chmod(0o640)
    link = tmp_path / "link-to-config"
    link.symlink_to(config)
    done = run(kt, *SETUP, f"--kubeconfig={link}")
    assert done.returncode == 0, done.stderr
    st = config.stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (
        other_user.pw_uid,
        other_user.pw_gid,
        0o640,
    )
    assert link.is_symlink() and "https://c.example" in config.read_text()


def test_root_gives_a_new_file_to_the_owner_of_its_directory(
    kt: KubetrayEnv, other_user: pwd.struct_passwd, tmp_path: Path
) -> None:
    kube = tmp_path / "kube"
    kube.mkdir()
    os.chown(kube, other_user.pw_uid, other_user.pw_gid)
    done = run(kt, *SETUP, f"--kubeconfig={kube / 'config'}")
    assert done.returncode == 0, done.stderr
    st = (kube / "config").stat()
    assert (st.st_uid, st.st_mode & 0o777) == (other_user.pw_uid, 0o600)


def test_another_users_file_is_refused_with_the_reason(
    kt: KubetrayEnv, other_user: pwd.struct_passwd
) -> None:
    shared = Path("/tmp") / f"kt-shared-{os.getpid()}"
    shared.mkdir()
    try:
        for sub in ("config", "state"):
            (shared / sub).mkdir()
        config = shared / "kubeconfig"
        config.write_text(kubeconfig())  # root's file...
        config.chmod(0o644)
        os.chown(shared, other_user.pw_uid, other_user.pw_gid)  # ...in a directory kt-other owns
        for sub in ("config", "state"):
            os.chown(shared / sub, other_user.pw_uid, other_user.pw_gid)
        env = dict(kt.env, HOME=str(shared), KUBETRAY_CONFIG_DIR=str(shared / "config"))
        env["KUBETRAY_STATE_DIR"] = str(shared / "state")
        done = run(kt, *SETUP, f"--kubeconfig={config}", user=OTHER, env=env)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "belongs to root (uid 0), not to you" in one_error_line(done.stderr)
        assert config.stat().st_uid == 0 and config.read_text() == kubeconfig()
        assert not list(shared.glob(".*.tmp")) and not (shared / "kubeconfig.lock").exists()
    finally:
        shutil.rmtree(shared, ignore_errors=True)


@pytest.mark.parametrize("target", ["system-file", "missing"])
def test_a_link_to_something_that_is_not_a_kubeconfig_is_not_written(
    kt: KubetrayEnv, tmp_path: Path, target: str
) -> None:
    system = tmp_path / "etc-app.yaml"
    if target == "system-file":
        system.write_text("listen: 0.0.0.0\nworkers: 4\n")
        system.chmod(0o640)
    link = tmp_path / "config"
    link.symlink_to(system)
    done = run(kt, *SETUP, f"--kubeconfig={link}")
    assert done.returncode == 1
    assert f"it is a symlink to {system}" in one_error_line(done.stderr)
    if target == "system-file":
        assert system.read_text() == "listen: 0.0.0.0\nworkers: 4\n"
        assert system.stat().st_mode & 0o777 == 0o640
    else:
        assert not system.exists()


@contextlib.contextmanager
def full_tmpfs(path: Path) -> Iterator[None]:
    """A tiny tmpfs at ``path``; the test fills it."""
    require(os.getuid() == 0, "needs root to mount a tmpfs")
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    require(mounted.returncode == 0, f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(directory: Path) -> None:
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
    finally:
        os.close(fd)


def leftovers(directory: Path) -> list[str]:
    return sorted(
        str(p.relative_to(directory))
        for p in directory.rglob("*")
        if p.name.endswith((".tmp", ".lock"))
    )


def test_full_disk_under_the_kubeconfig_leaves_no_lock_and_names_the_file(
    kt: KubetrayEnv, keyring_session: None, tmp_path: Path
) -> None:
    disk = tmp_path / "disk"
    with full_tmpfs(disk):
        config = disk / "config"
        text = kubeconfig([TOKEN_USER])
        config.write_text(text)
        fill(disk)
        done = run(kt, "secure", "--all", f"--kubeconfig={config}", "--yes")
        assert done.returncode == 1, done.stdout
        assert str(config) in one_error_line(done.stderr)
        assert "No space left on device" in done.stderr
        assert leftovers(disk) == []
        assert config.read_text() == text
    stored = kt.kubetray("status", "--json")
    assert "static" not in stored.stdout  # the secret moved back out: nothing half-done


def test_full_disk_under_the_sealed_secrets_leaves_no_temp_file(
    kt: KubetrayEnv, keyring_session: None, tmp_path: Path
) -> None:
    ca = CA("full-disk-ca")
    issued = ca.issue("full-disk-user")
    chain = issued.cert_pem + ca.cert_pem  # with its CA: too large for a keyring item, sealed
    disk = tmp_path / "disk"
    with full_tmpfs(disk):
        kt.env["KUBETRAY_CONFIG_DIR"] = str(disk / "kubetray")
        (disk / "kubetray").mkdir()
        config = tmp_path / "config"
        user = {
            "name": "certified",
            "user": {
                "client-certificate-data": base64.b64encode(chain).decode(),
                "client-key-data": base64.b64encode(issued.key_pem).decode(),
            },
        }
        text = kubeconfig([user])
        config.write_text(text)
        fill(disk)
        done = run(kt, "secure", "--all", f"--kubeconfig={config}", "--yes")
        assert done.returncode == 1, done.stdout
        assert "No space left on device" in one_error_line(done.stderr)
        assert str(disk) in done.stderr
        assert leftovers(disk) == []
        assert config.read_text() == text


def test_secure_all_says_which_secrets_stay_and_what_to_do(
    kt: KubetrayEnv, keyring_session: None, tmp_path: Path
) -> None:
    users = [
        {
            "name": "legacy-oidc",
            "user": {
                "auth-provider": {
                    "name": "oidc",
                    "config": {
                        "idp-issuer-url": "https://dex.example",
                        "client-id": "kube",
                        "client-secret": "provider-client-secret",
                        "refresh-token": "provider-refresh-token",
                    },
                }
            },
        },
        {
            "name": "kubelogin-secret",
            "user": {
                "exec": {
                    "command": "kubectl",
                    "args": ["oidc-login", "get-token", "--oidc-client-secret=args-secret"],
                }
            },
        },
        {
            "name": "cloud",
            "user": {
                "exec": {
                    "command": "aws-iam-authenticator",
                    "env": [{"name": "AWS_SECRET_ACCESS_KEY", "value": "env-secret"}],
                }
            },
        },
    ]
    config = tmp_path / "config"
    config.write_text(kubeconfig(users))
    done = run(kt, "secure", "--all", f"--kubeconfig={config}", "--yes")
    out = done.stdout + done.stderr
    assert "no static secrets to move" not in out
    assert "legacy-oidc" in out and "refresh-token, client-secret" in out
    assert "kubetray setup --issuer https://dex.example --client-id kube" in out
    assert "kubelogin-secret" in out and "--oidc-client-secret" in out
    assert "cloud" in out and "AWS_SECRET_ACCESS_KEY" in out
    for secret in ("provider-client-secret", "provider-refresh-token", "args-secret", "env-secret"):
        assert secret not in out
    assert done.returncode == 1
