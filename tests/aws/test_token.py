"""The EKS token kubetray signs, checked the way EKS checks it (tests/aws/eks.py: the
authenticator's steps, then the signature recomputed from the secret moto issued), and put
beside the one the AWS CLI makes from the same profile."""

import json
import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

from app.providers.aws.command import parse
from app.providers.aws.engine import CredentialsError, Engine
from app.providers.aws.token import decode
from tests.aws import world
from tests.aws.eks import EksVerifier, Refused
from tests.aws.moto_sts import ACCOUNT, MotoSTS

GET_TOKEN = ["eks", "get-token", "--cluster-name", "demo", "--output", "json"]


def _token(
    env: dict[str, str], *extra: str, region: str | None = "eu-west-1"
) -> tuple[str, datetime]:
    args = (["--region", region] if region else []) + GET_TOKEN + list(extra)
    tok = Engine(lambda _s: None).world(parse(args, env)).token("demo")
    return tok.token, tok.expires_at


def _query(token: str) -> tuple[str, list[tuple[str, str]]]:
    url = urlsplit(decode(token))
    return f"{url.scheme}://{url.netloc}{url.path}", parse_qsl(url.query)


def _cli(aws: Path, env: dict[str, str], *args: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    out = subprocess.run(
        [str(aws), *args],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout)


def _signed_at(query: list[tuple[str, str]]) -> datetime:
    return datetime.strptime(dict(query)["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)


def test_token_from_a_profile_s_keys_is_accepted_by_eks(
    sts: MotoSTS, files: world.AwsFiles
) -> None:
    token, expires = _token(files.env(AWS_PROFILE="dev"))
    who = EksVerifier(sts, "demo", "eu-west-1").verify(token)
    assert who.arn.startswith(f"arn:aws:iam::{ACCOUNT}:user/u")
    base, query = _query(token)
    assert base == "https://sts.eu-west-1.amazonaws.com/"
    assert [k for k, _ in query] == [
        "Action",
        "Version",
        "X-Amz-Algorithm",
        "X-Amz-Credential",
        "X-Amz-Date",
        "X-Amz-Expires",
        "X-Amz-SignedHeaders",
        "X-Amz-Signature",
    ]
    q = dict(query)
    assert (q["X-Amz-Expires"], q["X-Amz-SignedHeaders"]) == ("60", "host;x-k8s-aws-id")
    assert expires - _signed_at(query) == timedelta(minutes=14)
    assert "=" not in token


def test_eks_refuses_another_cluster_a_wrong_secret_and_an_old_token(
    sts: MotoSTS, files: world.AwsFiles
) -> None:
    token, _ = _token(files.env(AWS_PROFILE="dev"))
    with pytest.raises(Refused, match="SignatureDoesNotMatch"):
        EksVerifier(sts, "other", "eu-west-1").verify(token)
    # a wrong secret for a key moto knows
    akid = files.credentials.read_text().split("aws_access_key_id = ")[1].split()[0]
    files.credentials.write_text(
        f"[dev]\naws_access_key_id = {akid}\naws_secret_access_key = wrong\n"
    )
    forged, _ = _token(files.env(AWS_PROFILE="dev"))
    with pytest.raises(Refused, match="SignatureDoesNotMatch"):
        EksVerifier(sts, "demo", "eu-west-1").verify(forged)
    signed = _signed_at(_query(token)[1])
    late = EksVerifier(
        sts, "demo", "eu-west-1", now=lambda: signed + timedelta(minutes=15, seconds=1)
    )
    with pytest.raises(Refused, match="expired"):
        late.verify(token)
    # STS honours 15 minutes whatever X-Amz-Expires says (the authenticator's comment)
    EksVerifier(
        sts, "demo", "eu-west-1", now=lambda: signed + timedelta(minutes=14, seconds=59)
    ).verify(token)


def _reencode(url: str) -> str:
    import base64

    return "k8s-aws-v1." + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda u: u.replace("https://", "http://"), "scheme"),
        (
            lambda u: u.replace("sts.eu-west-1.amazonaws.com", "sts.eu-west-1.amazonaws.com:8443"),
            "port",
        ),
        (
            lambda u: u.replace("sts.eu-west-1.amazonaws.com", "sts.eu-west-1.example.com"),
            "STS domains",
        ),
        (
            lambda u: u.replace("sts.eu-west-1.amazonaws.com", "sts.eu-west-2.amazonaws.com"),
            "scope",
        ),
        (lambda u: u + "&X-Amz-Extra=1", "non-allowlisted"),
        (lambda u: u.replace("host%3Bx-k8s-aws-id", "host"), "x-k8s-aws-id"),
        (lambda u: u.replace("X-Amz-Expires=60", "X-Amz-Expires=901"), "out of range"),
        (lambda u: u.replace("GetCallerIdentity", "GetSessionToken"), "action"),
    ],
)
def test_eks_refuses_tampered_tokens(sts: MotoSTS, files: world.AwsFiles, change, words) -> None:
    token, _ = _token(files.env(AWS_PROFILE="dev"))
    with pytest.raises(Refused, match=words):
        EksVerifier(sts, "demo", "eu-west-1").verify(_reencode(change(decode(token))))
    with pytest.raises(Refused, match="padding"):
        EksVerifier(sts, "demo", "eu-west-1").verify(token + "=" * (-len(token) % 4 or 4))


