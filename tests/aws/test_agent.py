"""kubetray as the EKS plugin: real kubectl through the kubeconfigs ``aws eks update-kubeconfig``
and aws-iam-authenticator's README write (only ``command`` changed to kubetray-exec), the
agent signing with the profile's credentials, the API server stand-in letting in only what EKS's
verifier accepts; IAM Identity Center logins done once for every caller."""

import base64
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from tests.apiserver import NAMESPACES, APIServer
from tests.aws import world
from tests.aws.eks import EksVerifier
from tests.aws.moto_sts import ACCOUNT, MotoSTS
from tests.aws.sso import SsoStandIn
from tests.peers import KubetrayEnv, kubectl_bin
from tests.pki import CA

FIXTURES = Path(__file__).parent / "fixtures"
pytestmark = pytest.mark.kubectl


@pytest.fixture
def eks(sts: MotoSTS) -> EksVerifier:
    return EksVerifier(sts, "demo")


@pytest.fixture
def api(ca: CA, eks: EksVerifier) -> Iterator[APIServer]:
    with APIServer(ca, check_token=eks.check) as server:
        yield server


@pytest.fixture
def files(tmp_path: Path, sts: MotoSTS, sso: SsoStandIn) -> world.AwsFiles:
    """A portal of this test's own: the keyring is shared by the whole run, and a login of an
    earlier test's (dead) stand-in must not be this one's."""
    return world.write(
        tmp_path / "aws",
        sso.url,
        sts.url,
        keys=sts.user_keys(f"u{os.urandom(4).hex()}"),
        start_url=f"https://d-{os.urandom(5).hex()}.awsapps.com/start",
    )


@pytest.fixture
def stopped(kt: KubetrayEnv) -> Iterator[KubetrayEnv]:
    yield kt
    kt.kubetray("forget", "aws-corp")  # out of the shared keyring
    kt.stop_agent()


def imported(
    name: str, api: APIServer, kt: KubetrayEnv, where: Path, profile: str | None = None
) -> Path:
    """The fixture as ``kubetray import`` leaves it: kubetray-exec in ``command``, the rest
    as the tool wrote it (and kubetray's test directories in the exec env)."""
    text = (FIXTURES / name).read_text()
    text = text.replace("CA_DATA", base64.b64encode(api.ca_pem).decode()).replace("SERVER", api.url)
    text = text.replace("command: aws-iam-authenticator", f"command: {kt.helper}")
    text = text.replace("command: aws", f"command: {kt.helper}")
    if profile:
        text = text.replace("value: dev", f"value: {profile}")
    path = where / name
    path.write_text(text)
    return path


