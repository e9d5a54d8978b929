"""EKS: tokens signed for a cluster, and IAM Identity Center (AWS SSO) logins (issue 32).

The provider (this module: light imports, every agent loads it) reads the command lines of EKS
kubeconfigs, ``aws eks get-token`` and ``aws-iam-authenticator token`` (``command``), and what
their profile is (``profiles``). Who logs in:
- an **IAM Identity Center** profile: the portal's login (start URL, region, sso-session),
  shared by every profile, account and role on it: one device-code login for all of them;
- any other profile (keys, a role on keys, ``credential_process``...): a machine identity
  whose credentials botocore resolves with nobody there.
The token kubectl gets is signed per call for the caller's cluster, region and role
(``token``), with an expiry of its own (14 minutes from signing).

The rest imports botocore, and is loaded only when an AWS identity is used: ``session``
(botocore with the caller's environment), ``engine`` (credentials kept in memory), ``token``,
``sso`` (the login and refresh), ``cli_cache`` (the AWS CLI's cache, read once), ``login``
(the provider's Client).
"""

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from app.providers.aws import profiles
from app.providers.aws.command import (
    SECRET_ENV,
    CommandError,
    EksCommand,
    parse,
    recognises,
)
from app.providers.aws.convert import eks_args, why_not
from app.providers.aws.profiles import Source, SsoSession
from app.providers.base import NOBODY, SCREEN, Check, Clock, Converted, Shown, TokenSet, Wanted
from exec_helper.options import OptionsError

if TYPE_CHECKING:
    from app.providers.aws.login import AwsLogin
    from app.providers.base import Token

AWS = "aws"
KEY_ENV = frozenset({"AWS_ACCESS_KEY_ID", *SECRET_ENV})
"""Never remembered in the index (identities.json): keys come with each caller."""


@dataclass(frozen=True)
class AwsSettings:
    """One EKS request: the caller's command (cluster, region, profile, role, AWS_* env) and
    where its profile's credentials come from."""

    kind: ClassVar[str] = AWS
    command: EksCommand
    source: Source

    named_by_kubeconfig: ClassVar[bool] = False
    browser_command: ClassVar[str | None] = None

    @property
    def sso(self) -> SsoSession | None:
        return self.source.sso

    @property
    def key(self) -> str:
        if self.sso:  # the portal's login: every profile and role on it shares it
            return f"{AWS}|sso|{self.sso.key}"
        return profiles.identity_key(self.command, self.source)

    @property
    def fallback_name(self) -> str:
        if self.sso:
            host = self.sso.start_url.split("//", 1)[-1].split(".", 1)[0]
            return f"aws-{self.sso.name or host}"
        return f"aws-{self.source.profile}"

    @property
    def machine(self) -> bool:
        return self.sso is None

    @property
    def can_fetch(self) -> bool:
        """Keys from the environment come with a caller; a profile's are on this machine."""
        return self.source.kind != profiles.ENV or "AWS_SECRET_ACCESS_KEY" in self.command.environ

    @property
    def login_needs(self) -> str:
        """A device-code login needs a person who sees the code; adopting the AWS CLI's
        cached login (aws sso login) needs nobody."""
        if self.sso is None:
            return NOBODY
        from datetime import UTC, datetime

        from app.providers.aws import cli_cache

        return NOBODY if cli_cache.available(self.sso, datetime.now(UTC)) else SCREEN

    @property
    def group(self) -> str:
        if self.sso:
            return f"aws-sso|{self.sso.region}|{self.sso.start_url}"
        return "aws-sts"

    @property
    def where(self) -> str:
        if self.sso:
            return f"AWS IAM Identity Center {self.sso.start_url}"
        return f"AWS (profile {self.source.profile})"

    @property
    def ca_files(self) -> tuple[str, ...]:
        bundle = self.command.environ.get("AWS_CA_BUNDLE")
        return (bundle,) if bundle else ()

    def to_index(self) -> dict[str, Any]:
        c, s = self.command, self.source
        return {
            "command": {
                "tool": c.tool,
                "cluster_id": c.cluster_id,
                "region": c.region,
                "profile": c.profile,
                "profile_explicit": c.profile_explicit,
                "role_arn": c.role_arn,
                "session_name": c.session_name,
                "external_id": c.external_id,
                "forward_session_name": c.forward_session_name,
                "env": {k: v for k, v in c.env if k not in KEY_ENV},
            },
            "source": {
                "kind": s.kind,
                "profile": s.profile,
                "sso": None
                if s.sso is None
                else {
                    "start_url": s.sso.start_url,
                    "region": s.sso.region,
                    "name": s.sso.name,
                    "scopes": list(s.sso.scopes),
                },
                "account_id": s.account_id,
                "role_name": s.role_name,
                "roles": list(s.roles),
                "access_key_id": s.access_key_id,
                "credential": s.credential,
            },
        }


