"""ClusterProfile access (KEP-5339) for Python controllers: a profile and a provider file in,
what the `kubernetes` client needs to connect out. Standard library only.

Builds the exec configuration as cluster-inventory-api's `pkg/access` does: the first provider
*in file order* named in the profile's `status.accessProviders` (the deprecated
`credentialProviders` too, `accessProviders` winning on a name), the `additional-args` and
`additional-envs` extensions under the provider's policies, and the cluster's
`client.authentication.k8s.io/exec` extension as `spec.cluster.config`. Unlike the reference
library it never writes back into the shared configuration, so one cluster's arguments and
environment cannot leak into the next. Then it runs the plugin per KEP-541 (non-interactive,
cluster info when asked), caches the credential until it expires and runs at most one plugin
at a time per cluster and configuration.

    access = ClusterProfileAccess.from_file("clusterprofile-provider-file.json")
    conn = access.connection(profile)          # profile: the ClusterProfile object as a dict
    cfg = kubernetes.client.Configuration()
    cfg.host = conn.host
    cfg.ssl_ca_cert = <conn.ca_data written to a file>
    cfg.api_key = {"authorization": f"Bearer {conn.token}"}

(docs/clusterprofile.md has the whole example, with a client certificate too.)
"""

import json
import os
import subprocess
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from exec_helper.exec_credential import EXEC_EXTENSION, extension

ARGS_EXTENSION = "clusterprofiles.multicluster.x-k8s.io/exec/additional-args"
ENVS_EXTENSION = "clusterprofiles.multicluster.x-k8s.io/exec/additional-envs"
EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
PLUGIN_TIMEOUT = 60.0
EARLY = timedelta(seconds=10)
"""Run the plugin again this long before the credential expires."""


class AccessError(Exception):
    """The profile, the provider file or the plugin cannot give a connection."""


@dataclass(frozen=True)
class ExecConfig:
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    api_version: str = "client.authentication.k8s.io/v1"
    provide_cluster_info: bool = False


@dataclass(frozen=True)
class Provider:
    name: str
    exec_config: ExecConfig
    args_policy: str = ""
    envs_policy: str = ""


@dataclass(frozen=True)
class Connection:
    """Where to connect and with what."""

    host: str
    ca_data: bytes | None = None
    proxy_url: str | None = None
    token: str | None = None
    client_certificate: str | None = None
    client_key: str | None = None
    expires: datetime | None = None


@dataclass
class _Entry:
    lock: threading.Lock = field(default_factory=threading.Lock)
    connection: Connection | None = None


