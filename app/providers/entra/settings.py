"""An Entra identity's settings, from Azure kubelogin's command line: who logs in, how, where.

Light on purpose (no msal): the agent builds these for every request; msal is imported only
when an Entra identity needs tokens (app.providers.entra.client).

Each ``--login`` mode is served, or refused here in one line that says what to use:

=================  ==========================================================================
devicecode         a person: kubetray's login (device code by default), refresh-ahead, keyring
interactive        the same identity, browser login by default
ropc               username and password (MSAL's ROPC); needs nobody when both are given
spn                a service principal with a secret or a certificate; no person
workloadidentity   a federated token file (or GitHub Actions' OIDC token); no person
msi                the managed identity of the Azure machine kubetray runs on (MSAL); no person
azurecli           ``az account get-access-token``: the Azure CLI's own login
azd                ``azd auth token``: the Azure Developer CLI's own login
azurepipelines     refused: it exists only inside an Azure Pipelines job
--pop-enabled      refused: proof-of-possession tokens are for Azure Arc clusters
--legacy           refused: v1 (ADAL) tokens with an ``spn:`` audience, for clusters on the
                   retired AKS Azure AD v1 integration
=================  ==========================================================================
"""

from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar
from urllib.parse import urlsplit

from app import fingerprint
from app.providers.base import NOBODY, SCREEN
from app.providers.entra import clouds, os_broker
from app.providers.entra import options as o
from exec_helper.options import OptionsError

KIND = "entra"
AKS_SERVER = "6dae42f8-4368-4678-94ff-3960e28e3630"
"""The "Azure Kubernetes Service AAD Server" application every AKS-managed Entra cluster's
tokens are for, in every cloud."""
AKS_CLIENT = "80faf920-1908-4b52-b5ef-a8e7bedfc67a"
"""The "Azure Kubernetes Service AAD Client" public client that AKS writes as --client-id."""
PERSON_MODES = (o.DEVICECODE, o.INTERACTIVE)
TOOL_MODES = (o.AZURECLI, o.AZD)
DEFAULT_LOGIN_TIMEOUT = 180.0
"""How long a person's login may take in the browser or on the device page."""

REFUSED = {
    o.AZUREPIPELINES: (
        "--login azurepipelines works only inside an Azure Pipelines job (its "
        "SYSTEM_ACCESSTOKEN and service connection); kubetray does not do it: run Azure "
        "kubelogin in the pipeline, or use --login workloadidentity or spn"
    ),
}


