"""The shape of every kind of login kubetray does: the interface each provider implements.

git-credential-manager's host providers, in Python: one interface, a registry that picks the
provider whose command line a request carries (app.providers), each provider in a package of
its own. The broker, single flight, refresh ahead, the secret store, status and the tray know
only what is here; what a provider knows (its flags, its wire, its quirks) stays in its package.

Three nouns, all light to import (a provider's heavy library loads only in its Client):

* **Settings** (frozen, hashable): one request's settings. ``key`` is who logs in (the
  identity: never how the provider is reached), and equal settings share a Client.
* **Provider**: reads a request's arguments, per-cluster config and environment into a
  ``Wanted`` (or refuses them in one line: OptionsError), remembers settings in the index
  (``to_index`` / ``from_index``), makes a Client, says which token kubectl is given, how status
  describes an identity, what doctor checks, and how ``kubetray import`` converts a user.
* **Client** (one per identity per settings, made when first needed): the person's login,
  a machine identity's token, renewal, revocation.

Tokens of every provider are a ``TokenSet`` (app.oidc.tokens): ``expires_at`` of what kubectl
is given, ``issued_at``, the id/access/refresh tokens, ``claims`` (who), and ``state``, an opaque
JSON object the provider owns (an MSAL cache, a client registration) kept in the keyring with
them. Renewal failures are the typed errors of app.oidc.errors, which Logins understands:
RefreshRefused (only a login helps), ProviderUnavailable (try again; ``unsure`` when the
request may have been done), RefreshFailed (answered, but unusable: keep ``tokens``),
ClockSkew, and LoginError for the rest.
"""

import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from app.oidc.errors import (
    ClockSkew,
    LoginError,
    ProviderUnavailable,
    RefreshFailed,
    RefreshRefused,
)
from app.oidc.tokens import Revocation, TokenSet

__all__ = [
    "NOBODY",
    "SCREEN",
    "TERMINAL",
    "Check",
    "Client",
    "Clock",
    "ClockSkew",
    "Converted",
    "LoginError",
    "LoginUI",
    "Prepares",
    "Provider",
    "ProviderUnavailable",
    "RefreshFailed",
    "RefreshRefused",
    "Revocation",
    "Settings",
    "Shown",
    "Token",
    "TokenSet",
    "TokensRefused",
    "Wanted",
]

NOBODY = "nobody"
"""A login that needs no person (a password grant with both given, gcloud's ADC file)."""
TERMINAL = "terminal"
"""A login that needs an answer typed in a terminal (a password, a pasted code)."""
SCREEN = "screen"
"""A login a person must see (a browser, a device code): an interactive or visible caller,
or a browser the agent can open."""


class Clock(Protocol):
    def __call__(self) -> datetime: ...


class Settings(Protocol):
    """One request's settings for one provider (a frozen dataclass: hashable, comparable)."""

    @property
    def kind(self) -> str:
        """The provider's kind ("oidc", "google", ...): the identity's kind too."""

    @property
    def key(self) -> str:
        """Who logs in: equal for every spelling of one login, and unique across providers
        (start it with the kind). Never how the provider is reached (CAs, proxies, ports)."""

    @property
    def fallback_name(self) -> str:
        """The name of an identity nobody named (``user@host``, the account)."""

    @property
    def named_by_kubeconfig(self) -> bool:
        """A new identity takes the name of the kubeconfig user that runs it (one cluster's
        login); False for an account that serves many clusters by nature (Google's)."""

    @property
    def machine(self) -> bool:
        """No person ever logs in: the client's own credentials (Client.fetch)."""

    @property
    def can_fetch(self) -> bool:
        """A machine identity whose secret these settings carry (remembered ones do not)."""

    @property
    def login_needs(self) -> str:
        """NOBODY, TERMINAL or SCREEN: a login starts only where it can finish."""

    @property
    def browser_command(self) -> str | None:
        """The program that opens a login URL (None: the desktop's)."""

    @property
    def group(self) -> str:
        """Who answers renewals (the provider's URL): refresh ahead runs at most two jobs per
        group, so N identities of one provider never stampede it."""

    @property
    def where(self) -> str:
        """The provider in a person's words ("Logging in to NAME (WHERE)…")."""

    @property
    def ca_files(self) -> tuple[str, ...]:
        """CA files the provider is reached with (doctor checks each)."""

    def to_index(self) -> dict[str, Any]:
        """What identities.json remembers: JSON, and never a secret."""


@dataclass(frozen=True)
class Wanted:
    """What one request asks for, whatever its provider: Providers.wanted's answer."""

    settings: Settings
    name: str | None = None
    """A name the person chose (``--name``)."""
    force_refresh: bool = False
    no_login: bool = False
    """Never start or join a login (the kubelet cannot wait for a person)."""
    local_paths: tuple[str, ...] = ()
    """The flags or variables given that name a program or file on the agent's machine:
    refused for a request from an SSH host, where they would name the desktop's."""

    @property
    def kind(self) -> str:
        return self.settings.kind


@dataclass(frozen=True)
class Token:
    """A token whose end is its own, not the identity's tokens' (an EKS token is a URL signed
    for 15 minutes, whatever the login's lifetime): ``Provider.token`` may give one instead of
    a str, and kubectl is told ``expires_at`` (the provider keeps it in the future)."""

    value: str
    expires_at: datetime

    def __repr__(self) -> str:  # a secret: never in a log line
        return f"Token(expires_at={self.expires_at.isoformat()})"


class TokensRefused(LoginError):
    """``Provider.token`` found the identity's tokens refused although they have not expired
    (an IAM Identity Center session ended before its recorded end: aws-cli#7340). The broker
    has them renewed (a refresh, else a login, as for a 401 re-run) and asks once more."""


