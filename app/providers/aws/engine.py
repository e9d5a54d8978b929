"""One AWS identity's credentials and tokens, as the agent keeps them between calls.

``Engine`` holds a ``World`` per caller environment (profile, files, endpoints: what botocore
sees) and, per identity, the in-memory role-credential cache that outlives config changes. A
``World`` resolves credentials once through botocore's chain (refreshable credentials then
refresh themselves), assumes ``--role-arn`` on top (cached, unlike the CLI), and signs a token
per call (about 0.3 ms: no reuse needed, and every token gets its full 14 minutes).

SSO tokens are not kept here: ``Engine`` asks ``sso_tokens(session)`` for the current login,
which the broker keeps (in memory, and in the secret store).
"""

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from app.oidc.errors import LoginError, ProviderUnavailable
from app.providers.aws import profiles
from app.providers.aws.command import AUTHENTICATOR, AUTHENTICATOR_REGION, EksCommand
from app.providers.aws.profiles import ProfileError, SsoSession, identity_key
from app.providers.aws.sso import BotocoreTokenView, SsoClient, SsoTokens, error_code, said
from app.providers.aws.token import EksToken, presign_client, sign
from app.providers.aws.trust import UnusableBundle, untrusted
from app.providers.base import TokensRefused

MAX_WORLDS = 32
"""Worlds kept (the least recently used goes first): one per kubeconfig user's command and
environment, which a caller may vary without end (a session token rotated in its env)."""


class NeedsLogin(LoginError):
    """The identity's IAM Identity Center login is missing, expired or was refused."""

    def __init__(self, sso: SsoSession, why: str) -> None:
        super().__init__(
            f"the AWS IAM Identity Center login for {sso.start_url} {why}",
            "log in (kubetray login, or the tray)",
        )
        self.sso = sso


class PortalRefused(NeedsLogin, TokensRefused):
    """The portal refused the login's access token before its recorded end (aws-cli#7340):
    a refresh may help, else a login."""

    def __init__(self, sso: SsoSession) -> None:
        NeedsLogin.__init__(self, sso, "was refused by the portal")


class CredentialsError(LoginError):
    """No usable credentials for the profile (configuration, refused role, no keys)."""


@dataclass(frozen=True)
class Who:
    """GetCallerIdentity's answer."""

    account: str
    arn: str
    user_id: str


def _files(env: dict[str, str]) -> tuple[tuple[str, float, int], ...]:
    """The config files botocore reads, with what says they changed."""
    out = []
    for var, default in (
        ("AWS_CONFIG_FILE", "~/.aws/config"),
        ("AWS_SHARED_CREDENTIALS_FILE", "~/.aws/credentials"),
    ):
        path = os.path.expanduser(env.get(var) or default)
        try:
            st = os.stat(path)
            out.append((path, st.st_mtime, st.st_size))
        except OSError:
            out.append((path, 0.0, -1))
    return tuple(out)