@dataclass(frozen=True)
class EntraSettings:
    """Everything about one Entra identity, from the command line and the environment."""

    mode: str
    server_id: str
    authority_host: str
    """``https://login.microsoftonline.com/`` (with Azure's trailing slash)."""
    tenant_id: str | None = None
    client_id: str | None = None
    environment: str = clouds.DEFAULT_ENVIRONMENT
    cloud_name: str = "public cloud"
    redirect_url: str | None = None
    login_hint: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    client_certificate: str | None = None
    client_certificate_password: str | None = field(default=None, repr=False)
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    federated_token_file: str | None = None
    github_token_request: tuple[str, str] | None = field(default=None, repr=False)
    """(ACTIONS_ID_TOKEN_REQUEST_URL, ACTIONS_ID_TOKEN_REQUEST_TOKEN) in a GitHub Actions job:
    workloadidentity then takes GitHub's OIDC token instead of the file, as Azure kubelogin."""
    identity_resource_id: str | None = None
    subscription: str | None = None
    azure_config_dir: str | None = None
    """AZURE_CONFIG_DIR of the caller (azurecli): which Azure CLI profile is asked."""
    tool_path: str | None = None
    """The caller's PATH (azurecli, azd): where its ``az`` or ``azd`` is found."""
    instance_discovery: bool = True
    """MSAL's instance discovery: on for Microsoft's hosts (it knows their aliases), off with
    --disable-instance-discovery or for any other host (Azure Stack, ADFS, a test stand-in)."""
    timeout: float = 60.0
    """--timeout: how long one token request (or one run of az/azd) may take."""
    login_timeout: float = DEFAULT_LOGIN_TIMEOUT
    ca_files: tuple[str, ...] = ()
    broker: bool = True
    """Windows and macOS: a person's login through the OS broker (KUBETRAY_ENTRA_BROKER=0 in
    the caller's environment: the browser instead)."""
    name: str | None = None
    skip_open_browser: bool = False
    notes: tuple[str, ...] = ()
    """Things status says about these settings (an unknown --environment, say)."""
    sources: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    credential: str | None = None
    """The keyed fingerprint of the secret it logs in with (spn's secret, or certificate and
    its password; ropc's password): part of the key, so another secret is another identity
    (app.fingerprint). Remembered in the index; the secret never is."""

    kind: ClassVar[str] = KIND
    named_by_kubeconfig: ClassVar[bool] = False
    """One login serves every cluster of the tenant (AKS clusters share the server app): the
    identity is not one kubeconfig user's."""
    browser_command: ClassVar[str | None] = None

    @property
    def scope(self) -> str:
        return o.scope(self.server_id)

    @property
    def authority(self) -> str:
        """``https://login.microsoftonline.com/<tenant>``: MSAL's authority."""
        return self.authority_host + (self.tenant_id or "organizations")

    @property
    def person(self) -> bool:
        """A person logs in (devicecode, interactive): kubetray's login, refresh tokens."""
        return self.mode in PERSON_MODES

    @property
    def machine(self) -> bool:
        """No person is ever needed (ROPC needs nobody once both credentials are given)."""
        return not self.person

    @property
    def can_fetch(self) -> bool:
        """A machine identity whose credential is at hand (settings read back from the index
        carry no secret)."""
        if self.mode == o.SPN:
            return bool(self.client_secret or self.client_certificate)
        if self.mode == o.ROPC:
            return bool(self.username and self.password)
        if self.mode == o.WORKLOADIDENTITY:
            return bool(self.federated_token_file or self.github_token_request)
        return self.machine

    @property
    def login_needs(self) -> str:
        return SCREEN if self.person else NOBODY

    @property
    def group(self) -> str:
        """Who answers renewals: the tenant's token endpoint, or the tool."""
        if self.mode in (o.MSI, *TOOL_MODES):
            return f"{KIND}:{self.mode}"
        return self.authority

    @property
    def where(self) -> str:
        if self.mode in TOOL_MODES:
            return "Azure CLI" if self.mode == o.AZURECLI else "Azure Developer CLI"
        if self.mode == o.MSI:
            return "this machine's managed identity"
        return f"Microsoft Entra ID, tenant {self.tenant_id} ({self.cloud_name})"

    def to_index(self) -> dict[str, Any]:
        return self.to_dict()

    @property
    def key(self) -> str:
        """Who logs in, never how it is reached: a person's login is one identity whether
        reached by device code or browser; a machine's is its mode and credentials' owner."""
        host = self.authority_host.lower()
        tenant = (self.tenant_id or "").lower()
        client = (self.client_id or "").lower()
        parts = [KIND, host, tenant, client, self.scope]
        if self.mode == o.ROPC:
            parts.append(f"ropc:{(self.username or '').lower()}")
        elif self.mode in (o.SPN, o.WORKLOADIDENTITY):
            parts.append(self.mode)
        if self.mode in (o.ROPC, o.SPN) and self.credential:
            parts.append(f"cred:{self.credential}")
        elif self.mode == o.MSI:
            parts = [KIND, o.MSI, self.client_id or self.identity_resource_id or "", self.scope]
        elif self.mode in TOOL_MODES:
            parts = [
                KIND,
                self.mode,
                tenant,
                self.subscription or "",
                self.azure_config_dir or "",
                self.scope,
            ]
        return "|".join(parts)

    @property
    def fallback_name(self) -> str:
        """A name for an identity nobody named: ``aks@72f988bf`` (the tenant's first part),
        ``spn:<app>@<tenant>``, ``aks@azurecli``."""
        server = "aks" if self.server_id == AKS_SERVER else self.server_id
        tenant = (self.tenant_id or "default tenant").split("-")[0]
        if self.mode in (o.SPN, o.WORKLOADIDENTITY):
            return f"{self.mode}:{self.client_id}@{tenant}"
        if self.mode in (o.MSI, *TOOL_MODES):
            return f"{server}@{self.mode}"
        if self.mode == o.ROPC:
            return f"{self.username}@{tenant}"
        return f"{server}@{tenant}"

    def to_dict(self) -> dict[str, Any]:
        """What the identity index remembers: no secrets."""
        doc = asdict(self)
        for secret in ("client_secret", "client_certificate_password", "password"):
            doc.pop(secret, None)
        doc.pop("github_token_request", None)
        doc.pop("tool_path", None)
        return doc

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> "EntraSettings":
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {
            k: tuple(tuple(x) if isinstance(x, list) else x for x in v)
            if isinstance(v, list)
            else v
            for k, v in doc.items()
            if k in known
        }
        return cls(**values)