class Prepares(Protocol):
    """A provider whose ``token`` may need the network first (AWS: role credentials to fetch
    with the login, about hourly): ``ready`` says whether it can answer from memory now. The
    at-once path (the installed helper's fast path) asks it, and leaves the call to the full
    path when not; a provider without ``ready`` always answers from memory."""

    def ready(self, settings: "Settings", tokens: TokenSet) -> bool: ...


@dataclass(frozen=True)
class Shown:
    """An identity as status, the tray and the window show it (no secrets)."""

    who: str | None = None
    issuer: str | None = None
    client_id: str | None = None
    groups: tuple[str, ...] = ()
    details: tuple[tuple[str, str], ...] = ()
    """(label, value) pairs a person recognises the identity by: tenant, account, project."""


@dataclass(frozen=True)
class Check:
    """One line of ``kubetray doctor``."""

    name: str
    ok: bool
    detail: str
    remedy: str | None = None
    warn: bool = False
    """Works, with a limit the person should know of (ok stays True: not a problem)."""


@dataclass(frozen=True)
class Converted:
    """``kubetray import``'s rewrite of one kubeconfig user's exec entry: kubetray-exec's
    arguments (``command`` becomes kubetray-exec's absolute path), keeping every flag's
    meaning. ``env`` replaces the entry's env when not None."""

    args: tuple[str, ...]
    env: tuple[dict[str, str], ...] | None = None


class LoginUI(Protocol):
    """What a login needs from the person (the broker's Login): see progress, open a browser,
    answer a prompt, see a device code."""

    def show(self, text: str) -> None: ...
    def open_browser(self, url: str) -> bool:
        """Open ``url`` where the person is; False when it did not open. Where a browser was
        tried (``browser_available``), the person has then been told why, with the URL: the
        caller does not say the URL again."""

    def prompt(self, text: str, secret: bool) -> str | None: ...
    def show_device_code(self, user_code: str, uri: str) -> None: ...

    @property
    def cancelled(self) -> threading.Event: ...

    @property
    def auth_params(self) -> dict[str, str]:
        """Parameters this login adds to the authorization request (prompt=select_account)."""

    @property
    def browser_available(self) -> bool:
        """A browser can be opened where the person is (else: device code, a pasted code)."""


class Client(Protocol):
    """One provider client for one identity's settings (heavy imports live here)."""

    def login(self, ui: LoginUI, held: TokenSet | None) -> TokenSet:
        """The person's login (browser, device code, prompt: the settings choose).
        ``held``: the tokens the identity holds now, if any (a provider that gives a refresh
        token only on consent asks for consent when there is none to keep)."""

    def fetch(self) -> TokenSet:
        """A machine identity's new token (Settings.machine): no person, no refresh token."""

    def renew(self, tokens: TokenSet) -> TokenSet:
        """New tokens from ``tokens`` (a refresh) with nobody there; the typed errors."""

    def revoke(self, tokens: TokenSet) -> Revocation:
        """Revoke at the provider where it can, and say what it answered."""

    def account_choice(self) -> dict[str, str]:
        """What a login adds so the person can pick another account ({} when the provider
        offers no choice); AppError when the provider cannot be asked."""


class Provider(Protocol):
    """One kind of login (see the module). Instances are light and stateless."""

    @property
    def kind(self) -> str: ...

    @property
    def usage(self) -> str:
        """How its command line starts, for the line that says none was recognised."""

    def recognises(self, args: Sequence[str]) -> bool:
        """Whether ``args`` are this provider's command line (cheap: the registry asks every
        provider, in order; kubetray's own flags, --stored and --oidc-*, come last)."""

    def wanted(
        self, args: Sequence[str], config: Mapping[str, Any] | None, env: Mapping[str, str]
    ) -> Wanted:
        """The request's settings: arguments, the cluster's exec extension (``config``) and
        the caller's environment (only what paths.PASSED_ENV_PREFIXES lets through).
        OptionsError (one line) when they cannot be used."""

    def from_index(self, doc: Mapping[str, Any]) -> Settings:
        """Settings as Settings.to_index wrote them (ValueError, TypeError when unusable)."""

    def client(self, settings: Settings, clock: Clock) -> Client:
        """A client for ``settings`` (made when first needed; import heavy libraries here)."""

    def token(
        self, settings: Settings, tokens: TokenSet, cluster: str | None
    ) -> "str | Token | None":
        """The token kubectl is given for ``cluster`` (its server URL). On the hot path: from
        memory, no I/O (unless the provider ``Prepares`` and said it is not ready). A ``Token``
        carries its own expiry. ``settings`` are the caller's."""

    def renewable(self, settings: Settings, tokens: TokenSet) -> bool:
        """Whether ``tokens`` can be renewed with nobody there into what kubectl is given
        (a refresh token that brings a new token; a machine identity's secret at hand)."""

    def describe(self, settings: Settings, tokens: TokenSet | None) -> Shown:
        """The identity as status shows it."""

    def note(self, settings: Settings, tokens: TokenSet | None) -> str | None:
        """A quirk the person should know of (not an error), or None."""

    def checks(self, settings: Settings, now: Clock) -> Iterator[Check]:
        """``kubetray doctor``: the provider reachable, the clock, what else it needs."""

    def convert(self, exec_: Mapping[str, Any], user: str) -> Converted | None:
        """``kubetray import``: kubetray-exec's arguments for the exec entry of the kubeconfig
        user ``user`` when it runs this provider's own tool; None when it runs another.
        OptionsError (why) when it is one but cannot be converted: it is left as it is.
        A user with an ``auth-provider`` instead of an exec comes as ``{"auth-provider":
        {...}}`` (kubectl 1.26+ runs none of them: a provider that can, converts it)."""
