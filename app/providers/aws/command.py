"""The command lines of EKS kubeconfigs: ``aws eks get-token`` and ``aws-iam-authenticator token``.

``aws eks update-kubeconfig`` writes ``--region R eks get-token --cluster-name C --output json``
(``--role ARN`` after it with ``--role-arn``; ``AWS_PROFILE`` in ``env``); the
aws-iam-authenticator README writes ``token -i C [-r ROLE]``. ``kubetray import`` changes only
``command``, so these arguments reach kubetray-exec as they are, and the agent reads them here
(stdlib only: no botocore until a credential is asked for).

What is read as the AWS CLI reads it (argparse, prefixes like ``--role`` for ``--role-arn``
included, global flags before or after ``eks get-token``), and what kubetray decided where the
CLI v1 and v2 differ (docs/aws.md has the table):
- region: ``--region``, then ``AWS_REGION``, then ``AWS_DEFAULT_REGION``, then the profile's
  (v2's order; v1 ignores AWS_REGION), else none: the global STS endpoint, as the CLI;
  aws-iam-authenticator's default is us-east-1.
- profile: ``--profile``, then ``AWS_PROFILE``, then ``AWS_DEFAULT_PROFILE`` (v2's order).
  Only ``--profile`` makes the ``AWS_ACCESS_KEY_ID`` environment keys lose (botocore's rule).
- the output is always the ExecCredential JSON: ``--output json|text|table|yaml`` are accepted
  (kubectl reads JSON only), ``--query`` is refused (its result is no ExecCredential).
"""

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NoReturn

AWS_CLI = "aws"
AUTHENTICATOR = "aws-iam-authenticator"
SESSION_NAME = "EKSGetTokenAuth"
"""The RoleSessionName ``aws eks get-token --role-arn`` uses (awscli get_token.py)."""
AUTHENTICATOR_REGION = "us-east-1"
"""aws-iam-authenticator's region when none is set anywhere (it logs that it uses it)."""

ENV_PREFIX = "AWS_"
"""The caller's environment variables the agent hands to botocore: only these, never the
agent's own (the agent serves many callers, each with its own AWS_PROFILE)."""
AUTHENTICATOR_ENV = ("KUBERNETES_AWS_AUTHENTICATOR_CLUSTER_ID", "DEFAULT_ROLE")
"""aws-iam-authenticator's own variables: the cluster ID and the role, when not given as flags."""
SECRET_ENV = frozenset({"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"})
"""Variables whose value is a secret: never in a record, a log line or an error."""

OUTPUTS = ("json", "text", "table", "yaml", "yaml-stream")


class CommandError(ValueError):
    """An EKS command line kubetray cannot serve: the message is one line for the person."""


@dataclass(frozen=True)
class EksCommand:
    """What one kubeconfig user's command asks for: a token for ``cluster_id``, signed with the
    credentials of ``profile`` (or the environment's), after assuming ``role_arn`` if given."""

    tool: str
    """``aws`` or ``aws-iam-authenticator``: whose behaviour the answer follows."""
    cluster_id: str
    region: str | None
    """From the command line or the environment; None: the profile's, else the tool's default."""
    profile: str | None
    profile_explicit: bool = False
    """``--profile`` was given: the AWS_ACCESS_KEY_ID environment keys do not apply."""
    role_arn: str | None = None
    session_name: str | None = None
    external_id: str | None = None
    forward_session_name: bool = False
    token_only: bool = False
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    """The caller's AWS_* variables, sorted (may hold secrets: never shown)."""

    @property
    def environ(self) -> dict[str, str]:
        return dict(self.env)

    @property
    def role_session_name(self) -> str | None:
        """The RoleSessionName for ``role_arn``: the AWS CLI's fixed one, or the
        authenticator's ``-s`` (None: botocore makes one up, as the Go SDK does)."""
        if not self.role_arn:
            return None
        if self.tool == AWS_CLI:
            return SESSION_NAME
        return self.session_name

    def shown_env(self) -> dict[str, str]:
        """The environment as it may be shown (status, doctor): secrets masked."""
        return {k: ("***" if k in SECRET_ENV else v) for k, v in self.env}


