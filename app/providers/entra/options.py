"""Azure kubelogin's ``get-token`` command line, read as Azure kubelogin reads it.

What ``az aks get-credentials`` and ``kubelogin convert-kubeconfig`` write is
``kubelogin get-token --login MODE --server-id ID ...``: a kubeconfig that names kubetray-exec
instead of ``kubelogin`` runs unchanged. The rules follow Azure/kubelogin's
``pkg/internal/token/options.go`` (v0.2.x):

* pflag syntax: ``--flag value``, ``--flag=value``, ``-l value``, ``-lvalue``, ``-l=value``;
  booleans as ``--legacy`` or ``--legacy=true``; the last of a repeated flag wins; an unknown
  flag is an error. klog's flags (``-v``, ``--logtostderr`` ...) are accepted and unused.
* The environment is read *after* the flags and wins over them (``UpdateFromEnv``), unless
  ``--disable-environment-override``: ``AAD_*`` first, then ``AZURE_*`` over them (or the
  Terraform ``ARM_*`` names with ``--use-azurerm-env-vars``); ``AAD_LOGIN_METHOD`` over
  ``--login``; for workloadidentity ``AZURE_CLIENT_ID``, ``AZURE_FEDERATED_TOKEN_FILE`` and
  ``AZURE_AUTHORITY_HOST`` once more. A variable that is set but empty still counts (Go's
  ``os.LookupEnv``). :attr:`AzureArgs.sources` says which source won, for status.

kubetray adds three flags of its own: ``--name`` (the name shown), ``--certificate-authority``
(an extra CA file for the login host, added to the system's trust, repeatable) and
``--skip-open-browser``. Standard library only: the agent parses, msal is not imported here.
"""

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from app.providers.entra import clouds
from exec_helper.options import KLOG_FLAGS, OptionsError

DEVICECODE = "devicecode"
INTERACTIVE = "interactive"
SPN = "spn"
ROPC = "ropc"
MSI = "msi"
AZURECLI = "azurecli"
AZD = "azd"
WORKLOADIDENTITY = "workloadidentity"
AZUREPIPELINES = "azurepipelines"
LOGINS = (
    DEVICECODE,
    INTERACTIVE,
    SPN,
    ROPC,
    MSI,
    AZURECLI,
    AZD,
    WORKLOADIDENTITY,
    AZUREPIPELINES,
)
"""Azure kubelogin's --login values, in its order (its error message lists them so)."""

STR, BOOL, DURATION, LIST = "str", "bool", "duration", "list"


def _f(kind: str, flag: str = "", short: str = "", secret: bool = False, default: object = None):  # type: ignore[no-untyped-def]
    meta = {"kind": kind, "flag": flag, "short": short, "secret": secret}
    if kind == LIST:
        return field(default=(), metadata=meta)
    return field(default=default, metadata=meta, repr=not secret)


