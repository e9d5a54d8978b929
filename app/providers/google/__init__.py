"""Google (GKE) as a provider: kubetray-exec where ``gke-gcloud-auth-plugin`` was named.

A kubeconfig user written by ``gcloud container clusters get-credentials`` runs
``gke-gcloud-auth-plugin`` with no arguments (or ``--use_application_default_credentials``).
``kubetray import`` rewrites it to run kubetray-exec with the plugin's name as its first
argument and the plugin's flags after it (``kubetray-exec gke-gcloud-auth-plugin
[--use_application_default_credentials]``); flags that are only the plugin's
(``--use_application_default_credentials``, ``--impersonate_service_account``) are recognised
without the name too. kubetray-exec with no arguments at all still says it was not told which
credential to serve: no arguments is also every other plugin's empty command line.

Two ways to a Google access token (what GKE accepts: an OAuth access token with
``userinfo.email``; the username is the email):

* **kubetray's own login** (no flag): Google's installed-app flow on kubetray's OIDC engine:
  the browser, PKCE, a loopback redirect on any port, ``access_type=offline``, the client
  secret a desktop client has (not secret), and ``prompt=consent`` when the identity holds no
  refresh token (Google gives one only on a first consent or with it). Scopes ``openid``,
  ``userinfo.email`` and ``cloud-platform``. The OAuth client is gcloud's application-default
  client unless ``--oidc-client-id`` / ``--oidc-client-secret`` (or KUBETRAY_OIDC_CLIENT_ID /
  _SECRET) name another: see docs/providers.md for why.
* **gcloud's application-default login** (``--use_application_default_credentials``): taken
  over into the keyring the first time it is needed (app.providers.google.adc).

``--account`` (or the caller's CLOUDSDK_CORE_ACCOUNT) is the Google account to log in as (a
login hint, and checked after the login); ``--project`` is shown in status. Refused in one
line: ``--impersonate_service_account``, ``--use_edge_cloud``, and CLOUDSDK_AUTH_ACCESS_TOKEN
(the plugin serves that variable's token as it is; kubetray logs in itself).
"""

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

from app.identity import normalize_issuer
from app.oidc.settings import OIDCSettings, common_options
from app.providers.base import NOBODY, SCREEN, Check, Clock, Converted, Shown, TokenSet, Wanted
from app.providers.google import adc
from exec_helper import options
from exec_helper.options import HelperOptions, OptionsError

if TYPE_CHECKING:
    from app.providers.google.login import GoogleLogin

KIND = "google"
PLUGIN = "gke-gcloud-auth-plugin"
ISSUER = "https://accounts.google.com"
GCLOUD_ADC_CLIENT = (
    "764086051850-6qr4p6gpi6hn506pt8ejuq83di341hur.apps.googleusercontent.com",
    "d-FL95Q19q7MQmFpd7hHD0Ty",
)
"""gcloud's application-default client (``gcloud auth application-default login``): a Google
"Desktop app" client whose secret Google publishes in gcloud and google-auth (not a secret)."""
KEYBOARD_REDIRECT = "https://sdk.cloud.google.com/applicationdefaultauthcode.html"
"""Where Google shows that client's code for pasting (gcloud's --no-browser login)."""
SCOPES = (
    "openid",
    "https://www.googleapis.com/auth/userinfo.email",
    "https://www.googleapis.com/auth/cloud-platform",
)
GRANTS = ("auto", "authcode", "authcode-keyboard")
PLUGIN_BOOL = ("use_application_default_credentials", "use_edge_cloud")
PLUGIN_STR = ("account", "project", "impersonate_service_account", "location", "cluster")
PLUGIN_ONLY = ("--use_application_default_credentials", "--impersonate_service_account")
"""Flags no other command line has: recognised without the plugin's name before them."""
REFUSED_KUBETRAY = {
    "stored": "--stored names a stored credential, not a Google login",
    "username": "Google has no password login: drop --username",
    "password": "Google has no password login: drop --password",
    "audience": "Google access tokens have no audience to ask for: drop --audience",
}


