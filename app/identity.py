"""What identifies an OIDC identity, and the name people see for it.

One normalisation, used everywhere: two spellings of the same login are one identity, one
login, one record. What identifies a login is the issuer (scheme and host in lower case, no
default port, no trailing slash), the client id, the scopes as a set (``openid`` always in),
the authorization parameters as a set, the username for the password grant, and whether the
client logs in as itself (client credentials). Everything else (CAs, request headers, listen
addresses, the browser) is how the provider is reached, not who logs in.
"""

from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

from exec_helper.options import HelperOptions

_DEFAULT_PORTS = {"https": 443, "http": 80}


def normalize_issuer(url: str) -> str:
    """The issuer URL in one spelling: ``HTTPS://IdP:443/realms/x/`` → ``https://idp/realms/x``."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"  # an IPv6 literal keeps its brackets
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host if port in (None, _DEFAULT_PORTS.get(scheme)) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, ""))


def scopes(opts: HelperOptions) -> tuple[str, ...]:
    """The scopes to request: ``openid`` first, then the extra ones in the order given."""
    return tuple(dict.fromkeys(("openid", *opts.oidc_extra_scope)))


def auth_params(opts: HelperOptions) -> tuple[tuple[str, str], ...]:
    """Extra authorization request parameters, with ``--audience`` as ``audience=...`` and
    kubelogin's old ``--oidc-access-type`` as ``access_type=...``."""
    params = dict(opts.oidc_auth_request_extra_params)
    if opts.oidc_access_type:
        params["access_type"] = opts.oidc_access_type
    if opts.audience:
        params["audience"] = opts.audience
    return tuple(params.items())


def oidc_key(
    issuer: str,
    client_id: str,
    scope: Iterable[str],
    params: Iterable[tuple[str, str]],
    username: str | None,
    machine: bool = False,
) -> str:
    """The key of an OIDC identity: equal for every spelling of one login. ``machine``: the
    client's own token (client credentials), never a person's login with the same client."""
    return "|".join(
        [
            "oidc",
            normalize_issuer(issuer),
            client_id,
            ",".join(sorted({"openid", *scope})),
            ",".join(f"{k}={v}" for k, v in sorted(set(params))),
            username or "",
            *(["client-credentials"] if machine else []),
        ]
    )


def stored_key(name: str) -> str:
    """The key of a stored credential."""
    return f"stored:{name}"


def fallback_name(issuer: str, client_id: str, username: str | None) -> str:
    """``user@issuer-host`` (the client id stands in for the user of a browser login)."""
    host = urlsplit(normalize_issuer(issuer)).netloc or issuer
    return f"{username or client_id}@{host}"


def unique_name(wanted: str, taken: set[str]) -> str:
    """``wanted``, or ``wanted-2``, ``wanted-3``...: never two identities under one name."""
    if wanted not in taken:
        return wanted
    n = 2
    while f"{wanted}-{n}" in taken:
        n += 1
    return f"{wanted}-{n}"
