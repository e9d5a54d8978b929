"""kubetray's credential chain is botocore's own order, less what it refuses: this notices a
botocore upgrade that adds or moves a provider (the ``login`` provider came that way)."""

from pathlib import Path

from botocore.credentials import create_credential_resolver

from app.providers.aws.command import parse
from app.providers.aws.session import CallerSession, resolver

REFUSED = {"ec2-credentials-file", "boto-config", "iam-role"}
"""OriginalEC2Provider, BotoProvider (EC2-era files) and the instance metadata service."""


def _names(providers: list) -> list[str]:
    return [p.METHOD for p in providers]


def test_chain_is_botocore_s_order_less_the_instance_metadata(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text("[default]\nregion = eu-west-1\n")
    env = {"AWS_CONFIG_FILE": str(config), "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "c")}
    cmd = parse(["eks", "get-token", "--cluster-name", "d"], env)
    session = CallerSession(cmd.environ)
    ours = _names(resolver(session, cmd, None, {}, None).providers)
    theirs = [m for m in _names(create_credential_resolver(session).providers) if m not in REFUSED]
    assert ours == theirs


def test_the_session_reads_the_caller_s_environment_only(tmp_path: Path, monkeypatch) -> None:
    config = tmp_path / "config"
    config.write_text("[profile dev]\nregion = ap-south-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", "http://127.0.0.1:9")
    session = CallerSession({"AWS_CONFIG_FILE": str(config)}, "dev")
    assert session.get_config_variable("region") == "ap-south-1"
    client = session.create_client(
        "sts", region_name="ap-south-1", aws_access_key_id="a", aws_secret_access_key="b"
    )
    assert client.meta.endpoint_url == "https://sts.ap-south-1.amazonaws.com"
    caller = CallerSession(
        {"AWS_CONFIG_FILE": str(config), "AWS_ENDPOINT_URL_STS": "http://127.0.0.1:7"}, "dev"
    )
    client = caller.create_client(
        "sts", region_name="ap-south-1", aws_access_key_id="a", aws_secret_access_key="b"
    )
    assert client.meta.endpoint_url == "http://127.0.0.1:7"


def test_botocore_is_loaded_only_when_an_aws_identity_is_used() -> None:
    """Every agent loads the providers; only someone who uses AWS pays for botocore."""
    import subprocess
    import sys

    code = (
        "import sys; from app.providers import default; p = default(); "
        "p.wanted(['get-token', '--oidc-issuer-url=https://idp.example', '--oidc-client-id=k'], None, {}); "
        "from app.providers.aws import AwsProvider; "
        "AwsProvider().from_index({'command': {'tool': 'aws', 'cluster_id': 'c', 'region': None, "
        "'profile': 'p', 'profile_explicit': False, 'role_arn': None, 'session_name': None, "
        "'external_id': None, 'forward_session_name': False, 'env': {}}, 'source': {'kind': 'keys', "
        "'profile': 'p', 'sso': None, 'account_id': None, 'role_name': None, 'roles': [], "
        "'access_key_id': 'AKIA'}}).key; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('botocore', 'boto3')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_agent_keeps_a_bounded_number_of_aws_worlds(tmp_path: Path) -> None:
    """A caller whose environment changes every call (a session token rotated in its env) must
    not grow the agent: worlds and role caches are kept for the most recent ones only."""
    from app.providers.aws.engine import MAX_WORLDS, Engine

    engine = Engine(lambda _s: None)
    none = str(tmp_path / "none")
    for n in range(MAX_WORLDS + 8):
        env = {
            "AWS_ACCESS_KEY_ID": f"AKIA{n:016d}",
            "AWS_SECRET_ACCESS_KEY": "x",
            "AWS_CONFIG_FILE": none,
            "AWS_SHARED_CREDENTIALS_FILE": none,
        }
        engine.world(parse(["eks", "get-token", "--cluster-name", "d"], env))
    assert len(engine._worlds) == MAX_WORLDS
    assert len(engine._role_caches) <= 2 * MAX_WORLDS