def _from_index(doc: Mapping[str, Any]) -> AwsSettings:
    c, s = dict(doc["command"]), dict(doc["source"])
    env = c.pop("env", {}) or {}
    if not isinstance(env, dict):
        raise TypeError("env is not an object")
    command = EksCommand(**c, env=tuple(sorted((str(k), str(v)) for k, v in env.items())))
    sso = s.pop("sso", None)
    session = None
    if sso is not None:
        session = SsoSession(
            str(sso["start_url"]),
            str(sso["region"]),
            sso.get("name"),
            tuple(sso.get("scopes") or profiles.DEFAULT_SCOPES),
        )
    s["roles"] = tuple(s.get("roles") or ())
    return AwsSettings(command, Source(**s, sso=session))


class AwsProvider:
    """``aws eks get-token`` and ``aws-iam-authenticator token`` (see the module)."""

    kind = AWS
    usage = "aws eks get-token's or aws-iam-authenticator token's arguments"

    def recognises(self, args: Sequence[str]) -> bool:
        return recognises(list(args))

    def wanted(
        self, args: Sequence[str], config: Mapping[str, Any] | None, env: Mapping[str, str]
    ) -> Wanted:
        try:
            command = parse(list(args), env)
        except CommandError as e:
            raise OptionsError(str(e)) from None
        if command.token_only:
            raise OptionsError(
                "aws-iam-authenticator token: kubetray-exec prints the ExecCredential kubectl "
                "reads; --token-only is for scripts: remove it (or run aws-iam-authenticator "
                "there)"
            )
        from app.providers.aws.login import world

        try:
            source = world(command).source
        except Exception as e:  # the profile cannot be served: one line, with what to do
            one_line = getattr(e, "one_line", None)
            raise OptionsError(one_line() if callable(one_line) else str(e)) from None
        local = tuple(
            path
            for name in ("AWS_CA_BUNDLE",)
            if (path := command.environ.get(name)) and name not in env
        )
        return Wanted(AwsSettings(command, source), local_paths=local)

    def from_index(self, doc: Mapping[str, Any]) -> AwsSettings:
        try:
            return _from_index(doc)
        except (KeyError, AttributeError) as e:  # the interface says ValueError, TypeError
            raise ValueError(f"not an AWS identity's settings: {e}") from None

    def client(self, settings: Any, clock: Clock) -> "AwsLogin":
        from app.providers.aws.login import AwsLogin

        return AwsLogin(settings, clock)

    def token(self, settings: Any, tokens: TokenSet, cluster: str | None) -> "Token":
        from app.providers.aws.login import sign

        return sign(settings, tokens)

    def ready(self, settings: Any, tokens: TokenSet) -> bool:
        from app.providers.aws.login import ready

        return ready(settings, tokens)

    def renewable(self, settings: Any, tokens: TokenSet) -> bool:
        if settings.machine:
            return bool(settings.can_fetch)
        return bool(tokens.refresh_token and tokens.state.get("clientId"))

    def describe(self, settings: Any, tokens: TokenSet | None) -> Shown:
        """Who: the IAM Identity Center session (or the profile); then what tells its uses
        apart, short (the tray's line): account and role, a role assumed on top. The portal's
        URL is the issuer; doctor shows the rest."""
        s: AwsSettings = settings
        details = [(k, v) for k, v in s.source.describe() if k in ("account", "role", "assumes")]
        if s.command.role_arn:
            details.append(("assumes", s.command.role_arn))
        if not s.sso:
            details += [
                (k, v) for k, v in s.source.describe() if k in ("access key", "credentials")
            ]
        who = (s.sso.name or s.sso.start_url) if s.sso else s.source.profile
        return Shown(who=who, issuer=s.sso.start_url if s.sso else None, details=tuple(details))

    def note(self, settings: Any, tokens: TokenSet | None) -> str | None:
        if settings.sso and tokens is not None and not self.renewable(settings, tokens):
            return "this IAM Identity Center login cannot be refreshed: log in again when it ends"
        return None

    def checks(self, settings: Any, now: Clock) -> Iterator[Check]:
        from app.providers.aws.login import checks

        yield from checks(settings, now)

    def convert(self, exec_: Mapping[str, Any], user: str) -> Converted | None:
        stanza = dict(exec_)
        args = eks_args(stanza)
        if args is None:
            return None
        reason = why_not(stanza)
        if reason is not None:
            raise OptionsError(reason)
        return Converted(tuple(args))