def load_provider_file(path: str) -> list[Provider]:
    """The providers of a `-clusterprofile-provider-file`, in file order."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise AccessError(f"cannot read the provider file {path}: {e}") from None
    providers = []
    for i, item in enumerate(doc.get("providers") or [] if isinstance(doc, dict) else []):
        ec = item.get("execConfig") or {}
        if not isinstance(ec.get("command"), str):
            raise AccessError(f"{path}: providers[{i}].execConfig.command is missing")
        version = ec.get("apiVersion") or EXEC_API_VERSIONS[0]
        if version not in EXEC_API_VERSIONS:
            raise AccessError(f"exec plugin: invalid apiVersion {version!r}")
        providers.append(
            Provider(
                name=str(item.get("name")),
                exec_config=ExecConfig(
                    command=ec["command"],
                    args=tuple(str(a) for a in ec.get("args") or ()),
                    env=tuple((str(e["name"]), str(e["value"])) for e in ec.get("env") or ()),
                    api_version=version,
                    provide_cluster_info=bool(ec.get("provideClusterInfo")),
                ),
                args_policy=str(item.get("profileSourcedCLIArgsPolicy") or ""),
                envs_policy=str(item.get("profileSourcedEnvVarsPolicy") or ""),
            )
        )
    return providers


def _string_list(value: Any) -> list[str]:
    if isinstance(value, str):  # the reference library accepts a YAML/JSON string
        value = json.loads(value) if value.strip() else []
    if not isinstance(value, list):
        raise AccessError(f"{ARGS_EXTENSION} must be a list of strings")
    return [str(v) for v in value]


def exec_config_for(
    profile: dict[str, Any], providers: list[Provider]
) -> tuple[ExecConfig, dict[str, Any]]:
    """The exec configuration and cluster of ``profile``, as the reference library builds them."""
    status = profile.get("status") or {}
    access: dict[str, dict[str, Any]] = {}
    for key in ("credentialProviders", "accessProviders"):  # the later wins on a name
        for item in status.get(key) or ():
            access[str(item.get("name"))] = item
    chosen = next((p for p in providers if p.name in access), None)
    if chosen is None:
        name = (profile.get("metadata") or {}).get("name", "?")
        raise AccessError(
            f"no provider in the file serves ClusterProfile {name} (it offers {sorted(access)})"
        )
    cluster = dict(access[chosen.name].get("cluster") or {})
    if not cluster.get("server"):
        raise AccessError(f"the {chosen.name} access provider of the profile names no server")
    config = chosen.exec_config
    args = list(config.args)
    extra_args = extension(cluster, ARGS_EXTENSION)
    if chosen.args_policy == "Append" and extra_args is not None:
        args += _string_list(extra_args)
    elif chosen.args_policy not in ("", "Ignore", "Append"):
        raise AccessError(f"unsupported ProfileSourcedCLIArgsPolicy {chosen.args_policy!r}")
    env = dict(config.env)
    extra_env = extension(cluster, ENVS_EXTENSION) or {}
    if chosen.envs_policy == "AppendIfNotExists":
        env = {**{str(k): str(v) for k, v in extra_env.items()}, **env}
    elif chosen.envs_policy == "Replace":
        env = {**env, **{str(k): str(v) for k, v in extra_env.items()}}
    elif chosen.envs_policy not in ("", "Ignore"):
        raise AccessError(f"unsupported ProfileSourcedEnvVarsPolicy {chosen.envs_policy!r}")
    built = ExecConfig(
        config.command,
        tuple(args),
        tuple(sorted(env.items())),
        config.api_version,
        config.provide_cluster_info,
    )
    return built, cluster


def _exec_info(config: ExecConfig, cluster: dict[str, Any]) -> str:
    spec: dict[str, Any] = {"interactive": False}  # cluster-inventory forces Never
    if config.provide_cluster_info:
        info: dict[str, Any] = {"server": cluster["server"]}
        for key in ("certificate-authority-data", "proxy-url"):
            if cluster.get(key):
                info[key] = cluster[key]
        info["config"] = extension(cluster, EXEC_EXTENSION)
        spec = {"cluster": info, "interactive": False}
    return (
        json.dumps(
            {"kind": "ExecCredential", "apiVersion": config.api_version, "spec": spec},
            separators=(",", ":"),
        )
        + "\n"
    )


class ClusterProfileAccess:
    """Connections for ClusterProfiles through the providers of one provider file."""

    def __init__(self, providers: list[Provider]) -> None:
        self.providers = providers
        self.runs = 0
        """How many times a plugin ran (for tests and metrics)."""
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}

    @classmethod
    def from_file(cls, path: str) -> "ClusterProfileAccess":
        return cls(load_provider_file(path))

    def connection(self, profile: dict[str, Any], now: datetime | None = None) -> Connection:
        """A current connection for the profile's cluster (the plugin runs only when needed)."""
        config, cluster = exec_config_for(profile, self.providers)
        key = json.dumps(
            [
                config.command,
                config.args,
                config.env,
                config.api_version,
                cluster.get("server"),
                cluster.get("certificate-authority-data"),
                extension(cluster, EXEC_EXTENSION) if config.provide_cluster_info else None,
            ],
            sort_keys=True,
        )
        with self._lock:
            entry = self._entries.setdefault(key, _Entry())
        with entry.lock:
            now = now or datetime.now(UTC)
            cached = entry.connection
            if cached is not None and (cached.expires is None or now < cached.expires - EARLY):
                return cached
            entry.connection = self._run(config, cluster)
            return entry.connection

    def _run(self, config: ExecConfig, cluster: dict[str, Any]) -> Connection:
        env = {
            **os.environ,
            **dict(config.env),
            "KUBERNETES_EXEC_INFO": _exec_info(config, cluster),
        }
        with self._lock:
            self.runs += 1
        try:
            done = subprocess.run(
                [config.command, *config.args],
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=PLUGIN_TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise AccessError(f"exec plugin {config.command} could not run: {e}") from None
        if done.returncode != 0:
            raise AccessError(
                f"exec plugin {config.command} failed with exit code {done.returncode}: "
                f"{done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ''}"
            )
        try:
            doc = json.loads(done.stdout)
        except ValueError as e:
            raise AccessError(f"decoding stdout: {e}") from None
        if doc.get("apiVersion") != config.api_version:
            raise AccessError(
                f"exec plugin is configured to use API version {config.api_version}, "
                f"plugin returned version {doc.get('apiVersion')}"
            )
        status = doc.get("status") or {}
        if not status.get("token") and not (
            status.get("clientCertificateData") and status.get("clientKeyData")
        ):
            raise AccessError("exec plugin didn't return a token or cert/key pair")
        expiry = status.get("expirationTimestamp")
        ca = cluster.get("certificate-authority-data")
        import base64

        return Connection(
            host=cluster["server"],
            ca_data=base64.b64decode(ca) if ca else None,
            proxy_url=cluster.get("proxy-url"),
            token=status.get("token"),
            client_certificate=status.get("clientCertificateData"),
            client_key=status.get("clientKeyData"),
            expires=datetime.fromisoformat(expiry.replace("Z", "+00:00")) if expiry else None,
        )
