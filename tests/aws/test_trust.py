"""TLS to AWS trusts the system's CAs with AWS_CA_BUNDLE added, never one instead of the other.

botocore alone trusts certifi's bundle, and AWS_CA_BUNDLE replaces it: a company CA in the
system store only, or one company CA there and a team's in AWS_CA_BUNDLE, would fail IAM
Identity Center, GetRoleCredentials or AssumeRole. Here the IAM Identity Center stand-in and
moto's STS each serve https with a certificate from a different test CA; the "system store" is
what ``ssl.create_default_context()`` loads, the file ``SSL_CERT_FILE`` names in the agent's
environment (the machine's CAs plus the test CA, as update-ca-certificates would make it).
The calls go over the network: the SSO login (RegisterClient, StartDeviceAuthorization,
CreateToken), GetRoleCredentials, and AssumeRole for the profile's role_arn.
"""

import json
import os
import re
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.aws import world
from tests.aws.eks import EksVerifier
from tests.aws.moto_sts import ACCOUNT, MotoSTS
from tests.aws.sso import SsoStandIn
from tests.peers import KubetrayEnv
from tests.pki import CA, server_context

GET_TOKEN = list(world.GET_TOKEN)


@pytest.fixture
def agent_env(kt: KubetrayEnv, tmp_path: Path) -> Iterator[KubetrayEnv]:
    """``kt`` with no AWS_* of this machine's (its AWS_CA_BUNDLE would add the system's CAs
    by the other door), and the machine's CAs as the system store."""
    kt.env = {k: v for k, v in kt.env.items() if not k.startswith("AWS_")}
    kt.env.pop("SSL_CERT_DIR", None)  # one place for the system's CAs: SSL_CERT_FILE
    kt.env["SSL_CERT_FILE"] = str(_system_store(tmp_path / "system.pem"))
    yield kt
    kt.stop_agent()


def _system_store(path: Path, *added: CA) -> Path:
    """A system CA file: the machine's CAs, then ``added``."""
    machine = ssl.get_default_verify_paths().cafile
    assert machine, "this machine's CAs are not a file"
    path.write_bytes(Path(machine).read_bytes() + b"".join(ca.cert_pem for ca in added))
    return path


def _login_name(stderr: str) -> str:
    found = re.search(r"kubetray login ([\w.@-]+)", stderr)
    assert found, stderr
    return found.group(1)


