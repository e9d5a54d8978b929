"""EXEC-CONSUMERS.md §5: the installed kubetray-exec, a real agent, the real keyring.

Each test names its checklist row (#N). Rows about OIDC logins, prompts and refresh (#13's
audience, #21, #23, #29) belong to the OIDC work; #6 and #16 have no counterpart (the helper
has no version flag and no mode that needs cluster info).
"""

import json
import os
import pty
import re
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.peers import (
    A1,
    B1,
    PY,
    V1,
    KubetrayEnv,
    cluster_info,
    kubetray_env,
    require,
    secret_service_available,
)
from tests.pki import CA

TOKEN = "kt-conformance-token.0123456789abcdef"
TOKEN_B = "kt-conformance-token-for-cluster-b"
FIELDS = {"token", "clientCertificateData", "clientKeyData", "expirationTimestamp"}
TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


class Served:
    """A running agent with a token (``tok``), a second token (``tokb``), a cert (``crt``)."""

    def __init__(self, kt: KubetrayEnv, suffix: str, ca: CA) -> None:
        self.kt = kt
        self.tok, self.tokb, self.crt = f"tok-{suffix}", f"tokb-{suffix}", f"crt-{suffix}"
        self.client = ca.issue("kubetray-user", org="system:masters")
        kt.store_token(self.tok, TOKEN + "\n")
        kt.store_token(self.tokb, TOKEN_B)
        kt.store_certificate(self.crt, self.client.cert_pem + ca.cert_pem, self.client.key_pem)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    require(secret_service_available(), "no Secret Service: run the tests with `make test`")
    with kubetray_env(tmp_path_factory.mktemp("served")) as kt:
        yield Served(kt, os.urandom(4).hex(), CA())


def ok(
    done: subprocess.CompletedProcess[str], api_version: str = "client.authentication.k8s.io/v1"
) -> dict:
    """#1, #31, #33: exit 0, exactly one JSON document, the right version and kind."""
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)  # raises on a second document or any extra bytes
    assert done.stdout.endswith("}\n")
    assert doc["apiVersion"] == api_version
    assert doc["kind"] == "ExecCredential"
    assert set(doc["status"]) <= FIELDS  # 25: exact field names
    return doc


def failed(done: subprocess.CompletedProcess[str], *secrets: str) -> str:
    """#32, #34: exit 1, nothing on stdout, one line on stderr, no secret in it."""
    assert done.returncode == 1
    assert done.stdout == ""
    lines = [
        line for line in done.stderr.splitlines() if not line.startswith("kubetray-exec: started")
    ]
    assert len(lines) == 1, done.stderr
    for secret in (TOKEN, TOKEN_B, *secrets):
        assert secret not in done.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("exec_info", "version"),
    [
        (V1, "client.authentication.k8s.io/v1"),  # 1
        (B1, "client.authentication.k8s.io/v1beta1"),  # 2
        (A1, "client.authentication.k8s.io/v1alpha1"),  # 3, 24
        (PY, "client.authentication.k8s.io/v1"),  # 7
        (
            '{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1"}',
            "client.authentication.k8s.io/v1",
        ),  # 11
    ],
    ids=["v1", "v1beta1", "v1alpha1", "python-client", "no-spec"],
)
def test_replies_in_the_version_asked_with_the_token(
    served: Served, exec_info: str, version: str
) -> None:
    doc = ok(served.kt.run_helper("--stored", served.tok, exec_info=exec_info), version)
    assert doc["status"] == {"token": TOKEN}  # 30: no expiry known, so none sent


@pytest.mark.parametrize(
    ("exec_info", "message"),
    [
        (V1.replace("/v1", "/v2"), "unsupported apiVersion client.authentication.k8s.io/v2"),  # 4
        (V1.replace('"ExecCredential"', '"Foo"'), "invalid group/kind"),  # 5
        ("{", "decode:"),  # 10
        ("bad data", "decode:"),
        ("null", "decode:"),
        ("[]", "decode:"),
        (V1.replace("false", '"no"'), "decode: spec.interactive must be a boolean"),
        (
            cluster_info("https://a", config=[1]),
            "decode: spec.cluster.config (the cluster's exec extension) must be a JSON object",
        ),
    ],
    ids=[
        "v2",
        "kind-foo",
        "brace",
        "bad-data",
        "null",
        "array",
        "interactive-string",
        "config-array",
    ],
)
def test_bad_input_fails_with_one_clear_line(served: Served, exec_info: str, message: str) -> None:
    line = failed(served.kt.run_helper("--stored", served.tok, exec_info=exec_info))
    assert line.startswith(message) if message.startswith("decode:") else message in line


