"""A token goes only to a request that carries the credential it was obtained with (issue 37):
kubetray-exec against the agent and the Entra stand-in (tests/oidc/entra.mjs) or the real
oidc-provider (client credentials), as a second kubeconfig on the same machine would try it.
"""

import base64
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from app.providers.entra.settings import AKS_CLIENT, AKS_SERVER
from tests.entra import Entra, aks_accepts, run_entra
from tests.idp import run_idp
from tests.integration.test_entra_client import CERT_CLIENT, jwk_of, rsa_certificate
from tests.integration.test_machine_identities import machine_args, nobody_here
from tests.peers import KubetrayEnv

pytestmark = [pytest.mark.usefixtures("keyring_session"), pytest.mark.timeout(180)]


def pem_of(key: Any, cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@pytest.fixture(scope="module")
def entra(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Entra, list[bytes], Path]]:
    """Entra with the secret app, and a certificate app that trusts two certificates (Entra
    takes several per app: how one is rotated); the PEMs, and a PFX of the first."""
    d = tmp_path_factory.mktemp("certs")
    pairs = [rsa_certificate(d) for _ in range(2)]
    pfx = d / "sp.pfx"
    key, cert = pairs[0]
    pfx.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"sp", key, cert, None, serialization.BestAvailableEncryption(b"pfx-password")
        )
    )
    with run_entra(certificateJwks={"keys": [jwk_of(k) for k, _ in pairs]}) as e:
        yield e, [pem_of(k, c) for k, c in pairs], pfx


def spn(e: Entra, client: str, *extra: str) -> list[str]:
    return [
        "get-token",
        "--login",
        "spn",
        "--server-id",
        AKS_SERVER,
        "--client-id",
        client or AKS_CLIENT,
        "--tenant-id",
        e.tenant,
        "--authority-host",
        e.base + "/",
        "--certificate-authority",
        str(e.ca_file),
        *extra,
    ]


def token(done: Any) -> str:
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["status"]["token"])


def refused(done: Any, *secrets: str) -> None:
    """rc≠0, one line on stderr, no token on stdout, no secret anywhere."""
    assert done.returncode != 0, done.stdout
    assert done.stdout == ""
    lines = [x for x in done.stderr.splitlines() if "started the kubetray agent" not in x]
    assert len(lines) == 1, done.stderr
    for secret in secrets:
        assert secret not in done.stderr


def thumbprint(e: Entra) -> str:
    """The x5t#S256 of the certificate the last token request was signed with."""
    assertion = e.seen("/token")[-1]["params"]["client_assertion"]
    header = json.loads(base64.urlsafe_b64decode(assertion.split(".")[0] + "=="))
    return str(header["x5t#S256"]).rstrip("=")


def x5t(pem: bytes) -> str:
    der = x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)
    return base64.urlsafe_b64encode(hashlib.sha256(der).digest()).rstrip(b"=").decode()


def nothing_secret_kept(kt: KubetrayEnv, *secrets: str) -> None:
    shown = kt.kubetray("status", "--json").stdout
    files = "".join(
        p.read_text(errors="replace")
        for p in kt.home.parent.rglob("*")
        if p.is_file() and p.stat().st_size < 1 << 20 and "node_modules" not in p.parts
    )
    for secret in secrets:
        assert secret not in shown and secret not in files


def test_a_wrong_secret_after_the_right_one_gets_no_token(
    kt: KubetrayEnv, entra: tuple[Entra, list[bytes], Path]
) -> None:
    e, _, _ = entra
    nobody_here(kt)
    app, right = e.sp_secret["client_id"], e.sp_secret["client_secret"]
    served = token(kt.run_helper(*spn(e, app, "--client-secret", right)))
    assert aks_accepts(e)(served)
    wrong = "not-the-secret-4e1a"
    refused(kt.run_helper(*spn(e, app, "--client-secret", wrong)), wrong, right)
    # the environment's secret too, and again (no cached answer for the wrong one either)
    again = kt.run_helper(*spn(e, app), extra_env={"AZURE_CLIENT_SECRET": wrong})
    refused(again, wrong, right)
    assert token(kt.run_helper(*spn(e, app, "--client-secret", right))) == served
    names = [i["name"] for i in json.loads(kt.kubetray("status", "--json").stdout)["identities"]]
    assert len(names) == 1, names  # the wrong secret left no identity behind
    (index_file,) = [p for p in kt.home.parent.rglob("identities.json")]
    index = index_file.read_text()
    assert "cred:" in index
    nothing_secret_kept(kt, right, wrong)
    # what the index holds of the secret is keyed: not its plain hash
    assert hashlib.sha256(right.encode()).hexdigest()[:32] not in index


