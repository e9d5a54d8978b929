"""EKS command lines as kubeconfigs carry them: ``aws eks get-token`` (written by ``aws eks
update-kubeconfig``) and ``aws-iam-authenticator token``, with the environment kubectl gives."""

from pathlib import Path

import pytest
import yaml

from app.providers.aws.command import (
    AUTHENTICATOR,
    AWS_CLI,
    SESSION_NAME,
    CommandError,
    parse,
    recognises,
)

FIXTURES = Path(__file__).parent.parent / "aws" / "fixtures"


def _exec(name: str) -> tuple[list[str], dict[str, str]]:
    doc = yaml.safe_load((FIXTURES / name).read_text())
    stanza = doc["users"][0]["user"]["exec"]
    return stanza["args"], {e["name"]: e["value"] for e in stanza.get("env") or []}


def test_update_kubeconfig_fixtures_are_read_as_the_cli_reads_them() -> None:
    args, env = _exec("update-kubeconfig-default.yaml")
    cmd = parse(args, env)
    assert (cmd.tool, cmd.cluster_id, cmd.region, cmd.profile, cmd.role_arn) == (
        AWS_CLI,
        "demo",
        "us-east-1",
        None,
        None,
    )
    args, env = _exec("update-kubeconfig-profile.yaml")
    cmd = parse(args, env)
    assert (cmd.region, cmd.profile, cmd.profile_explicit) == ("eu-west-1", "dev", False)
    args, env = _exec("update-kubeconfig-role.yaml")
    cmd = parse(args, env)
    # update-kubeconfig writes --role, an argparse prefix of --role-arn
    assert cmd.role_arn == "arn:aws:iam::123456789012:role/eks-admin"
    assert cmd.role_session_name == SESSION_NAME


def test_authenticator_readme_kubeconfig() -> None:
    args, env = _exec("aws-iam-authenticator.yaml")
    cmd = parse(args, env)
    assert (cmd.tool, cmd.cluster_id, cmd.profile, cmd.region) == (
        AUTHENTICATOR,
        "demo",
        "dev",
        None,
    )


@pytest.mark.parametrize(
    "args",
    [
        ["--region", "us-east-1", "eks", "get-token", "--cluster-name", "demo"],
        ["eks", "get-token", "--cluster-name=demo", "--region=us-east-1"],
        ["eks", "--region", "us-east-1", "get-token", "--cluster-n", "demo"],
        ["--reg", "us-east-1", "eks", "get-token", "--cluster-name", "demo", "--output", "json"],
    ],
)
def test_global_flags_anywhere_and_prefixes(args: list[str]) -> None:
    cmd = parse(args, {})
    assert (cmd.cluster_id, cmd.region) == ("demo", "us-east-1")


def test_region_and_profile_precedence() -> None:
    base = ["eks", "get-token", "--cluster-name", "demo"]
    env = {"AWS_REGION": "eu-central-1", "AWS_DEFAULT_REGION": "eu-west-1"}
    assert parse(base, env).region == "eu-central-1"  # v2's order: AWS_REGION first
    assert parse(base, {"AWS_DEFAULT_REGION": "eu-west-1"}).region == "eu-west-1"
    assert parse(["--region", "us-west-2", *base], env).region == "us-west-2"
    assert parse(base, {}).region is None  # the global endpoint, as the CLI
    penv = {"AWS_PROFILE": "a", "AWS_DEFAULT_PROFILE": "b"}
    assert parse(base, penv).profile == "a"
    assert parse(base, {"AWS_DEFAULT_PROFILE": "b"}).profile == "b"
    explicit = parse(["--profile", "c", *base], penv)
    assert (explicit.profile, explicit.profile_explicit) == ("c", True)


def test_cluster_id_for_outposts_and_the_cli_s_own_refusals() -> None:
    assert parse(["eks", "get-token", "--cluster-id", "abc-123"], {}).cluster_id == "abc-123"
    with pytest.raises(CommandError, match="cluster_id"):
        parse(["eks", "get-token", "--cluster-id", "a", "--cluster-name", "b"], {})
    with pytest.raises(CommandError, match="Either parameter --cluster-name or --cluster-id"):
        parse(["eks", "get-token"], {})
    with pytest.raises(
        CommandError,
        match=r"^kubetray-exec stands in for 'aws eks get-token' only, not "
        r"'aws eks describe-cluster': run the AWS CLI for that$",
    ):
        parse(["eks", "describe-cluster", "--name", "demo"], {})
    with pytest.raises(CommandError, match="--query"):
        parse(["eks", "get-token", "--cluster-name", "d", "--query", "status.token"], {})
    with pytest.raises(CommandError, match="--output"):
        parse(["eks", "get-token", "--cluster-name", "d", "--output", "xml"], {})
    with pytest.raises(CommandError, match="no-verify-ssl"):
        parse(["eks", "get-token", "--cluster-name", "d", "--no-verify-ssl"], {})
    with pytest.raises(CommandError, match=r"^aws eks get-token: unrecognized arguments: --frob"):
        parse(["eks", "get-token", "--cluster-name", "d", "--frobnicate"], {})


def test_output_other_than_json_still_gives_json_and_ca_bundle_is_kept() -> None:
    cmd = parse(
        ["eks", "get-token", "--cluster-name", "d", "--output", "text", "--ca-bundle", "/ca.pem"],
        {"AWS_DEFAULT_OUTPUT": "table"},
    )
    assert cmd.environ["AWS_CA_BUNDLE"] == "/ca.pem"


