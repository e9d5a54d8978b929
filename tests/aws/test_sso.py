"""IAM Identity Center logins: the stand-in speaks AWS's wire format (boto3's own clients raise
the modelled exceptions), kubetray's device login and refresh, role credentials kept in memory,
nothing written under ~/.aws, and the AWS CLI's cache read once and never written."""

import dataclasses
import hashlib
import json
import os
import subprocess
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest
from botocore import UNSIGNED
from botocore.config import Config

from app.oidc.errors import LoginError, RefreshRefused
from app.providers.aws import cli_cache
from app.providers.aws.command import parse
from app.providers.aws.engine import Engine, NeedsLogin
from app.providers.aws.profiles import SsoSession
from app.providers.aws.sso import SsoClient, SsoTokens
from app.providers.aws.token import decode
from tests.aws import world
from tests.aws.eks import EksVerifier
from tests.aws.moto_sts import ACCOUNT, MotoSTS
from tests.aws.sso import SsoStandIn

CORP = SsoSession(world.START_URL, "us-east-1", "corp")
GET_TOKEN = list(world.GET_TOKEN)


def _boto(sso: SsoStandIn, service: str):
    return boto3.client(
        service,
        region_name="us-east-1",
        endpoint_url=sso.url,
        config=Config(signature_version=UNSIGNED),
    )


def test_the_stand_in_answers_in_aws_s_wire_format(sso: SsoStandIn) -> None:
    """boto3 picks the exception from x-amzn-ErrorType, as with the real service."""
    oidc = _boto(sso, "sso-oidc")
    reg = oidc.register_client(clientName="t", clientType="public", scopes=["sso:account:access"])
    auth = oidc.start_device_authorization(
        clientId=reg["clientId"], clientSecret=reg["clientSecret"], startUrl=world.START_URL
    )
    assert auth["verificationUriComplete"].endswith(auth["userCode"])
    with pytest.raises(oidc.exceptions.AuthorizationPendingException) as e:
        oidc.create_token(
            clientId=reg["clientId"],
            clientSecret=reg["clientSecret"],
            grantType="urn:ietf:params:oauth:grant-type:device_code",
            deviceCode=auth["deviceCode"],
        )
    assert e.value.response["error"] == "authorization_pending"
    with pytest.raises(oidc.exceptions.InvalidClientException):
        oidc.start_device_authorization(
            clientId=reg["clientId"], clientSecret="wrong", startUrl=world.START_URL
        )
    with pytest.raises(_boto(sso, "sso").exceptions.UnauthorizedException) as u:
        _boto(sso, "sso").get_role_credentials(
            roleName="AdministratorAccess", accountId=ACCOUNT, accessToken="nope"
        )
    assert u.value.response["Error"]["Message"] == "Session token not found or invalid"


def _client(files: world.AwsFiles, sleeps: list[float] | None = None) -> SsoClient:
    w = Engine(lambda _s: None).world(parse(GET_TOKEN, files.env(AWS_PROFILE="sso-dev")))
    client = w.sso_client()
    assert client is not None

    def sleep(ev: threading.Event, seconds: float) -> bool:
        if sleeps is not None:
            sleeps.append(seconds)
        return ev.wait(0.05)

    return SsoClient(client.sso, w.unsigned, sleep=sleep)


def test_device_login_shows_the_code_and_polls_as_told(
    sso: SsoStandIn, files: world.AwsFiles
) -> None:
    sleeps: list[float] = []
    client = _client(files, sleeps)
    person = world.QuickPerson(sso)
    sso.slow_down_next = 1
    tokens = client.login(person)
    assert person.codes and person.codes[0] in person.lines[0]
    assert world.START_URL in person.lines[0]
    assert sleeps[:2] == [1.0, 6.0]  # interval, then +5 s after slow_down
    assert tokens.refreshable and tokens.expires_at - tokens.issued_at == timedelta(hours=1)
    assert (sso.calls["RegisterClient"], sso.calls["StartDeviceAuthorization"]) == (1, 1)
    # a second login reuses kubetray's registration
    client.login(world.QuickPerson(sso), tokens.registration)
    assert sso.calls["RegisterClient"] == 1


def test_denied_expired_and_cancelled_logins(sso: SsoStandIn, files: world.AwsFiles) -> None:
    client = _client(files)
    with pytest.raises(LoginError, match="denied"):
        client.login(world.QuickPerson(sso, deny=True))
    sso.device_seconds = 1

    class Nobody(world.QuickPerson):
        def show_device_code(self, user_code: str, uri: str) -> None:
            self.codes.append(user_code)

    with pytest.raises(LoginError, match=r"expired|not completed"):
        client.login(Nobody(sso))
    sso.device_seconds = 600
    nobody = Nobody(sso)
    nobody.cancelled.set()
    with pytest.raises(LoginError, match="cancelled"):
        client.login(nobody)


