"""What kubetray knows about a provider before talking to it, and what discovery tells it.

Kept apart from the client so that importing these types costs nothing (the client pulls in
requests and authlib, ~15 MB, loaded only once an OIDC identity is used).
"""

import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar
from urllib.parse import urlsplit

from app import fingerprint, identity
from exec_helper.options import GRANT_TYPES, HelperOptions, OptionsError

DEFAULT_TIMEOUT = 180.0
KUBELOGIN_LISTEN = ("127.0.0.1:8000", "127.0.0.1:18000")
"""int128/kubelogin's default listen addresses, with redirect URI ``http://localhost:8000``:
what its setup guide tells admins to register, so a kubelogin kubeconfig works unchanged."""
CLIENT_CREDENTIALS = "client-credentials"
"""The grant of a machine identity: the client's own token, no person, no refresh token."""
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""An HTTP field name (RFC 9110 §5.1: a token)."""


@dataclass(frozen=True)
class OIDCSettings:
    """Everything about talking to one provider, from kubetray-exec's flags (the OIDC
    provider's Settings, app.providers.base; other providers built on this engine, such as
    Google's, hold one of these for it)."""

    kind: ClassVar[str] = "oidc"
    SECRETS: ClassVar[tuple[str, ...]] = ("client_secret", "password", "request_headers")
    """Never in the index (request headers' values may be keys too)."""

    issuer: str
    client_id: str
    client_secret: str | None = field(default=None, repr=False)
    scopes: tuple[str, ...] = ()
    extra_params: tuple[tuple[str, str], ...] = ()
    use_access_token: bool = False
    grant_type: str = "auto"
    listen_addresses: tuple[str, ...] = ()
    redirect_hostname: str | None = None
    redirect_url: str | None = None
    """The exact redirect URI registered at the provider (kubelogin's --oidc-redirect-url)."""
    local_server_cert: str | None = None
    local_server_key: str | None = None
    redirect_url_keyboard: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_files: tuple[str, ...] = ()
    ca_data: tuple[str, ...] = ()
    insecure: bool = False
    browser_command: str | None = None
    skip_open_browser: bool = False
    timeout: float = DEFAULT_TIMEOUT
    success_url: str | None = None
    request_headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    """Sent with every request to the provider (--oidc-request-header); values may be keys."""
    credential: str | None = None
    """The keyed fingerprint of the secret that obtains its tokens with nobody there (client
    credentials' client secret; a password grant is a person's login, whose later calls carry
    no password, as an authorization code's): part of the key, so another
    secret is another identity (app.fingerprint). Remembered; the secret never is."""

    @property
    def machine(self) -> bool:
        """A machine identity (client credentials): its tokens never need a person."""
        return self.grant_type == CLIENT_CREDENTIALS

    @property
    def can_fetch(self) -> bool:
        """A machine identity whose client secret these settings carry (remembered settings
        carry none)."""
        return self.machine and bool(self.client_secret)

    @property
    def login_needs(self) -> str:
        """Who a login needs: nobody (a password grant with both given), a terminal (a
        password or a pasted code to type), else a screen (a browser, a device code)."""
        if self.grant_type == "password" and self.username and self.password:
            return "nobody"
        if self.grant_type in ("password", "authcode-keyboard"):
            return "terminal"
        return "screen"

    @property
    def named_by_kubeconfig(self) -> bool:
        return True

    @property
    def group(self) -> str:
        """Refresh ahead spreads renewals per issuer."""
        return self.issuer

    @property
    def where(self) -> str:
        return self.issuer

    @property
    def host(self) -> str:
        return urlsplit(self.issuer).netloc or self.issuer

    def to_index(self) -> dict[str, Any]:
        """What identities.json remembers: every field but the secrets."""
        doc = asdict(self)
        for secret in self.SECRETS:
            doc.pop(secret)
        return doc

    @property
    def key(self) -> str:
        """The identity these settings log in as (see app.identity)."""
        return identity.oidc_key(
            self.issuer,
            self.client_id,
            self.scopes,
            self.extra_params,
            self.username,
            machine=self.machine,
        ) + (f"|cred:{self.credential}" if self.credential else "")

    @property
    def fallback_name(self) -> str:
        """``user@issuer-host``: the name of an identity nobody named."""
        return identity.fallback_name(self.issuer, self.client_id, self.username)

    @classmethod
    def from_options(cls, opts: HelperOptions) -> "OIDCSettings":
        assert opts.oidc_issuer_url and opts.oidc_client_id
        if bool(opts.local_server_cert) != bool(opts.local_server_key):
            raise OptionsError("--local-server-cert and --local-server-key go together")
        grant = opts.grant_type or ("password" if opts.username else "auto")
        if grant == "token-exchange":
            raise OptionsError(
                "kubetray does not do kubelogin's token-exchange grant: use another --grant-type ("
                + "|".join(GRANT_TYPES[1:])
                + ")"
            )
        if grant not in GRANT_TYPES:
            raise OptionsError(
                f"--grant-type must be one of {'|'.join(GRANT_TYPES)}, not {grant!r}"
            )
        if grant == CLIENT_CREDENTIALS and not opts.oidc_client_secret:
            raise OptionsError(
                "--grant-type=client-credentials needs --oidc-client-secret: the client "
                "authenticates as itself (RFC 6749 §4.4: confidential clients only)"
            )
        credential = None
        if grant == CLIENT_CREDENTIALS:
            credential = fingerprint.of("client-credentials", opts.oidc_client_secret)
        return cls(
            credential=credential,
            issuer=identity.normalize_issuer(opts.oidc_issuer_url),
            client_id=opts.oidc_client_id,
            client_secret=opts.oidc_client_secret,
            scopes=identity.scopes(opts),
            extra_params=identity.auth_params(opts),
            use_access_token=opts.oidc_use_access_token,
            grant_type=grant,
            listen_addresses=_listen_ports(opts.listen_port)
            or opts.listen_address
            or (() if opts.oidc_redirect_url else KUBELOGIN_LISTEN),
            redirect_hostname=opts.oidc_redirect_url_hostname or "localhost",
            redirect_url=opts.oidc_redirect_url,
            local_server_cert=opts.local_server_cert,
            local_server_key=opts.local_server_key,
            redirect_url_keyboard=opts.oidc_redirect_url_authcode_keyboard,
            username=opts.username,
            password=opts.password,
            **common_options(opts),
        )

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> "OIDCSettings":
        """Settings as remembered in JSON (lists back to tuples)."""
        values: dict[str, Any] = {
            key: tuple(value) if isinstance(value, list) else value for key, value in doc.items()
        }
        for pairs in ("extra_params", "request_headers"):
            values[pairs] = tuple(tuple(pair) for pair in values.get(pairs, ()))
        values["issuer"] = identity.normalize_issuer(str(values.get("issuer", "")))
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})