class World:
    """What botocore makes of one caller's environment and command (less the cluster)."""

    def __init__(
        self,
        command: EksCommand,
        role_caches: Callable[[str], dict[str, Any]],
        sso_tokens: Callable[[SsoSession], SsoTokens | None],
    ) -> None:
        from app.providers.aws.session import CallerSession, unsigned_clients

        self.command = command
        self._lock = threading.Lock()
        self._clients: dict[str | None, Any] = {}
        try:
            self.session = CallerSession(command.environ, command.profile)
            config = self.session.full_config
            env = {} if command.profile_explicit else command.environ
            self.source = profiles.classify(config, command.profile or "default", env)
        except profiles.ProfileMissing as e:
            said_ = profiles.missing(e, command.environ, command.profile_explicit)
            raise CredentialsError(str(said_), said_.hint) from None
        except ProfileError as e:
            raise CredentialsError(str(e), e.hint) from None
        except UnusableBundle as e:
            raise CredentialsError(e.message, e.hint) from None
        except Exception as e:  # botocore's config errors
            from botocore.exceptions import ProfileNotFound

            if isinstance(e, ProfileNotFound):  # botocore looked first
                name = str(e.kwargs.get("profile") or command.profile)
                said_ = profiles.missing(
                    profiles.ProfileMissing(name, name), command.environ, command.profile_explicit
                )
                raise CredentialsError(str(said_), said_.hint) from None
            raise CredentialsError(f"the AWS configuration cannot be read: {e}") from None
        self.sso = self.source.sso
        self._role_cache = role_caches(self.key)
        sso = self.sso
        view = BotocoreTokenView(sso, lambda: sso_tokens(sso)) if sso else None
        self.region = (
            command.region
            or self.session.get_config_variable("region")
            or (AUTHENTICATOR_REGION if command.tool == AUTHENTICATOR else None)
        )
        self._view = view
        self._resolver = self._chain()
        self.unsigned = unsigned_clients(self.session)
        self._signing_session: Any = None
        self._credentials: Any = None

    def _chain(self) -> Any:
        """botocore's chain, made anew for each load: its AssumeRoleProvider serves one load
        (a second is taken for a source_profile loop)."""
        from app.providers.aws.session import resolver

        made = resolver(self.session, self.command, self.region, self._role_cache, self._view)
        self.session.register_component("credential_provider", made)
        return made

    @property
    def key(self) -> str:
        return identity_key(self.command, self.source)

    def sso_client(self) -> SsoClient | None:
        return SsoClient(self.sso, self.unsigned) if self.sso else None

    def _errors(self, e: Exception) -> LoginError:
        from botocore import exceptions as bx

        bad_certificate = untrusted(e, f"AWS credentials for profile {self.source.profile!r}")
        if bad_certificate is not None:
            return bad_certificate

        if self.sso and isinstance(e, bx.UnauthorizedSSOTokenError):
            return PortalRefused(self.sso)
        if self.sso and isinstance(e, bx.SSOTokenLoadError | bx.TokenRetrievalError):
            return NeedsLogin(self.sso, "is needed")
        if self.sso and isinstance(e, bx.ClientError) and error_code(e) == "ForbiddenException":
            return CredentialsError(
                f"IAM Identity Center does not give you the role {self.source.role_name} in "
                f"account {self.source.account_id} ({said(e)})",
                "check sso_account_id and sso_role_name in your AWS config (kubetray doctor "
                "lists the roles your login has)",
            )
        if isinstance(e, bx.EndpointConnectionError | bx.ConnectTimeoutError | bx.ReadTimeoutError):
            return ProviderUnavailable(
                f"AWS could not be reached for the credentials of profile "
                f"{self.source.profile!r} ({e})",
                "check the network; kubetray tries again",
            )
        if isinstance(e, bx.ClientError):
            return CredentialsError(
                f"AWS refused the credentials of profile {self.source.profile!r}: {e}"
            )
        return CredentialsError(str(e))

    def credentials(self) -> Any:
        """The signing credentials (botocore's object: refreshable ones refresh themselves)."""
        from botocore import exceptions as bx

        with self._lock:
            if self._credentials is not None:
                return self._credentials
            try:
                self._resolver = self._chain()
                base = self._resolver.load_credentials()
                if base is None:
                    raise CredentialsError(
                        "Unable to locate credentials for AWS"
                        + (f" (profile {self.command.profile!r})" if self.command.profile else ""),
                        "configure a profile (aws configure / aws configure sso) or set AWS_PROFILE"
                        " in the kubeconfig's env",
                    )
                # botocore clients made from this session (the SSO portal's, AssumeRole's, the
                # signer's) take these, instead of running the chain again (AssumeRoleProvider
                # is single-use: a second load is an "infinite loop")
                from app.providers.aws.session import given as _given

                self.session.register_component("credential_provider", _given(base))
                creds = base
                if self.command.role_arn:
                    from app.providers.aws.session import CallerSession, assumed, given

                    name = self.command.role_session_name
                    if self.command.forward_session_name:
                        name = self._forwarded_name(base) or name
                    creds = assumed(
                        self.session, base, self.command, self.region, self._role_cache, name
                    )
                    signing = CallerSession(self.command.environ, self.command.profile)
                    signing.register_component("credential_provider", given(creds))
                    self._signing_session = signing
                creds.get_frozen_credentials()  # load now: errors belong to this call
            except LoginError:
                raise
            except (bx.BotoCoreError, bx.ClientError) as e:
                raise self._errors(e) from None
            except RuntimeError as e:  # botocore: "refreshed credentials are still expired"
                raise self._expired(e) from None
            self._credentials = creds
            return creds

    def _forwarded_name(self, base: Any) -> str | None:
        who = self.whoami(base)
        _, sep, name = who.user_id.partition(":")
        return name if sep else None

    def ready(self) -> bool:
        """Signing now needs no network (credentials loaded and not due for a refresh)."""
        creds = self._credentials
        if creds is None:
            return False
        needed = getattr(creds, "refresh_needed", None)
        return not (needed and needed())

    def forget(self) -> None:
        """Drop the credentials (a logout, a refused role): the next call resolves again."""
        with self._lock:
            self._credentials = None
            self._signing_session = None
            self._clients.clear()
            self._role_cache.clear()

    def token_endpoint(self) -> str:
        """Where this world's tokens point (the STS endpoint for its region); no credentials,
        no network."""
        from botocore.config import Config

        client = self.session.create_client(
            "sts",
            region_name=self.region,
            aws_access_key_id="endpoint-only",
            aws_secret_access_key="endpoint-only",  # noqa: S106 (never used to sign)
            config=Config(ignore_configured_endpoint_urls=True),
        )
        return str(client.meta.endpoint_url)

    def token(self, cluster_id: str) -> EksToken:
        """A token for ``cluster_id`` signed for this world's region."""
        from botocore import exceptions as bx

        creds = self.credentials()
        client = self._clients.get(self.region)
        if client is None:
            client = presign_client(self._signing_session or self.session, self.region)
            self._clients[self.region] = client
        end = getattr(creds, "_expiry_time", None)  # botocore keeps no public accessor
        if isinstance(end, datetime) and end.tzinfo is None:
            end = end.replace(tzinfo=UTC)
        try:
            return sign(client, cluster_id, end if isinstance(end, datetime) else None)
        except (bx.BotoCoreError, bx.ClientError, RuntimeError) as e:
            with self._lock:
                self._credentials = None
            raise (self._expired(e) if isinstance(e, RuntimeError) else self._errors(e)) from None

    def _expired(self, e: RuntimeError) -> LoginError:
        """botocore's RuntimeError for credentials whose source (a credential_process, a
        credentials file with an expiry, a cached role) gave them already expired."""
        if "expired" not in str(e):
            raise e
        profile = self.command.profile or self.source.profile
        of = f" of profile {profile!r}" if profile else ""
        return CredentialsError(
            f"the AWS credentials{of} have expired, and where they come from gave no fresh ones",
            "renew them (your credential_process or the tool that wrote them, or aws sso login), "
            "then run kubectl again",
        )

    def whoami(self, credentials: Any = None) -> Who:
        """GetCallerIdentity (a network call: doctor, --forward-session-name)."""
        from botocore import exceptions as bx

        creds = (credentials or self.credentials()).get_frozen_credentials()
        try:
            client = self.session.create_client(
                "sts",
                region_name=self.region,
                aws_access_key_id=creds.access_key,
                aws_secret_access_key=creds.secret_key,
                aws_session_token=creds.token,
            )
            answer = client.get_caller_identity()
        except (bx.BotoCoreError, bx.ClientError) as e:
            raise self._errors(e) from None
        return Who(answer["Account"], answer["Arn"], answer["UserId"])