@pytest.mark.parametrize("value", [None, ""], ids=["unset", "empty"])
def test_missing_exec_info_is_v1beta1_and_not_interactive(
    served: Served, value: str | None
) -> None:  # 9, EXEC-CONSUMERS 8.3: client-node never sets it; kubelogin's reading
    extra = {} if value is None else {"KUBERNETES_EXEC_INFO": value}
    done = served.kt.run_helper("--stored", served.tok, exec_info=None, extra_env=extra)
    assert ok(done, "client.authentication.k8s.io/v1beta1")["status"]["token"] == TOKEN
    oidc = ["--oidc-issuer-url=https://idp.example", "--oidc-client-id=kubectl"]
    primary, secondary = pty.openpty()  # a terminal, yet nobody said "interactive"
    try:
        start = time.monotonic()
        done = served.kt.run_helper(*oidc, exec_info=None, extra_env=extra, stdin=secondary)
    finally:
        os.close(primary)
        os.close(secondary)
    # a wait for the terminal or a login would last until run_helper's 60 s timeout
    assert time.monotonic() - start < 15 and "login required" in failed(done)


def test_huge_input(served: Served) -> None:
    # Linux caps one environment string at 128 KiB, so that is the largest input there is.
    pad = "x" * (120 * 1024)
    big = V1[:-2] + ',"pad":"' + pad + '"}'
    assert (
        ok(served.kt.run_helper("--stored", served.tok, exec_info=big))["status"]["token"] == TOKEN
    )
    line = failed(served.kt.run_helper("--stored", served.tok, exec_info="{" + pad))
    assert line.startswith("decode:") and len(line) < 300


def test_escaped_server_and_trailing_newline(served: Served) -> None:  # 8
    info = (
        cluster_info("https://h.example:6443/p?a=1&b=<2>")
        .replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
    )
    assert "\\u0026" in info and info.endswith("\n")
    ok(served.kt.run_helper("--stored", served.tok, exec_info=info))
    assert served.kt.calls()[0]["cluster"] == "https://h.example:6443/p?a=1&b=<2>"


def test_python_style_cluster_with_unknown_keys(served: Served) -> None:  # 12
    info = cluster_info(
        "https://10.0.0.1:6443",
        config=None,
        **{"certificate-authority": "/nonexistent/ca.crt", "name": "c1", "extensions": []},
    )
    assert (
        ok(served.kt.run_helper("--stored", served.tok, exec_info=info))["status"]["token"] == TOKEN
    )


def test_per_cluster_config_beats_args(served: Served) -> None:  # 13 (for stored), 17
    a = cluster_info("https://a.example:6443", config={"stored": served.tok})
    b = cluster_info("https://b.example:6443", config={"stored": served.tokb})
    for _ in range(2):  # cached entries stay apart
        assert (
            ok(served.kt.run_helper("--stored", served.tok, exec_info=a))["status"]["token"]
            == TOKEN
        )
        assert (
            ok(served.kt.run_helper("--stored", served.tok, exec_info=b))["status"]["token"]
            == TOKEN_B
        )


@pytest.mark.parametrize(
    "info",
    [
        cluster_info("https://a.example", config=None),  # 14: client-go without the extension
        cluster_info("https://a.example").replace(',"config":null', ""),  # 15: no config key
    ],
    ids=["config-null", "config-absent"],
)
def test_no_per_cluster_config_uses_args(served: Served, info: str) -> None:
    assert (
        ok(served.kt.run_helper("--stored", served.tok, exec_info=info))["status"]["token"] == TOKEN
    )


def test_python_cluster_with_extensions_and_config_uses_config(served: Served) -> None:  # 18
    ext = [{"name": "client.authentication.k8s.io/exec", "extension": {"stored": served.tok}}]
    info = cluster_info("https://a", config={"stored": served.tokb}, extensions=ext)
    assert (
        ok(served.kt.run_helper("--stored", served.tok, exec_info=info))["status"]["token"]
        == TOKEN_B
    )
    older = json.loads(cluster_info("https://a", extensions=ext))
    del older["spec"]["cluster"]["config"]  # python client < v34.1 sends only the extensions
    done = served.kt.run_helper("--stored", served.tokb, exec_info=json.dumps(older))
    assert ok(done)["status"]["token"] == TOKEN


