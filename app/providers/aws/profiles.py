"""What an AWS profile is, read from botocore's parsed config (``session.full_config``).

kubetray serves what botocore's credential chain resolves, except what needs a machine it is
not (the EC2 instance metadata service) or a cache it would have to write in plaintext:

| source | served |
| --- | --- |
| ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` (``AWS_SESSION_TOKEN``) in kubectl's env | yes |
| keys in ``~/.aws/credentials`` or ``~/.aws/config`` | yes |
| IAM Identity Center: ``sso_session`` and legacy ``sso_start_url`` | yes: kubetray's login |
| ``role_arn`` on ``source_profile``, ``credential_source`` Environment, EcsContainer | yes |
| ``credential_process`` | yes (botocore runs it) |
| ``web_identity_token_file`` in the profile | yes |
| container credentials (``AWS_CONTAINER_CREDENTIALS_*``) | yes |
| ``AWS_WEB_IDENTITY_TOKEN_FILE``/``AWS_ROLE_ARN`` in the env (pods, CI) | refused |
| ``login_session`` (``aws login``) | refused |
| ``credential_source = Ec2InstanceMetadata``, the instance metadata service | refused |
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app import fingerprint

if TYPE_CHECKING:
    from app.providers.aws.command import EksCommand

DEFAULT_SCOPES = ("sso:account:access",)
"""Registration scopes when the sso-session names none: what the AWS CLI's wizard writes, and
what gives a refresh token (so a legacy ``sso_start_url`` profile refreshes too)."""

SSO = "sso"
KEYS = "keys"
ENV = "env"
ROLE = "assume-role"
PROCESS = "process"
WEB_IDENTITY = "web-identity"
CONTAINER = "container"


class ProfileError(ValueError):
    """A profile kubetray cannot serve, or that is broken: one line, with what to do."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class ProfileMissing(ProfileError):
    """A profile that is in no AWS config file (``missing`` says where it was looked for)."""

    def __init__(self, name: str, wanted: str) -> None:
        super().__init__(f"the AWS profile {name!r} is not in the AWS config files")
        self.name = name
        self.wanted = wanted
        """The profile asked for (``name`` is its source_profile when they differ)."""


def missing(e: ProfileMissing, env: Mapping[str, str], explicit: bool) -> ProfileError:
    """``e`` in the person's words: the profile, the files looked in (``env``: the caller's
    AWS_* variables), and what to do (``explicit``: named by ``--profile``, not AWS_PROFILE)."""
    config = env.get("AWS_CONFIG_FILE") or "~/.aws/config"
    creds = env.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials"
    if e.name != e.wanted:
        return ProfileError(
            f"the AWS profile {e.wanted!r} has source_profile {e.name!r}, which is neither in "
            f"{config} nor in {creds}",
            f"add the profile {e.name!r}, or fix source_profile in {e.wanted!r}",
        )
    named_by = (
        "--profile in the kubeconfig's args" if explicit else "AWS_PROFILE (the kubeconfig's env)"
    )
    return ProfileError(
        f"the AWS profile {e.name!r} is neither in {config} nor in {creds}",
        f"create it: aws configure sso --profile {e.name}, or fix {named_by}",
    )


@dataclass(frozen=True)
class SsoSession:
    """What a person logs in to: one IAM Identity Center portal (start URL) in its region.
    Many profiles (accounts, roles) share one login."""

    start_url: str
    region: str
    name: str | None = None
    """The ``[sso-session NAME]``; None for a legacy profile (start URL in the profile)."""
    scopes: tuple[str, ...] = DEFAULT_SCOPES

    @property
    def cache_key(self) -> str:
        """The AWS CLI's SSO cache key: sha1 of the session name, else of the start URL
        (botocore ``SSOTokenLoader._generate_cache_key``)."""
        import hashlib

        return hashlib.sha1((self.name or self.start_url).encode()).hexdigest()  # noqa: S324

    @property
    def key(self) -> str:
        """Who logs in, for kubetray's store: the portal and the session's name."""
        return f"{self.start_url}|{self.region}|{self.name or ''}"


@dataclass(frozen=True)
class Source:
    """Where a profile's credentials come from, after following ``source_profile``."""

    kind: str
    profile: str
    sso: SsoSession | None = None
    account_id: str | None = None
    role_name: str | None = None
    roles: tuple[str, ...] = ()
    """The role ARNs assumed on top, first to last (``source_profile`` chains)."""
    access_key_id: str | None = None
    credential: str | None = None
    """The keyed fingerprint of the environment's secret access key and session token
    (app.fingerprint): another secret for one access key is another identity."""

    def describe(self) -> list[tuple[str, str]]:
        """(label, value) pairs for status, doctor and the tray, what tells logins apart first
        (the tray's line is short); no secret."""
        out = []
        if self.account_id:
            out.append(("account", self.account_id))
        if self.role_name:
            out.append(("role", self.role_name))
        for arn in self.roles:
            out.append(("assumes", arn))
        if self.access_key_id:
            out.append(("access key", self.access_key_id))
        out.append(("profile", self.profile))
        if self.sso:
            out.append(("sso session", self.sso.name or self.sso.start_url))
            out.append(("start url", self.sso.start_url))
        if not self.sso and not self.access_key_id:
            out.append(("credentials", self.kind))
        return out


