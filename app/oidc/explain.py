"""Network and provider failures in a person's words: a sentence and what to do (Qt-free).

Used wherever such a failure reaches someone: the OIDC client's errors (so the CLI, kubectl's
stderr and the tray's notifications), `kubetray setup`'s probe and the Add cluster dialog.
"""

import json
import socket
import ssl
import urllib.parse

CA_FLAG = "--certificate-authority"
"""The flag that adds the provider's CA, as kubetray-exec names it (setup: --provider-ca)."""


def untrusted_hint(ca_flag: str = CA_FLAG) -> str:
    """What to do when the provider's certificate does not verify."""
    return f"pass {ca_flag} with the CA certificate that signed the provider's certificate"


def _where(url: str) -> tuple[str, str]:
    """(host, host:port) of ``url``."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or url
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = 0
    return host, f"{host}:{port}" if port else host


def network(
    reason: BaseException | None, url: str, ca_flag: str = CA_FLAG
) -> tuple[str, str | None]:
    """(message, hint) for a request to ``url`` that failed with ``reason`` (urllib's URLError
    reason or the OSError itself)."""
    host, address = _where(url)
    if isinstance(reason, ssl.SSLCertVerificationError):
        if reason.verify_code == 62 or "hostname" in str(reason.verify_message).lower():
            return (
                f"the provider's certificate is not valid for {host}",
                "check the host name in the issuer URL (use the one its certificate names)",
            )
        if reason.verify_code == 10 or "expired" in str(reason.verify_message).lower():
            return (f"the provider's certificate at {address} has expired", None)
        return (
            f"the provider's CA is not trusted ({address}: {reason.verify_message})",
            untrusted_hint(ca_flag),
        )
    if isinstance(reason, socket.gaierror):
        return (
            f"cannot find the provider's host {host} (the DNS lookup failed)",
            "check the issuer URL for a typo; if the provider is internal, connect the VPN",
        )
    if isinstance(reason, ConnectionRefusedError):
        return (
            f"nothing answers at {address} (connection refused)",
            "check the port in the issuer URL and that the provider is running",
        )
    if isinstance(reason, TimeoutError | socket.timeout):
        return (
            f"the provider at {address} did not answer in time",
            "check the network, a firewall, or the proxy (HTTPS_PROXY, NO_PROXY)",
        )
    if isinstance(reason, ssl.SSLError):
        return (
            f"no TLS connection with {address} ({reason.reason or reason})",
            "check that the issuer URL's scheme and port are those of the provider's https port",
        )
    if isinstance(reason, ConnectionError):
        return (f"the connection to {address} was cut ({reason})", "try again")
    return (f"cannot reach the provider at {address}: {reason}", None)


NOT_JSON = "check the issuer URL: it should be the provider's, not a web page's"


def failure(error: object, url: str, ca_flag: str = CA_FLAG) -> tuple[str, str | None]:
    """(message, hint) for app.oidc.http's TransportError (an HTTP answer or no answer)."""
    status = getattr(error, "status", 0)
    if status:
        return http(status, getattr(error, "body", b""), url)
    reason = getattr(error, "reason", None)
    if isinstance(reason, BaseException):
        return network(reason, url, ca_flag)
    return (f"cannot reach the provider at {url}: {error}", None)


def http(status: int, body: bytes, url: str) -> tuple[str, str | None]:
    """(message, hint) for an HTTP error answer, with the provider's own words when it sent
    an OAuth error document."""
    description = ""
    try:
        doc = json.loads(body)
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        parts = [str(doc[k]) for k in ("error", "error_description") if doc.get(k)]
        description = ": ".join(parts)
    message = f"the provider answered HTTP {status} for {url}"
    if description:
        message += f" ({description})"
    hint = None
    if status == 404 and url.endswith("/.well-known/openid-configuration"):
        hint = "check the issuer URL: the provider serves no discovery document there"
    elif status in (502, 503, 504):
        hint = "the provider or a proxy in front of it is down: try again later"
    return message, hint