def test_a_configured_sts_endpoint_never_reaches_the_token(
    sts: MotoSTS, files: world.AwsFiles
) -> None:
    """The profile's [services] sts endpoint (moto) and AWS_ENDPOINT_URL_STS are for AssumeRole;
    the token keeps the real host, which EKS accepts (the AWS CLI would put moto's there)."""
    env = files.env(AWS_PROFILE="admin-via-dev", AWS_ENDPOINT_URL_STS=sts.url)
    token, _ = _token(env)
    assert _query(token)[0] == "https://sts.eu-west-1.amazonaws.com/"
    who = EksVerifier(sts, "demo", "eu-west-1").verify(token)
    assert who.canonical_arn == f"arn:aws:iam::{ACCOUNT}:role/eks-admin"


def test_the_cli_puts_a_configured_sts_endpoint_into_its_token_and_eks_refuses_it(
    sts: MotoSTS, files: world.AwsFiles, aws_cli: Path
) -> None:
    """Why kubetray's signing client ignores configured endpoints (eks.md A.2)."""
    env = files.env(AWS_PROFILE="dev", AWS_ENDPOINT_URL_STS=sts.url)
    env["AWS_CONFIG_FILE"] = str(files.dir / "plain-config")
    (files.dir / "plain-config").write_text("[profile dev]\n")
    cli_token = _cli(aws_cli, env, "--region", "eu-west-1", *GET_TOKEN)["status"]["token"]
    assert _query(cli_token)[0] == f"{sts.url}/"
    with pytest.raises(Refused, match="scheme"):
        EksVerifier(sts, "demo", "eu-west-1").verify(cli_token)
    ours, _ = _token(env)
    EksVerifier(sts, "demo", "eu-west-1").verify(ours)