def test_missing_extension_value_kind_is_named(served: Served) -> None:
    info = cluster_info("https://a", config={"stored": 7})
    assert "client.authentication.k8s.io/exec extension sets stored" in failed(
        served.kt.run_helper(exec_info=info)
    )


def test_login_needed_fails_fast_without_reading_stdin(served: Served) -> None:  # 19
    start = time.monotonic()
    done = served.kt.run_helper(
        "get-token", "--oidc-issuer-url=https://idp.example", "--oidc-client-id=kubectl"
    )
    assert time.monotonic() - start < 15  # a wait for stdin would last the 60 s timeout
    assert failed(done).startswith("login required for kubectl@idp.example")


def test_non_interactive_with_a_silent_pty_does_not_block(served: Served) -> None:  # 20
    primary, secondary = pty.openpty()
    try:
        done = served.kt.run_helper(
            "--oidc-issuer-url=https://idp.example",
            "--oidc-client-id=kubectl",
            stdin=secondary,
            timeout=10,
        )
    finally:
        os.close(primary)
        os.close(secondary)
    assert "login required" in failed(done)


def test_interactive_true_with_a_pipe_is_not_interactive(served: Served) -> None:  # 22
    info = V1.replace("false", "true")
    done = served.kt.run_helper(
        "--oidc-issuer-url=https://idp.example",
        "--oidc-client-id=kubectl",
        exec_info=info,
        input="",
        timeout=10,
    )
    assert "login required" in failed(done)


