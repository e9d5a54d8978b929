"""Does a cluster's CA verify its API server? One TLS handshake, made the way kubectl makes it.

kubectl (client-go) trusts only the cluster's CA when kubeconfig names one (and refuses both
``certificate-authority`` and ``certificate-authority-data``, or a CA with
``insecure-skip-tls-verify``), the system's CAs otherwise; it checks the server URL's host name,
or ``tls-server-name``; and it goes through ``proxy-url`` or ``HTTPS_PROXY`` (an ``http://``
proxy's CONNECT) unless ``NO_PROXY`` matches or the host is loopback. So does this. Nothing is
sent over the TLS connection: the handshake is the check. A server that does not answer is not a
CA failure (a VPN may be off): that is a warning.
"""

import base64
import binascii
import ipaddress
import os
import socket
import ssl
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

TIMEOUT = 3.0
"""Per cluster, connection and handshake together (all clusters are checked at once)."""

PASS, WARN, FAIL = "pass", "warn", "fail"

_UNKNOWN_AUTHORITY = {2, 18, 19, 20, 21}
"""OpenSSL's verify codes for "no trusted CA signed this chain"."""
_HOSTNAME_MISMATCH, _EXPIRED, _NOT_YET_VALID = 62, 10, 9


@dataclass(frozen=True)
class ClusterTLS:
    """What kubeconfig says about reaching one cluster."""

    name: str
    server: str
    file: str
    """The kubeconfig file holding the cluster (relative CA paths start at its directory)."""
    ca_file: str | None = None
    ca_data: str | None = None
    insecure: bool = False
    server_name: str | None = None
    proxy_url: str | None = None
    in_default_kubeconfig: bool = True
    """Whether plain ``kubectl config`` edits the file that holds it."""

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any], file: str, default: bool = True) -> "ClusterTLS":
        body = entry.get("cluster")
        c: Mapping[str, Any] = body if isinstance(body, Mapping) else {}

        def text(key: str) -> str | None:
            value = c.get(key)
            return str(value) if value not in (None, "") else None

        ca_file = text("certificate-authority")
        if ca_file and not os.path.isabs(ca_file):
            ca_file = os.path.join(os.path.dirname(os.path.abspath(file)), ca_file)
        return cls(
            name=str(entry.get("name")),
            server=text("server") or "",
            file=file,
            ca_file=ca_file,
            ca_data=text("certificate-authority-data"),
            insecure=c.get("insecure-skip-tls-verify") is True,
            server_name=text("tls-server-name"),
            proxy_url=text("proxy-url"),
            in_default_kubeconfig=default,
        )

    def set_cluster(self, *flags: str) -> str:
        """The kubectl line that changes this cluster."""
        where = "" if self.in_default_kubeconfig else f" --kubeconfig={self.file}"
        return f"kubectl config set-cluster {self.name}{where} " + " ".join(flags)

    @property
    def set_ca(self) -> str:
        return "set the cluster's CA: " + self.set_cluster(
            "--certificate-authority=FILE", "--embed-certs"
        )


@dataclass(frozen=True)
class Finding:
    """The check's outcome: PASS, WARN or FAIL, in a person's words, with what to do."""

    verdict: str
    detail: str
    remedy: str | None = None


def check_all(
    clusters: list[ClusterTLS],
    timeout: float = TIMEOUT,
    environ: Mapping[str, str] | None = None,
) -> list[Finding]:
    """Every cluster at once (a few unreachable ones cost one timeout, not one each)."""
    if not clusters:
        return []
    env = os.environ if environ is None else environ
    with ThreadPoolExecutor(max_workers=min(8, len(clusters))) as pool:
        return list(pool.map(lambda c: check(c, timeout, env), clusters))