def _listen_ports(ports: tuple[str, ...]) -> tuple[str, ...]:
    """kubelogin's deprecated --listen-port: it wins over --listen-address, as there."""
    out = []
    for port in ports:
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise OptionsError(f"--listen-port takes a port number, not {port!r}")
        out.append(f"127.0.0.1:{int(port)}")
    return tuple(out)


def common_options(opts: HelperOptions) -> dict[str, Any]:
    """What every login through this engine (kubelogin's flags, Google's) reads alike from
    kubetray-exec's options: TLS toward the provider, the browser, the login's time limit, the
    page after it, and extra request headers (refused in one line when not HTTP headers)."""
    return {
        "ca_files": opts.certificate_authority,
        "ca_data": opts.certificate_authority_data,
        "insecure": opts.insecure_skip_tls_verify,
        "browser_command": opts.browser_command,
        "skip_open_browser": opts.skip_open_browser,
        "timeout": float(opts.authentication_timeout_sec or DEFAULT_TIMEOUT),
        "success_url": opts.open_url_after_authentication,
        "request_headers": _headers(opts.oidc_request_header),
    }


def _headers(pairs: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """--oidc-request-header as given, refused when it would not be one HTTP header. The
    value is never repeated in a message: it may be a key."""
    for name, value in pairs:
        if not _HEADER_NAME.fullmatch(name):
            raise OptionsError(f"--oidc-request-header: {name!r} is not an HTTP header name")
        if any((ord(c) < 32 and c != "\t") or ord(c) == 127 for c in value):
            raise OptionsError(
                f"--oidc-request-header {name}: the value holds a line break or another "
                "control character"
            )
    return pairs


@dataclass(frozen=True)
class Metadata:
    """The parts of the discovery document kubetray uses."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    device_authorization_endpoint: str | None
    revocation_endpoint: str | None
    end_session_endpoint: str | None
    grant_types_supported: tuple[str, ...]
    code_challenge_methods_supported: tuple[str, ...]
    id_token_signing_alg_values_supported: tuple[str, ...]
    scopes_supported: tuple[str, ...] = ()
    prompt_values_supported: tuple[str, ...] = ()
    revocation_endpoint_auth_methods_supported: tuple[str, ...] = ()

    def capabilities(self, has_secret: bool = False) -> list["Capability"]:
        """What kubetray can use at this provider, as doctor and Add cluster report it.

        Discovery is often incomplete, so what it leaves out is "unknown", never "no".
        """
        revocation = "no"
        detail = ""
        if self.revocation_endpoint:
            methods = self.revocation_endpoint_auth_methods_supported
            if has_secret or not methods or "none" in methods:
                revocation = "yes"  # unlisted methods: public clients may revoke (RFC 7009 §2.1)
            else:
                detail = "it requires client authentication, and this client has no secret"
        if "offline_access" in self.scopes_supported or (
            "refresh_token" in self.grant_types_supported
        ):
            refresh = "yes"
        else:
            refresh = "unknown"
        return [
            Capability("PKCE (S256)", _listed("S256", self.code_challenge_methods_supported)),
            Capability("device code login", "yes" if self.device_authorization_endpoint else "no"),
            Capability("refresh tokens", refresh),
            Capability("logout at the provider", "yes" if self.end_session_endpoint else "no"),
            Capability("token revocation", revocation, detail),
        ]


@dataclass(frozen=True)
class Capability:
    """One thing a provider offers: ``state`` is "yes", "no" or "unknown" (not in discovery)."""

    name: str
    state: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.name} {self.state}" + (f" ({self.detail})" if self.detail else "")


def _listed(value: str, listed: tuple[str, ...]) -> str:
    if value in listed:
        return "yes"
    return "no" if listed else "unknown"
