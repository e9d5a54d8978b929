"""Real kubectl through the kubeconfig fixtures ``aws eks update-kubeconfig`` writes, against an
API server stand-in that lets in only what EKS's verifier accepts for cluster ``demo``.

The AWS CLI v1 itself (``command: aws``) goes first: it shows that the stand-ins accept the
reference implementation's tokens, so what kubetray-exec is held to is EKS's rule, not ours.
"""

import base64
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.apiserver import NAMESPACES, APIServer
from tests.aws import world
from tests.aws.eks import EksVerifier
from tests.aws.moto_sts import MotoSTS
from tests.peers import kubectl_bin
from tests.pki import CA

FIXTURES = Path(__file__).parent / "fixtures"
VERSIONS = ["1.27", "1.33"]
pytestmark = pytest.mark.kubectl


@pytest.fixture
def eks(sts: MotoSTS) -> EksVerifier:
    return EksVerifier(sts, "demo", "us-east-1")


@pytest.fixture
def api(ca: CA, eks: EksVerifier) -> Iterator[APIServer]:
    with APIServer(ca, check_token=eks.check) as server:
        yield server


def fixture(name: str, api: APIServer, where: Path, command: str | None = None) -> Path:
    """The fixture with the stand-in's URL and CA (and ``command`` in place of the tool's)."""
    text = (FIXTURES / name).read_text()
    text = text.replace("CA_DATA", base64.b64encode(api.ca_pem).decode()).replace("SERVER", api.url)
    if command:
        text = text.replace("command: aws-iam-authenticator", f"command: {command}")
        text = text.replace("command: aws", f"command: {command}")
    path = where / name
    path.write_text(text)
    return path


def run(kubectl_bin: str, config: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [kubectl_bin, "--kubeconfig", str(config), "get", "ns", "-o", "name"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def cli_env(files: world.AwsFiles, home: Path, aws: Path, **more: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    plain = world.write(home / "cli-aws", "http://127.0.0.1:9", "", services=False)
    plain.credentials.write_text(files.credentials.read_text())
    return {
        **clean,
        **plain.env(),
        "HOME": str(home),
        "PATH": f"{aws.parent}:{clean.get('PATH', '')}",
        **more,
    }


@pytest.mark.parametrize("version", VERSIONS)
def test_the_aws_cli_through_the_fixtures(
    version: str,
    api: APIServer,
    eks: EksVerifier,
    files: world.AwsFiles,
    aws_cli: Path,
    tmp_path: Path,
) -> None:
    bin_ = kubectl_bin(version)
    env = cli_env(files, tmp_path, aws_cli, AWS_PROFILE="dev")
    done = run(bin_, fixture("update-kubeconfig-default.yaml", api, tmp_path), env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [f"namespace/{n}" for n in NAMESPACES]
    assert eks.seen and eks.seen[-1].arn.startswith("arn:aws:iam::123456789012:user/u")
    # the role fixture: --role (update-kubeconfig's spelling) is assumed at moto
    env["AWS_ENDPOINT_URL_STS"] = (
        files.config.read_text().split("sts =\n  endpoint_url = ")[1].split()[0]
    )
    done = run(bin_, fixture("update-kubeconfig-role.yaml", api, tmp_path), env)
    # the CLI puts the configured STS endpoint into its token: EKS (the stand-in) refuses it
    assert done.returncode != 0
    assert "unexpected scheme" in eks.refusals[-1]