class Engine:
    """The agent's AWS worlds and per-identity role caches."""

    def __init__(self, sso_tokens: Callable[[SsoSession], SsoTokens | None]) -> None:
        self._sso_tokens = sso_tokens
        self._lock = threading.Lock()
        self._worlds: OrderedDict[Any, World] = OrderedDict()
        self._role_caches: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def world(self, command: EksCommand) -> World:
        """The world of ``command`` (made once per environment and config file version)."""
        plain = (
            command.tool,
            command.profile,
            command.profile_explicit,
            command.role_arn,
            command.session_name,
            command.external_id,
            command.forward_session_name,
            command.region,
            command.env,
        )
        key = (plain, _files(command.environ))
        with self._lock:
            found = self._worlds.get(key)
            if found is not None:
                self._worlds.move_to_end(key)
        if found is not None:
            return found
        made = World(command, self._role_cache, self._sso_tokens)
        with self._lock:
            found = self._worlds.get(key)
            if found is not None:
                return found
            stale = [k for k in self._worlds if k[0] == plain]
            for k in stale:
                del self._worlds[k]
            self._worlds[key] = made
            while len(self._worlds) > MAX_WORLDS:  # callers' environments vary without end
                self._worlds.popitem(last=False)
            return made

    def forget(self, sso: SsoSession | None = None) -> None:
        """Drop the credentials of every world (of ``sso``'s login only, if given)."""
        with self._lock:
            worlds = list(self._worlds.values())
        for w in worlds:
            if sso is None or w.sso == sso:
                w.forget()

    def _role_cache(self, key: str) -> dict[str, Any]:
        """One role cache per identity, kept when its world is made again (a config edit)."""
        with self._lock:
            cache = self._role_caches.setdefault(key, {})
            self._role_caches.move_to_end(key)
            while len(self._role_caches) > 2 * MAX_WORLDS:
                self._role_caches.popitem(last=False)
            return cache
