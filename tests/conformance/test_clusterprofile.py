"""EXEC-CONSUMERS.md §7: ClusterProfile access (KEP-5339), with a trivial plugin and kubetray-exec."""

import base64
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from exec_helper.clusterprofile import (
    ARGS_EXTENSION,
    ENVS_EXTENSION,
    EXEC_EXTENSION,
    AccessError,
    ClusterProfileAccess,
    exec_config_for,
    load_provider_file,
)
from tests.apiserver import NAMESPACES, APIServer
from tests.peers import ROOT, KubetrayEnv
from tests.pki import CA

ECHO = [sys.executable, str(ROOT / "tests" / "plugins" / "echo_plugin.py")]


def provider_file(path: Path, *providers: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"providers": list(providers)}))
    return path


def echo_provider(
    name: str = "echo",
    args: list[str] | None = None,
    env: dict[str, str] | None = None,
    args_policy: str = "",
    envs_policy: str = "",
    command: list[str] | None = None,
) -> dict[str, Any]:
    cmd = command or ECHO
    return {
        "name": name,
        "execConfig": {
            "command": cmd[0],
            "args": [*cmd[1:], *(args or [])],
            "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
            "apiVersion": "client.authentication.k8s.io/v1",
            "provideClusterInfo": True,
        },
        "profileSourcedCLIArgsPolicy": args_policy,
        "profileSourcedEnvVarsPolicy": envs_policy,
    }


def profile(
    name: str,
    server: str,
    config: Any = None,
    extra_args: Any = None,
    extra_envs: Any = None,
    providers: tuple[str, ...] = ("echo",),
    key: str = "accessProviders",
) -> dict[str, Any]:
    extensions = []
    if config is not None:
        extensions.append({"name": EXEC_EXTENSION, "extension": config})
    if extra_args is not None:
        extensions.append({"name": ARGS_EXTENSION, "extension": extra_args})
    if extra_envs is not None:
        extensions.append({"name": ENVS_EXTENSION, "extension": extra_envs})
    return {
        "metadata": {"name": name},
        "status": {
            key: [
                {"name": p, "cluster": {"server": server, "extensions": extensions}}
                for p in providers
            ]
        },
    }


def seen(access: ClusterProfileAccess, prof: dict[str, Any]) -> dict[str, Any]:
    token = access.connection(prof).token
    assert token is not None
    return dict(json.loads(token))


def test_policies_per_cluster_without_leaks(tmp_path: Path) -> None:
    append = ClusterProfileAccess.from_file(
        str(
            provider_file(
                tmp_path / "p.json",
                echo_provider(
                    args=["--audience", "default"],
                    env={"CP_TENANT": "file"},
                    args_policy="Append",
                    envs_policy="AppendIfNotExists",
                ),
            )
        )
    )
    a = profile(
        "a",
        "https://a.example",
        config={"stored": "a"},
        extra_args=["--audience", "a"],
        extra_envs={"CP_TENANT": "a", "CP_ONLY_A": "1"},
    )
    b = profile(
        "b",
        "https://b.example",
        config={"stored": "b"},
        extra_args='["--audience", "b"]',
        extra_envs={"CP_TENANT": "b"},
    )
    sa, sb = seen(append, a), seen(append, b)
    assert sa["server"] == "https://a.example" and sa["config"] == {"stored": "a"}
    assert sa["args"] == ["--audience", "default", "--audience", "a"]
    assert sb["args"] == ["--audience", "default", "--audience", "b"]  # a's args never reach b
    assert sa["env"] == {"CP_TENANT": "file", "CP_ONLY_A": "1"}  # the file wins
    assert sb["env"] == {"CP_TENANT": "file"}  # nor does a's env
    assert sa["interactive"] is False
    replace = ClusterProfileAccess.from_file(
        str(
            provider_file(
                tmp_path / "r.json",
                echo_provider(
                    env={"CP_TENANT": "file"}, args_policy="Ignore", envs_policy="Replace"
                ),
            )
        )
    )
    sr = seen(replace, a)
    assert sr["env"]["CP_TENANT"] == "a" and sr["args"] == []  # the profile wins; args ignored
    ignore = ClusterProfileAccess.from_file(
        str(provider_file(tmp_path / "i.json", echo_provider(env={"CP_TENANT": "file"})))
    )
    assert seen(ignore, a)["env"] == {"CP_TENANT": "file"}