def kubectl(
    config: Path, kt: KubetrayEnv, env: dict[str, str], version: str = "1.33"
) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in kt.env.items() if not k.startswith("AWS_")}
    full.update(env, HOME=str(kt.home))
    return subprocess.run(
        [kubectl_bin(version), "--kubeconfig", str(config), "get", "ns", "-o", "name"],
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_update_kubeconfig_users_with_a_profile_s_keys(
    stopped: KubetrayEnv,
    api: APIServer,
    eks: EksVerifier,
    files: world.AwsFiles,
    tmp_path: Path,
    version: str,
) -> None:
    kt = stopped
    config = imported("update-kubeconfig-profile.yaml", api, kt, tmp_path)
    for _ in range(3):
        done = kubectl(config, kt, files.env(), version)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == [f"namespace/{n}" for n in NAMESPACES]
    assert {i.arn for i in eks.seen} == {eks.seen[0].arn}
    assert eks.seen[0].arn.startswith(f"arn:aws:iam::{ACCOUNT}:user/u")
    assert not eks.refusals


def test_role_arn_and_a_configured_sts_endpoint(
    stopped: KubetrayEnv, api: APIServer, eks: EksVerifier, files: world.AwsFiles, tmp_path: Path
) -> None:
    """update-kubeconfig's ``--role`` is assumed (at moto, through the profile's [services]
    endpoint), and the token still names the real STS host (the AWS CLI's would not)."""
    config = imported("update-kubeconfig-role.yaml", api, stopped, tmp_path)
    done = kubectl(config, stopped, files.env(AWS_PROFILE="dev"))
    assert done.returncode == 0, done.stderr
    assert eks.seen[-1].arn == f"arn:aws:sts::{ACCOUNT}:assumed-role/eks-admin/EKSGetTokenAuth"


def _approver(sso: SsoStandIn, stop: threading.Event) -> threading.Thread:
    """A person who opens the link kubetray shows and allows it (a form post, as the page's
    button does)."""

    def run() -> None:
        import urllib.parse
        import urllib.request

        while not stop.is_set():
            for code in sso.pending_codes():
                body = urllib.parse.urlencode({"user_code": code}).encode()
                urllib.request.urlopen(f"{sso.url}/approve", data=body, timeout=5).read()
            stop.wait(0.1)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_iam_identity_center_login_once_for_every_caller(
    stopped: KubetrayEnv,
    api: APIServer,
    eks: EksVerifier,
    sso: SsoStandIn,
    files: world.AwsFiles,
    tmp_path: Path,
) -> None:
    kt = stopped
    config = imported("aws-iam-authenticator.yaml", api, kt, tmp_path, profile="sso-dev")
    env = files.env()
    first = kubectl(config, kt, env)
    assert first.returncode != 0
    assert "kubetray login aws-corp" in first.stderr
    # the person logs in from a terminal: the code and the link on stderr
    stop = threading.Event()
    _approver(sso, stop)
    try:
        login = _cli(kt, env, "login", "aws-corp")
    finally:
        stop.set()
    assert login.returncode == 0, login.stderr
    assert files.start_url in login.stderr and "/device?user_code=" in login.stderr
    assert "or scan this with your phone:\n█" in login.stderr  # the link as a QR code
    # 12 callers at once, through two profiles on the same portal: no second login
    (tmp_path / "ro").mkdir()
    readonly = imported(
        "aws-iam-authenticator.yaml", api, kt, tmp_path / "ro", profile="sso-readonly"
    )
    with ThreadPoolExecutor(12) as pool:
        runs = list(pool.map(lambda i: kubectl(config if i % 2 else readonly, kt, env), range(12)))
    assert [r.returncode for r in runs] == [0] * 12, [r.stderr for r in runs if r.returncode]
    assert sso.calls["StartDeviceAuthorization"] == 1
    assert sso.calls["GetRoleCredentials"] == 2  # one per role, kept in memory
    roles = {i.canonical_arn.rsplit("/", 1)[1].split("_")[1] for i in eks.seen}
    assert roles == {"AdministratorAccess", "ReadOnly"}
    assert not (kt.home / ".aws").exists()  # nothing in the AWS CLI's plaintext caches
    status = json.loads(
        subprocess.run(
            [sys.executable, "-m", "app", "status", "--json"],
            env=kt.env,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=Path(__file__).parents[2],
            check=True,
        ).stdout
    )
    shown = [i for i in status["identities"] if i["name"] == "aws-corp"]
    assert shown and shown[0]["kind"] == "aws"
    assert ["account", ACCOUNT] in [list(d) for d in shown[0]["details"]]
    # the SSO tokens are nowhere in kubetray's files
    access = [t for t in sso.access][:1]
    for path in [*kt.config.rglob("*"), *kt.state.rglob("*"), *kt.home.rglob("*")]:
        if path.is_file():
            data = path.read_bytes()
            assert not any(a.encode() in data for a in access), path


def test_the_aws_cli_s_login_is_adopted_without_asking(
    stopped: KubetrayEnv,
    api: APIServer,
    eks: EksVerifier,
    sso: SsoStandIn,
    files: world.AwsFiles,
    tmp_path: Path,
) -> None:
    """After ``aws sso login`` (its cache in ~/.aws/sso/cache), the first kubectl call works
    with nobody there, and the CLI's file is left exactly as it was."""
    from app.providers.aws.command import parse
    from app.providers.aws.engine import Engine
    from app.providers.aws.sso import SsoClient

    w = Engine(lambda _s: None).world(
        parse(["eks", "get-token", "--cluster-name", "demo"], files.env(AWS_PROFILE="sso-dev"))
    )
    assert w.sso is not None
    tokens = SsoClient(w.sso, w.unsigned).login(world.QuickPerson(sso))
    cache = stopped.home / ".aws" / "sso" / "cache"
    cache.mkdir(parents=True)
    entry = cache / f"{w.sso.cache_key}.json"
    entry.write_text(json.dumps(tokens.to_cli()))
    before = entry.read_bytes(), entry.stat().st_mtime_ns
    config = imported("update-kubeconfig-profile.yaml", api, stopped, tmp_path, profile="sso-dev")
    done = kubectl(config, stopped, files.env())
    assert done.returncode == 0, done.stderr
    assert "AWSReservedSSO_AdministratorAccess" in eks.seen[-1].arn
    assert sso.calls["StartDeviceAuthorization"] == 1  # the one above, for the CLI's login
    time.sleep(0.1)
    assert (entry.read_bytes(), entry.stat().st_mtime_ns) == before


def _cli(kt: KubetrayEnv, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return kt.kubetray(*args, env=env, timeout=120)


def test_the_login_lives_in_the_keyring_across_restarts_and_logout_ends_it(
    stopped: KubetrayEnv,
    keyring_session: None,
    api: APIServer,
    eks: EksVerifier,
    sso: SsoStandIn,
    files: world.AwsFiles,
    tmp_path: Path,
) -> None:
    kt = stopped
    config = imported("update-kubeconfig-profile.yaml", api, kt, tmp_path, profile="sso-dev")
    env = files.env()
    assert kubectl(config, kt, env).returncode != 0  # the identity is known from now on
    stop = threading.Event()
    _approver(sso, stop)
    try:
        assert _cli(kt, env, "login", "aws-corp").returncode == 0
    finally:
        stop.set()
    assert kubectl(config, kt, env).returncode == 0
    kt.stop_agent()
    # a new agent: the login comes from the keyring; and the portal has ended its access
    # token early (aws-cli#7340): refused at GetRoleCredentials, refreshed, served
    sso.end_access()
    refreshes = sso.calls["CreateToken"]
    done = kubectl(config, kt, env)
    assert done.returncode == 0, done.stderr
    assert sso.calls["CreateToken"] == refreshes + 1
    assert sso.calls["StartDeviceAuthorization"] == 1
    secrets = [*sso.access, *sso.refresh]
    for path in [*kt.config.rglob("*"), *kt.state.rglob("*"), *kt.home.rglob("*")]:
        if path.is_file():
            data = path.read_bytes()
            assert not any(s.encode() in data for s in secrets), path
    out = _cli(kt, env, "logout", "aws-corp")
    assert out.returncode == 0, out.stderr
    assert sso.calls["Logout"] == 1
    again = kubectl(config, kt, env)
    assert again.returncode != 0 and "kubetray login aws-corp" in again.stderr


def test_kubetray_import_converts_eks_users_and_undo_puts_them_back(
    stopped: KubetrayEnv,
    keyring_session: None,
    api: APIServer,
    eks: EksVerifier,
    files: world.AwsFiles,
    tmp_path: Path,
) -> None:
    """``kubetray import`` on files as update-kubeconfig and the authenticator's README wrote
    them: a diff first, then only ``command`` changed, kubectl through the result, --undo."""
    kt = stopped
    paths = []
    for name in ("update-kubeconfig-profile.yaml", "aws-iam-authenticator.yaml"):
        text = (FIXTURES / name).read_text()
        text = text.replace("CA_DATA", base64.b64encode(api.ca_pem).decode())
        text = text.replace("SERVER", api.url)
        path = tmp_path / name
        path.write_text(text)
        path.chmod(0o600)
        paths.append(path)
    original = [p.read_bytes() for p in paths]
    env = {"KUBECONFIG": ":".join(map(str, paths))}
    dry = _cli(kt, env, "import", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert (
        "-      command: aws" in dry.stdout
        and "-      command: aws-iam-authenticator" in dry.stdout
    )
    assert [p.read_bytes() for p in paths] == original
    done = _cli(kt, env, "import", "--yes")
    assert done.returncode == 0, done.stderr
    for before, path in zip(original, paths, strict=True):
        old = yaml.safe_load(before)["users"][0]["user"]["exec"]
        new = yaml.safe_load(path.read_text())["users"][0]["user"]["exec"]
        assert new["command"].endswith("kubetray-exec")
        assert (new["args"], new.get("env")) == (old["args"], old.get("env"))
    # kubectl through the imported files, as they are
    for path in paths:
        out = kubectl(path, kt, files.env())
        assert out.returncode == 0, out.stderr
    undo = _cli(kt, env, "import", "--undo", "--yes")
    assert undo.returncode == 0, undo.stderr
    # the same bytes: the files are as the import left them, so their backups go back
    assert [p.read_bytes() for p in paths] == original


def test_doctor_names_the_profile_the_token_host_and_who_aws_says_this_is(
    stopped: KubetrayEnv, api: APIServer, files: world.AwsFiles, sso: SsoStandIn, tmp_path: Path
) -> None:
    keys = imported("update-kubeconfig-profile.yaml", api, stopped, tmp_path)
    (tmp_path / "sso").mkdir()
    portal = imported(
        "update-kubeconfig-profile.yaml", api, stopped, tmp_path / "sso", profile="sso-dev"
    )
    for config, words in (
        (
            keys,
            [
                "AWS profile dev",
                "signed for https://sts.eu-west-1.amazonaws.com",
                f"arn:aws:iam::{ACCOUNT}:user/u",
            ],
        ),
        (
            portal,
            [
                "AWS profile sso-dev",
                f"IAM Identity Center {files.start_url}",
                "answers",
                "clock vs",
            ],
        ),
    ):
        out = _cli(stopped, {**files.env(), "KUBECONFIG": str(config)}, "doctor")
        for word in words:
            assert word in out.stdout, out.stdout


def test_another_secret_for_one_access_key_never_gets_the_first_one_s_token(
    stopped: KubetrayEnv, eks: EksVerifier, files: world.AwsFiles, sts: MotoSTS
) -> None:
    """A second kubeconfig on the machine that knows the access key id, not its secret, is
    never handed a token signed with the secret another caller gave (issue 37)."""
    akid, secret = sts.user_keys(f"env{os.urandom(3).hex()}")
    args = ["eks", "get-token", "--cluster-name", "demo", "--region", "eu-west-1"]

    def run(secret_key: str) -> subprocess.CompletedProcess[str]:
        env = files.env(
            AWS_ACCESS_KEY_ID=akid, AWS_SECRET_ACCESS_KEY=secret_key, AWS_ENDPOINT_URL_STS=sts.url
        )
        return stopped.run_helper(*args, extra_env=env)

    right = run(secret)
    assert right.returncode == 0, right.stderr
    assert eks.check(json.loads(right.stdout)["status"]["token"])
    wrong = run("not-" + secret)
    token = json.loads(wrong.stdout)["status"]["token"] if wrong.returncode == 0 else None
    assert token is None or not eks.check(token)  # signed with the wrong secret, if at all
    assert secret not in wrong.stderr and secret not in wrong.stdout.replace(token or "", "")
