"""The AWS provider's Client, and what the agent keeps for AWS between calls (botocore: this
module is loaded only when an AWS identity is used).

- An IAM Identity Center identity's ``TokenSet`` is the portal's login: ``access_token`` and
  ``refresh_token`` are the SSO tokens, ``state`` kubetray's client registration (a secret:
  the keyring keeps it with the tokens). ``login`` first adopts the AWS CLI's cached login
  (read once per portal, never written), else runs the device-code login; ``renew`` refreshes
  (CreateToken, refresh_token grant).
- Any other identity is a machine identity: ``fetch`` resolves its credentials through
  botocore's chain (nothing secret in its TokenSet: the keys stay where the person put them);
  a TokenSet's end is the credentials' end, or 12 hours for keys that never end, when the
  profile is read again.
- Role credentials (SSO GetRoleCredentials, AssumeRole) live in ``ENGINE``'s memory only.
"""

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from app.oidc.errors import LoginError
from app.oidc.tokens import Revocation, TokenSet
from app.providers.aws import cli_cache
from app.providers.aws.command import EksCommand
from app.providers.aws.engine import CredentialsError, Engine, World
from app.providers.aws.profiles import SsoSession
from app.providers.aws.sso import Registration, SsoClient, SsoTokens
from app.providers.base import Check, Clock, LoginUI, Token

KEYS_RECHECK = timedelta(hours=12)
"""How long a machine identity with keys that never end is served before its profile is
read again (a person who rotated the keys in ~/.aws/credentials is seen within this)."""
ADOPT_MARGIN = timedelta(minutes=5)

_held: dict[SsoSession, SsoTokens] = {}
_held_lock = threading.Lock()


def _current(sso: SsoSession) -> SsoTokens | None:
    with _held_lock:
        return _held.get(sso)


ENGINE = Engine(_current)


def world(command: EksCommand) -> World:
    return ENGINE.world(command)


def to_sso(tokens: TokenSet, sso: SsoSession) -> SsoTokens:
    """The portal's login in a TokenSet (as Logins keeps it) → the record botocore reads."""
    st = tokens.state
    registration = None
    if st.get("clientId") and st.get("clientSecret") and st.get("registrationExpiresAt"):
        registration = Registration(
            str(st["clientId"]),
            str(st["clientSecret"]),
            datetime.fromisoformat(str(st["registrationExpiresAt"])),
        )
    return SsoTokens(
        start_url=sso.start_url,
        region=sso.region,
        access_token=tokens.access_token or "",
        expires_at=tokens.expires_at,
        issued_at=tokens.issued_at,
        refresh_token=tokens.refresh_token,
        registration=registration,
    )


def from_sso(tokens: SsoTokens, sso: SsoSession) -> TokenSet:
    state: dict[str, Any] = {}
    if tokens.registration:
        state = {
            "clientId": tokens.registration.client_id,
            "clientSecret": tokens.registration.client_secret,
            "registrationExpiresAt": tokens.registration.expires_at.isoformat(),
        }
    return TokenSet(
        expires_at=tokens.expires_at,
        issued_at=tokens.issued_at,
        access_token=tokens.access_token,
        refresh_token=tokens.refresh_token,
        claims={"name": sso.name or sso.start_url, "sub": sso.start_url},
        state=state,
    )


def _hold(settings: Any, tokens: TokenSet) -> None:
    """The login Logins serves is the one botocore reads (a refresh or a new login)."""
    sso: SsoSession | None = settings.sso
    if sso is None:
        return
    with _held_lock:
        current = _held.get(sso)
        if current is None or current.access_token != tokens.access_token:
            _held[sso] = to_sso(tokens, sso)


def sign(settings: Any, tokens: TokenSet) -> Token:
    """The caller's token: its cluster, region and role (network only for credentials not in
    memory yet: see ready)."""
    _hold(settings, tokens)
    signed = world(settings.command).token(settings.command.cluster_id)
    return Token(signed.token, signed.expires_at)


def ready(settings: Any, tokens: TokenSet) -> bool:
    _hold(settings, tokens)
    return world(settings.command).ready()


