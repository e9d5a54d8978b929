"""OpenID Connect (int128/kubelogin's flags) as a provider, on kubetray's OIDC engine (app.oidc).

The engine stays in app/oidc (discovery, the grants, refresh, revocation, id_token checks):
this package only adapts it to the provider interface. Other providers built on the same
engine (Google's) use app.oidc the same way, with settings of their own.
"""

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from app.errors import AppError
from app.model import OIDC
from app.oidc.settings import OIDCSettings
from app.providers.base import Check, Clock, Converted, Shown, TokenSet, Wanted
from exec_helper import options
from exec_helper.options import HelperOptions

if TYPE_CHECKING:
    from app.oidc.client import OIDCClient
    from app.providers.oidc.login import OIDCLogin

Engine = Callable[[OIDCSettings, Callable[[], datetime]], "OIDCClient"]
"""Makes the engine's client for settings (tests give a fake provider's)."""


class OIDCProvider:
    """kubetray-exec's ``--oidc-*`` flags: int128/kubelogin's get-token command line."""

    kind = OIDC
    usage = "--oidc-issuer-url and --oidc-client-id"

    def __init__(self, engine: Engine | None = None) -> None:
        self._engine = engine

    def recognises(self, args: Sequence[str]) -> bool:
        return False  # kubetray's own flags: the registry reads them once for stored and OIDC

    def from_options(self, opts: HelperOptions) -> Wanted | None:
        if not (opts.oidc_issuer_url and opts.oidc_client_id):
            return None
        return Wanted(
            OIDCSettings.from_options(opts),
            opts.name,
            opts.force_refresh,
            opts.no_login,
            local_paths=_local_paths(opts),
        )

    def wanted(
        self, args: Sequence[str], config: Mapping[str, Any] | None, env: Mapping[str, str]
    ) -> Wanted:
        found = self.from_options(options.resolve(list(args), dict(config or {}), dict(env)))
        if found is None:
            raise options.OptionsError("--oidc-issuer-url and --oidc-client-id are required")
        return found

    def from_index(self, doc: Mapping[str, Any]) -> OIDCSettings:
        return OIDCSettings.from_dict(dict(doc))

    def client(self, settings: Any, clock: Clock) -> "OIDCLogin":
        from app.providers.oidc.login import OIDCLogin

        if self._engine is not None:
            return OIDCLogin(settings, self._engine(settings, clock))
        from app.oidc.client import OIDCClient  # requests + authlib: only once used

        return OIDCLogin(settings, OIDCClient(settings, clock))

    def token(self, settings: Any, tokens: TokenSet, cluster: str | None) -> str | None:
        return tokens.access_token if settings.use_access_token else tokens.id_token

    def renewable(self, settings: Any, tokens: TokenSet) -> bool:
        if settings.machine:
            return bool(settings.can_fetch)
        return bool(tokens.refresh_token) and refresh_helps(tokens, settings)

    def describe(self, settings: Any, tokens: TokenSet | None) -> Shown:
        groups = tokens.claims.get("groups") if tokens else None
        return Shown(
            who=tokens.who() if tokens else None,
            issuer=settings.issuer,
            client_id=settings.client_id,
            groups=tuple(str(g) for g in groups) if isinstance(groups, list) else (),
        )

    def note(self, settings: Any, tokens: TokenSet | None) -> str | None:
        return no_id_token_note(tokens, settings)

    def checks(self, settings: Any, now: Clock) -> Iterator[Check]:
        return check_provider(settings, now)

    def convert(self, exec_: Mapping[str, Any], user: str) -> Converted | None:
        flags = kubelogin_flags(exec_)
        if flags is None:
            return None
        options.parse_args(flags)  # OptionsError: left as it is, and why
        named = any(a == "--name" or a.startswith("--name=") for a in flags)
        # The identity's name in the args: it must not depend on which client calls first.
        return Converted(("get-token", *flags, *([] if named else [f"--name={user}"])))