def test_client_certificate_pair(served: Served) -> None:  # 26, 27, 28
    doc = ok(served.kt.run_helper("--stored", served.crt))
    status = doc["status"]
    assert "token" not in status
    assert status["clientCertificateData"].startswith("-----BEGIN CERTIFICATE-----")
    assert status["clientCertificateData"].count("BEGIN CERTIFICATE") == 2  # leaf, then the CA
    leaf_pem = served.client.cert_pem.decode()
    assert status["clientCertificateData"].startswith(leaf_pem)
    assert status["clientKeyData"].startswith("-----BEGIN PRIVATE KEY-----")
    assert TS.match(status["expirationTimestamp"])
    expires = datetime.strptime(status["expirationTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=UTC
    )
    # Before notAfter by a margin (10 % of its lifetime, at most half), never after it: a client
    # that used it until the very end got a TLS alert (EXEC-CONSUMERS.md 8.3).
    start, end = served.client.cert.not_valid_before_utc, served.client.cert.not_valid_after_utc
    assert end - (end - start) / 2 <= expires < end - timedelta(seconds=1)


def test_last_repeated_flag_wins(served: Served) -> None:  # 36
    done = served.kt.run_helper("--stored", served.tok, "--stored", served.tokb)
    assert ok(done)["status"]["token"] == TOKEN_B


def test_cwd_does_not_matter(served: Served, tmp_path: Path) -> None:  # 37
    for cwd in ("/", str(tmp_path)):
        assert ok(served.kt.run_helper("--stored", served.tok, cwd=cwd))["status"]["token"] == TOKEN


def test_kubelogin_style_arguments_are_accepted(served: Served) -> None:
    for prefix in (["get-token"], ["oidc-login", "get-token"]):
        done = served.kt.run_helper(
            *prefix, "--stored", served.tok, "--token-cache-dir=~/.kube/cache/oidc-login", "-v", "1"
        )
        assert ok(done)["status"]["token"] == TOKEN


def test_unknown_flag_is_refused(served: Served) -> None:
    line = failed(served.kt.run_helper("--stored", served.tok, "--no-such-flag"))
    assert "unknown argument '--no-such-flag'" in line


def test_no_credential_named(served: Served) -> None:
    assert "was not told which credential to serve" in failed(served.kt.run_helper())
    assert "no stored credential named 'nope'" in failed(served.kt.run_helper("--stored", "nope"))


def test_help_and_version_need_no_agent(tmp_path: Path) -> None:
    with kubetray_env(tmp_path) as kt:
        done = kt.run_helper("--help", exec_info=None)
        assert (
            done.returncode == 0
            and "--oidc-issuer-url" in done.stdout
            and "--stored" in done.stdout
        )
        assert kt.agent_pid() is None


def test_records_name_the_caller(served: Served) -> None:
    served.kt.run_helper("--stored", served.tok)
    call = served.kt.calls()[0]
    assert call["identity"] == served.tok and call["ok"] is True
    assert call["caller"]["name"] == "kubetray-exec"
    assert call["caller"]["parents"][0] == Path("/proc/self/comm").read_text().strip()
    assert call["latency_ms"] < 1000


def test_cache_skipped_on_request_and_after_a_401(served: Served) -> None:  # 39
    from tests.peers import ROOT

    def swap(token: str) -> None:  # behind the agent's back: no invalidate
        code = (
            "import sys; from datetime import UTC, datetime; from app import compose, static_credentials; "
            "now = datetime.now(UTC); "
            f"compose.stored_credentials().save(static_credentials.token_credential({served.tokb!r}, {token!r}, 'x', now), now)"
        )
        subprocess.run([os.sys.executable, "-c", code], env=served.kt.env, check=True, cwd=ROOT)

    assert ok(served.kt.run_helper("--stored", served.tokb))["status"]["token"] == TOKEN_B
    swap("rotated-1")
    assert ok(served.kt.run_helper("--stored", served.tokb))["status"]["token"] == TOKEN_B  # cached
    assert (
        ok(served.kt.run_helper("--stored", served.tokb, "--force-refresh"))["status"]["token"]
        == "rotated-1"
    )
    swap("rotated-2")
    retry = A1.replace('"spec":{}', '"spec":{"response":{"code":401,"header":{}}}')
    doc = ok(
        served.kt.run_helper("--stored", served.tokb, exec_info=retry),
        "client.authentication.k8s.io/v1alpha1",
    )
    assert doc["status"]["token"] == "rotated-2"
    swap(TOKEN_B)
    served.kt.run_helper("--stored", served.tokb, "--force-refresh")


def test_ten_parallel_cold_starts_share_one_agent(
    tmp_path: Path, keyring_session: None, name: str
) -> None:  # 38
    with kubetray_env(tmp_path) as kt:
        kt.store_token(name, TOKEN)
        assert kt.agent_pid() is None
        # ten agents start at once on what may be two CPUs: the point is that one serves all
        # ten callers, not the 10 s a single start is given
        kt.env["KUBETRAY_AGENT_START_TIMEOUT"] = "60"
        with ThreadPoolExecutor(10) as pool:
            results = list(pool.map(lambda _: kt.run_helper("--stored", name), range(10)))
        for done in results:
            assert ok(done)["status"]["token"] == TOKEN
        assert len([c for c in kt.calls() if c["identity"] == name]) == 10
        said = "".join(d.stderr for d in results).count("kubetray-exec: started the kubetray agent")
        assert said == 1  # one agent started: one helper says so
        kt.kubetray("forget", name)
        runtime = str(kt.runtime)
    # The agents that lost the race are gone too: none starts late, once the winner stops.
    deadline = time.monotonic() + 10
    while agents_for(runtime) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert agents_for(runtime) == []


def agents_for(runtime: str) -> list[int]:
    """Processes whose environment names this kubetray runtime directory (agents, on Linux)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if f"KUBETRAY_RUNTIME_DIR={runtime}".encode() in env:
            found.append(int(entry))
    return found


def test_silent_agent_times_out(tmp_path: Path) -> None:  # 40
    import socket

    with kubetray_env(tmp_path) as kt:
        kt.runtime.mkdir(mode=0o700)
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(kt.runtime / "agent.sock"))
        server.listen()
        start = time.monotonic()
        done = kt.run_helper("--stored", "x", extra_env={"KUBETRAY_EXEC_TIMEOUT": "1"})
        assert time.monotonic() - start < 10
        assert "did not answer within 1 s" in failed(done)
        server.close()


def test_a_repeated_failure_says_why_every_time(served: Served) -> None:  # EXEC-CONSUMERS 8.3
    """Three calls within the negative cache's window from one parent (a long-lived client):
    each is answered from memory after the first, and each with the same reason."""
    for attempt in range(3):  # a call reaches the agent within the 1 s window, loaded or not
        name = f"nobody-stored-this-{attempt}"
        lines = [failed(served.kt.run_helper("--stored", name)) for _ in range(3)]
        assert len(set(lines)) == 1 and "no stored credential named" in lines[0]
        mine = [r for r in served.kt.calls() if name in (r["error"] or "")]
        if any(r["error"].startswith("(repeated)") for r in mine):
            break
    else:
        pytest.fail("no call came within the window of the failure it repeats, in 3 tries")
