"""kubetray-exec's arguments: the int128/kubelogin ``get-token`` flag set, plus ``--stored``.

A kubelogin kubeconfig switches to kubetray by changing only ``command``. Flags may also come
from the cluster's ``client.authentication.k8s.io/exec`` extension (``spec.cluster.config``),
keyed by the flag name without dashes (``{"oidc-client-id": "x"}``); per-cluster values win
over arguments, because cluster-inventory's library accumulates arguments across clusters.
Scalar flags repeated on the command line: the last one wins. Lowest of all come environment
variables named ``KUBETRAY_`` + the flag in capitals with ``_`` for ``-`` (``KUBETRAY_STORED``,
``KUBETRAY_OIDC_CLIENT_ID``): what a ClusterProfile's ``additional-envs`` extension injects.
Precedence: per-cluster config, then arguments, then environment.
"""

import argparse
import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any

STR, LIST, BOOL, INT, MAP = "str", "list", "bool", "int", "map"

GRANT_TYPES = (
    "auto",
    "authcode",
    "authcode-keyboard",
    "password",
    "device-code",
    "client-credentials",
)
"""The --grant-type values kubetray does: kubelogin's, less token-exchange."""

KLOG_FLAGS = {
    "add_dir_header": BOOL,
    "alsologtostderr": BOOL,
    "legacy_stderr_threshold_behavior": BOOL,
    "log_backtrace_at": STR,
    "log_dir": STR,
    "log_file": STR,
    "log_file_max_size": STR,
    "logtostderr": BOOL,
    "one_output": BOOL,
    "skip_headers": BOOL,
    "skip_log_headers": BOOL,
    "stderrthreshold": STR,
    "vmodule": STR,
}
"""klog's flags, which kubelogin accepts beside -v: accepted and unused (kubetray-exec keeps
no log; the agent has its own)."""

_TOKEN_EXCHANGE = (
    "kubetray does not do kubelogin's token-exchange grant: remove --{flag} and use another "
    "--grant-type (" + "|".join(GRANT_TYPES[1:]) + ")"
)
REFUSED = {
    flag: (kind, _TOKEN_EXCHANGE)
    for flag, kind in {
        "token-exchange-resource": LIST,
        "token-exchange-audience": LIST,
        "token-exchange-requested-token-type": STR,
        "token-exchange-subject-token": STR,
        "token-exchange-subject-token-type": STR,
        "token-exchange-actor-token": STR,
        "token-exchange-actor-token-type": STR,
    }.items()
}
"""kubelogin flags kubetray refuses, with what to do instead ({flag} is the flag's name)."""


def _f(kind: str, help: str, default: Any = None, split: bool = False, secret: bool = False) -> Any:
    meta = {"kind": kind, "help": help, "split": split, "secret": secret}
    if kind in (LIST, MAP):  # a secret stays out of repr(), and so out of any log line
        return field(default=(), metadata=meta, repr=not secret)
    return field(default=default, metadata=meta, repr=not secret)