def check(
    cluster: ClusterTLS, timeout: float = TIMEOUT, environ: Mapping[str, str] | None = None
) -> Finding:
    """Whether kubectl's TLS connection to ``cluster`` would verify."""
    env = os.environ if environ is None else environ
    try:
        target = _Target.of(cluster, env)
    except _Refused as e:
        return Finding(FAIL, e.detail, e.remedy)
    if target is None:
        return Finding(
            WARN,
            f"{cluster.server} is plain http: no TLS, so nothing to verify (and tokens travel "
            "unencrypted)",
            "use the API server's https URL: " + cluster.set_cluster("--server=https://HOST:PORT"),
        )
    if target.skipped:
        return Finding(WARN, target.skipped)
    try:
        context = _context(cluster)
    except _Refused as e:
        return Finding(FAIL, e.detail, e.remedy)
    deadline = time.monotonic() + timeout
    try:
        with _connect(target, deadline) as sock:
            sock.settimeout(_left(deadline))
            with context.wrap_socket(sock, server_hostname=target.server_name):
                pass
    except ssl.SSLCertVerificationError as e:
        return _not_verified(cluster, target, e, timeout)
    except _Unreachable as e:
        return Finding(WARN, e.detail, e.remedy)
    except ssl.SSLError as e:
        return Finding(
            FAIL,
            f"no TLS with {target.address} ({e.reason or e}){target.via}: kubectl will fail too",
            "check the server URL's port: it must be the API server's https port (often 6443) "
            f"({cluster.set_cluster('--server=https://HOST:PORT')})",
        )
    except OSError as e:
        return _unreachable(target, e, timeout)
    if cluster.insecure:
        return Finding(
            WARN,
            f"{cluster.server} answers but is not verified (insecure-skip-tls-verify: true): "
            "anyone on the path can pose as the cluster and take your token",
            cluster.set_ca + " --insecure-skip-tls-verify=false",
        )
    source = (
        "certificate-authority-data"
        if cluster.ca_data
        else ("certificate-authority" if cluster.ca_file else "the system's CAs")
    )
    return Finding(PASS, f"CA verifies {cluster.server} ({source}{target.via})")


# -- the connection --------------------------------------------------------------------------