@pytest.mark.parametrize(
    "args",
    [
        ["token", "-i", "demo"],
        ["token", "-idemo"],
        ["token", "-i=demo"],
        ["token", "--cluster-id=demo"],
        ["token", "--cluster-id", "demo", "--cache"],
    ],
)
def test_authenticator_flag_forms(args: list[str]) -> None:
    assert parse(args, {}).cluster_id == "demo"


def test_authenticator_role_session_and_env() -> None:
    cmd = parse(["token", "-i", "demo", "-r", "arn:aws:iam::1:role/x", "-s", "me", "-e", "ext"], {})
    assert (cmd.role_arn, cmd.role_session_name, cmd.external_id) == (
        "arn:aws:iam::1:role/x",
        "me",
        "ext",
    )
    env = {
        "KUBERNETES_AWS_AUTHENTICATOR_CLUSTER_ID": "fromenv",
        "DEFAULT_ROLE": "arn:aws:iam::1:role/y",
    }
    cmd = parse(["token"], env)
    assert (cmd.cluster_id, cmd.role_arn, cmd.role_session_name) == (
        "fromenv",
        "arn:aws:iam::1:role/y",
        None,
    )
    assert parse(["token", "-i", "d", "--token-only"], {}).token_only
    with pytest.raises(CommandError, match="cluster ID not specified"):
        parse(["token"], {})
    with pytest.raises(CommandError, match="cannot be used together"):
        parse(["token", "-i", "d", "-s", "x", "--forward-session-name"], {})
    with pytest.raises(CommandError, match="unknown flag"):
        parse(["token", "-i", "d", "--nope"], {})


def test_recognised_command_lines_and_not_kubelogin_s() -> None:
    assert recognises(["--region", "us-east-1", "eks", "get-token", "--cluster-name", "demo"])
    assert recognises(["token", "-i", "demo"])
    assert not recognises(["get-token", "--oidc-issuer-url=https://idp", "--oidc-client-id=x"])
    assert not recognises(["oidc-login", "get-token", "--oidc-issuer-url", "https://idp"])
    assert not recognises(["--stored", "prod"])


def test_only_aws_variables_are_kept_and_secrets_are_masked() -> None:
    env = {
        "AWS_PROFILE": "dev",
        "AWS_SECRET_ACCESS_KEY": "s3cr3t",
        "AWS_ACCESS_KEY_ID": "AKIA",
        "HOME": "/home/x",
        "KUBECONFIG": "/k",
        "AWS_EMPTY": "",
    }
    cmd = parse(["eks", "get-token", "--cluster-name", "d"], env)
    assert set(cmd.environ) == {"AWS_PROFILE", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID"}
    assert cmd.shown_env()["AWS_SECRET_ACCESS_KEY"] == "***"
    assert "s3cr3t" not in repr(cmd)


def test_import_recognises_eks_entries_and_keeps_their_flags() -> None:
    from app.providers.aws.convert import converted, eks_args, why_not

    for name in (
        "update-kubeconfig-default.yaml",
        "update-kubeconfig-role.yaml",
        "aws-iam-authenticator.yaml",
    ):
        stanza = yaml.safe_load((FIXTURES / name).read_text())["users"][0]["user"]["exec"]
        assert eks_args(stanza) == stanza["args"]
        assert why_not(stanza) is None
        after = converted(stanza, "/opt/kubetray/kubetray-exec", "install kubetray")
        assert (after["command"], after["args"], after.get("env")) == (
            "/opt/kubetray/kubetray-exec",
            stanza["args"],
            stanza.get("env"),
        )
    assert eks_args(
        {
            "command": "C:\\Program Files\\Amazon\\AWSCLIV2\\aws.exe",
            "args": ["eks", "get-token", "--cluster-name", "d"],
        }
    )
    assert eks_args({"command": "kubelogin", "args": ["get-token", "--server-id", "x"]}) is None
    assert eks_args({"command": "aws", "args": ["sts", "get-caller-identity"]}) is None
    reason = why_not(
        {"command": "aws", "args": ["eks", "get-token", "--cluster-name", "d", "--query", "x"]}
    )
    assert reason is not None and "--query" in reason


def test_the_tool_s_name_typed_first_means_the_same() -> None:
    """``kubetray-exec aws eks get-token ...`` by hand is what ``command: aws`` with ``args:
    [eks, get-token, ...]`` means (and likewise for aws-iam-authenticator)."""
    aws = ["--region", "eu-west-1", "eks", "get-token", "--cluster-name", "demo"]
    assert recognises(["aws", *aws]) and parse(["aws", *aws], {}) == parse(aws, {})
    token = ["token", "-i", "demo", "-r", "arn:aws:iam::1:role/r"]
    named = ["aws-iam-authenticator", *token]
    assert recognises(named) and parse(named, {}) == parse(token, {})
    # any other AWS command typed after kubetray-exec gets the AWS answer, not kubelogin's
    assert recognises(["aws", "eks", "list-clusters"])
    with pytest.raises(CommandError, match=r"not 'aws eks list-clusters'"):
        parse(["aws", "eks", "list-clusters"], {})
    with pytest.raises(CommandError, match=r"not 'aws-iam-authenticator verify'"):
        parse(["aws-iam-authenticator", "verify", "-t", "x"], {})