def _unnamed(args: list[str]) -> list[str]:
    """``args`` without a leading tool name: a person who types ``kubetray-exec aws eks
    get-token ...`` (or ``kubetray-exec aws-iam-authenticator token ...``) means what the
    kubeconfig's ``command: aws``, ``args: [eks, get-token, ...]`` means."""
    return args[1:] if args[:1] in ([AWS_CLI], [AUTHENTICATOR]) else args


def recognises(args: list[str]) -> bool:
    """Is this an EKS command line (the AWS CLI's ``eks get-token``, its global flags possibly
    first; the authenticator's ``token``; anything after a tool's name, which ``parse`` then
    serves or refuses in the tool's terms)? Cheap: no parsing of flags."""
    if args[:1] in ([AWS_CLI], [AUTHENTICATOR]):
        return True
    if args[:1] == ["token"]:
        return True
    words = [a for a in args if not a.startswith("-")]
    return any(words[i : i + 2] == ["eks", "get-token"] for i in range(len(words) - 1))


def caller_env(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The part of a caller's environment that is AWS's (and the authenticator's)."""
    return tuple(
        sorted(
            (k, v)
            for k, v in env.items()
            if (k.startswith(ENV_PREFIX) or k in AUTHENTICATOR_ENV) and v != ""
        )
    )


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse would exit 2
        raise CommandError(f"{self.prog}: {message}")


def _aws_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="aws eks get-token", add_help=False, allow_abbrev=True)
    p.add_argument("words", nargs="*")
    p.add_argument("--region")
    p.add_argument("--profile")
    p.add_argument("--output")
    p.add_argument("--query")
    p.add_argument("--endpoint-url")  # the CLI ignores it for the token, so does kubetray
    p.add_argument("--ca-bundle")
    p.add_argument("--no-verify-ssl", action="store_true")
    p.add_argument("--debug", action="store_true")
    p.add_argument("--no-paginate", action="store_true")
    p.add_argument("--no-sign-request", action="store_true")
    p.add_argument("--no-cli-pager", action="store_true")
    p.add_argument("--no-cli-auto-prompt", action="store_true")
    p.add_argument("--cli-auto-prompt", action="store_true")
    p.add_argument("--color")
    p.add_argument("--cli-read-timeout")
    p.add_argument("--cli-connect-timeout")
    p.add_argument("--cli-binary-format")
    p.add_argument("--cluster-name")
    p.add_argument("--cluster-id")
    p.add_argument("--role-arn")
    p.add_argument("--session-name")  # on some aws-cli branches only; harmless
    return p


def _authenticator_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="aws-iam-authenticator token", add_help=False, allow_abbrev=False)
    p.add_argument("-i", "--cluster-id")
    p.add_argument("-r", "--role")
    p.add_argument("--region")
    p.add_argument("-s", "--session-name")
    p.add_argument("-e", "--external-id")
    p.add_argument("--token-only", nargs="?", const="true")
    p.add_argument("--forward-session-name", nargs="?", const="true")
    p.add_argument("--cache", nargs="?", const="true")  # kubetray caches in memory only
    p.add_argument("-c", "--config")
    p.add_argument("-l", "--log-format")
    p.add_argument("-v", "--log-verbosity")
    p.add_argument("--feature-gates")
    return p