MICROSOFT_HOSTS = frozenset(
    {
        "login.microsoftonline.com",
        "login.microsoft.com",
        "login.windows.net",
        "sts.windows.net",
        "login.microsoftonline.us",
        "login.usgovcloudapi.net",
        "login-us.microsoftonline.com",
        "login.chinacloudapi.cn",
        "login.partner.microsoftonline.cn",
    }
)
"""Entra's own login hosts (msal.authority's well-known hosts, sovereign clouds included)."""


def _need(value: str | None, what: str) -> str:
    if not value:
        raise OptionsError(f"{what} cannot be empty")
    return value


def from_args(args: o.AzureArgs, env: dict[str, str] | None = None) -> EntraSettings:
    """Settings for an Azure kubelogin command line, or OptionsError with one line saying
    what is wrong (Azure kubelogin's words) or what to use instead (a refused mode)."""
    env = env or {}
    if args.login in REFUSED:
        raise OptionsError(REFUSED[args.login])
    if args.pop_enabled:
        raise OptionsError(
            "--pop-enabled asks for proof-of-possession tokens, which Azure Arc-enabled "
            "clusters take; kubetray serves bearer tokens (what AKS takes): for an Arc cluster "
            "keep Azure kubelogin, for AKS remove --pop-enabled and --pop-claims"
        )
    if args.legacy and args.login in (o.DEVICECODE, o.SPN):
        raise OptionsError(
            "--legacy asks for Azure AD v1 tokens with an 'spn:' audience, which only clusters "
            "on the retired AKS Azure AD v1 integration take; kubetray gets v2 tokens: remove "
            "--legacy (and migrate the cluster to AKS-managed Entra ID), or keep Azure "
            "kubelogin for it"
        )
    where = clouds.cloud(args.environment, args.authority_host)
    server_id = args.server_id or ""
    mode = args.login
    if mode in (o.DEVICECODE, o.INTERACTIVE, o.ROPC, o.SPN, o.WORKLOADIDENTITY):
        _need(args.client_id, "client ID")
        _need(args.tenant_id, "tenant ID")
    federated = args.federated_token_file
    github = None
    if mode == o.ROPC:
        _need(args.username, "username")
        _need(args.password, "password")
    if mode == o.SPN and not args.client_certificate:
        _need(args.client_secret, "client secret")
    if mode == o.WORKLOADIDENTITY:
        url, token = (
            env.get("ACTIONS_ID_TOKEN_REQUEST_URL"),
            env.get("ACTIONS_ID_TOKEN_REQUEST_TOKEN"),
        )
        if url and token:
            github = (url, token)
        else:
            _need(federated, "federated token file")
    if mode == o.INTERACTIVE and args.redirect_url:
        parts = urlsplit(args.redirect_url)
        if parts.scheme != "http" or parts.hostname not in ("localhost", "127.0.0.1"):
            raise OptionsError(
                f"--redirect-url {args.redirect_url} is not a loopback http URL "
                "(http://localhost:PORT): kubetray receives the login there itself"
            )
    host = urlsplit(where.host).hostname or ""
    credential = None
    if mode == o.SPN:
        credential = fingerprint.of(
            "spn",
            args.client_secret or None,
            args.client_certificate or None,
            args.client_certificate_password or None,
        )
    elif mode == o.ROPC:
        credential = fingerprint.of("ropc", args.password)
    return EntraSettings(
        mode=mode,
        server_id=server_id,
        authority_host=where.host,
        tenant_id=args.tenant_id or None,
        client_id=args.client_id or None,
        environment=args.environment,
        cloud_name=where.name,
        redirect_url=args.redirect_url,
        login_hint=args.login_hint,
        client_secret=args.client_secret or None,
        client_certificate=args.client_certificate or None,
        client_certificate_password=args.client_certificate_password or None,
        username=args.username or None,
        password=args.password or None,
        federated_token_file=federated or None,
        github_token_request=github,
        identity_resource_id=args.identity_resource_id or None,
        subscription=args.subscription or None,
        azure_config_dir=env.get("AZURE_CONFIG_DIR") or None,
        tool_path=env.get("PATH") if mode in TOOL_MODES else None,
        instance_discovery=not args.disable_instance_discovery and host in MICROSOFT_HOSTS,
        timeout=args.timeout,
        ca_files=args.certificate_authority,
        broker=os_broker.wanted(env),
        name=args.name,
        skip_open_browser=args.skip_open_browser,
        notes=tuple(n for n in (where.note,) if n),
        sources=args.sources,
        credential=credential,
    )


def parse(args: list[str], env: dict[str, str]) -> EntraSettings:
    """An Azure kubelogin command line and the caller's environment → settings."""
    return from_args(o.parse(args, env), env)