@dataclass(frozen=True)
class GoogleSettings:
    """A Google identity: kubetray's own login (``adc`` None) or gcloud's application-default
    login taken over from the ADC file ``adc``."""

    kind: ClassVar[str] = KIND
    engine: OIDCSettings
    """How the OIDC engine reaches Google: issuer, the OAuth client, scopes, CAs, browser."""
    adc: str | None = None
    account: str | None = None
    project: str | None = None

    @property
    def key(self) -> str:
        if self.adc:
            return f"{KIND}|adc|{self.adc}"
        e = self.engine
        scopes = ",".join(sorted(e.scopes))
        return "|".join([KIND, e.issuer, e.client_id, scopes, self.account or ""])

    @property
    def fallback_name(self) -> str:
        if self.adc:
            return "google-adc"
        return self.account or "google"

    named_by_kubeconfig: ClassVar[bool] = False
    """One Google account serves every GKE cluster: named after it, not a cluster's user."""
    machine: ClassVar[bool] = False
    can_fetch: ClassVar[bool] = False

    @property
    def login_needs(self) -> str:
        return NOBODY if self.adc else SCREEN

    @property
    def browser_command(self) -> str | None:
        return self.engine.browser_command

    @property
    def group(self) -> str:
        return self.engine.issuer

    @property
    def where(self) -> str:
        if self.adc:
            return f"gcloud's application default credentials, {self.adc}"
        return "Google" if self.engine.issuer == ISSUER else self.engine.issuer

    @property
    def ca_files(self) -> tuple[str, ...]:
        return self.engine.ca_files

    @property
    def default_client(self) -> bool:
        return self.engine.client_id == GCLOUD_ADC_CLIENT[0]

    def to_index(self) -> dict[str, Any]:
        return {
            "engine": self.engine.to_index(),
            "adc": self.adc,
            "account": self.account,
            "project": self.project,
        }