class _Refused(Exception):
    """kubeconfig's settings are unusable before any connection (kubectl refuses them too)."""

    def __init__(self, detail: str, remedy: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.remedy = remedy


class _Unreachable(Exception):
    """The proxy would not connect us (a warning, as an unreachable server is)."""

    def __init__(self, detail: str, remedy: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.remedy = remedy


@dataclass(frozen=True)
class _Target:
    host: str
    port: int
    server_name: str
    proxy: tuple[str, int, str | None] | None = None
    """(host, port, Proxy-Authorization) of an http:// proxy to CONNECT through."""
    proxy_shown: str = ""
    skipped: str = ""
    """Why the check cannot run from here (a proxy kind it does not speak)."""

    @property
    def address(self) -> str:
        return _hostport(self.host, self.port)

    @property
    def via(self) -> str:
        return f", through the proxy {self.proxy_shown}" if self.proxy else ""

    @classmethod
    def of(cls, cluster: ClusterTLS, env: Mapping[str, str]) -> "_Target | None":
        """Where to connect; None for a plain-http server."""
        server = cluster.server
        if not server:
            raise _Refused(
                "has no server URL: kubectl will fail with 'no server found for cluster'",
                cluster.set_cluster("--server=https://HOST:PORT"),
            )
        if "://" not in server:  # client-go: https when TLS settings are given, else http
            tls = cluster.ca_file or cluster.ca_data or cluster.insecure
            server = ("https://" if tls else "http://") + server
        parts = urlsplit(server)
        try:
            port = parts.port
        except ValueError:
            port = -1
        if port == -1 or not parts.hostname or parts.scheme not in ("https", "http"):
            raise _Refused(
                f"its server URL {cluster.server} is not an https://HOST:PORT URL",
                cluster.set_cluster("--server=https://HOST:PORT"),
            )
        if parts.scheme == "http":
            return None
        host, port = parts.hostname, port or 443
        proxy = cluster.proxy_url or _env_proxy(host, port, env)
        if not proxy:
            return cls(host, port, cluster.server_name or host)
        where = urlsplit(proxy if "://" in proxy else "http://" + proxy)
        shown = f"{where.hostname}:{where.port or 80}"  # never the proxy's user:password
        if where.scheme != "http" or not where.hostname:
            return cls(
                host,
                port,
                cluster.server_name or host,
                skipped=f"not checked: the proxy {proxy.split('@')[-1]} is not an http:// proxy "
                "(doctor speaks only HTTP CONNECT)",
            )
        auth = None
        if where.username is not None:
            secret = f"{unquote(where.username)}:{unquote(where.password or '')}"
            auth = "Basic " + base64.b64encode(secret.encode()).decode()
        return cls(
            host,
            port,
            cluster.server_name or host,
            proxy=(where.hostname, where.port or 80, auth),
            proxy_shown=shown,
        )


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _env_proxy(host: str, port: int, env: Mapping[str, str]) -> str | None:
    """HTTPS_PROXY as Go's net/http reads it: loopback and NO_PROXY matches go direct."""
    proxy = env.get("HTTPS_PROXY") or env.get("https_proxy")
    if not proxy or host.lower() == "localhost":
        return None
    try:
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    if ip is not None and ip.is_loopback:
        return None
    no_proxy = env.get("NO_PROXY") or env.get("no_proxy") or ""
    return None if no_proxy_matches(host, port, no_proxy) else proxy


def no_proxy_matches(host: str, port: int, no_proxy: str) -> bool:
    """Whether NO_PROXY sends ``host:port`` direct, by Go's rules: ``*``; an IP or CIDR;
    ``example.com`` (itself and its subdomains); ``.example.com`` or ``*.example.com``
    (subdomains only); each optionally with ``:port``."""
    host = host.lower().rstrip(".")
    try:
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        try:
            net = ipaddress.ip_network(entry, strict=False) if "/" in entry else None
        except ValueError:
            net = None
        if net is not None:
            if ip is not None and ip in net:
                return True
            continue
        name, want_port = entry, ""
        head, sep, tail = entry.rpartition(":")
        if sep and tail.isdigit() and (not head.count(":") or head.endswith("]")):
            name, want_port = head, tail
        name = name.strip("[]")
        if want_port and want_port != str(port):
            continue
        try:
            entry_ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None
            entry_ip = ipaddress.ip_address(name)
        except ValueError:
            entry_ip = None
        if entry_ip is not None or ip is not None:  # an IP matches an IP entry only
            if entry_ip is not None and entry_ip == ip:
                return True
            continue
        if not name:
            continue
        name = name.removeprefix("*")
        if name.startswith("."):
            if host.endswith(name):
                return True
        elif host == name or host.endswith("." + name):
            return True
    return False


def _connect(target: _Target, deadline: float) -> socket.socket:
    """A TCP connection to the server, through the proxy's CONNECT if there is one."""
    if target.proxy is None:
        return socket.create_connection((target.host, target.port), timeout=_left(deadline))
    phost, pport, auth = target.proxy
    try:
        sock = socket.create_connection((phost, pport), timeout=_left(deadline))
    except OSError as e:
        raise _Unreachable(
            f"the proxy {target.proxy_shown} does not answer ({_reason(e)}): kubectl cannot "
            f"reach {target.address} through it either",
            "fix HTTPS_PROXY (or the cluster's proxy-url), or add the host to NO_PROXY",
        ) from None
    try:
        lines = [f"CONNECT {target.address} HTTP/1.1", f"Host: {target.address}"]
        if auth:
            lines.append(f"Proxy-Authorization: {auth}")
        sock.settimeout(_left(deadline))
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 16384:
            chunk = sock.recv(4096)
            if not chunk:
                break
            head += chunk
        status = head.split(b"\r\n", 1)[0].decode("latin-1")
        fields = status.split(" ", 2)
        if len(fields) < 2 or fields[1] != "200":
            raise _Unreachable(
                f"the proxy {target.proxy_shown} would not connect to {target.address} "
                f"({status or 'no answer'})",
                "check the proxy's rules, or add the host to NO_PROXY if it is reached direct",
            )
        return sock
    except BaseException:
        sock.close()
        raise


def _left(deadline: float) -> float:
    return max(0.01, deadline - time.monotonic())


def _context(cluster: ClusterTLS) -> ssl.SSLContext:
    """The trust kubectl would use for ``cluster``."""
    if cluster.ca_file and cluster.ca_data:
        raise _Refused(
            "both certificate-authority and certificate-authority-data are set: kubectl refuses "
            "the cluster ('certificate-authority-data and certificate-authority are both "
            "specified')",
            f"keep one: kubectl config unset clusters.{cluster.name}.certificate-authority",
        )
    if (cluster.ca_file or cluster.ca_data) and cluster.insecure:
        raise _Refused(
            "sets a CA and insecure-skip-tls-verify: kubectl refuses the cluster ('specifying a "
            "root certificates file with the insecure flag is not allowed')",
            "drop the insecure flag: " + cluster.set_cluster("--insecure-skip-tls-verify=false"),
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.hostname_checks_common_name = False  # Go matches the names in the SAN only
    if cluster.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    if cluster.ca_data:
        try:
            pem = base64.b64decode(cluster.ca_data, validate=True).decode("ascii")
        except (binascii.Error, UnicodeDecodeError):
            raise _Refused(
                "its certificate-authority-data is not base64 of a PEM certificate: kubectl "
                "cannot load the kubeconfig",
                cluster.set_ca,
            ) from None
        _load(context, cluster, cadata=pem, what="certificate-authority-data")
    elif cluster.ca_file:
        try:
            with open(cluster.ca_file, encoding="ascii", errors="replace") as f:
                pem = f.read()
        except OSError as e:
            raise _Refused(
                f"its certificate-authority {cluster.ca_file} cannot be read ({e.strerror}): "
                "kubectl will fail with 'unable to read certificate-authority'",
                cluster.set_ca,
            ) from None
        _load(context, cluster, cadata=pem, what=f"certificate-authority {cluster.ca_file}")
    else:
        context.load_default_certs()
    return context


def _load(context: ssl.SSLContext, cluster: ClusterTLS, cadata: str, what: str) -> None:
    try:
        context.load_verify_locations(cadata=cadata)
    except (ssl.SSLError, ValueError):
        raise _Refused(
            f"its {what} holds no PEM certificate: kubectl will fail with 'certificate signed "
            "by unknown authority'",
            cluster.set_ca,
        ) from None


# -- in a person's words ---------------------------------------------------------------------


def _not_verified(
    cluster: ClusterTLS, target: _Target, e: ssl.SSLCertVerificationError, timeout: float
) -> Finding:
    code = e.verify_code
    if code in _UNKNOWN_AUTHORITY:
        issuer = _peer_issuer(target, timeout)
        if cluster.ca_data or cluster.ca_file:
            field = "certificate-authority-data" if cluster.ca_data else "certificate-authority"
            what = f"is not signed by the cluster's CA ({field} in kubeconfig)"
            what += f" but by {issuer}" if issuer else ""
        else:
            what = f"is signed by {issuer}," if issuer else "is signed by a CA"
            what += " which this system does not trust, and kubeconfig names no CA for the cluster"
        return Finding(
            FAIL,
            f"x509: the server's certificate {what}: kubectl will fail with 'certificate signed "
            "by unknown authority'",
            cluster.set_ca,
        )
    if code == _HOSTNAME_MISMATCH:
        names = _peer_names(target, timeout)
        valid = f" (it is valid for {', '.join(names)})" if names else ""
        return Finding(
            FAIL,
            f"x509: the server's certificate is not valid for {target.server_name}{valid}: "
            "kubectl will fail with 'certificate is valid for ..., not "
            f"{target.server_name}'",
            "use a name the certificate holds: "
            + cluster.set_cluster("--tls-server-name=NAME")
            + " (or that name in --server)",
        )
    if code == _EXPIRED:
        return Finding(
            FAIL,
            f"x509: the certificate of {target.address} has expired: kubectl will fail",
            "the cluster's administrators must renew the API server's certificate (or this "
            "machine's clock is wrong)",
        )
    if code == _NOT_YET_VALID:
        return Finding(
            FAIL,
            f"x509: the certificate of {target.address} is not valid yet: kubectl will fail",
            "check this machine's clock (e.g. timedatectl set-ntp true)",
        )
    return Finding(
        FAIL,
        f"x509: the certificate of {target.address} does not verify ({e.verify_message}): "
        "kubectl will fail too",
        cluster.set_ca,
    )


def _unreachable(target: _Target, e: OSError, timeout: float) -> Finding:
    """An unreachable server: a warning (the VPN may be off), with the reason in words."""
    if isinstance(e, socket.gaierror):
        return Finding(
            WARN,
            f"cannot find the cluster's host {target.host} (the DNS lookup failed): its CA is "
            "not checked",
            "if the cluster is internal, connect the VPN; else check the server URL",
        )
    if isinstance(e, ConnectionRefusedError):
        return Finding(
            WARN,
            f"nothing answers at {target.address} (connection refused){target.via}: its CA is "
            "not checked",
            "check the server URL's port and that the cluster is running",
        )
    if isinstance(e, TimeoutError | socket.timeout):
        return Finding(
            WARN,
            f"{target.address} did not answer within {timeout:g} s{target.via}: its CA is not "
            "checked",
            "check the network, the VPN, a firewall, or the proxy (HTTPS_PROXY, NO_PROXY)",
        )
    return Finding(
        WARN,
        f"cannot reach {target.address} ({_reason(e)}){target.via}: its CA is not checked",
        "check the network and the server URL",
    )


def _reason(e: OSError) -> str:
    if isinstance(e, TimeoutError | socket.timeout):
        return "no answer in time"
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    return e.strerror or str(e)


def _peer_certificate(target: _Target, timeout: float) -> Any:
    """The server's certificate, read without verifying it (to say what it holds); or None."""
    from cryptography import x509

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        deadline = time.monotonic() + timeout
        with _connect(target, deadline) as sock:
            sock.settimeout(_left(deadline))
            with context.wrap_socket(sock, server_hostname=target.server_name) as tls:
                der = tls.getpeercert(binary_form=True)
        return x509.load_der_x509_certificate(der) if der else None
    except (OSError, ValueError, _Unreachable):
        return None


def _peer_issuer(target: _Target, timeout: float) -> str | None:
    cert = _peer_certificate(target, timeout)
    return str(cert.issuer.rfc4514_string()) if cert is not None else None


def _peer_names(target: _Target, timeout: float) -> list[str]:
    from cryptography import x509

    cert = _peer_certificate(target, timeout)
    if cert is None:
        return []
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    dns = [str(n) for n in san.get_values_for_type(x509.DNSName)]
    return dns + [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]