def test_provider_choice_and_errors(tmp_path: Path) -> None:
    providers = load_provider_file(
        str(provider_file(tmp_path / "p.json", echo_provider("first"), echo_provider("second")))
    )
    both = profile("x", "https://x", providers=("second", "first"))
    assert exec_config_for(both, providers)[0] == providers[0].exec_config  # file order decides
    legacy = profile("y", "https://y", providers=("second",), key="credentialProviders")
    assert exec_config_for(legacy, providers)[0] == providers[1].exec_config
    with pytest.raises(AccessError, match="no provider in the file serves ClusterProfile z"):
        exec_config_for(profile("z", "https://z", providers=("other",)), providers)
    bad = load_provider_file(
        str(provider_file(tmp_path / "b.json", echo_provider(args_policy="Sometimes")))
    )
    with pytest.raises(AccessError, match="unsupported ProfileSourcedCLIArgsPolicy 'Sometimes'"):
        exec_config_for(profile("x", "https://x", extra_args=["a"]), bad)
    (tmp_path / "v.json").write_text(
        json.dumps(
            {
                "providers": [
                    {
                        **echo_provider(),
                        "execConfig": {
                            **echo_provider()["execConfig"],
                            "apiVersion": "client.authentication.k8s.io/v1alpha1",
                        },
                    }
                ]
            }
        )
    )
    with pytest.raises(AccessError, match="invalid apiVersion"):
        load_provider_file(str(tmp_path / "v.json"))


def test_repeated_and_parallel_runs_are_cheap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = tmp_path / "runs"
    monkeypatch.setenv("CP_RUNS_FILE", str(runs))
    access = ClusterProfileAccess.from_file(
        str(provider_file(tmp_path / "p.json", echo_provider()))
    )
    profiles = [profile(f"c{i}", f"https://c{i}.example", config={"n": i}) for i in range(3)]
    with ThreadPoolExecutor(12) as pool:
        list(pool.map(lambda i: access.connection(profiles[i % 3]), range(36)))
    assert access.runs == 3 and len(runs.read_text().splitlines()) == 3  # one run per cluster


def test_kubetray_exec_as_the_access_provider(
    kt: KubetrayEnv, keyring_session: None, name: str, tmp_path: Path
) -> None:
    for suffix in ("a", "b", "env"):
        kt.store_token(f"{name}-{suffix}", f"token-for-{suffix}")
    helper = [str(kt.helper)]
    env = {k: v for k, v in kt.env.items() if k.startswith("KUBETRAY_") or k == "PYTHONPATH"}
    access = ClusterProfileAccess.from_file(
        str(
            provider_file(
                tmp_path / "p.json",
                echo_provider(
                    "kubetray",
                    args=["--stored", f"{name}-a"],
                    env=env,
                    args_policy="Append",
                    envs_policy="Replace",
                    command=helper,
                ),
            )
        )
    )
    ca = CA()
    with APIServer(ca, token="token-for-b") as api:
        by_config = profile(
            "b",
            api.url,
            config={"stored": f"{name}-b"},
            extra_args=["--stored", f"{name}-a"],
            providers=("kubetray",),
        )
        by_config["status"]["accessProviders"][0]["cluster"]["certificate-authority-data"] = (
            base64.b64encode(api.ca_pem).decode()
        )
        conn = access.connection(by_config)
        assert conn.token == "token-for-b"  # config beats the (accumulated) args
        import kubernetes

        cfg = kubernetes.client.Configuration()
        cfg.host = conn.host
        (tmp_path / "ca.crt").write_bytes(conn.ca_data or b"")
        cfg.ssl_ca_cert = str(tmp_path / "ca.crt")
        cfg.api_key = {"authorization": f"Bearer {conn.token}"}
        with kubernetes.client.ApiClient(cfg) as client:
            names = [
                n.metadata.name for n in kubernetes.client.CoreV1Api(client).list_namespace().items
            ]
        assert names == NAMESPACES
    by_args = profile("a", "https://a.example", providers=("kubetray",))
    assert access.connection(by_args).token == "token-for-a"
    by_env = profile(
        "e",
        "https://e.example",
        extra_envs={"KUBETRAY_STORED": f"{name}-env"},
        providers=("kubetray",),
    )
    # env is the lowest: the static --stored argument still wins over the profile's env
    assert access.connection(by_env).token == "token-for-a"
    only_env = ClusterProfileAccess.from_file(
        str(
            provider_file(
                tmp_path / "e.json",
                echo_provider("kubetray", env=env, envs_policy="Replace", command=helper),
            )
        )
    )
    assert only_env.connection(by_env).token == "token-for-env"
    for suffix in ("a", "b", "env"):
        kt.kubetray("forget", f"{name}-{suffix}")