def kubelogin_flags(exec_: Any) -> list[str] | None:
    """The get-token flags of an int128/kubelogin exec entry; None for anything else.

    Recognised: ``kubectl oidc-login get-token ...``, ``kubelogin get-token ...`` and
    ``kubectl-oidc_login get-token ...`` with an ``--oidc-issuer-url`` (Azure's kubelogin also
    has a ``get-token``, but no such flag).
    """
    if not isinstance(exec_, Mapping) or not isinstance(exec_.get("command"), str):
        return None
    args = exec_.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        return None
    program = os.path.basename(exec_["command"].replace("\\", "/")).lower()
    program = program.removesuffix(".exe")
    if program == "kubectl" and args[:2] == ["oidc-login", "get-token"]:
        flags = args[2:]
    elif program in ("kubelogin", "kubectl-oidc_login") and args[:1] == ["get-token"]:
        flags = args[1:]
    else:
        return None
    named = any(a == "--oidc-issuer-url" or a.startswith("--oidc-issuer-url=") for a in flags)
    return flags if named else None


DESKTOP_ONLY = ("browser_command", "certificate_authority", "local_server_cert", "local_server_key")
"""Flags that name programs or files: from a remote host they would name the desktop's."""


def _local_paths(opts: HelperOptions) -> tuple[str, ...]:
    return tuple(f"--{f.replace('_', '-')}" for f in DESKTOP_ONLY if getattr(opts, f))


def refresh_helps(tokens: TokenSet, settings: OIDCSettings) -> bool:
    """Whether a refresh can renew what kubectl is given: not the id_token of a provider that
    sends none on refresh (then only a login or --oidc-use-access-token does)."""
    return settings.use_access_token or not tokens.no_id_token_on_refresh


def no_id_token_note(tokens: TokenSet | None, settings: OIDCSettings | None) -> str | None:
    """What to tell the user about a provider that sends no id_token on refresh, or None."""
    if tokens is None or settings is None or refresh_helps(tokens, settings):
        return None
    return (
        "the provider sends no id_token on refresh, so each id_token lifetime needs a login; "
        "add --oidc-use-access-token if the API server accepts the provider's access tokens"
    )


def check_provider(settings: OIDCSettings, now: Clock, label: str = "provider") -> Iterator[Check]:
    """The provider's discovery and capabilities, and the clock against its Date header."""
    from app.oidc.client import CLOCK_SKEW, OIDCClient

    name = f"{label} {settings.issuer}"
    yield from _check_transport(name, settings)
    client = OIDCClient(settings, now)
    try:
        meta = client.metadata()
        server = client.server_time()
    except AppError as e:
        yield Check(
            name,
            False,
            e.message,
            e.hint or "check the issuer URL, the network, the proxy and the CA settings",
        )
        return
    has = meta.capabilities(has_secret=bool(settings.client_secret))
    found = ", ".join(str(c) for c in has)
    if has[0].state == "no":
        yield Check(name, False, found, "the provider must offer PKCE S256 for browser logins")
    else:
        yield Check(name, True, found)
    yield from check_clock(settings.issuer, server, now, CLOCK_SKEW)


LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")


def _check_transport(name: str, settings: OIDCSettings) -> Iterator[Check]:
    """A warning where the login's secrets cross the network without verified TLS: kubetray
    takes such settings, as int128/kubelogin does (a kubeconfig keeps working), but the person
    should know."""
    parts = urlsplit(settings.issuer)
    host = (parts.hostname or "").lower()
    if parts.scheme == "http" and host not in LOOPBACK_HOSTS and not host.startswith("127."):
        yield Check(
            name,
            True,
            "plain http: codes, passwords and tokens cross the network unencrypted",
            "use the provider's https URL (a private CA: --certificate-authority)",
            warn=True,
        )
    elif settings.insecure:
        yield Check(
            name,
            True,
            "--insecure-skip-tls-verify: the provider's certificate is not checked, so anyone "
            "on the path can pose as it",
            "give its CA with --certificate-authority instead",
            warn=True,
        )


def check_clock(
    where: str, server: datetime | None, now: Clock, tolerated: float
) -> Iterator[Check]:
    """This machine's clock against a server's Date header."""
    if server is None:
        yield Check(f"clock vs {where}", True, "the provider sends no Date header")
        return
    skew = (now() - server).total_seconds()
    line = f"{abs(skew):.0f} s {'ahead of' if skew > 0 else 'behind'} the provider"
    if abs(skew) > tolerated:
        yield Check(
            f"clock vs {where}",
            False,
            f"this machine's clock is {line}: its tokens will look expired or not yet valid",
            "turn on time synchronisation (e.g. timedatectl set-ntp true)",
        )
    else:
        yield Check(f"clock vs {where}", True, f"within {tolerated:.0f} s ({line})")