@dataclass(frozen=True)
class HelperOptions:
    """Every flag kubetray-exec accepts; the field name is the flag with ``_`` for ``-``."""

    stored: str | None = _f(STR, "serve the stored credential NAME (see: kubetray store)")
    name: str | None = _f(STR, "the name kubetray shows for this OIDC identity")
    oidc_issuer_url: str | None = _f(STR, "issuer URL of the OpenID provider")
    oidc_client_id: str | None = _f(STR, "client ID registered at the provider")
    oidc_client_secret: str | None = _f(STR, "client secret, for confidential clients")
    oidc_extra_scope: tuple[str, ...] = _f(LIST, "extra scope to request (repeatable)", split=True)
    oidc_use_access_token: bool = _f(BOOL, "send the access token instead of the id_token", False)
    oidc_use_pkce: bool = _f(
        BOOL, "accepted for kubelogin compatibility (PKCE is always used)", False
    )
    oidc_pkce_method: str | None = _f(STR, "accepted for kubelogin compatibility (S256 is used)")
    oidc_redirect_url: str | None = _f(STR, "redirect URL for the browser login")
    oidc_redirect_url_hostname: str | None = _f(STR, "hostname in the loopback redirect URL")
    oidc_redirect_url_authcode_keyboard: str | None = _f(STR, "redirect URL for authcode-keyboard")
    oidc_auth_request_extra_params: tuple[tuple[str, str], ...] = _f(
        MAP, "extra authorization request parameters, KEY=VALUE[,KEY=VALUE]"
    )
    oidc_access_type: str | None = _f(
        STR, "sent as access_type=VALUE with the authorization request (kubelogin's Google flag)"
    )
    oidc_request_header: tuple[tuple[str, str], ...] = _f(
        MAP, "HTTP header sent with every request to the provider, KEY=VALUE", secret=True
    )
    grant_type: str | None = _f(STR, "|".join(GRANT_TYPES))
    listen_address: tuple[str, ...] = _f(
        LIST, "loopback address for the redirect (repeatable)", split=True
    )
    listen_port: tuple[str, ...] = _f(
        LIST, "kubelogin's old flag: listen on 127.0.0.1:PORT (repeatable)", split=True
    )
    skip_open_browser: bool = _f(BOOL, "print the login URL instead of opening a browser", False)
    browser_command: str | None = _f(STR, "command that opens the login URL")
    authentication_timeout_sec: int | None = _f(INT, "how long a browser login may take")
    local_server_cert: str | None = _f(STR, "TLS certificate for an HTTPS loopback listener")
    local_server_key: str | None = _f(STR, "TLS key of --local-server-cert")
    open_url_after_authentication: str | None = _f(STR, "page to show after the login")
    username: str | None = _f(STR, "username for the password grant")
    password: str | None = _f(STR, "password for the password grant")
    certificate_authority: tuple[str, ...] = _f(LIST, "extra CA file for the provider (repeatable)")
    certificate_authority_data: tuple[str, ...] = _f(LIST, "extra base64 CA for the provider")
    insecure_skip_tls_verify: bool = _f(BOOL, "do not verify the provider's certificate", False)
    tls_renegotiation_once: bool = _f(BOOL, "accepted for kubelogin compatibility", False)
    tls_renegotiation_freely: bool = _f(BOOL, "accepted for kubelogin compatibility", False)
    audience: str | None = _f(STR, "audience to request a token for (sent as audience=...)")
    force_refresh: bool = _f(BOOL, "skip the agent's cache and fetch the credential again", False)
    no_login: bool = _f(BOOL, "never start a login: fail at once if one is needed", False)
    token_cache_dir: str | None = _f(
        STR, "accepted and unused: the agent keeps tokens in the OS keyring, never in files"
    )
    token_cache_storage: str | None = _f(
        STR, "accepted and unused: the agent keeps tokens in the OS keyring, never in files"
    )
    force_keyring: bool = _f(
        BOOL, "accepted and unused: the agent always keeps tokens in the OS keyring", False
    )
    no_keyring: bool = _f(
        BOOL, "accepted and unused: the agent keeps tokens in the OS keyring, never in files", False
    )
    v: int | None = _f(INT, "log verbosity (accepted for kubelogin compatibility)")

    @property
    def flags_given(self) -> dict[str, Any]:
        """The flags that differ from their defaults, by flag name (for messages and tests)."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value != f.default:
                out[f.name.replace("_", "-")] = value
        return out


class OptionsError(ValueError):
    """An argument or a per-cluster setting kubetray-exec cannot use."""


class UnknownArgument(OptionsError):
    """An argument none of kubetray-exec's own flags is: a typo, or another tool's command
    line, which a provider in the agent may read (app.providers): said by the agent."""


_FIELDS = {f.name.replace("_", "-"): f for f in dataclasses.fields(HelperOptions)}
_TRUE = {"true", "1", "yes", "t"}
_FALSE = {"false", "0", "no", "f"}


def _bool(text: str) -> bool:
    low = text.lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _pairs(text: str, secret: bool = False) -> list[tuple[str, str]]:
    """KEY=VALUE pairs as kubelogin's flags (pflag's StringToString) read them: one ``=`` is
    one pair, commas and all (``Accept=a,b``); more are a comma-separated list, CSV quoting.
    ``secret``: a malformed value is not repeated in the message (header values are keys)."""
    if text.count("=") <= 1:
        items = [text.strip('"')]
    else:
        import csv  # only for lists of pairs

        try:
            items = next(csv.reader([text]), [])
        except csv.Error as e:
            raise argparse.ArgumentTypeError(f"expected KEY=VALUE[,KEY=VALUE]: {e}") from None
    out = []
    for item in filter(None, items):
        key, sep, value = item.partition("=")
        if not sep or not key:
            shown = "a value without KEY=" if secret else repr(item)
            raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {shown}")
        out.append((key, value))
    return out


def _secret_pairs(text: str) -> list[tuple[str, str]]:
    return _pairs(text, secret=True)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would print usage and exit 2
        raise OptionsError(message)


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser, generated from HelperOptions (also used for ``--help``)."""
    parser = _Parser(
        prog="kubetray-exec",
        allow_abbrev=False,
        description="Exec credential plugin for kubectl and other Kubernetes clients: asks the "
        "kubetray agent for a credential and prints an ExecCredential. Name it as the command "
        "of a kubeconfig user's exec entry; kubelogin get-token flags are accepted, and the "
        "arguments of Azure kubelogin, gke-gcloud-auth-plugin, 'aws eks get-token' and "
        "'aws-iam-authenticator token' (kubetray import writes them).",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    for flag, f in _FIELDS.items():
        kind, help_text = f.metadata["kind"], f.metadata["help"]
        names = ["-v", "--v"] if flag == "v" else ["--" + flag]
        if kind == BOOL:
            parser.add_argument(
                *names, dest=f.name, nargs="?", const=True, type=_bool, help=help_text
            )
        elif kind == LIST:
            parser.add_argument(*names, dest=f.name, action="append", help=help_text)
        elif kind == MAP:
            pairs = _secret_pairs if f.metadata["secret"] else _pairs
            parser.add_argument(*names, dest=f.name, action="append", type=pairs, help=help_text)
        else:
            parser.add_argument(
                *names, dest=f.name, type=int if kind == INT else str, help=help_text
            )
    for flag, kind in KLOG_FLAGS.items():  # --log_dir as klog spells it, --log-dir as well
        names = ["--" + flag] + (["--" + flag.replace("_", "-")] if "_" in flag else [])
        _ignored(parser, names, "klog_" + flag, kind, argparse.SUPPRESS)
    for flag, (kind, _) in REFUSED.items():
        _ignored(parser, ["--" + flag], _REFUSED_DEST + flag, kind, argparse.SUPPRESS)
    return parser


_REFUSED_DEST = "refused:"


@functools.cache
def _cached_parser() -> argparse.ArgumentParser:
    """build_parser() once per process: building it costs ~2 ms, and the agent and doctor
    resolve the flags of every kubeconfig context (500 contexts: a second of building).
    Parsing only reads it, so threads may share it."""
    return build_parser()


def _ignored(
    parser: argparse.ArgumentParser, names: list[str], dest: str, kind: str, help: str
) -> None:
    """A flag parsed only to be dropped (klog's) or refused (REFUSED)."""
    if kind == BOOL:
        parser.add_argument(*names, dest=dest, nargs="?", const=True, type=_bool, help=help)
    elif kind == LIST:
        parser.add_argument(*names, dest=dest, action="append", help=help)
    else:
        parser.add_argument(*names, dest=dest, help=help)


def _refuse(flags: list[str]) -> None:
    if flags:
        raise OptionsError(REFUSED[flags[0]][1].format(flag=flags[0]))


def strip_subcommand(args: list[str]) -> list[str]:
    """Drop kubelogin's leading ``get-token`` or ``oidc-login get-token``."""
    if args[:2] == ["oidc-login", "get-token"]:
        return args[2:]
    if args[:1] == ["get-token"]:
        return args[1:]
    return args


def _normalize(f: dataclasses.Field[Any], value: Any) -> Any:
    kind = f.metadata["kind"]
    if kind == LIST:
        items = [value] if isinstance(value, str) else list(value)
        if f.metadata["split"]:
            items = [part for item in items for part in str(item).split(",") if part]
        return tuple(str(v) for v in items)
    if kind == MAP:
        if isinstance(value, dict):
            return tuple((str(k), str(v)) for k, v in value.items())
        return tuple(pair for group in value for pair in group)
    return value


def parse_args(args: list[str]) -> dict[str, Any]:
    """Parse arguments into {field name: value} for the flags that were given."""
    try:
        ns, rest = _cached_parser().parse_known_args(strip_subcommand(list(args)))
    except argparse.ArgumentTypeError as e:  # pragma: no cover - argparse wraps these
        raise OptionsError(str(e)) from None
    _refuse(
        [
            k.removeprefix(_REFUSED_DEST)
            for k, v in vars(ns).items()
            if k.startswith(_REFUSED_DEST) and v is not None
        ]
    )
    if rest:
        raise UnknownArgument(
            f"unknown argument {rest[0]!r}: kubetray-exec takes the kubelogin get-token flags, "
            "--stored NAME, or the arguments of Azure kubelogin, gke-gcloud-auth-plugin, "
            "'aws eks get-token' or 'aws-iam-authenticator token' (see kubetray-exec --help)"
        )
    fields = {f.name: f for f in dataclasses.fields(HelperOptions)}
    return {
        name: _normalize(fields[name], value)
        for name, value in vars(ns).items()
        if value is not None and name in fields
    }


def _from_config(config: dict[str, Any]) -> dict[str, Any]:
    _refuse([key for key, value in config.items() if key in REFUSED and value is not None])
    out = {}
    for key, value in config.items():
        f = _FIELDS.get(key)
        if f is None or value is None:
            continue  # the extension may carry settings for other tools
        kind = f.metadata["kind"]
        ok = {
            STR: isinstance(value, str),
            BOOL: isinstance(value, bool),
            INT: isinstance(value, int) and not isinstance(value, bool),
            LIST: isinstance(value, str | list),
            MAP: isinstance(value, dict),
        }[kind]
        if not ok:
            shown = "a value" if f.metadata["secret"] else repr(value)
            raise OptionsError(
                f"the cluster's client.authentication.k8s.io/exec extension sets {key} to "
                f"{shown}, which is not a {kind}"
            )
        out[f.name] = _normalize(f, value)
    return out


ENV_PREFIX = "KUBETRAY_"


def _from_env(env: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for flag, f in _FIELDS.items():
        value = env.get(ENV_PREFIX + flag.upper().replace("-", "_"))
        if value is None or value == "":
            continue
        kind = f.metadata["kind"]
        try:
            if kind == BOOL:
                out[f.name] = _bool(value)
            elif kind == INT:
                out[f.name] = int(value)
            elif kind == MAP:
                out[f.name] = tuple(_pairs(value, f.metadata["secret"]))
            elif kind == LIST:
                out[f.name] = _normalize(f, value.split(","))
            else:
                out[f.name] = value
        except (ValueError, argparse.ArgumentTypeError) as e:
            raise OptionsError(f"{ENV_PREFIX}{flag.upper().replace('-', '_')}: {e}") from None
    return out


def resolve(
    args: list[str], config: dict[str, Any] | None = None, env: dict[str, str] | None = None
) -> HelperOptions:
    """Environment, then arguments over it, then the per-cluster config over both."""
    values = _from_env(env) if env else {}
    values.update(parse_args(args))
    if config:
        values.update(_from_config(config))
    return HelperOptions(**values)
