"""doctor's cluster check against real TLS servers: the CA kubeconfig names verifies the API
server (PASS), or does not (FAIL, with the kubectl line that fixes it); an unreachable server is
a warning, not a CA failure; the clusters are checked at once; proxies are gone through."""

import base64
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from app import cluster_tls, doctor
from app.cluster_tls import ClusterTLS, no_proxy_matches
from app.kubeconfig.view import View
from tests.apiserver import APIServer
from tests.peers import ROOT, KubetrayEnv
from tests.pki import CA

HELPER = "/opt/kubetray/kubetray-exec"


def kubetray_user(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "user": {
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": HELPER,
                "args": ["--stored", name],
            }
        },
    }


def write(
    path: Path, clusters: dict[str, dict[str, Any]], other: frozenset[str] = frozenset()
) -> Path:
    """One context per cluster, each with a kubetray user unless named in ``other``."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": c} for n, c in clusters.items()],
        "users": [kubetray_user("kt"), {"name": "static", "user": {"token": "t"}}],
        "contexts": [
            {
                "name": f"ctx-{n}",
                "context": {"cluster": n, "user": "static" if n in other else "kt"},
            }
            for n in clusters
        ],
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def closed_port() -> int:
    """A loopback port nothing listens on (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def black_hole() -> Iterator[int]:
    """A port that accepts TCP (the kernel's backlog) but never speaks TLS."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield int(s.getsockname()[1])


def checks(config: Path, timeout: float = cluster_tls.TIMEOUT) -> dict[str, doctor.Check]:
    view = View.load([str(config)])
    users = list(doctor.kubetray_users(view))
    return {c.name: c for c in doctor.check_clusters(view, users, timeout)}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_a_matching_ca_passes_a_wrong_or_missing_one_fails_an_unreachable_server_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HTTPS_PROXY", raising=False)
    monkeypatch.delenv("https_proxy", raising=False)
    other_ca = CA("another CA")
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "other-ca.crt").write_bytes(other_ca.cert_pem)
    down = closed_port()
    with APIServer(CA()) as api:
        config = write(
            tmp_path / "config",
            {
                "good": {"server": api.url, "certificate-authority-data": b64(api.ca_pem)},
                # A relative path starts at the kubeconfig's directory, as in client-go.
                "wrong-ca": {"server": api.url, "certificate-authority": "certs/other-ca.crt"},
                "no-ca": {"server": api.url},
                "down": {"server": f"https://127.0.0.1:{down}"},
                "not-kubetrays": {"server": api.url},
            },
            other=frozenset({"not-kubetrays"}),
        )
        got = checks(config)
    assert set(got) == {"cluster good", "cluster wrong-ca", "cluster no-ca", "cluster down"}

    good = got["cluster good"]
    assert (good.ok, good.warn) == (True, False)
    assert good.detail == f"CA verifies {api.url} (certificate-authority-data)"

    wrong = got["cluster wrong-ca"]
    assert not wrong.ok
    assert wrong.detail == (
        "x509: the server's certificate is not signed by the cluster's CA (certificate-authority "
        "in kubeconfig) but by CN=kubetray test CA: kubectl will fail with 'certificate signed "
        "by unknown authority'"
    )
    assert wrong.remedy == (
        f"set the cluster's CA: kubectl config set-cluster wrong-ca --kubeconfig={config} "
        "--certificate-authority=FILE --embed-certs"
    )

    missing = got["cluster no-ca"]
    assert not missing.ok
    assert missing.detail == (
        "x509: the server's certificate is signed by CN=kubetray test CA, which this system "
        "does not trust, and kubeconfig names no CA for the cluster: kubectl will fail with "
        "'certificate signed by unknown authority'"
    )
    assert "kubectl config set-cluster no-ca" in str(missing.remedy)

    unreachable = got["cluster down"]
    assert (unreachable.ok, unreachable.warn) == (True, True)
    assert unreachable.detail == (
        f"nothing answers at 127.0.0.1:{down} (connection refused): its CA is not checked"
    )
    assert unreachable.remedy == "check the server URL's port and that the cluster is running"


def test_the_kubectl_line_names_no_file_when_kubectl_edits_that_one_anyway(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with APIServer(CA()) as api:
        config = write(tmp_path / "config", {"c": {"server": api.url}})
        monkeypatch.setenv("KUBECONFIG", str(config))
        found = checks(config)["cluster c"]
    assert found.remedy == (
        "set the cluster's CA: kubectl config set-cluster c --certificate-authority=FILE "
        "--embed-certs"
    )


def test_clusters_are_checked_at_once_and_a_silent_one_costs_one_timeout(tmp_path: Path) -> None:
    with black_hole() as a, black_hole() as b, black_hole() as c:
        config = write(
            tmp_path / "config",
            {n: {"server": f"https://127.0.0.1:{p}"} for n, p in (("a", a), ("b", b), ("c", c))},
        )
        start = time.monotonic()
        got = checks(config, timeout=5)
        took = time.monotonic() - start
    assert took < 10, took  # three in a row would take 15 s
    for name, port in (("a", a), ("b", b), ("c", c)):
        found = got[f"cluster {name}"]
        assert (found.ok, found.warn) == (True, True)
        assert found.detail == f"127.0.0.1:{port} did not answer within 5 s: its CA is not checked"


def test_insecure_skip_tls_verify_warns_and_is_refused_beside_a_ca(tmp_path: Path) -> None:
    with APIServer(CA()) as api:
        config = write(
            tmp_path / "config",
            {
                "insecure": {"server": api.url, "insecure-skip-tls-verify": True},
                "both": {
                    "server": api.url,
                    "insecure-skip-tls-verify": True,
                    "certificate-authority-data": b64(api.ca_pem),
                },
                "two-cas": {
                    "server": api.url,
                    "certificate-authority": str(tmp_path / "ca.crt"),
                    "certificate-authority-data": b64(api.ca_pem),
                },
                "junk-ca": {"server": api.url, "certificate-authority-data": "bm90IGEgY2VydA=="},
                "missing-file": {"server": api.url, "certificate-authority": "/nonexistent/ca.crt"},
            },
        )
        got = checks(config)
    insecure = got["cluster insecure"]
    assert (insecure.ok, insecure.warn) == (True, True)
    assert insecure.detail.startswith(
        f"{api.url} answers but is not verified (insecure-skip-tls-verify: true)"
    )
    assert str(insecure.remedy).endswith("--embed-certs --insecure-skip-tls-verify=false")
    both = got["cluster both"]
    assert (
        not both.ok and "specifying a root certificates file with the insecure flag" in both.detail
    )
    assert not got["cluster two-cas"].ok
    assert "are both specified" in got["cluster two-cas"].detail
    assert got["cluster junk-ca"].detail.startswith(
        "its certificate-authority-data holds no PEM certificate"
    )
    assert got["cluster missing-file"].detail.startswith(
        "its certificate-authority /nonexistent/ca.crt cannot be read (No such file or directory)"
    )


def test_tls_server_name_is_the_name_verified(tmp_path: Path) -> None:
    with APIServer(CA()) as api:
        ca = b64(api.ca_pem)
        config = write(
            tmp_path / "config",
            {
                "by-name": {
                    "server": api.url,
                    "certificate-authority-data": ca,
                    "tls-server-name": "localhost",
                },
                "wrong-name": {
                    "server": api.url,
                    "certificate-authority-data": ca,
                    "tls-server-name": "kube.example",
                },
            },
        )
        got = checks(config)
    assert got["cluster by-name"].ok and not got["cluster by-name"].warn
    wrong = got["cluster wrong-name"]
    assert not wrong.ok
    assert wrong.detail.startswith(
        "x509: the server's certificate is not valid for kube.example (it is valid for "
        "localhost, 127.0.0.1)"
    )
    assert "--tls-server-name=NAME" in str(wrong.remedy)


class ConnectProxy:
    """An HTTP CONNECT proxy that sends every tunnel to 127.0.0.1 (so names need no DNS)."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = int(self.sock.getsockname()[1])
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._tunnel, args=(client,), daemon=True).start()

    def _tunnel(self, client: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            head += client.recv(4096)
        target = head.split(b"\r\n", 1)[0].split()[1].decode()
        self.seen.append(target)
        upstream = socket.create_connection(("127.0.0.1", int(target.rsplit(":", 1)[1])))
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")

        def pump(src: socket.socket, dst: socket.socket) -> None:
            try:
                while data := src.recv(65536):
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                dst.close()

        threading.Thread(target=pump, args=(upstream, client), daemon=True).start()
        pump(client, upstream)

    def close(self) -> None:
        self.sock.close()


def test_https_proxy_is_gone_through_unless_no_proxy_says_direct(tmp_path: Path) -> None:
    proxy = ConnectProxy()
    try:
        with APIServer(CA()) as api:
            port = api.url.rsplit(":", 1)[1]
            settings = {
                "server": f"https://kube.invalid:{port}",
                "certificate-authority-data": b64(api.ca_pem),
                "tls-server-name": "localhost",
            }
            cluster = ClusterTLS.from_entry({"name": "p", "cluster": settings}, "config")
            env = {"HTTPS_PROXY": f"http://user:pw@127.0.0.1:{proxy.port}"}
            through = cluster_tls.check(cluster, environ=env)
            direct = cluster_tls.check(cluster, environ={**env, "NO_PROXY": ".invalid"})
            by_url = ClusterTLS.from_entry(
                {
                    "name": "u",
                    "cluster": {**settings, "proxy-url": f"http://127.0.0.1:{proxy.port}"},
                },
                "config",
            )
            own = cluster_tls.check(by_url, environ={})
    finally:
        proxy.close()
    assert through.verdict == cluster_tls.PASS
    assert through.detail == (
        f"CA verifies https://kube.invalid:{port} (certificate-authority-data, through the proxy "
        f"127.0.0.1:{proxy.port})"
    )
    assert "user" not in through.detail and "pw" not in through.detail
    assert proxy.seen == [f"kube.invalid:{port}", f"kube.invalid:{port}"]
    assert own.verdict == cluster_tls.PASS  # the cluster's proxy-url, with no HTTPS_PROXY
    assert direct.verdict == cluster_tls.WARN
    assert direct.detail == (
        "cannot find the cluster's host kube.invalid (the DNS lookup failed): its CA is not checked"
    )


def test_a_proxy_that_does_not_answer_is_a_warning_and_a_socks_one_is_not_checked() -> None:
    cluster = ClusterTLS.from_entry(
        {"name": "c", "cluster": {"server": "https://kube.invalid"}}, "f"
    )
    down = closed_port()
    found = cluster_tls.check(cluster, environ={"https_proxy": f"127.0.0.1:{down}"})
    assert found.verdict == cluster_tls.WARN
    assert found.detail.startswith(
        f"the proxy 127.0.0.1:{down} does not answer (connection refused)"
    )
    socks = cluster_tls.check(cluster, environ={"HTTPS_PROXY": "socks5://127.0.0.1:1080"})
    assert socks.verdict == cluster_tls.WARN and socks.detail.startswith("not checked: the proxy")


@pytest.mark.parametrize(
    ("host", "port", "no_proxy", "direct"),
    [
        ("kube.corp.example", 6443, "corp.example", True),
        ("corp.example", 6443, "corp.example", True),
        ("corp.example", 6443, ".corp.example", False),
        ("kube.corp.example", 6443, "*.corp.example", True),
        ("notcorp.example", 6443, "corp.example", False),
        ("kube.corp.example", 6443, "corp.example:443", False),
        ("kube.corp.example", 443, "corp.example:443", True),
        ("10.1.2.3", 6443, "10.0.0.0/8", True),
        ("10.1.2.3", 6443, "10.1.2.3", True),
        ("10.1.2.3", 6443, "corp.example, 10.1.2.4", False),
        ("fd00::1", 6443, "[fd00::1]:6443", True),
        ("anything.example", 6443, "*", True),
        ("KUBE.Corp.Example", 6443, " CORP.example ", True),
    ],
)
def test_no_proxy_matches_as_go_does(host: str, port: int, no_proxy: str, direct: bool) -> None:
    assert no_proxy_matches(host, port, no_proxy) is direct


def test_loopback_is_never_proxied() -> None:
    env = {"HTTPS_PROXY": "http://proxy.invalid:3128"}
    for host in ("127.0.0.1", "localhost", "::1"):
        assert cluster_tls._env_proxy(host, 6443, env) is None
    assert cluster_tls._env_proxy("kube.example", 6443, env) == "http://proxy.invalid:3128"


def test_doctor_prints_each_cluster_with_its_fix(kt: KubetrayEnv, tmp_path: Path) -> None:
    other = CA("another CA")
    (tmp_path / "other-ca.crt").write_bytes(other.cert_pem)
    with APIServer(CA()) as api:
        config = write(
            tmp_path / "kubeconfig",  # (tmp_path / "config" is kt's configuration directory)
            {
                "good": {"server": api.url, "certificate-authority-data": b64(api.ca_pem)},
                "wrong-ca": {"server": api.url, "certificate-authority": "other-ca.crt"},
                "down": {"server": f"https://127.0.0.1:{closed_port()}"},
            },
        )
        env = {k: v for k, v in kt.env.items() if "PROXY" not in k.upper()}
        done = subprocess.run(
            [sys.executable, "-m", "app", "doctor", f"--kubeconfig={config}"],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    lines = done.stdout.splitlines()
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert f"ok    cluster good: CA verifies {api.url} (certificate-authority-data)" in lines
    at = lines.index(
        "FAIL  cluster wrong-ca: x509: the server's certificate is not signed by the cluster's CA "
        "(certificate-authority in kubeconfig) but by CN=kubetray test CA: kubectl will fail "
        "with 'certificate signed by unknown authority'"
    )
    assert lines[at + 1] == (
        f"      fix: set the cluster's CA: kubectl config set-cluster wrong-ca "
        f"--kubeconfig={config} --certificate-authority=FILE --embed-certs"
    )
    assert any(
        line.startswith("WARN  cluster down: nothing answers at 127.0.0.1:") for line in lines
    )


def test_a_port_that_answers_without_tls_fails_with_the_port_to_check(tmp_path: Path) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = int(server.getsockname()[1])

        def answer_http() -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(4096)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

        threading.Thread(target=answer_http, daemon=True).start()
        config = write(tmp_path / "config", {"http": {"server": f"https://127.0.0.1:{port}"}})
        found = checks(config)["cluster http"]
    assert not found.ok
    assert found.detail.startswith(f"no TLS with 127.0.0.1:{port} (")
    assert str(found.remedy).startswith("check the server URL's port")
