"""What kubetray makes of an AWS profile (config parsed by botocore's own loader), what it
serves and what it refuses with one line."""

from pathlib import Path

import pytest
from botocore.configloader import load_config

from app.providers.aws import profiles
from app.providers.aws.profiles import ProfileError, classify

CONFIG = """
[profile sso-dev]
sso_session = corp
sso_account_id = 123456789012
sso_role_name = AdministratorAccess

[sso-session corp]
sso_start_url = https://d-1234567890.awsapps.com/start
sso_region = us-east-1
sso_registration_scopes = sso:account:access, extra:scope

[profile legacy]
sso_start_url = https://d-1234567890.awsapps.com/start
sso_region = us-east-1
sso_account_id = 123456789012
sso_role_name = ReadOnly

[profile chain]
source_profile = sso-dev
role_arn = arn:aws:iam::123456789012:role/eks-admin

[profile chain2]
source_profile = chain
role_arn = arn:aws:iam::123456789012:role/second

[profile keys]
aws_access_key_id = AKIAEXAMPLE
aws_secret_access_key = secret

[profile proc]
credential_process = /bin/echo

[profile webid]
role_arn = arn:aws:iam::123456789012:role/ci
web_identity_token_file = /tmp/token

[profile login]
login_session = arn:aws:iam::123456789012:user/me

[profile ec2]
role_arn = arn:aws:iam::123456789012:role/x
credential_source = Ec2InstanceMetadata

[profile badsession]
sso_session = nope
sso_account_id = 1
sso_role_name = r

[profile half]
sso_session = corp
sso_account_id = 1

[profile loop-a]
source_profile = loop-b
role_arn = arn:aws:iam::1:role/a

[profile loop-b]
source_profile = loop-a
role_arn = arn:aws:iam::1:role/b
"""


@pytest.fixture
def config(tmp_path: Path) -> dict:
    path = tmp_path / "config"
    path.write_text(CONFIG)
    return load_config(str(path))


def test_sso_session_and_legacy(config: dict) -> None:
    src = classify(config, "sso-dev", {})
    assert src.kind == profiles.SSO
    assert src.sso is not None
    assert (src.sso.start_url, src.sso.region, src.sso.name) == (
        "https://d-1234567890.awsapps.com/start",
        "us-east-1",
        "corp",
    )
    assert src.sso.scopes == ("sso:account:access", "extra:scope")
    # the AWS CLI's cache key: sha1 of the session name (eks.md D.4)
    assert src.sso.cache_key == "ee0bfd2552fbd840c02cc48b6e823320543c450f"
    assert (src.account_id, src.role_name) == ("123456789012", "AdministratorAccess")
    legacy = classify(config, "legacy", {})
    assert legacy.sso is not None and legacy.sso.name is None
    assert legacy.sso.scopes == profiles.DEFAULT_SCOPES
    assert ("role", "ReadOnly") in legacy.describe()


def test_role_chains_end_at_their_source(config: dict) -> None:
    src = classify(config, "chain2", {})
    assert src.kind == profiles.SSO
    assert src.roles == (
        "arn:aws:iam::123456789012:role/eks-admin",
        "arn:aws:iam::123456789012:role/second",
    )
    with pytest.raises(ProfileError, match="loop"):
        classify(config, "loop-a", {})


def test_keys_process_web_identity_and_env(config: dict) -> None:
    assert classify(config, "keys", {}).access_key_id == "AKIAEXAMPLE"
    assert classify(config, "proc", {}).kind == profiles.PROCESS
    assert classify(config, "webid", {}).kind == profiles.WEB_IDENTITY
    env = {"AWS_ACCESS_KEY_ID": "AKIAENV", "AWS_SECRET_ACCESS_KEY": "x"}
    src = classify(config, "sso-dev", env)
    assert (src.kind, src.access_key_id) == (profiles.ENV, "AKIAENV")
    assert "x" not in str(src.describe())


@pytest.mark.parametrize(
    ("profile", "env", "words"),
    [
        ("login", {}, "aws login"),
        ("ec2", {}, "instance metadata"),
        ("default", {"AWS_WEB_IDENTITY_TOKEN_FILE": "/t"}, "web identity"),
        ("badsession", {}, 'sso-session does not exist: "nope"'),
        ("half", {}, "missing required configuration: sso_role_name"),
        ("nope", {}, r"the AWS profile 'nope' is not in the AWS config files"),
    ],
)
def test_refused_with_one_line(config: dict, profile: str, env: dict, words: str) -> None:
    with pytest.raises(ProfileError, match=words) as e:
        classify(config, profile, env)
    assert "\n" not in str(e.value)


def test_no_profile_at_all_is_not_an_error_until_credentials_are_asked(config: dict) -> None:
    assert classify({"profiles": {}}, "default", {}).kind == "none"
    assert classify(
        {"profiles": {}}, "default", {"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://x"}
    ).kind == (profiles.CONTAINER)
