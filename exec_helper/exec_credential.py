"""ExecCredential (client.authentication.k8s.io, KEP-541): KUBERNETES_EXEC_INFO in, reply out.

The agent parses and renders on the helper's behalf (the helper stays free of ``json``); the
helper itself uses this module only on its slow path, to reject bad input before it starts an
agent. Behaviour follows what client-go and the Python client actually send and accept
(../shared/EXEC-CONSUMERS.md).
"""

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

GROUP = "client.authentication.k8s.io"
KIND = "ExecCredential"
API_VERSIONS = (f"{GROUP}/v1", f"{GROUP}/v1beta1", f"{GROUP}/v1alpha1")
EXEC_EXTENSION = "client.authentication.k8s.io/exec"
ENV_NAME = "KUBERNETES_EXEC_INFO"
MAX_EXEC_INFO = 256 * 1024
"""Linux caps one environment string at 128 KiB; anything larger is not from a consumer."""


class ExecInfoError(ValueError):
    """KUBERNETES_EXEC_INFO is missing or not an ExecCredential we can answer."""


@dataclass(frozen=True)
class Cluster:
    """The cluster the caller talks to (present when the kubeconfig sets provideClusterInfo)."""

    server: str
    config: dict[str, Any] | None
    """The cluster's client.authentication.k8s.io/exec extension, None when absent or null."""
    certificate_authority_data: str | None = None
    proxy_url: str | None = None


@dataclass(frozen=True)
class ExecInfo:
    """What the caller asked for."""

    api_version: str
    interactive: bool
    cluster: Cluster | None = None
    response_code: int | None = None
    """v1alpha1 only: the HTTP status that made an old client run the plugin again (401)."""


def _object(value: Any, what: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ExecInfoError(f"decode: {what} must be a JSON object, not {_json_type(value)}")
    return value


def _json_type(value: Any) -> str:
    names = {str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    if value is None:
        return "null"
    if isinstance(value, list):
        return "an array"
    return names.get(type(value), type(value).__name__)


def extension(cluster: dict[str, Any], name: str = EXEC_EXTENSION) -> Any:
    """The value of a kubeconfig cluster's extension ``name`` (None when it has none)."""
    extensions = cluster.get("extensions")
    for entry in extensions if isinstance(extensions, list) else ():
        if isinstance(entry, dict) and entry.get("name") == name:
            return entry.get("extension")
    return None


def _cluster_config(cluster: dict[str, Any]) -> dict[str, Any] | None:
    if "config" in cluster:
        return _object(cluster["config"], "spec.cluster.config (the cluster's exec extension)")
    # The Python client before v34.1 passes the raw kubeconfig cluster, extensions list included.
    return _object(extension(cluster), f"the {EXEC_EXTENSION} extension")


NO_EXEC_INFO = ExecInfo(api_version=f"{GROUP}/v1beta1", interactive=False)
"""An absent or empty KUBERNETES_EXEC_INFO (client-node never sets it): kubelogin's reading."""


def parse_exec_info(text: str | None) -> ExecInfo:
    """Parse and validate KUBERNETES_EXEC_INFO; absent or empty is NO_EXEC_INFO."""
    if not text:
        return NO_EXEC_INFO
    if len(text) > MAX_EXEC_INFO:
        raise ExecInfoError(f"decode: {ENV_NAME} is larger than {MAX_EXEC_INFO} bytes")
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise ExecInfoError(f"decode: {ENV_NAME} is not valid JSON: {e}") from None
    except RecursionError:
        raise ExecInfoError(f"decode: {ENV_NAME} is nested too deeply") from None
    obj = _object(doc, ENV_NAME)
    if obj is None:
        raise ExecInfoError(f"decode: {ENV_NAME} must be a JSON object, not null")
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    group = api_version.rpartition("/")[0] if isinstance(api_version, str) else ""
    if kind != KIND or group != GROUP:
        raise ExecInfoError(
            f"invalid group/kind: wanted {KIND}.{GROUP}, got {kind}.{group or '<none>'}"
        )
    if api_version not in API_VERSIONS:
        supported = ", ".join(v.rpartition("/")[2] for v in API_VERSIONS)
        raise ExecInfoError(
            f"unsupported apiVersion {api_version}: kubetray-exec speaks {GROUP} {supported}"
        )
    spec = _object(obj.get("spec"), "spec") or {}
    interactive = spec.get("interactive", False)
    if not isinstance(interactive, bool):
        raise ExecInfoError(
            f"decode: spec.interactive must be a boolean, not {_json_type(interactive)}"
        )
    response = _object(spec.get("response"), "spec.response") or {}
    code = response.get("code")
    raw_cluster = _object(spec.get("cluster"), "spec.cluster")
    cluster = None
    if raw_cluster is not None:
        server = raw_cluster.get("server")
        if not isinstance(server, str) or not server:
            raise ExecInfoError("decode: spec.cluster.server must be a non-empty string")
        ca = raw_cluster.get("certificate-authority-data")
        proxy = raw_cluster.get("proxy-url")
        cluster = Cluster(
            server=server,
            config=_cluster_config(raw_cluster),
            certificate_authority_data=ca if isinstance(ca, str) else None,
            proxy_url=proxy if isinstance(proxy, str) else None,
        )
    return ExecInfo(
        api_version=api_version,
        interactive=interactive,
        cluster=cluster,
        response_code=code if isinstance(code, int) else None,
    )


def format_timestamp(when: datetime) -> str:
    """RFC 3339 in UTC with a capital T and Z, whole seconds: what every consumer parses."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def render(
    api_version: str,
    *,
    token: str | None = None,
    client_certificate_data: str | None = None,
    client_key_data: str | None = None,
    expiration: datetime | None = None,
) -> str:
    """One ExecCredential JSON document (and a newline) for stdout."""
    if not token and not (client_certificate_data and client_key_data):
        raise ValueError("an ExecCredential needs a token or a certificate and key pair")
    status: dict[str, str] = {}
    if expiration is not None:
        status["expirationTimestamp"] = format_timestamp(expiration)
    if token:
        status["token"] = token
    if client_certificate_data and client_key_data:
        status["clientCertificateData"] = client_certificate_data
        status["clientKeyData"] = client_key_data
    doc = {"apiVersion": api_version, "kind": KIND, "status": status}
    return json.dumps(doc, separators=(",", ":")) + "\n"