def _cli(kt: KubetrayEnv, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return kt.kubetray(*args, env=env, timeout=120)


@pytest.mark.parametrize("sso_trusted_by", ["system store", "AWS_CA_BUNDLE"])
def test_the_system_s_cas_and_aws_ca_bundle_are_both_trusted(
    agent_env: KubetrayEnv, sts: MotoSTS, tmp_path: Path, sso_trusted_by: str
) -> None:
    """IAM Identity Center's certificate from one CA, STS's from another; one CA is in the
    system store only, the other in AWS_CA_BUNDLE only: the login, the role credentials and
    the role assumed on top all verify (botocore alone fails one or the other)."""
    kt = agent_env
    company, team = CA("company CA, in the system store"), CA("team CA, in AWS_CA_BUNDLE")
    _system_store(Path(kt.env["SSL_CERT_FILE"]), company)
    bundle = tmp_path / "team-ca.pem"
    client = team.issue("a client key kept beside its CA")
    bundle.write_bytes(client.key_pem + team.cert_pem)
    sso_ca, sts_ca = (company, team) if sso_trusted_by == "system store" else (team, company)
    with (
        SsoStandIn(sts, tls=server_context(sso_ca), interval=0.2) as sso,
        sts.over_tls(server_context(sts_ca)) as sts_url,
    ):
        sso.auto_approve = True
        files = world.write(
            tmp_path / "aws",
            sso.url,
            sts_url,
            start_url=f"https://d-{os.urandom(5).hex()}.awsapps.com/start",
        )
        env = files.env(AWS_PROFILE="eks-admin-via-sso", AWS_CA_BUNDLE=str(bundle))
        first = kt.run_helper(*GET_TOKEN, extra_env=env)
        assert first.returncode != 0
        name = _login_name(first.stderr)
        try:
            login = _cli(kt, env, "login", name)  # the stand-in approves the code at once
            assert login.returncode == 0, login.stderr
            assert files.start_url in login.stderr
            done = kt.run_helper(*GET_TOKEN, extra_env=env)
            assert done.returncode == 0, done.stderr
            token = json.loads(done.stdout)["status"]["token"]
            who = EksVerifier(sts, "demo").verify(token)
            assert who.arn.startswith(f"arn:aws:sts::{ACCOUNT}:assumed-role/eks-admin/")
            assert sso.calls["GetRoleCredentials"] == 1
            # what botocore was given: one file in the agent's private directory, both sets
            (combined,) = kt.runtime.glob("aws-ca-*.pem")
            assert combined.stat().st_mode & 0o777 == 0o600
            text = combined.read_bytes()
            assert company.cert_pem in text and team.cert_pem in text
            assert b"PRIVATE KEY" not in text  # only the bundle's certificates are copied
        finally:
            kt.kubetray("forget", name)  # out of the shared keyring


def test_a_certificate_nobody_trusts_is_refused_in_one_line(
    agent_env: KubetrayEnv, sts: MotoSTS, tmp_path: Path
) -> None:
    """A CA in neither the system store nor AWS_CA_BUNDLE: the login and AssumeRole fail with
    the untrusted certificate named, and what to do (not 'could not be reached, tries again')."""
    kt = agent_env
    stranger, team = CA("a CA nobody trusts"), CA("team CA, in AWS_CA_BUNDLE")
    bundle = tmp_path / "team-ca.pem"
    bundle.write_bytes(team.cert_pem)
    with (
        SsoStandIn(sts, tls=server_context(stranger), interval=0.2) as sso,
        sts.over_tls(server_context(stranger)) as sts_url,
    ):
        sso.auto_approve = True
        files = world.write(
            tmp_path / "aws",
            sso.url,
            sts_url,
            keys=sts.user_keys(f"u{os.urandom(4).hex()}"),
            start_url=f"https://d-{os.urandom(5).hex()}.awsapps.com/start",
        )
        # AssumeRole at an STS whose certificate does not verify (keys of the profile's own)
        env = files.env(AWS_PROFILE="admin-via-dev", AWS_CA_BUNDLE=str(bundle))
        done = kt.run_helper(*GET_TOKEN, extra_env=env)
        assert done.returncode != 0
        port = sts_url.rsplit(":", 1)[1]
        assert f"untrusted certificate at 127.0.0.1:{port}" in done.stderr, done.stderr
        assert "AWS_CA_BUNDLE" in done.stderr and "system's trust store" in done.stderr
        assert "Traceback" not in done.stderr
        # the IAM Identity Center login
        env = files.env(AWS_PROFILE="sso-dev")
        first = kt.run_helper(*GET_TOKEN, extra_env=env)
        name = _login_name(first.stderr)
        try:
            login = _cli(kt, env, "login", name)
            assert login.returncode != 0
            port = sso.url.rsplit(":", 1)[1]
            line = f"IAM Identity Center (the login): untrusted certificate at 127.0.0.1:{port}"
            assert line in login.stderr, login.stderr
            assert sso.calls["RegisterClient"] == 0  # nothing went past the handshake
        finally:
            kt.kubetray("forget", name)


def test_doctor_reaches_iam_identity_center_with_the_same_trust(
    sts: MotoSTS, tmp_path: Path
) -> None:
    """kubetray doctor's "IAM Identity Center answers" check verifies as the clients do."""
    from app.providers.aws.login import _reach

    team = CA("team CA, in AWS_CA_BUNDLE")
    bundle = tmp_path / "team-ca.pem"
    bundle.write_bytes(team.cert_pem)
    with SsoStandIn(sts, tls=server_context(team)) as sso:
        date, error = _reach(sso.url, str(bundle))
        assert error is None and date is not None
        date, error = _reach(sso.url, None)
        assert date is None and error and "certificate verify failed" in error
