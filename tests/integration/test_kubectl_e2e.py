"""Real kubectl (1.27, 1.33) and the Python client, kubetray-exec --stored, an HTTPS stand-in.

The stand-in accepts only the stored bearer token, or only the stored client certificate
(mTLS); anything else is 401. kubeconfigs are what a user would write by hand today.
"""

import base64
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.apiserver import NAMESPACES, APIServer
from tests.peers import KubetrayEnv, kubectl_binaries, require
from tests.pki import CA, Issued

TOKEN = "e2e-bearer-token-8f3a"
CLIENT_CN = "kubetray-e2e-user"
VERSIONS = ["1.27", "1.33"]


@pytest.fixture(scope="module")
def ca() -> CA:
    return CA()


@pytest.fixture(scope="module")
def client_cert(ca: CA) -> Issued:
    return ca.issue(CLIENT_CN, org="system:masters")


@pytest.fixture
def api(ca: CA) -> Iterator[APIServer]:
    with APIServer(ca, token=TOKEN, client_cn=CLIENT_CN) as server:
        yield server


@pytest.fixture
def stored(
    kt: KubetrayEnv, keyring_session: None, name: str, client_cert: Issued, ca: CA, tmp_path: Path
) -> Iterator[dict[str, str]]:
    names = {"token": name, "cert": name + "-cert", "wrong": name + "-wrong"}
    kt.store_token(names["token"], TOKEN)
    kt.store_certificate(names["cert"], client_cert.cert_pem, client_cert.key_pem)
    kt.store_token(names["wrong"], "not-the-right-token")
    yield names
    for n in names.values():
        kt.kubetray("forget", n)


def kubeconfig(kt: KubetrayEnv, api: APIServer, stored_name: str, path: Path) -> Path:
    """A kubeconfig whose user runs kubetray-exec; the exec env names kubetray's directories."""
    env = [
        {"name": k, "value": v}
        for k, v in kt.env.items()
        if k.startswith("KUBETRAY_") or k == "PYTHONPATH"
    ]
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "e2e",
        "clusters": [
            {
                "name": "e2e",
                "cluster": {
                    "server": api.url,
                    "certificate-authority-data": base64.b64encode(api.ca_pem).decode(),
                },
            }
        ],
        "users": [
            {
                "name": "e2e",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1",
                        "command": str(kt.helper),
                        "args": ["--stored", stored_name],
                        "env": env,
                        "interactiveMode": "Never",
                        "provideClusterInfo": True,
                        "installHint": "install kubetray",
                    }
                },
            }
        ],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "e2e"}}],
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def kubectl(version: str, config: Path, kt: KubetrayEnv) -> subprocess.CompletedProcess[str]:
    binaries = kubectl_binaries()
    require(
        version in binaries,
        f"kubectl {version} is not installed (the machine's kubectl package has it)",
    )
    # The parent environment names a *wrong* runtime directory: kubeconfig's exec env must win (#35).
    env = dict(kt.env, KUBETRAY_RUNTIME_DIR="/nonexistent/kubetray", HOME=str(kt.home))
    return subprocess.run(
        [binaries[version], "--kubeconfig", str(config), "get", "namespaces", "-o", "name"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.kubectl
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("mode", ["token", "cert"])
def test_kubectl_lists_namespaces(
    kt: KubetrayEnv, api: APIServer, stored: dict[str, str], tmp_path: Path, version: str, mode: str
) -> None:
    config = kubeconfig(kt, api, stored[mode], tmp_path / "kubeconfig")
    done = kubectl(version, config, kt)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [f"namespace/{n}" for n in NAMESPACES]
    assert set(api.outcomes()) == {mode}
    call = kt.calls()[0]
    assert call["identity"] == stored[mode] and call["cluster"] == api.url
    assert call["caller"]["parents"][0].startswith("kubectl")


@pytest.mark.kubectl
@pytest.mark.parametrize("version", VERSIONS)
def test_one_401_runs_the_helper_once_more(
    kt: KubetrayEnv, api: APIServer, stored: dict[str, str], tmp_path: Path, version: str
) -> None:
    config = kubeconfig(kt, api, stored["token"], tmp_path / "kubeconfig")
    api.reject_next = 1
    kubectl(version, config, kt)
    assert api.outcomes()[0] == "401"
    assert len([c for c in kt.calls() if c["identity"] == stored["token"]]) == 2


@pytest.mark.kubectl
@pytest.mark.parametrize("version", VERSIONS)
def test_kubectl_with_a_rejected_token_fails_without_leaking_it(
    kt: KubetrayEnv, api: APIServer, stored: dict[str, str], tmp_path: Path, version: str
) -> None:
    config = kubeconfig(kt, api, stored["wrong"], tmp_path / "kubeconfig")
    done = kubectl(version, config, kt)
    assert done.returncode != 0
    assert "not-the-right-token" not in done.stderr + done.stdout
    # client-go runs the plugin again after each 401 (identical input, v1: no hint why)
    runs = len([c for c in kt.calls() if c["identity"] == stored["wrong"]])
    assert runs == 1 + api.outcomes().count("401")


@pytest.mark.kubectl
def test_kubectl_shows_the_helpers_error(
    kt: KubetrayEnv, api: APIServer, keyring_session: None, tmp_path: Path
) -> None:
    config = kubeconfig(kt, api, "never-stored", tmp_path / "kubeconfig")
    done = kubectl("1.33", config, kt)
    assert done.returncode != 0
    assert "no stored credential named 'never-stored'" in done.stderr
    assert "executable" in done.stderr and "failed with exit code 1" in done.stderr
    assert api.outcomes() == []  # nothing unauthenticated went out


@pytest.mark.parametrize("mode", ["token", "cert"])
def test_python_client_lists_namespaces(
    kt: KubetrayEnv, api: APIServer, stored: dict[str, str], tmp_path: Path, mode: str
) -> None:
    import kubernetes

    config = kubeconfig(kt, api, stored[mode], tmp_path / "kubeconfig")
    client = kubernetes.config.new_client_from_config(config_file=str(config))
    try:
        names = [
            ns.metadata.name for ns in kubernetes.client.CoreV1Api(client).list_namespace().items
        ]
    finally:
        client.close()
    assert names == NAMESPACES
    assert set(api.outcomes()) == {mode}


@pytest.mark.kubectl
def test_kubectls_retries_of_a_failure_are_answered_from_memory_with_their_reason(
    kt: KubetrayEnv, keyring_session: None, api: APIServer, tmp_path: Path
) -> None:
    """kubectl runs the plugin again at once after a failure (discovery retries): the agent
    answers the repeats from memory, and each answer carries the reason (a long-lived client
    shows only the last failure it got, so a silent repeat would leave it without one)."""
    config = kubeconfig(kt, api, "nobody-stored-this", tmp_path / "kubeconfig")
    for _ in range(2):
        done = kubectl("1.33", config, kt)
        assert done.returncode != 0
        # One "failed with exit code 1" per run, and kubectl's last line repeats the last one.
        runs = done.stderr.count("failed with exit code 1") - done.stderr.count(
            "Unable to connect to the server: getting credentials"
        )
        assert runs >= 1 and done.stderr.count("no stored credential named") >= runs, done.stderr
    records = kt.calls()
    repeated = [r for r in records if (r["error"] or "").startswith("(repeated)")]
    assert repeated and len(records) > len(repeated) + 1
