"""The kubeconfig fixtures are what ``aws eks update-kubeconfig`` writes: regenerated here with
the AWS CLI v1 against moto's EKS and compared line for line (server and CA aside, which a
test fills with the stand-in API server's)."""

import os
import subprocess
from pathlib import Path

import pytest

from tests.aws.moto_sts import ACCOUNT, MotoSTS

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize(
    ("fixture", "args", "env"),
    [
        ("update-kubeconfig-default.yaml", ["--region", "us-east-1"], {}),
        ("update-kubeconfig-profile.yaml", ["--region", "eu-west-1"], {"AWS_PROFILE": "dev"}),
        (
            "update-kubeconfig-role.yaml",
            [
                "--region",
                "us-east-1",
                "--role-arn",
                f"arn:aws:iam::{ACCOUNT}:role/eks-admin",
                "--alias",
                "demo-admin",
                "--user-alias",
                "demo-admin-user",
            ],
            {},
        ),
    ],
)
def test_fixture_is_what_update_kubeconfig_writes(
    sts: MotoSTS, aws_cli: Path, tmp_path: Path, fixture: str, args: list[str], env: dict
) -> None:
    region = args[1]
    eks = sts.client("eks", region)
    if "demo" not in eks.list_clusters()["clusters"]:
        eks.create_cluster(
            name="demo",
            roleArn=f"arn:aws:iam::{ACCOUNT}:role/eks-cluster",
            resourcesVpcConfig={},
        )
    config = tmp_path / "config"
    config.write_text("[default]\n[profile dev]\n")
    creds = tmp_path / "credentials"
    creds.write_text(
        "[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = x\n"
        "[dev]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = x\n"
    )
    kubeconfig = tmp_path / "kubeconfig"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    subprocess.run(
        [
            str(aws_cli),
            "eks",
            "update-kubeconfig",
            "--name",
            "demo",
            "--endpoint-url",
            sts.url,
            "--kubeconfig",
            str(kubeconfig),
            *args,
        ],
        env={
            **clean,
            "AWS_CONFIG_FILE": str(config),
            "AWS_SHARED_CREDENTIALS_FILE": str(creds),
            "HOME": str(tmp_path),
            **env,
        },
        capture_output=True,
        check=True,
        timeout=60,
    )
    written = kubeconfig.read_text().splitlines()
    expected = (FIXTURES / fixture).read_text().splitlines()
    strip = ("    certificate-authority-data:", "    server:")
    assert [line for line in written if not line.startswith(strip)] == [
        line for line in expected if not line.startswith(strip)
    ]