def test_the_agent_s_own_environment_is_not_the_caller_s(
    sts: MotoSTS, files: world.AwsFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent was started by someone's kubectl with their AWS_*: another caller's profile
    is the caller's."""
    monkeypatch.setenv("AWS_PROFILE", "nope")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAAGENTS")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "agents-secret")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    token, _ = _token(files.env(AWS_PROFILE="dev"))
    monkeypatch.undo()  # the verifier's own boto3 client reads os.environ
    assert "AKIAAGENTS" not in decode(token)
    who = EksVerifier(sts, "demo", "eu-west-1").verify(token)
    assert who.arn.startswith(f"arn:aws:iam::{ACCOUNT}:user/u")


def test_environment_keys_and_an_explicit_profile(sts: MotoSTS, files: world.AwsFiles) -> None:
    """botocore's rule: AWS_ACCESS_KEY_ID wins over AWS_PROFILE, not over --profile."""
    akid, secret = sts.user_keys(f"env{os.urandom(3).hex()}")
    env = files.env(AWS_PROFILE="dev", AWS_ACCESS_KEY_ID=akid, AWS_SECRET_ACCESS_KEY=secret)
    token, _ = _token(env)
    assert f"X-Amz-Credential={akid}" in decode(token)
    token, _ = _token(env, "--profile", "dev")
    assert akid not in decode(token)
    EksVerifier(sts, "demo", "eu-west-1").verify(token)


def test_role_arn_is_assumed_once_and_signed_as_the_cli_names_it(
    sts: MotoSTS, files: world.AwsFiles
) -> None:
    from moto.sts.models import sts_backends

    engine = Engine(lambda _s: None)
    cmd = parse(
        ["--region", "eu-west-1", *GET_TOKEN, "--role", f"arn:aws:iam::{ACCOUNT}:role/eks-admin"],
        files.env(AWS_PROFILE="dev"),
    )
    before = len(sts_backends[ACCOUNT]["aws"].assumed_roles)
    tokens = [engine.world(cmd).token("demo").token for _ in range(5)]
    assert len(sts_backends[ACCOUNT]["aws"].assumed_roles) == before + 1  # the CLI: 5
    who = EksVerifier(sts, "demo", "eu-west-1").verify(tokens[-1])
    assert who.arn == f"arn:aws:sts::{ACCOUNT}:assumed-role/eks-admin/EKSGetTokenAuth"


def test_no_credentials_is_one_clear_line(files: world.AwsFiles) -> None:
    with pytest.raises(CredentialsError, match="Unable to locate credentials") as e:
        _token(files.env(AWS_PROFILE="default"))
    assert e.value.hint and "aws configure" in e.value.hint
    env = files.env(AWS_PROFILE="nope")
    with pytest.raises(CredentialsError) as e:
        _token(env)
    config, creds = env["AWS_CONFIG_FILE"], env["AWS_SHARED_CREDENTIALS_FILE"]
    assert e.value.one_line() == (
        f"the AWS profile 'nope' is neither in {config} nor in {creds}; create it: aws configure"
        " sso --profile nope, or fix AWS_PROFILE (the kubeconfig's env)"
    )


@pytest.mark.parametrize(
    ("region", "env", "host"),
    [
        ("eu-west-1", {}, "sts.eu-west-1.amazonaws.com"),
        (None, {}, "sts.amazonaws.com"),
        ("eu-west-1", {"AWS_STS_REGIONAL_ENDPOINTS": "legacy"}, "sts.amazonaws.com"),
        ("us-east-1", {"AWS_USE_FIPS_ENDPOINT": "true"}, "sts-fips.us-east-1.amazonaws.com"),
        ("us-east-1", {"AWS_USE_DUALSTACK_ENDPOINT": "true"}, "sts.us-east-1.api.aws"),
        ("cn-north-1", {}, "sts.cn-north-1.amazonaws.com.cn"),
    ],
)
def test_same_token_shape_as_aws_eks_get_token(
    sts: MotoSTS, files: world.AwsFiles, aws_cli: Path, region: str | None, env: dict, host: str
) -> None:
    """Host, credential scope, parameters and their order, and expirationTimestamp minus X-Amz-Date
    as the AWS CLI v1 makes them; both tokens pass EKS's checks (aws partition)."""
    full = files.env(AWS_PROFILE="dev", **env)
    full.pop("AWS_CONFIG_FILE")  # the [services] endpoints would put moto into the CLI's token
    full["AWS_CONFIG_FILE"] = str(files.dir / "plain-config")
    (files.dir / "plain-config").write_text("[profile dev]\n")
    ours, _ = _token(full, region=region)
    theirs = _cli(aws_cli, full, *(["--region", region] if region else []), *GET_TOKEN)
    cli_token = theirs["status"]["token"]
    (ob, oq), (tb, tq) = _query(ours), _query(cli_token)
    assert ob == tb == f"https://{host}/"
    assert [k for k, _ in oq] == [k for k, _ in tq]
    skip = {"X-Amz-Date", "X-Amz-Signature", "X-Amz-Credential"}
    assert [(k, v) for k, v in oq if k not in skip] == [(k, v) for k, v in tq if k not in skip]
    scope = lambda q: dict(q)["X-Amz-Credential"].split("/", 2)[2]  # noqa: E731
    assert scope(oq) == scope(tq)
    cli_expiry = datetime.strptime(theirs["status"]["expirationTimestamp"], "%Y-%m-%dT%H:%M:%SZ")
    # The CLI reads its clock again after signing (both to the second): 14 minutes, plus the
    # moment between, which a loaded machine stretched over a second boundary.
    lifetime = cli_expiry.replace(tzinfo=UTC) - _signed_at(tq)
    assert timedelta(minutes=14) <= lifetime <= timedelta(minutes=14, seconds=10), lifetime
    if host.endswith("amazonaws.com") or host.endswith("api.aws"):
        verifier = EksVerifier(sts, "demo", region or "us-east-1")
        assert verifier.verify(ours).arn == verifier.verify(cli_token).arn


def test_no_region_anywhere_is_global_for_the_cli_and_us_east_1_for_the_authenticator(
    sts: MotoSTS, files: world.AwsFiles
) -> None:
    env = files.env(AWS_PROFILE="admin-via-dev")  # a profile without a region
    engine = Engine(lambda _s: None)
    cli = engine.world(parse(["eks", "get-token", "--cluster-name", "demo"], env))
    authenticator = engine.world(parse(["token", "-i", "demo"], env))
    assert (cli.region, cli.token_endpoint()) == (None, "https://sts.amazonaws.com")
    assert authenticator.region == "us-east-1"
    assert authenticator.token_endpoint() == "https://sts.us-east-1.amazonaws.com"
    EksVerifier(sts, "demo").verify(authenticator.token("demo").token)


def test_expired_credentials_from_their_source_are_one_clear_line(files: world.AwsFiles) -> None:
    """A credential_process (or any source) that gives credentials already expired: botocore
    raises RuntimeError; kubectl was told 'the kubetray agent failed: RuntimeError'."""
    process = files.dir / "expired-process"
    past = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    answer = {
        "Version": 1,
        "AccessKeyId": "AKIAEXPIREDEXAMPLE",
        "SecretAccessKey": "expired-secret",
        "SessionToken": "expired-session",
        "Expiration": past,
    }
    process.write_text(f"#!/bin/sh\necho '{json.dumps(answer)}'\n")
    process.chmod(0o755)
    with files.config.open("a") as f:
        f.write(f"\n[profile expired]\ncredential_process = {process}\n")
    with pytest.raises(CredentialsError) as e:
        _token(files.env(AWS_PROFILE="expired"))
    line = e.value.one_line()
    assert line.startswith("the AWS credentials of profile 'expired' have expired"), line
    assert "renew them" in line and "RuntimeError" not in line
    assert "expired-secret" not in line and "expired-session" not in line