def test_a_pfx_with_a_wrong_password_after_the_right_one_gets_no_token(
    kt: KubetrayEnv, entra: tuple[Entra, list[bytes], Path]
) -> None:
    e, _, pfx = entra
    nobody_here(kt)
    args = spn(e, CERT_CLIENT, "--client-certificate", str(pfx))
    ok = {"AZURE_CLIENT_CERTIFICATE_PASSWORD": "pfx-password"}
    assert aks_accepts(e)(token(kt.run_helper(*args, extra_env=ok)))
    bad = {"AZURE_CLIENT_CERTIFICATE_PASSWORD": "guess-1"}
    refused(kt.run_helper(*args, extra_env=bad), "guess-1", "pfx-password")
    refused(kt.run_helper(*args), "pfx-password")  # no password at all
    nothing_secret_kept(kt, "pfx-password", "guess-1")


def test_two_certificates_of_one_app_are_two_identities_and_the_second_is_said(
    kt: KubetrayEnv, entra: tuple[Entra, list[bytes], Path], tmp_path: Path
) -> None:
    e, pems, _ = entra
    nobody_here(kt)
    one, two = tmp_path / "one.pem", tmp_path / "two.pem"
    one.write_bytes(pems[0])
    two.write_bytes(pems[1])
    first = token(kt.run_helper(*spn(e, CERT_CLIENT, "--client-certificate", str(one))))
    assert thumbprint(e) == x5t(pems[0])
    second = token(kt.run_helper(*spn(e, CERT_CLIENT, "--client-certificate", str(two))))
    assert thumbprint(e) == x5t(pems[1]) and second != first
    # each context keeps its own token
    assert token(kt.run_helper(*spn(e, CERT_CLIENT, "--client-certificate", str(one)))) == first
    rows = [i for i in json.loads(kt.kubetray("status", "--json").stdout)["identities"]]
    assert len(rows) == 2, rows
    log = "".join(p.read_text(errors="replace") for p in kt.state.rglob("*.log"))
    assert "another credential" in log, log[-2000:]


def test_client_credentials_with_another_secret_get_no_token(kt: KubetrayEnv) -> None:
    nobody_here(kt)
    with run_idp(clientCredentials=True) as idp:
        args = [a for a in machine_args(idp) if not a.startswith("--oidc-client-secret")]
        right = token(
            kt.run_helper(*args, "--oidc-client-secret=machine-secret", "--oidc-use-access-token")
        )
        done = kt.run_helper(*args, "--oidc-client-secret=guess", "--oidc-use-access-token")
        refused(done, "guess", "machine-secret")
        assert right
        nothing_secret_kept(kt, "machine-secret", "guess")


def two_users(kt: KubetrayEnv, path: Path, a: list[str], b: list[str]) -> Path:
    """A kubeconfig whose users ci-a and ci-b both run kubetray-exec for one login."""
    users = [
        {
            "name": n,
            "user": {
                "exec": {
                    "apiVersion": "client.authentication.k8s.io/v1",
                    "command": str(kt.helper),
                    "args": args,
                    "interactiveMode": "Never",
                }
            },
        }
        for n, args in (("ci-a", a), ("ci-b", b))
    ]
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": users,
        "contexts": [
            {"name": f"ctx-{u['name']}", "context": {"cluster": "k", "user": u["name"]}}
            for u in users
        ],
        "current-context": "ctx-ci-a",
    }
    path.write_text(json.dumps(doc))
    return path


def names(kt: KubetrayEnv) -> list[str]:
    return [i["name"] for i in json.loads(kt.kubetray("status", "--json").stdout)["identities"]]


def test_a_name_one_kubeconfig_gives_never_renames_a_login_another_runs(
    kt: KubetrayEnv, tmp_path: Path
) -> None:
    nobody_here(kt)
    with run_idp(clientCredentials=True) as idp:
        a = [*machine_args(idp), "--oidc-use-access-token"]
        b = [*a, "--name=b-name"]
        config = {"KUBECONFIG": str(two_users(kt, tmp_path / "two-users.yaml", a, b))}
        token(kt.run_helper(*a, extra_env=config))
        (before,) = names(kt)
        done = kt.run_helper(*b, extra_env=config)
        token(done)  # served, under the name it has
        assert names(kt) == [before]
        assert f"--name b-name is not applied: this login is {before}" in done.stderr
        assert "ci-a" in done.stderr and "ci-b" in done.stderr
        again = kt.run_helper(*b, extra_env=config)
        token(again)
        assert again.stderr == "" and names(kt) == [before]  # said once
        # one kubeconfig user alone: its first --name replaces the made-up name, as ever
        alone = [*a, "--oidc-extra-scope=profile"]
        token(kt.run_helper(*alone))
        token(kt.run_helper(*alone, "--name=mine"))
        assert "mine" in names(kt)