@dataclass(frozen=True)
class AzureArgs:
    """Azure kubelogin's options after flags and environment, field per flag."""

    login: str = _f(STR, "login", "l", default=DEVICECODE)
    server_id: str | None = _f(STR, "server-id")
    client_id: str | None = _f(STR, "client-id")
    tenant_id: str | None = _f(STR, "tenant-id", "t")
    environment: str = _f(STR, "environment", "e", default=clouds.DEFAULT_ENVIRONMENT)
    legacy: bool = _f(BOOL, "legacy", default=False)
    client_secret: str | None = _f(STR, "client-secret", secret=True)
    client_certificate: str | None = _f(STR, "client-certificate")
    client_certificate_password: str | None = _f(STR, "client-certificate-password", secret=True)
    username: str | None = _f(STR, "username")
    password: str | None = _f(STR, "password", secret=True)
    identity_resource_id: str | None = _f(STR, "identity-resource-id")
    federated_token_file: str | None = _f(STR, "federated-token-file")
    authority_host: str | None = _f(STR, "authority-host")
    use_azurerm_env_vars: bool = _f(BOOL, "use-azurerm-env-vars", default=False)
    disable_environment_override: bool = _f(BOOL, "disable-environment-override", default=False)
    pop_enabled: bool = _f(BOOL, "pop-enabled", default=False)
    pop_claims: str | None = _f(STR, "pop-claims")
    disable_instance_discovery: bool = _f(BOOL, "disable-instance-discovery", default=False)
    redirect_url: str | None = _f(STR, "redirect-url")
    login_hint: str | None = _f(STR, "login-hint")
    subscription: str | None = _f(STR, "subscription", "s")
    azure_pipelines_service_connection_id: str | None = _f(
        STR, "azure-pipelines-service-connection-id"
    )
    cache_dir: str | None = _f(STR, "cache-dir")
    token_cache_dir: str | None = _f(STR, "token-cache-dir")
    timeout: float = _f(DURATION, "timeout", default=60.0)
    # kubetray's own
    name: str | None = _f(STR, "name")
    certificate_authority: tuple[str, ...] = _f(LIST, "certificate-authority")
    skip_open_browser: bool = _f(BOOL, "skip-open-browser", default=False)
    sources: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    """(field, where its value came from: ``--client-id``, ``AZURE_CLIENT_ID``), for status;
    fields left at their defaults are not listed."""

    def source(self, name: str) -> str:
        """Where the value of field ``name`` came from (``default`` when nowhere)."""
        return dict(self.sources).get(name, "default")


_FIELDS = {f.metadata["flag"]: f for f in dataclasses.fields(AzureArgs) if f.metadata}
_SHORT = {f.metadata["short"]: f for f in _FIELDS.values() if f.metadata["short"]}
_KLOG = {**{name: kind for name, kind in KLOG_FLAGS.items()}, "v": "int"}
_KLOG_SHORT = {"v"}
_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}
"""strconv.ParseBool, which pflag uses."""


def _bool(flag: str, text: str) -> bool:
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise OptionsError(
        f'invalid argument "{text}" for "--{flag}" flag: strconv.ParseBool: parsing '
        f'"{text}": invalid syntax'
    )


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}


def parse_duration(text: str) -> float | None:
    """A Go duration (``60s``, ``1m30s``, ``1.5h``) in seconds; None when it is not one."""
    sign = -1.0 if text.startswith("-") else 1.0
    rest = text.lstrip("+-")
    if rest == "0":
        return 0.0
    total, pos = 0.0, 0
    for m in _DURATION_PART.finditer(rest):
        if m.start() != pos:
            return None
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return sign * total if rest and pos == len(rest) else None


def recognises(args: Sequence[str]) -> bool:
    """Whether ``args`` are Azure kubelogin's ``get-token`` (not int128/kubelogin's, which
    shares the binary name and the subcommand: its command line names ``--oidc-issuer-url``)."""
    if not args or args[0] != "get-token":
        return False
    if any(a.startswith("--oidc-") for a in args):
        return False
    azure = {"--server-id", "--login", "-l", "--environment", "-e", "--tenant-id", "-t"}
    azure |= {"--legacy", "--pop-enabled", "--use-azurerm-env-vars", "--federated-token-file"}
    return any(a.split("=", 1)[0] in azure or a[:2] in ("-l", "-t", "-e") for a in args[1:])