class GoogleProvider:
    """gke-gcloud-auth-plugin's command line, served by kubetray's Google login."""

    kind = KIND
    usage = f"{PLUGIN} [its flags] (a GKE user: kubetray import writes it)"

    def __init__(self, engine: Any = None) -> None:
        self._engine = engine

    def recognises(self, args: Sequence[str]) -> bool:
        if args and args[0] == PLUGIN:
            return True
        return any(a.split("=", 1)[0] in PLUGIN_ONLY for a in args)

    def wanted(
        self, args: Sequence[str], config: Mapping[str, Any] | None, env: Mapping[str, str]
    ) -> Wanted:
        plugin, rest = _plugin_flags(list(args))
        if env.get("CLOUDSDK_AUTH_ACCESS_TOKEN"):
            raise OptionsError(
                "CLOUDSDK_AUTH_ACCESS_TOKEN is set: gke-gcloud-auth-plugin would send that token "
                "as it is; kubetray logs in to Google itself. Unset it (or keep the plugin for "
                "this cluster)"
            )
        if plugin.get("impersonate_service_account"):
            raise OptionsError(
                "kubetray does not impersonate service accounts "
                "(--impersonate_service_account): keep gke-gcloud-auth-plugin for this cluster"
            )
        if plugin.get("use_edge_cloud"):
            raise OptionsError(
                "kubetray does not serve Distributed Cloud Edge clusters (--use_edge_cloud): "
                "keep gke-gcloud-auth-plugin for this cluster"
            )
        opts = options.resolve(rest, dict(config or {}), dict(env))
        return self.from_options(opts, plugin, env)

    def from_options(
        self, opts: HelperOptions, plugin: Mapping[str, Any], env: Mapping[str, str]
    ) -> Wanted:
        for field_name, why in REFUSED_KUBETRAY.items():
            if getattr(opts, field_name):
                raise OptionsError(why)
        grant = opts.grant_type or "auto"
        if grant not in GRANTS:
            raise OptionsError(
                f"a Google login is a browser login (--grant-type {'|'.join(GRANTS)}), not {grant}"
            )
        client_id = opts.oidc_client_id or GCLOUD_ADC_CLIENT[0]
        secret = opts.oidc_client_secret
        if secret is None and client_id == GCLOUD_ADC_CLIENT[0]:
            secret = GCLOUD_ADC_CLIENT[1]
        if not secret:
            raise OptionsError(
                f"Google needs the client secret of the OAuth client {client_id} (a desktop "
                "client's is not secret): give --oidc-client-secret with --oidc-client-id"
            )
        account = plugin.get("account") or env.get("CLOUDSDK_CORE_ACCOUNT") or None
        params = dict(opts.oidc_auth_request_extra_params)
        params["access_type"] = "offline"
        if account:
            params.setdefault("login_hint", account)
        engine = OIDCSettings(
            issuer=normalize_issuer(opts.oidc_issuer_url or ISSUER),
            client_id=client_id,
            client_secret=secret,
            scopes=tuple(dict.fromkeys((*SCOPES, *opts.oidc_extra_scope))),
            extra_params=tuple(params.items()),
            use_access_token=True,
            grant_type=grant,
            listen_addresses=opts.listen_address,  # none: 127.0.0.1 on any port (RFC 8252)
            redirect_hostname=opts.oidc_redirect_url_hostname or "127.0.0.1",
            redirect_url=opts.oidc_redirect_url,
            redirect_url_keyboard=opts.oidc_redirect_url_authcode_keyboard
            or (KEYBOARD_REDIRECT if client_id == GCLOUD_ADC_CLIENT[0] else None),
            **common_options(opts),
        )
        use_adc = bool(plugin.get("use_application_default_credentials"))
        local = []
        if opts.browser_command:
            local.append("--browser-command")
        if opts.certificate_authority:
            local.append("--certificate-authority")
        if use_adc and env.get("GOOGLE_APPLICATION_CREDENTIALS"):
            local.append("GOOGLE_APPLICATION_CREDENTIALS")
        settings = GoogleSettings(
            engine=engine,
            adc=adc.path(env) if use_adc else None,
            account=account,
            project=plugin.get("project") or None,
        )
        return Wanted(settings, opts.name, opts.force_refresh, opts.no_login, tuple(local))

    def from_index(self, doc: Mapping[str, Any]) -> GoogleSettings:
        engine = OIDCSettings.from_dict(dict(doc["engine"]))
        if engine.client_id == GCLOUD_ADC_CLIENT[0]:  # its secret is public: kept in the code
            engine = replace(engine, client_secret=GCLOUD_ADC_CLIENT[1])
        return GoogleSettings(
            engine=engine,
            adc=_optional(doc.get("adc")),
            account=_optional(doc.get("account")),
            project=_optional(doc.get("project")),
        )

    def client(self, settings: Any, clock: Clock) -> "GoogleLogin":
        from app.providers.google.login import GoogleLogin

        return GoogleLogin(settings, clock, self._engine)

    def token(self, settings: Any, tokens: TokenSet, cluster: str | None) -> str | None:
        return tokens.access_token

    def renewable(self, settings: Any, tokens: TokenSet) -> bool:
        return bool(tokens.refresh_token)

    def describe(self, settings: Any, tokens: TokenSet | None) -> Shown:
        who = tokens.who() if tokens else None
        details: list[tuple[str, str]] = []
        if tokens and who and who != "?":
            details.append(("account", who))
        elif settings.account:
            details.append(("account", settings.account))
        if settings.project:
            details.append(("project", settings.project))
        if settings.adc:
            details.append(("from", "gcloud application-default login"))
        return Shown(
            who=who,
            issuer=settings.engine.issuer,
            client_id=settings.engine.client_id,
            details=tuple(details),
        )

    def note(self, settings: Any, tokens: TokenSet | None) -> str | None:
        return None

    def checks(self, settings: Any, now: Clock) -> Iterator[Check]:
        from app.providers.oidc import check_provider

        yield from check_provider(settings.engine, now, label="Google")
        if settings.adc:
            try:
                found = adc.read(settings.adc)
            except Exception as e:  # LoginError: its message says what to do
                yield Check(
                    f"Google application default credentials {settings.adc}",
                    False,
                    getattr(e, "message", str(e)),
                    getattr(e, "hint", None),
                )
            else:
                yield Check(
                    f"Google application default credentials {settings.adc}",
                    True,
                    f"a person's login (client {found.client_id}); kubetray keeps its own copy "
                    "in the keyring and refreshes it, gcloud's file stays as it is",
                )
        elif settings.default_client:
            yield Check(
                "Google OAuth client",
                True,
                "gcloud's application-default client (Google may restrict its use by others; "
                "--oidc-client-id/--oidc-client-secret name your own desktop client)",
                warn=False,
            )

    def convert(self, exec_: Mapping[str, Any], user: str) -> Converted | None:
        command = exec_.get("command")
        if not isinstance(command, str):
            return None
        program = os.path.basename(command.replace("\\", "/")).lower().removesuffix(".exe")
        if program != PLUGIN:
            return None
        args = exec_.get("args") or []
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise OptionsError("its args are not a list of strings")
        self.wanted([PLUGIN, *args], None, {})  # OptionsError: left as it is, and why
        return Converted((PLUGIN, *args))


def _optional(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _plugin_flags(args: list[str]) -> tuple[dict[str, Any], list[str]]:
    """gke-gcloud-auth-plugin's own flags (pflag: ``--f=v``, ``--f v``, ``--b``,
    ``--b=false``), and the rest (kubetray's flags, klog's)."""
    if args[:1] == [PLUGIN]:
        args = args[1:]
    plugin: dict[str, Any] = {}
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg[2:].partition("=") if arg.startswith("--") else ("", "", "")
        if name in PLUGIN_BOOL:
            if eq and value.lower() not in ("true", "false", "1", "0", "t", "f"):
                raise OptionsError(f"--{name} takes true or false, not {value!r}")
            plugin[name] = (value.lower() in ("true", "1", "t")) if eq else True
        elif name in PLUGIN_STR:
            if not eq:
                if i + 1 >= len(args):
                    raise OptionsError(f"--{name} needs a value")
                i += 1
                value = args[i]
            plugin[name] = value
        else:
            rest.append(arg)
        i += 1
    return plugin, rest