def sso_session(config: Mapping[str, Any], profile: str, section: Mapping[str, Any]) -> SsoSession:
    """The IAM Identity Center session of a profile that has ``sso_session`` or ``sso_*``
    keys, checked as botocore checks it (same messages)."""
    sessions = config.get("sso_sessions", {})
    name = section.get("sso_session")
    values = dict(section)
    if name:
        found = sessions.get(name)
        if found is None:
            raise ProfileError(f'The specified sso-session does not exist: "{name}"')
        for key in ("sso_start_url", "sso_region"):
            if key in section and key in found and section[key] != found[key]:
                raise ProfileError(
                    f"The value for {key} is inconsistent between profile ({section[key]}) and "
                    f"sso-session ({found[key]})"
                )
        values = {**found, **section}
    missing = [k for k in ("sso_start_url", "sso_region") if not values.get(k)]
    if missing:
        raise ProfileError(
            f'The profile "{profile}" is configured to use SSO but is missing required '
            f"configuration: {', '.join(missing)}"
        )
    scopes = tuple(
        s.strip() for s in str(values.get("sso_registration_scopes") or "").split(",") if s.strip()
    )
    return SsoSession(
        start_url=values["sso_start_url"],
        region=values["sso_region"],
        name=name or None,
        scopes=scopes or DEFAULT_SCOPES,
    )


def classify(config: Mapping[str, Any], profile: str, env: Mapping[str, str]) -> Source:
    """Where ``profile``'s credentials come from (``env`` is the caller's AWS_* variables and
    applies when the profile was not given with ``--profile``: pass {} otherwise)."""
    if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
        return Source(
            ENV,
            profile,
            access_key_id=env["AWS_ACCESS_KEY_ID"],
            credential=fingerprint.of(
                "aws-env",
                env["AWS_SECRET_ACCESS_KEY"],
                env.get("AWS_SESSION_TOKEN") or env.get("AWS_SECURITY_TOKEN"),
            ),
        )
    if env.get("AWS_WEB_IDENTITY_TOKEN_FILE"):
        raise ProfileError(
            "kubetray does not serve web identity from the environment "
            "(AWS_WEB_IDENTITY_TOKEN_FILE): that is a pod's or a CI job's identity",
            "run aws eks get-token there, or put web_identity_token_file and role_arn in a profile",
        )
    profiles = config.get("profiles", {})
    roles: list[str] = []
    seen: list[str] = []
    name = profile
    while True:
        if name in seen:
            raise ProfileError(
                f"the profile {profile!r} has a source_profile loop: {' -> '.join([*seen, name])}"
            )
        seen.append(name)
        section = profiles.get(name)
        if section is None:
            if name == "default" and name == profile and not seen[:-1]:
                return Source(CONTAINER if _container(env) else "none", profile)
            raise ProfileMissing(name, profile)
        if section.get("login_session"):
            raise ProfileError(
                f"the profile {name!r} uses an 'aws login' session (login_session), which "
                "kubetray does not serve yet",
                "use an IAM Identity Center profile (sso_session) or keys for EKS with kubetray",
            )
        role = section.get("role_arn")
        if role and section.get("web_identity_token_file"):
            return Source(WEB_IDENTITY, profile, roles=(*roles, role))
        if role and section.get("source_profile") and section["source_profile"] != name:
            roles.insert(0, role)
            name = section["source_profile"]
            continue
        if role and section.get("source_profile") == name:
            # botocore: a profile that names itself uses its own keys, then the role
            roles.insert(0, role)
            return Source(
                KEYS, profile, roles=tuple(roles), access_key_id=section.get("aws_access_key_id")
            )
        if role and section.get("credential_source"):
            source = section["credential_source"]
            if source == "Ec2InstanceMetadata":
                raise ProfileError(
                    f"the profile {name!r} takes its credentials from the EC2 instance metadata "
                    "service, which kubetray does not ask (a desktop has none)",
                    "on EC2, run aws eks get-token there",
                )
            roles.insert(0, role)
            return Source(
                ENV if source == "Environment" else CONTAINER, profile, roles=tuple(roles)
            )
        if (
            section.get("sso_session")
            or section.get("sso_account_id")
            or section.get("sso_role_name")
        ):
            sess = sso_session(config, name, section)
            missing = [k for k in ("sso_account_id", "sso_role_name") if not section.get(k)]
            if missing:
                raise ProfileError(
                    f'The profile "{name}" is configured to use SSO but is missing required '
                    f"configuration: {', '.join(missing)}"
                )
            return Source(
                SSO,
                profile,
                sso=sess,
                account_id=str(section["sso_account_id"]),
                role_name=section["sso_role_name"],
                roles=tuple(roles),
            )
        if section.get("aws_access_key_id"):
            return Source(
                KEYS, profile, roles=tuple(roles), access_key_id=section["aws_access_key_id"]
            )
        if section.get("credential_process"):
            return Source(PROCESS, profile, roles=tuple(roles))
        if role:
            raise ProfileError(
                f"the profile {name!r} has role_arn but neither source_profile nor "
                "credential_source"
            )
        return Source(CONTAINER if _container(env) else "none", profile, roles=tuple(roles))


def _container(env: Mapping[str, str]) -> bool:
    return bool(
        env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
        or env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI")
    )


def identity_key(command: "EksCommand", source: Source) -> str:
    """Who signs (never the cluster, the region or how AWS is reached): the profile's source,
    its roles, and ``--role-arn``."""
    if source.kind == ENV:
        who = f"env:{source.access_key_id}"
    elif source.sso:
        who = f"sso:{source.sso.start_url}|{source.account_id}|{source.role_name}"
    else:
        who = f"profile:{source.profile}:{source.kind}:{source.access_key_id or ''}"
    roles = "|".join(source.roles)
    role = command.role_arn or ""
    session = command.role_session_name or ""
    cred = f"{fingerprint.MARK}{source.credential}" if source.credential else ""
    return f"aws|{who}|{roles}|{role}|{session}|{command.external_id or ''}{cred}"