def _read_flags(args: Sequence[str]) -> dict[str, object]:
    """The flags given, by field name (pflag's rules); the last of a repeated one wins."""
    out: dict[str, object] = {}
    lists: dict[str, list[str]] = {}
    seen_command = False
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            break
        if not arg.startswith("-") or arg == "-":
            if arg == "get-token" and not seen_command:
                seen_command = True
            continue  # cobra hands a leaf command's other arguments to it, which ignores them
        if arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
            spec = _FIELDS.get(name)
            if spec is None:
                if name in _KLOG or name in ("help",):
                    if _KLOG.get(name) != BOOL and not eq and name not in ("help",):
                        i += 1
                    continue
                raise OptionsError(f"unknown flag: --{name}")
        else:
            short, rest = arg[1], arg[2:]
            spec = _SHORT.get(short)
            if spec is None:
                if short in _KLOG_SHORT or short == "h":
                    if short == "v" and not rest:
                        i += 1
                    continue
                raise OptionsError(f"unknown shorthand flag: '{short}' in {arg}")
            name = spec.metadata["flag"]
            eq, value = ("=", rest[1:]) if rest.startswith("=") else ("=" if rest else "", rest)
        kind = spec.metadata["kind"]
        if kind == BOOL:
            out[spec.name] = _bool(name, value) if eq else True
            continue
        if not eq:
            if i >= len(args):
                raise OptionsError(f"flag needs an argument: --{name}")
            value = args[i]
            i += 1
        if kind == DURATION:
            seconds = parse_duration(value)
            if seconds is None:
                raise OptionsError(
                    f'invalid argument "{value}" for "--{name}" flag: time: invalid duration '
                    f'"{value}"'
                )
            out[spec.name] = seconds
        elif kind == LIST:
            lists.setdefault(spec.name, []).append(value)
        else:
            out[spec.name] = value
    out.update({k: tuple(v) for k, v in lists.items()})
    return out


def parse(args: Sequence[str], env: Mapping[str, str]) -> AzureArgs:
    """``get-token ...`` and the caller's environment as Azure kubelogin combines them.

    Raises OptionsError with one line (Azure kubelogin's own words where it has them).
    """
    given = _read_flags(args)
    values: dict[str, object] = dict(given)
    sources = {name: f"--{_field(name).metadata['flag']}" for name in given}

    def take(name: str, var: str) -> None:
        if var in env:
            values[name] = env[var]
            sources[name] = var

    if not values.get("disable_environment_override"):
        if values.get("use_azurerm_env_vars"):
            take("client_id", "ARM_CLIENT_ID")
            take("client_secret", "ARM_CLIENT_SECRET")
            take("client_certificate", "ARM_CLIENT_CERTIFICATE_PATH")
            take("client_certificate_password", "ARM_CLIENT_CERTIFICATE_PASSWORD")
            take("tenant_id", "ARM_TENANT_ID")
        else:
            take("client_id", "AAD_SERVICE_PRINCIPAL_CLIENT_ID")
            take("client_id", "AZURE_CLIENT_ID")
            take("client_secret", "AAD_SERVICE_PRINCIPAL_CLIENT_SECRET")
            take("client_secret", "AZURE_CLIENT_SECRET")
            take("client_certificate", "AAD_SERVICE_PRINCIPAL_CLIENT_CERTIFICATE")
            take("client_certificate", "AZURE_CLIENT_CERTIFICATE_PATH")
            take("client_certificate_password", "AAD_SERVICE_PRINCIPAL_CLIENT_CERTIFICATE_PASSWORD")
            take("client_certificate_password", "AZURE_CLIENT_CERTIFICATE_PASSWORD")
            take("tenant_id", "AZURE_TENANT_ID")
        take("username", "AAD_USER_PRINCIPAL_NAME")
        take("username", "AZURE_USERNAME")
        take("password", "AAD_USER_PRINCIPAL_PASSWORD")
        take("password", "AZURE_PASSWORD")
        take("login", "AAD_LOGIN_METHOD")
        if values.get("login", DEVICECODE) == WORKLOADIDENTITY:
            take("client_id", "AZURE_CLIENT_ID")
            take("federated_token_file", "AZURE_FEDERATED_TOKEN_FILE")
            take("authority_host", "AZURE_AUTHORITY_HOST")
        if values.get("login") == AZUREPIPELINES:
            for name, var in (
                ("client_id", "AZURESUBSCRIPTION_CLIENT_ID"),
                ("tenant_id", "AZURESUBSCRIPTION_TENANT_ID"),
                (
                    "azure_pipelines_service_connection_id",
                    "AZURESUBSCRIPTION_SERVICE_CONNECTION_ID",
                ),
            ):
                if not values.get(name):
                    take(name, var)
        if "AZURE_CLI_TIMEOUT" in env:
            seconds = parse_duration(env["AZURE_CLI_TIMEOUT"])
            if seconds is not None:
                values["timeout"] = seconds
                sources["timeout"] = "AZURE_CLI_TIMEOUT"
    parsed = AzureArgs(**values, sources=tuple(sorted(sources.items())))  # type: ignore[arg-type]
    _validate(parsed)
    return parsed