def _env_first(env: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        if env.get(name):
            return env[name]
    return None


def _flag_true(value: str | None) -> bool:
    if value is None:
        return False
    low = value.lower()
    if low in ("true", "1", "t"):
        return True
    if low in ("false", "0", "f"):
        return False
    raise CommandError(f"aws-iam-authenticator token: expected true or false, got {value!r}")


def parse(args: list[str], env: Mapping[str, str]) -> EksCommand:
    """The EKS command in ``args`` with the caller's environment ``env`` (raises CommandError
    with one line for anything kubetray cannot serve as the tool would)."""
    aws_env = caller_env(env)
    envd = dict(aws_env)
    if args[:1] == [AUTHENTICATOR] and args[1:2] != ["token"]:
        raise CommandError(
            "kubetray-exec stands in for 'aws-iam-authenticator token' only, not "
            f"{' '.join(args[:2])!r}: run aws-iam-authenticator for that"
        )
    args = _unnamed(args)
    if args[:1] == ["token"]:
        return _parse_authenticator(args[1:], envd, aws_env)
    return _parse_aws(args, envd, aws_env)


def _parse_aws(
    args: list[str], env: dict[str, str], aws_env: tuple[tuple[str, str], ...]
) -> EksCommand:
    ns, unknown = _aws_parser().parse_known_intermixed_args(args)
    if ns.words != ["eks", "get-token"]:  # before the flags: they may be another command's
        raise CommandError(
            "kubetray-exec stands in for 'aws eks get-token' only, not "
            f"'aws {' '.join(ns.words)}': run the AWS CLI for that"
        )
    if unknown:
        raise CommandError(f"aws eks get-token: unrecognized arguments: {' '.join(unknown)}")
    if ns.cluster_name and ns.cluster_id:
        raise CommandError(
            'aws eks get-token: The key "cluster_id" cannot be specified when one of the '
            "following keys are also specified: cluster_name"
        )
    cluster = ns.cluster_name or ns.cluster_id
    if not cluster:
        raise CommandError("Either parameter --cluster-name or --cluster-id must be specified.")
    if ns.query is not None:
        raise CommandError(
            "aws eks get-token: kubetray prints the ExecCredential kubectl reads; --query would "
            "print something else: remove --query"
        )
    if ns.output is not None and ns.output not in OUTPUTS:
        raise CommandError(
            f"aws: argument --output: Invalid choice, valid choices are: {' | '.join(OUTPUTS)}"
        )
    if ns.no_verify_ssl:
        raise CommandError(
            "aws eks get-token: kubetray does not turn off TLS verification for AWS: remove "
            "--no-verify-ssl, and give your CA with --ca-bundle or AWS_CA_BUNDLE"
        )
    if ns.ca_bundle:
        aws_env = tuple(sorted({**dict(aws_env), "AWS_CA_BUNDLE": ns.ca_bundle}.items()))
    profile = ns.profile or _env_first(env, "AWS_PROFILE", "AWS_DEFAULT_PROFILE")
    return EksCommand(
        tool=AWS_CLI,
        cluster_id=cluster,
        region=ns.region or _env_first(env, "AWS_REGION", "AWS_DEFAULT_REGION"),
        profile=profile,
        profile_explicit=ns.profile is not None,
        role_arn=ns.role_arn or None,
        env=aws_env,
    )


def _split_short(args: list[str]) -> list[str]:
    """pflag's ``-i=demo`` is ``-i demo`` (argparse would keep the ``=``)."""
    out = []
    for a in args:
        if len(a) > 2 and a[0] == "-" and a[1] != "-" and a[2] == "=":
            out += [a[:2], a[3:]]
        else:
            out.append(a)
    return out


def _parse_authenticator(
    args: list[str], env: dict[str, str], aws_env: tuple[tuple[str, str], ...]
) -> EksCommand:
    ns, rest = _authenticator_parser().parse_known_args(_split_short(args))
    if rest:
        raise CommandError(f"aws-iam-authenticator token: unknown flag: {rest[0]}")
    cluster = ns.cluster_id or env.get("KUBERNETES_AWS_AUTHENTICATOR_CLUSTER_ID")
    if not cluster:
        raise CommandError("aws-iam-authenticator token: Error: cluster ID not specified")
    forward = _flag_true(ns.forward_session_name)
    if forward and ns.session_name:
        raise CommandError(
            "aws-iam-authenticator token: --session-name and --forward-session-name cannot be "
            "used together"
        )
    _flag_true(ns.cache)
    profile = _env_first(env, "AWS_PROFILE", "AWS_DEFAULT_PROFILE")
    return EksCommand(
        tool=AUTHENTICATOR,
        cluster_id=cluster,
        region=ns.region or _env_first(env, "AWS_REGION", "AWS_DEFAULT_REGION"),
        profile=profile,
        role_arn=ns.role or env.get("DEFAULT_ROLE") or None,
        session_name=ns.session_name or None,
        external_id=ns.external_id or None,
        forward_session_name=forward,
        token_only=_flag_true(ns.token_only),
        env=aws_env,
    )
