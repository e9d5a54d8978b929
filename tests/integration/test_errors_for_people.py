"""Network and provider failures in a person's words, through `kubetray setup` (which now asks
the provider before writing) and `kubetray-exec` (what kubectl prints), on real sockets."""

from pathlib import Path

import pytest

from tests import failing
from tests.peers import KubetrayEnv
from tests.pki import CA


def setup(kt: KubetrayEnv, config: Path, issuer: str, *extra: str):  # type: ignore[no-untyped-def]
    return kt.kubetray(
        "setup",
        f"--issuer={issuer}",
        "--client-id=kubectl",
        "--server=https://127.0.0.1:6443",
        "--context=c",
        f"--kubeconfig={config}",
        "--yes",
        *extra,
    )


def assert_refused(done, config: Path, *expected: str) -> None:  # type: ignore[no-untyped-def]
    assert done.returncode != 0
    for text in expected:
        assert text in done.stderr, done.stderr
    for raw in ("Traceback", "urlopen error", "Errno", "HTTPSConnectionPool"):
        assert raw not in done.stderr
    assert not config.exists()  # nothing written


def test_setup_dns_failure(kt: KubetrayEnv, tmp_path: Path) -> None:
    config = tmp_path / "config"
    done = setup(kt, config, failing.UNRESOLVABLE)
    assert_refused(
        done,
        config,
        "cannot find the provider's host idp.kubetray-test.invalid (the DNS lookup failed)",
        "hint: check the issuer URL for a typo",
    )


def test_setup_connection_refused(kt: KubetrayEnv, tmp_path: Path) -> None:
    config = tmp_path / "config"
    issuer = failing.closed_port()
    done = setup(kt, config, issuer)
    where = issuer.removeprefix("http://")
    assert_refused(done, config, f"nothing answers at {where} (connection refused)")


def test_setup_untrusted_provider_ca_then_provider_ca(kt: KubetrayEnv, tmp_path: Path) -> None:
    config = tmp_path / "config"
    ca = CA("private provider CA")
    with failing.json_server(200, failing.DISCOVERY, ca=ca) as issuer:
        done = setup(kt, config, issuer)
        assert_refused(
            done,
            config,
            "the provider's CA is not trusted",
            "hint: pass --provider-ca with the CA certificate",
        )
        ca_file = kt.inputs() / "provider-ca.pem"
        ca_file.write_bytes(ca.cert_pem)
        done = setup(kt, config, issuer, f"--provider-ca={ca_file}")
        assert done.returncode == 0, done.stderr
        # the file it wrote is named: plain kubectl would read another one
        assert f"try: kubectl --kubeconfig {config} --context c get namespaces" in done.stdout


def test_setup_http_error_carries_the_providers_description(
    kt: KubetrayEnv, tmp_path: Path
) -> None:
    config = tmp_path / "config"
    with failing.json_server(404, failing.REALM_MISSING) as issuer:
        done = setup(kt, config, issuer + "/realms/nope")
    assert_refused(
        done,
        config,
        "the provider answered HTTP 404",
        "(invalid_request: Realm does not exist)",
        "hint: check the issuer URL: the provider serves no discovery document there",
    )


def test_setup_no_probe_writes_without_asking(kt: KubetrayEnv, tmp_path: Path) -> None:
    config = tmp_path / "config"
    done = setup(kt, config, failing.closed_port(), "--no-probe")
    assert done.returncode == 0, done.stderr
    assert config.exists()


@pytest.mark.slow
def test_setup_timeout(kt: KubetrayEnv, tmp_path: Path) -> None:
    config = tmp_path / "config"
    with failing.silent_server() as issuer:
        done = setup(kt, config, issuer)
    assert_refused(
        done,
        config,
        "did not answer in time",
        "hint: check the network, a firewall, or the proxy",
    )


def test_login_says_the_same(kt: KubetrayEnv) -> None:
    """`kubetray login` of an identity kubectl named, whose provider refuses connections."""
    issuer = failing.closed_port()
    where = issuer.removeprefix("http://")
    done = kt.run_helper(f"--oidc-issuer-url={issuer}", "--oidc-client-id=kubectl")
    assert done.returncode != 0
    done = kt.kubetray("login", f"kubectl@{where}")
    assert done.returncode != 0
    assert f"nothing answers at {where} (connection refused)" in done.stderr, done.stderr
    assert "; check the port in the issuer URL" in done.stderr  # one line, via the agent
    assert "Errno" not in done.stderr