def test_refresh_rotates_and_an_old_refresh_token_is_refused_for_good(
    sso: SsoStandIn, files: world.AwsFiles
) -> None:
    client = _client(files)
    first = client.login(world.QuickPerson(sso))
    second = client.refresh(first)
    assert second.access_token != first.access_token
    assert second.refresh_token != first.refresh_token
    assert second.registration == first.registration
    with pytest.raises(RefreshRefused, match="invalid_grant"):
        client.refresh(first)
    # an sso-session without sso_registration_scopes: kubetray asks for sso:account:access,
    # which is what gives a refresh token
    no_scopes = world.write(files.dir / "noscopes", sso.url, "http://127.0.0.1:9", scopes="")
    assert _client(no_scopes).login(world.QuickPerson(sso)).refreshable
    assert [c[2] for c in sso.clients.values()][-1] == ["sso:account:access"]
    # a login imported from a legacy CLI cache entry has none
    with pytest.raises(RefreshRefused, match="no refresh token"):
        client.refresh(dataclasses.replace(second, refresh_token=None))


def test_role_credentials_stay_in_memory_and_nothing_is_written_under_aws(
    sts: MotoSTS,
    sso: SsoStandIn,
    files: world.AwsFiles,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    held: dict[SsoSession, SsoTokens] = {}
    engine = Engine(held.get)
    cmd = parse(GET_TOKEN, files.env(AWS_PROFILE="sso-dev"))
    with pytest.raises(NeedsLogin, match="is needed"):
        engine.world(cmd).token("demo")
    w = engine.world(cmd)
    assert w.sso is not None and w.sso.start_url == world.START_URL
    client = w.sso_client()
    assert client is not None
    held[w.sso] = client.login(world.QuickPerson(sso))
    verifier = EksVerifier(sts, "demo", "eu-west-1")
    for _ in range(5):
        who = verifier.verify(engine.world(cmd).token("demo").token)
    assert sso.calls["GetRoleCredentials"] == 1
    assert who.canonical_arn == (
        f"arn:aws:iam::{ACCOUNT}:role/AWSReservedSSO_AdministratorAccess_0123456789abcdef"
    )
    assert who.session_name == "jane@example.com"
    # a role chain on the same login: no second device login
    chain = parse(GET_TOKEN, files.env(AWS_PROFILE="eks-admin-via-sso"))
    assert verifier.verify(engine.world(chain).token("demo").token).canonical_arn == (
        f"arn:aws:iam::{ACCOUNT}:role/eks-admin"
    )
    assert sso.calls["StartDeviceAuthorization"] == 1
    assert not (home / ".aws").exists()
    # the portal ends the session: once the credentials are dropped, a login is needed
    sso.revoke_all()
    engine.forget(w.sso)
    with pytest.raises(NeedsLogin, match="refused by the portal"):
        engine.world(cmd).token("demo")


def test_a_role_not_assigned_is_said(sso: SsoStandIn, files: world.AwsFiles) -> None:
    sso.directory.accounts[ACCOUNT] = ("prod", ["ReadOnly"])
    held: dict[SsoSession, SsoTokens] = {}
    engine = Engine(held.get)
    w = engine.world(parse(GET_TOKEN, files.env(AWS_PROFILE="sso-dev")))
    client = w.sso_client()
    assert client is not None and w.sso is not None
    held[w.sso] = client.login(world.QuickPerson(sso))
    with pytest.raises(LoginError, match="ForbiddenException"):
        w.token("demo")
    assert list(client.roles(held[w.sso])) == [(ACCOUNT, "prod", "ReadOnly")]


def _cli_env(sso: SsoStandIn, home: Path, profile: str) -> dict[str, str]:
    """The CLI with the stand-ins given by environment (no [services] sts endpoint, which the
    CLI would put into its token)."""
    files = world.write(home / "awsconfig", sso.url, "", services=False)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return {
        **clean,
        **files.env(AWS_PROFILE=profile),
        **world.endpoint_env(sso.url),
        "HOME": str(home),
    }


def test_the_aws_cli_s_cache_is_read_once_and_never_written(
    sts: MotoSTS, sso: SsoStandIn, files: world.AwsFiles, tmp_path: Path, aws_cli: Path
) -> None:
    """A login in the CLI's cache shape works for the real AWS CLI (so the shape is the CLI's);
    kubetray reads it and serves from it without touching the file."""
    tokens = _client(files).login(world.QuickPerson(sso))
    home = tmp_path / "clihome"
    cache = home / ".aws" / "sso" / "cache"
    cache.mkdir(parents=True)
    entry = cache / (hashlib.sha1(b"corp").hexdigest() + ".json")
    entry.write_text(json.dumps(tokens.to_cli()))
    out = subprocess.run(
        [str(aws_cli), *GET_TOKEN],
        env=_cli_env(sso, home, "sso-dev"),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    cli_token = json.loads(out.stdout)["status"]["token"]
    verifier = EksVerifier(sts, "demo", "eu-west-1")
    assert "AWSReservedSSO_AdministratorAccess" in verifier.verify(cli_token).arn
    before = entry.read_bytes(), entry.stat().st_mtime_ns
    now = datetime.now(UTC)
    read = cli_cache.read(CORP, now, str(cache))
    assert read is not None
    assert (read.access_token, read.refresh_token) == (tokens.access_token, tokens.refresh_token)
    engine = Engine(lambda _s: read)
    ours = engine.world(parse(GET_TOKEN, files.env(AWS_PROFILE="sso-dev"))).token("demo")
    assert "AWSReservedSSO_AdministratorAccess" in verifier.verify(ours.token).arn
    assert (entry.read_bytes(), entry.stat().st_mtime_ns) == before
    other = SsoSession("https://d-other.awsapps.com/start", "us-east-1", "corp")
    assert cli_cache.read(other, now, str(cache)) is None  # same name, another portal
    entry.write_text("{not json")
    assert cli_cache.read(CORP, now, str(cache)) is None


def test_the_aws_cli_refreshes_with_the_stand_in(
    sso: SsoStandIn, files: world.AwsFiles, tmp_path: Path, aws_cli: Path
) -> None:
    """The CLI's own refresh (under 15 min left) against the stand-in: the stand-in's
    CreateToken refresh_token grant is what botocore expects; kubetray then reads the result."""
    tokens = _client(files).login(world.QuickPerson(sso))
    home = tmp_path / "clihome"
    cache = home / ".aws" / "sso" / "cache"
    cache.mkdir(parents=True)
    entry = cache / (hashlib.sha1(b"corp").hexdigest() + ".json")
    doc = tokens.to_cli()
    doc["expiresAt"] = (datetime.now(UTC) + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    entry.write_text(json.dumps(doc))
    subprocess.run(
        [str(aws_cli), *GET_TOKEN],
        env=_cli_env(sso, home, "sso-dev"),
        capture_output=True,
        timeout=60,
        check=True,
    )
    refreshed = json.loads(entry.read_text())
    assert refreshed["refreshToken"] != tokens.refresh_token
    read = cli_cache.read(CORP, datetime.now(UTC), str(cache))
    assert read is not None and read.refresh_token == refreshed["refreshToken"]
    assert read.expires_at > datetime.now(UTC) + timedelta(minutes=50)


def test_tokens_in_the_store_are_a_versioned_record_and_never_printed(
    sso: SsoStandIn, files: world.AwsFiles
) -> None:
    tokens = _client(files).login(world.QuickPerson(sso))
    again = SsoTokens.from_bytes(tokens.to_bytes())
    assert again == tokens
    assert tokens.access_token not in repr(tokens)
    assert tokens.refresh_token is not None and tokens.refresh_token not in repr(tokens)
    with pytest.raises(ValueError, match="format"):
        SsoTokens.from_bytes(json.dumps({"format": 99}).encode())


def test_authenticator_role_with_forwarded_session_name(
    sts: MotoSTS, sso: SsoStandIn, files: world.AwsFiles
) -> None:
    """``aws-iam-authenticator token -i C -r ROLE --forward-session-name`` on an SSO profile:
    the role session is named after the SSO session (jane@...), as the authenticator does it
    (GetCallerIdentity's UserId ROLEID:NAME); ``-s`` names it outright."""
    held: dict[SsoSession, SsoTokens] = {}
    engine = Engine(held.get)
    env = files.env(AWS_PROFILE="sso-dev")
    w = engine.world(parse(["token", "-i", "demo"], env))
    client = w.sso_client()
    assert client is not None and w.sso is not None
    held[w.sso] = client.login(world.QuickPerson(sso))
    role = f"arn:aws:iam::{ACCOUNT}:role/eks-admin"
    verifier = EksVerifier(sts, "demo")
    fwd = engine.world(parse(["token", "-i", "demo", "-r", role, "--forward-session-name"], env))
    who = verifier.verify(fwd.token("demo").token)
    assert who.arn == f"arn:aws:sts::{ACCOUNT}:assumed-role/eks-admin/jane@example.com"
    named = engine.world(parse(["token", "-i", "demo", "-r", role, "-s", "ci-run-7"], env))
    assert verifier.verify(named.token("demo").token).session_name == "ci-run-7"
    # no --region: the profile's (eu-west-1), as the authenticator's SDK reads it
    assert "https://sts.eu-west-1.amazonaws.com/" in decode(named.token("demo").token)