def _field(name: str) -> dataclasses.Field[object]:
    return next(f for f in dataclasses.fields(AzureArgs) if f.name == name)


def _validate(a: AzureArgs) -> None:
    """Azure kubelogin's ``Validate`` and ``Do`` checks, in its words."""
    if a.login not in LOGINS:
        raise OptionsError(
            f"'{a.login}' is not a supported login method. Supported method is one of "
            + ", ".join(LOGINS)
        )
    if a.authority_host:
        clouds.check_authority_host(a.authority_host)
    if a.pop_enabled and not a.pop_claims:
        raise OptionsError(
            "if enabling pop token mode, please provide the pop-claims flag containing the PoP "
            "token claims as a comma-separated string: `u=popClaimHost,key1=val1`"
        )
    if a.pop_claims and not a.pop_enabled:
        raise OptionsError(
            "pop-enabled flag is required to use the PoP token feature. Please provide both "
            "pop-enabled and pop-claims flags"
        )
    if a.timeout <= 0:
        raise OptionsError("timeout must be greater than 0")
    if not a.server_id:
        raise OptionsError("server-id is required")


def scope(server_id: str) -> str:
    """The scope for the server application: trailing slashes off, ``/.default`` on (Azure
    kubelogin's ``GetScope``)."""
    out = server_id.rstrip("/")
    return out if out.endswith("/.default") else out + "/.default"


SECRET_FIELDS = frozenset(
    f.name for f in dataclasses.fields(AzureArgs) if f.metadata and f.metadata["secret"]
)
ENV_NAMES = (
    "AAD_LOGIN_METHOD",
    "AAD_USER_PRINCIPAL_NAME",
    "AAD_USER_PRINCIPAL_PASSWORD",
    "AAD_SERVICE_PRINCIPAL_CLIENT_ID",
    "AAD_SERVICE_PRINCIPAL_CLIENT_SECRET",
    "AAD_SERVICE_PRINCIPAL_CLIENT_CERTIFICATE",
    "AAD_SERVICE_PRINCIPAL_CLIENT_CERTIFICATE_PASSWORD",
    "ARM_CLIENT_ID",
    "ARM_CLIENT_SECRET",
    "ARM_CLIENT_CERTIFICATE_PATH",
    "ARM_CLIENT_CERTIFICATE_PASSWORD",
    "ARM_TENANT_ID",
    "AZURE_AUTHORITY_HOST",
    "AZURE_CLIENT_CERTIFICATE_PASSWORD",
    "AZURE_CLIENT_CERTIFICATE_PATH",
    "AZURE_CLIENT_ID",
    "AZURE_CLIENT_SECRET",
    "AZURE_FEDERATED_TOKEN_FILE",
    "AZURE_PASSWORD",
    "AZURE_TENANT_ID",
    "AZURE_USERNAME",
    "AZURE_CLI_TIMEOUT",
    "AZURE_CONFIG_DIR",
    "AZURESUBSCRIPTION_CLIENT_ID",
    "AZURESUBSCRIPTION_TENANT_ID",
    "AZURESUBSCRIPTION_SERVICE_CONNECTION_ID",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_URL",
)
"""Every variable Azure kubelogin (or the tool a mode runs: az's AZURE_CONFIG_DIR, GitHub's
token request) reads: what kubetray-exec must forward to the agent for these command lines.
Several hold secrets: forwarded, never logged or recorded."""
