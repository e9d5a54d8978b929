"""The AWS stand-ins, one of each per test module (moto's state is per process)."""

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.aws import world
from tests.aws.moto_sts import MotoSTS
from tests.aws.sso import SsoStandIn
from tests.pki import CA

AWS_CLI = Path(sys.executable).parent / "aws"


@pytest.fixture(scope="module")
def ca() -> CA:
    """The CA of the stand-in API servers' certificates."""
    return CA()


@pytest.fixture(scope="module")
def sts() -> Iterator[MotoSTS]:
    with MotoSTS() as server:
        yield server


@pytest.fixture
def sso(sts: MotoSTS) -> Iterator[SsoStandIn]:
    with SsoStandIn(sts) as server:
        yield server


@pytest.fixture
def files(tmp_path: Path, sts: MotoSTS, sso: SsoStandIn) -> world.AwsFiles:
    """The config files, with an IAM user's keys as profile ``dev``."""
    return world.write(
        tmp_path / "aws", sso.url, sts.url, keys=sts.user_keys(f"u{os.urandom(4).hex()}")
    )


@pytest.fixture
def aws_cli() -> Path:
    """The AWS CLI v1 from PyPI (the test extra): what kubetray is a drop-in for."""
    if not AWS_CLI.exists():
        pytest.skip("the AWS CLI (awscli, in the test extra) is not installed")
    return AWS_CLI