class AwsLogin:
    """The Client of one AWS identity's settings (app.providers.base.Client)."""

    def __init__(self, settings: Any, clock: Clock) -> None:
        self.settings = settings
        self.clock = clock

    def _world(self) -> World:
        return world(self.settings.command)

    def _sso(self) -> tuple[SsoSession, SsoClient]:
        sso: SsoSession | None = self.settings.sso
        if sso is None:
            raise LoginError(f"{self.settings.where} has no login: its credentials are its own")
        return sso, SsoClient(sso, self._world().unsigned, now=self.clock)

    def login(self, ui: LoginUI, held: TokenSet | None) -> TokenSet:
        sso, client = self._sso()
        now = self.clock()
        adopted = self._adopt(sso, client, now)
        if adopted is not None:
            ui.show(f"Using the AWS CLI's login to {sso.start_url} (aws sso login)")
            return from_sso(adopted, sso)
        registration = to_sso(held, sso).registration if held else None
        fresh = client.login(ui, registration)
        ENGINE.forget(sso)  # role credentials of an earlier login (maybe another person's)
        return from_sso(fresh, sso)

    def _adopt(self, sso: SsoSession, client: SsoClient, now: datetime) -> SsoTokens | None:
        """The AWS CLI's cached login for ``sso``, once per agent: a person who ran
        ``aws sso login`` is not asked again."""
        found = cli_cache.take(sso, now)
        if found is None:
            return None
        if found.expires_at > now + ADOPT_MARGIN:
            return found
        try:
            return client.refresh(found)
        except LoginError:
            return None

    def fetch(self) -> TokenSet:
        """A machine identity: its credentials resolved now (no person)."""
        w = self._world()
        w.forget()
        creds = w.credentials()
        now = self.clock()
        end = getattr(creds, "_expiry_time", None)  # botocore keeps no public accessor
        if isinstance(end, datetime):
            end = end if end.tzinfo else end.replace(tzinfo=UTC)
        else:
            end = now + KEYS_RECHECK
        frozen = creds.get_frozen_credentials()
        return TokenSet(
            expires_at=end,
            issued_at=now,
            claims={"name": self.settings.source.profile, "sub": frozen.access_key},
        )

    def renew(self, tokens: TokenSet) -> TokenSet:
        if self.settings.machine:
            return self.fetch()
        sso, client = self._sso()
        return from_sso(client.refresh(to_sso(tokens, sso)), sso)

    def revoke(self, tokens: TokenSet) -> Revocation:
        if self.settings.machine:
            ENGINE.forget()
            return Revocation(False, "nothing to revoke: the credentials are the profile's")
        sso, client = self._sso()
        client.logout(to_sso(tokens, sso))
        ENGINE.forget(sso)
        with _held_lock:
            _held.pop(sso, None)
        return Revocation(True, "logged out at the IAM Identity Center portal")

    def account_choice(self) -> dict[str, str]:
        return {}


def checks(settings: Any, now: Clock) -> Iterator[Check]:
    """``kubetray doctor`` for one AWS identity."""
    from app.providers.oidc import check_clock

    name = f"AWS profile {settings.source.profile}"
    try:
        w = world(settings.command)
    except LoginError as e:
        yield Check(name, False, e.message, e.hint)
        return
    details = ", ".join(f"{k} {v}" for k, v in w.source.describe() if k != "profile")
    yield Check(name, True, details or w.source.kind)
    yield Check(
        f"tokens for {settings.command.cluster_id}",
        True,
        f"signed for {w.token_endpoint()} (region {w.region or 'none: global'})",
    )
    if w.sso is not None:
        oidc = w.unsigned("sso-oidc", w.sso.region)
        url = oidc.meta.endpoint_url
        date, error = _reach(url, w.session.ca_bundle)
        if error:
            yield Check(
                f"IAM Identity Center {w.sso.start_url}",
                False,
                f"{url} cannot be reached ({error})",
                "check the network, a proxy, AWS_CA_BUNDLE, and sso_region in your AWS config",
            )
            return
        yield Check(f"IAM Identity Center {w.sso.start_url}", True, f"{url} answers")
        yield from check_clock(url, date, now, 300)
        return
    try:
        who = w.whoami()
    except (LoginError, CredentialsError) as e:
        yield Check(f"{name}: credentials", False, e.message, e.hint)
        return
    yield Check(f"{name}: credentials", True, f"AWS says this is {who.arn}")


def _reach(url: str, ca_bundle: str | None) -> tuple[datetime | None, str | None]:
    """Any HTTP answer from ``url`` (its Date header), or why none came; TLS as the agent's
    clients verify it (the system's CAs and the caller's bundle)."""
    import email.utils
    import urllib.error
    import urllib.request

    from app.errors import UsageError
    from app.oidc.http import ssl_context

    try:
        context = ssl_context((ca_bundle,) if ca_bundle else ())
        with urllib.request.urlopen(url, timeout=5, context=context) as answer:  # noqa: S310
            date = answer.headers.get("Date")
    except urllib.error.HTTPError as e:
        date = e.headers.get("Date")
    except (urllib.error.URLError, OSError, ValueError, UsageError) as e:
        return None, str(getattr(e, "reason", e))
    return (email.utils.parsedate_to_datetime(date) if date else None), None
