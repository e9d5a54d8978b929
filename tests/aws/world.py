"""An AWS world for tests: config files as ``aws configure`` / ``aws configure sso`` write
them, pointed at the stand-ins (IAM Identity Center, moto's STS) through a ``[services]``
section, as a person with VPC endpoints would, and never at AWS.

The token's own host stays the real STS endpoint: kubetray signs with a client that ignores
configured endpoints, and the EKS stand-in checks the host.
"""

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.aws.moto_sts import ACCOUNT

START_URL = "https://d-1234567890.awsapps.com/start"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/eks-admin"
GET_TOKEN = (
    "--region",
    "eu-west-1",
    "eks",
    "get-token",
    "--cluster-name",
    "demo",
    "--output",
    "json",
)
"""What ``aws eks update-kubeconfig`` writes for cluster ``demo`` in eu-west-1 (its args)."""


@dataclass
class AwsFiles:
    dir: Path
    config: Path
    credentials: Path
    start_url: str = START_URL

    def env(self, **more: str) -> dict[str, str]:
        """What a kubeconfig's exec sees (plus ``more``): the files, no instance metadata."""
        return {
            "AWS_CONFIG_FILE": str(self.config),
            "AWS_SHARED_CREDENTIALS_FILE": str(self.credentials),
            "AWS_EC2_METADATA_DISABLED": "true",
            **more,
        }


def write(
    where: Path,
    sso_url: str,
    sts_url: str,
    keys: tuple[str, str] | None = None,
    scopes: str = "sso:account:access",
    services: bool = True,
    start_url: str = START_URL,
) -> AwsFiles:
    """``sso-dev`` (sso-session ``corp``), ``sso-legacy``, ``eks-admin-via-sso`` (a role on
    top of sso-dev), ``dev`` (keys, when given) and ``admin-via-dev`` (a role on top of dev).
    ``services``: the profiles use the ``[services]`` endpoints; without, give
    ``endpoint_env()`` in the environment (the AWS CLI puts a configured STS endpoint into its
    token, so a CLI run must not see one)."""
    where.mkdir(parents=True, exist_ok=True)
    use = "services = standins\n" if services else ""
    config = (
        f"""[profile sso-dev]
sso_session = corp
sso_account_id = {ACCOUNT}
sso_role_name = AdministratorAccess
region = eu-west-1
{use}
[profile sso-readonly]
sso_session = corp
sso_account_id = {ACCOUNT}
sso_role_name = ReadOnly
region = eu-west-1
{use}
[profile sso-legacy]
sso_start_url = {start_url}
sso_region = us-east-1
sso_account_id = {ACCOUNT}
sso_role_name = AdministratorAccess
region = eu-west-1
{use}
[profile eks-admin-via-sso]
source_profile = sso-dev
role_arn = {ROLE_ARN}
region = eu-west-1
{use}
[profile dev]
region = eu-west-1
{use}
[profile admin-via-dev]
source_profile = dev
role_arn = {ROLE_ARN}
{use}
[sso-session corp]
sso_start_url = {start_url}
sso_region = us-east-1
"""
        + (f"sso_registration_scopes = {scopes}\n" if scopes else "")
        + f"""
[services standins]
sso_oidc =
  endpoint_url = {sso_url}
sso =
  endpoint_url = {sso_url}
sts =
  endpoint_url = {sts_url}
"""
    )
    cfg = where / "config"
    cfg.write_text(config)
    creds = where / "credentials"
    creds.write_text(
        f"[dev]\naws_access_key_id = {keys[0]}\naws_secret_access_key = {keys[1]}\n" if keys else ""
    )
    return AwsFiles(where, cfg, creds, start_url)


def endpoint_env(sso_url: str) -> dict[str, str]:
    """The IAM Identity Center endpoints as environment variables (for the AWS CLI)."""
    return {"AWS_ENDPOINT_URL_SSO": sso_url, "AWS_ENDPOINT_URL_SSO_OIDC": sso_url}


class QuickPerson:
    """A device-login UI whose person approves the code at once (or denies it)."""

    def __init__(self, sso: Any, deny: bool = False) -> None:
        self.sso = sso
        self.deny = deny
        self.lines: list[str] = []
        self.codes: list[str] = []
        self.cancelled = threading.Event()

    def show(self, text: str) -> None:
        self.lines.append(text)

    def show_device_code(self, user_code: str, uri: str) -> None:
        self.codes.append(user_code)
        self.sso.approve(user_code, deny=self.deny)

    def open_browser(self, url: str) -> bool:
        return False


def lines(ui: QuickPerson) -> Iterator[str]:
    yield from ui.lines
