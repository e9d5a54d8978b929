"""kubetray's Entra client (MSAL for Python) against npm oidc-provider dressed as Entra
(tests/oidc/entra.mjs), with the check AKS makes on what it serves.

Every login here is a real one on the stand-in's pages (tests/entra.Person, over HTTP).
"""

import base64
import datetime as dt
import json
import os
import random
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from app.oidc.errors import LoginError, ProviderUnavailable, RefreshRefused
from app.providers.base import Check, TokenSet
from app.providers.entra import EntraProvider, errors
from app.providers.entra.client import EntraClient
from app.providers.entra.settings import EntraSettings, parse
from tests.entra import (
    AKS_CLIENT,
    AKS_SERVER,
    WORKLOAD_AUDIENCE,
    Entra,
    Person,
    PersonAtUI,
    aks_accepts,
    decode,
    run_entra,
)

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def entra() -> Iterator[Entra]:
    with run_entra() as e:
        yield e


def args(e: Entra, login: str, *extra: str) -> list[str]:
    return [
        "get-token",
        "--login",
        login,
        "--server-id",
        AKS_SERVER,
        "--client-id",
        AKS_CLIENT,
        "--tenant-id",
        e.tenant,
        "--authority-host",
        e.base + "/",
        "--certificate-authority",
        str(e.ca_file),
        *extra,
    ]


def settings(e: Entra, login: str = "devicecode", *extra: str, **env: str) -> EntraSettings:
    return parse(args(e, login, *extra), dict(env))


def login(
    e: Entra, user: str = "alice", how: str = "device", **kw: str
) -> tuple[EntraClient, TokenSet, PersonAtUI]:
    client = EntraClient(settings(e, **kw) if kw else settings(e))
    ui = PersonAtUI(Person(e, user))
    return client, client.login(ui, how=how), ui


def refresh_tokens(tokens: TokenSet) -> list[str]:
    """The refresh tokens in the MSAL cache the tokens carry (what the keyring holds)."""
    return [
        rt["secret"]
        for rt in json.loads(tokens.state.get("msal_cache") or "{}")
        .get("RefreshToken", {})
        .values()
    ]


# --- a person's logins ------------------------------------------------------------------


def test_device_code_shows_entras_message_and_serves_what_aks_accepts(entra: Entra) -> None:
    client, tokens, ui = login(entra, "alice", "device")
    assert ui.lines[0].startswith("To sign in, use a web browser to open the page https://")
    assert ui.codes and ui.codes[0][0] in ui.lines[0]
    assert aks_accepts(entra)(tokens.access_token)
    claims = decode(tokens.access_token)
    assert (
        claims["aud"] == AKS_SERVER and claims["iss"] == f"https://sts.windows.net/{entra.tenant}/"
    )
    assert claims["upn"] == "alice@contoso.test" and claims["appid"] == AKS_CLIENT
    assert tokens.who() == "alice@contoso.test" and tokens.claims["tid"] == entra.tenant
    assert tokens.refresh_token in refresh_tokens(tokens)
    asked = entra.seen("/oauth2/v2.0/devicecode")[-1]["params"]
    assert asked["scope"].split() == [
        f"{AKS_SERVER}/.default",
        "offline_access",
        "openid",
        "profile",
    ]
    assert refresh_tokens(tokens), "the refresh token is in the cache that goes to the keyring"
    shown = EntraProvider().describe(client.settings, tokens)
    assert shown.who == "alice@contoso.test"
    assert shown.details[:2] == (("tenant", entra.tenant), ("account", "alice@contoso.test"))


def test_browser_login_comes_back_to_localhost_as_a_posted_form(entra: Entra) -> None:
    client = EntraClient(settings(entra, "interactive", "--login-hint", "bob@contoso.test"))
    ui = PersonAtUI(Person(entra, "bob"), prompt="select_account")
    tokens = client.login(ui)
    assert tokens.who() == "bob@contoso.test" and aks_accepts(entra)(tokens.access_token)
    asked = entra.seen("/oauth2/v2.0/authorize")[-1]["params"]
    assert asked["response_mode"] == "form_post" and asked["code_challenge_method"] == "S256"
    assert asked["redirect_uri"].startswith("http://localhost:")
    assert not asked["redirect_uri"].endswith("/")  # what Entra's http://localhost matches
    assert asked["login_hint"] == "bob@contoso.test" and asked["prompt"] == "select_account"
    assert "Waiting for the login in your browser" in ui.lines[0]


def test_a_cancelled_browser_login_ends_at_once(entra: Entra) -> None:
    client = EntraClient(settings(entra, "interactive"))
    ui = PersonAtUI(None)  # nobody logs in
    ui.cancelled.set()
    start = time.monotonic()
    with pytest.raises(LoginError, match="cancelled"):
        client.login(ui)
    assert time.monotonic() - start < 2


def test_refresh_rotates_the_refresh_token_and_works_after_a_restart(entra: Entra) -> None:
    client, tokens, _ = login(entra, "carol")
    renewed = client.renew(tokens)
    assert renewed.access_token != tokens.access_token
    assert refresh_tokens(renewed) and refresh_tokens(renewed) != refresh_tokens(tokens)
    assert aks_accepts(entra)(renewed.access_token)
    # What the keyring gives back to a new agent renews too (and with the newest token only).
    stored = TokenSet.from_bytes(renewed.to_bytes())
    again = EntraClient(client.settings).renew(stored)
    assert again.who() == "carol@contoso.test" and aks_accepts(entra)(again.access_token)
    refreshes = [
        s for s in entra.seen("/token") if s["params"].get("grant_type") == "refresh_token"
    ]
    assert len({s["params"]["refresh_token"] for s in refreshes[-2:]}) == 2  # never one sent twice


def test_a_claims_challenge_is_answered_by_one_login_that_carries_it(entra: Entra) -> None:
    client, tokens, _ = login(entra, "dave")
    claims = '{"access_token":{"capolids":{"essential":true,"values":["mfa-policy"]}}}'
    entra.challenge("dave", claims)
    before = entra.counts().get("error:interaction_required", 0)
    with pytest.raises(errors.InteractionRequired) as refused:
        client.renew(tokens)
    assert "AADSTS50076" in refused.value.message and "Trace ID" not in refused.value.message
    assert refused.value.claims == claims
    # MSAL would keep the refused refresh token: kubetray removed it, so nothing retries it.
    with pytest.raises(RefreshRefused):
        client.renew(tokens)
    assert entra.counts().get("error:interaction_required", 0) == before + 1
    # The next login sends the challenge (claims=), once; afterwards refreshes work again.
    fresh = client.login(PersonAtUI(Person(entra, "dave")), how="browser")
    assert entra.seen("/oauth2/v2.0/authorize")[-1]["params"]["claims"] == claims
    assert aks_accepts(entra)(client.renew(fresh).access_token)
    client.login(PersonAtUI(Person(entra, "dave")), how="browser")
    assert "claims" not in entra.seen("/oauth2/v2.0/authorize")[-1]["params"]


def test_a_device_login_carries_the_claims_challenge_too(entra: Entra) -> None:
    client, tokens, _ = login(entra, "erin")
    entra.challenge("erin")
    with pytest.raises(errors.InteractionRequired):
        client.renew(tokens)
    client.login(PersonAtUI(Person(entra, "erin")), how="device")
    assert "capolids" in entra.seen("/oauth2/v2.0/devicecode")[-1]["params"]["claims"]


def test_a_revoked_grant_needs_a_login_and_its_refresh_token_is_gone(entra: Entra) -> None:
    client, tokens, _ = login(entra, "frank")
    entra.revoke("frank")
    with pytest.raises(RefreshRefused) as refused:
        client.renew(tokens)
    assert not isinstance(refused.value, errors.InteractionRequired)
    assert "AADSTS50173" in refused.value.message and refused.value.hint == "log in again"
    assert client.claims is None
    fresh = client.login(PersonAtUI(Person(entra, "frank")), how="device")
    assert aks_accepts(entra)(fresh.access_token)


def test_a_login_drops_the_account_logged_in_before(entra: Entra) -> None:
    client, first, _ = login(entra, "gina")
    second = client.login(PersonAtUI(Person(entra, "hank")), how="device")
    cache = json.loads(second.state["msal_cache"])
    assert [a["username"] for a in cache["Account"].values()] == ["hank@contoso.test"]
    assert second.state["home_account_id"] != first.state["home_account_id"]


def test_logout_says_entra_cannot_revoke_the_refresh_token(entra: Entra) -> None:
    client, tokens, _ = login(entra, "ivy")
    answer = client.revoke(tokens)
    assert not answer.revoked and "no way to revoke" in answer.reason


# --- trust ------------------------------------------------------------------------------


def test_the_ca_given_is_added_to_the_system_trust_whatever_requests_variables_say(
    entra: Entra, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # MSAL's own HTTP (requests) lets REQUESTS_CA_BUNDLE beat the CA it is given.
    other = tmp_path / "other.pem"
    from tests.pki import CA

    other.write_bytes(CA("unrelated").cert_pem)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(other))
    monkeypatch.setenv("CURL_CA_BUNDLE", str(other))
    _, tokens, _ = login(entra, "jack")
    assert aks_accepts(entra)(tokens.access_token)


def test_an_untrusted_login_host_is_said_in_one_line(entra: Entra) -> None:
    s = parse(args(entra, "devicecode")[:-2], {})  # no --certificate-authority
    with pytest.raises(LoginError) as failed:
        EntraClient(s).login(PersonAtUI(None))
    assert "CA is not trusted" in failed.value.message
    assert failed.value.hint and "--certificate-authority" in failed.value.hint


def test_an_unknown_tenant_is_named(entra: Entra) -> None:
    s = parse(
        [
            a if a != entra.tenant else "00000000-0000-0000-0000-00000000dead"
            for a in args(entra, "devicecode")
        ],
        {},
    )
    with pytest.raises(errors.ConfigurationRefused) as failed:
        EntraClient(s).login(PersonAtUI(None))
    assert "does not know the tenant" in failed.value.message
    assert "--tenant-id" in (failed.value.hint or "")


def test_an_entra_that_does_not_answer_is_unavailable_not_refused(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    s = parse(
        [
            "get-token",
            "--server-id",
            AKS_SERVER,
            "--client-id",
            AKS_CLIENT,
            "--tenant-id",
            "t",
            "--authority-host",
            f"https://127.0.0.1:{port}/",
        ],
        {},
    )
    with pytest.raises(ProviderUnavailable) as failed:
        EntraClient(s).login(PersonAtUI(None))
    assert "connection refused" in failed.value.message


# --- machines ---------------------------------------------------------------------------


def spn(e: Entra, *extra: str, **env: str) -> EntraSettings:
    a = args(e, "spn", *extra)
    a[a.index("--client-id") + 1] = e.sp_secret["client_id"]
    return parse(a, dict(env))


def test_a_service_principal_with_a_secret_from_the_environment(entra: Entra) -> None:
    s = spn(entra, AZURE_CLIENT_SECRET=entra.sp_secret["client_secret"])
    assert s.machine
    tokens = EntraClient(s).login(PersonAtUI(None))
    claims = decode(tokens.access_token)
    assert aks_accepts(entra)(tokens.access_token)
    assert claims["idtyp"] == "app" and claims["appid"] == entra.sp_secret["client_id"]
    assert "upn" not in claims and not tokens.state and not tokens.refresh_token  # an app


def test_a_wrong_secret_is_one_line_that_names_the_credential(entra: Entra) -> None:
    with pytest.raises(errors.CredentialRefused) as refused:
        EntraClient(spn(entra, "--client-secret", "not-it")).fetch()
    assert refused.value.message.startswith("Entra refused the client's credential (AADSTS7000215")
    assert "not-it" not in refused.value.one_line()


def test_a_refusal_is_not_sent_again_for_a_minute_unless_someone_asks(entra: Entra) -> None:
    """MSAL remembers identical HTTP 400 answers for 60 s: renewals behind the scenes get
    that answer (Entra is not hammered), a person's `kubetray login` reaches Entra."""
    a = args(entra, "spn", "--client-secret", entra.sp_secret["client_secret"])
    a[a.index("--client-id") + 1] = entra.sp_secret["client_id"]
    a[a.index("--server-id") + 1] = "api://not-in-this-tenant"
    client = EntraClient(parse(a, {}))

    def sent() -> int:
        return len(
            [s for s in entra.seen("/token") if "not-in-this" in s["params"].get("scope", "")]
        )

    for _ in range(3):
        with pytest.raises(errors.ConfigurationRefused, match="AADSTS500011"):
            client.renew(None)  # type: ignore[arg-type]
    assert sent() == 1
    with pytest.raises(errors.ConfigurationRefused):
        client.login(PersonAtUI(None))
    assert sent() == 2


def rsa_certificate(tmp_path: Path) -> tuple[rsa.RSAPrivateKey, x509.Certificate]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubetray-sp")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return key, cert


def jwk_of(key: rsa.RSAPrivateKey) -> dict[str, str]:
    numbers = key.public_key().public_numbers()

    def b64(n: int) -> str:
        return (
            base64.urlsafe_b64encode(n.to_bytes((n.bit_length() + 7) // 8, "big"))
            .rstrip(b"=")
            .decode()
        )

    return {"kty": "RSA", "n": b64(numbers.n), "e": b64(numbers.e)}


CERT_CLIENT = "a1b2c3d4-0000-4000-8000-0000000ce27e"


@pytest.fixture(scope="module")
def cert_entra(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Entra, Path, Path]]:
    d = tmp_path_factory.mktemp("cert")
    key, cert = rsa_certificate(d)
    pem = d / "sp.pem"
    pem.write_bytes(
        cert.public_bytes(serialization.Encoding.PEM)
        + key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    pfx = d / "sp.pfx"
    pfx.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"sp", key, cert, None, serialization.BestAvailableEncryption(b"pfx-password")
        )
    )
    with run_entra(certificateJwks={"keys": [jwk_of(key)]}) as e:
        yield e, pem, pfx


def test_a_service_principal_with_a_pem_certificate(cert_entra: tuple[Entra, Path, Path]) -> None:
    e, pem, _ = cert_entra
    a = args(e, "spn", "--client-certificate", str(pem))
    a[a.index("--client-id") + 1] = CERT_CLIENT
    tokens = EntraClient(parse(a, {})).fetch()
    assert aks_accepts(e)(tokens.access_token)
    assert decode(tokens.access_token)["appidacr"] == "2"  # a certificate, not a secret
    assertion = e.seen("/token")[-1]["params"]["client_assertion"]
    header = json.loads(base64.urlsafe_b64decode(assertion.split(".")[0] + "=="))
    assert header["alg"] == "PS256" and "x5t#S256" in header and header["x5c"]


def test_a_service_principal_with_a_pfx_certificate_and_its_password(
    cert_entra: tuple[Entra, Path, Path],
) -> None:
    e, _, pfx = cert_entra
    a = args(e, "spn", "--client-certificate", str(pfx))
    a[a.index("--client-id") + 1] = CERT_CLIENT
    s = parse(a, {"AZURE_CLIENT_CERTIFICATE_PASSWORD": "pfx-password"})
    assert aks_accepts(e)(EntraClient(s).fetch().access_token)


def test_a_certificate_file_without_a_key_is_one_line(
    cert_entra: tuple[Entra, Path, Path], tmp_path: Path
) -> None:
    e, pem, _ = cert_entra
    only_cert = tmp_path / "cert-only.pem"
    only_cert.write_text(pem.read_text().split("-----BEGIN PRIVATE KEY-----")[0])
    a = args(e, "spn", "--client-certificate", str(only_cert))
    with pytest.raises(errors.CredentialRefused, match="holds no certificate and private key"):
        EntraClient(parse(a, {})).fetch()


ISSUER = "https://oidc.prod-aks.azure.com/00000000-0000-0000-0000-000000000001/"
SUBJECT = "system:serviceaccount:default:workload"


@pytest.fixture(scope="module")
def wi_entra() -> Iterator[tuple[Entra, object]]:
    from joserfc.jwk import RSAKey

    key = RSAKey.generate_key(2048, parameters={"kid": "cluster"})
    jwks = {"keys": [key.as_dict(private=False)]}
    with run_entra(federated={"issuer": ISSUER, "subject": SUBJECT, "jwks": jwks}) as e:
        yield e, key


def federated_token(key: object, subject: str = SUBJECT, lifetime: int = 3600) -> str:
    from joserfc import jwt

    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "sub": subject,
        "aud": [WORKLOAD_AUDIENCE],
        "iat": now,
        "nbf": now,
        "exp": now + lifetime,
    }
    return jwt.encode({"alg": "RS256", "kid": "cluster"}, claims, key)  # type: ignore[arg-type]


def test_workload_identity_reads_the_rotated_token_file_each_time(
    wi_entra: tuple[Entra, object], tmp_path: Path
) -> None:
    e, key = wi_entra
    token_file = tmp_path / "azure-identity-token"
    first, second = federated_token(key), federated_token(key, lifetime=3000)
    token_file.write_text(first)
    s = parse(
        [
            "get-token",
            "--login",
            "workloadidentity",
            "--server-id",
            AKS_SERVER,
            "--certificate-authority",
            str(e.ca_file),
        ],
        {
            "AZURE_CLIENT_ID": e.sp_workload,
            "AZURE_TENANT_ID": e.tenant,
            "AZURE_FEDERATED_TOKEN_FILE": str(token_file),
            "AZURE_AUTHORITY_HOST": e.base + "/",
        },
    )
    client = EntraClient(s)
    assert aks_accepts(e)(client.fetch().access_token)
    token_file.write_text(second + "\n")  # the kubelet rotates it
    assert decode(client.fetch().access_token)["appid"] == e.sp_workload
    sent = [x["params"].get("client_assertion") for x in e.seen("/token")][-2:]
    assert sent == [first, second]
    assert e.seen("/token")[-1]["params"]["client_assertion_type"].endswith(":jwt-bearer")


def test_a_workload_token_entra_does_not_trust_is_one_line(
    wi_entra: tuple[Entra, object], tmp_path: Path
) -> None:
    e, key = wi_entra
    token_file = tmp_path / "token"
    token_file.write_text(federated_token(key, subject="system:serviceaccount:default:intruder"))
    s = parse(
        [
            "get-token",
            "--login",
            "workloadidentity",
            "--server-id",
            AKS_SERVER,
            "--client-id",
            e.sp_workload,
            "--tenant-id",
            e.tenant,
            "--federated-token-file",
            str(token_file),
            "--authority-host",
            e.base + "/",
            "--certificate-authority",
            str(e.ca_file),
        ],
        {},
    )
    with pytest.raises(errors.CredentialRefused) as refused:
        EntraClient(s).fetch()
    assert "AADSTS700027" in refused.value.message
    token_file.unlink()
    with pytest.raises(errors.CredentialRefused, match="cannot read the federated token file"):
        EntraClient(s).fetch()


def test_managed_identity_as_app_service_serves_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with run_entra(msiSecret="platform-secret") as e:
        monkeypatch.setenv("IDENTITY_ENDPOINT", f"{e.base}/msi/token")
        monkeypatch.setenv("IDENTITY_HEADER", "platform-secret")
        s = parse(
            [
                "get-token",
                "--login",
                "msi",
                "--server-id",
                AKS_SERVER,
                "--client-id",
                "mi-client",
                "--certificate-authority",
                str(e.ca_file),
            ],
            {},
        )
        tokens = EntraClient(s).fetch()
        assert aks_accepts(e)(tokens.access_token)
        assert decode(tokens.access_token)["appid"] == "mi-client"
        assert e.seen("/msi/token")[-1]["params"]["resource"] == AKS_SERVER


def test_managed_identity_where_something_else_answers_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not an Azure machine: a proxy answers the managed identity endpoint with a page (here,
    as this machine's egress proxy does for 169.254.169.254: 403 text/plain)."""
    import http.server
    import threading

    class Proxy(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(403)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"destination not allowed")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("IDENTITY_ENDPOINT", f"http://127.0.0.1:{server.server_port}/token")
        monkeypatch.setenv("IDENTITY_HEADER", "platform-secret")
        s = parse(["get-token", "--login", "msi", "--server-id", AKS_SERVER], {})
        with pytest.raises(LoginError) as failed:
            EntraClient(s).fetch()
    finally:
        server.shutdown()
        server.server_close()
    said = f"{failed.value.message}; {failed.value.hint}"
    assert "managed identity endpoint" in said and "not JSON" in said and "proxy" in said
    assert "Expecting value" not in said and "\n" not in said


# --- ROPC (MSAL asks https://<host>/common/userrealm/ on port 443) -----------------------


@pytest.fixture(scope="module")
def entra_443() -> Iterator[Entra]:
    if os.geteuid() != 0:
        pytest.skip("ROPC needs the stand-in on port 443 (MSAL drops the port): run as root")
    host = f"127.{random.randint(1, 254)}.{random.randint(1, 254)}.{random.randint(2, 254)}"
    with run_entra(host=host, port=443) as e:
        yield e


def test_ropc_needs_nobody_and_refreshes(entra_443: Entra) -> None:
    e = entra_443
    s = parse(args(e, "ropc", "--username", "kim@contoso.test"), {"AZURE_PASSWORD": "pw-kim"})
    assert s.machine
    client = EntraClient(s)
    tokens = client.login(PersonAtUI(None))
    assert tokens.who() == "kim@contoso.test" and aks_accepts(e)(tokens.access_token)
    assert e.seen("/common/userrealm/kim@contoso.test")
    assert aks_accepts(e)(client.renew(tokens).access_token)


def test_ropc_under_mfa_says_to_use_a_login_that_can_do_it(entra_443: Entra) -> None:
    e = entra_443
    e.challenge("lee")
    s = parse(args(e, "ropc", "--username", "lee@contoso.test", "--password", "pw-lee"), {})
    with pytest.raises(errors.CredentialRefused) as refused:
        EntraClient(s).fetch()
    assert "AADSTS50076" in refused.value.message
    assert "--login devicecode or interactive" in (refused.value.hint or "")


# --- doctor -----------------------------------------------------------------------------


def test_doctor_sees_the_host_the_tenant_and_the_clock(entra: Entra) -> None:
    def checks(s: EntraSettings) -> dict[str, Check]:
        lines = list(EntraProvider().checks(s, lambda: dt.datetime.now(dt.UTC)))
        return {c.name.split()[0]: c for c in lines}

    good = checks(settings(entra))
    assert good["Entra"].ok and good["tenant"].ok and good["clock"].ok
    assert good["tenant"].name == f"tenant {entra.tenant}"
    entra.set_clock(900)
    try:
        clock = checks(settings(entra))["clock"]
        # The Date header has whole seconds: 899 or 900 s.
        assert not clock.ok and re.search(r"(899|900) s behind the provider", clock.detail)
        assert clock.remedy and "time synchronisation" in clock.remedy
    finally:
        entra.set_clock(0)
    s = parse(
        [a.replace(entra.tenant, "contoso-typo.example") for a in args(entra, "devicecode")], {}
    )
    tenant = checks(s)["tenant"]
    assert not tenant.ok and "AADSTS90002" in tenant.detail and "--tenant-id" in str(tenant.remedy)


# --- azurecli and azd: the tool's own login --------------------------------------------


@pytest.mark.parametrize("tool", ["az", "azd"])
def test_the_tools_login_is_served_by_running_it(entra: Entra, tmp_path: Path, tool: str) -> None:
    from tests.entra import fake_tool

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    state = fake_tool(entra, tool, bin_dir)
    mode = "azurecli" if tool == "az" else "azd"
    cmd = ["get-token", "--login", mode, "--server-id", AKS_SERVER, "--tenant-id", entra.tenant]
    env = {"PATH": str(bin_dir), "AZURE_CONFIG_DIR": str(tmp_path / "profile")}
    client = EntraClient(parse(cmd, env))
    with pytest.raises(LoginError) as refused:
        client.login(PersonAtUI(None))
    login_cmd = "az login" if tool == "az" else "azd auth login"
    assert refused.value.hint and refused.value.hint.startswith(f"run {login_cmd}")
    (state / "logged-in").touch()
    tokens = client.login(PersonAtUI(None))
    assert aks_accepts(entra)(tokens.access_token)
    assert tokens.who() == entra.sp_secret["client_id"]  # the tool's login, from its token
    assert abs((tokens.expires_at - dt.datetime.now(dt.UTC)).total_seconds() - 3600) < 60
    calls = [json.loads(line) for line in (state / "calls.jsonl").read_text().splitlines()]
    if tool == "az":
        assert calls[-1]["argv"] == [
            "account",
            "get-access-token",
            "--output",
            "json",
            "--resource",
            AKS_SERVER,
            "--tenant",
            entra.tenant,
        ]
    else:
        assert calls[-1]["argv"] == [
            "auth",
            "token",
            "--output",
            "json",
            "--no-prompt",
            "--scope",
            f"{AKS_SERVER}/.default",
            "--tenant-id",
            entra.tenant,
        ]
    assert calls[-1]["AZURE_CONFIG_DIR"] == env["AZURE_CONFIG_DIR"]


def test_a_tool_that_is_not_installed_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    from app.providers.entra import tools

    monkeypatch.setattr(tools, "EXTRA_DIRS", {})
    s = parse(
        ["get-token", "--login", "azurecli", "--server-id", AKS_SERVER], {"PATH": str(tmp_path)}
    )
    with pytest.raises(LoginError) as failed:
        EntraClient(s).fetch()
    assert "runs az, which is not installed here" in failed.value.message
    assert "--login devicecode or interactive" in (failed.value.hint or "")


def test_workload_identity_in_github_actions_asks_github_for_the_token(
    wi_entra: tuple[Entra, object],
) -> None:
    """Azure kubelogin in a GitHub Actions job (ACTIONS_ID_TOKEN_REQUEST_URL and _TOKEN set)
    takes GitHub's OIDC token, asked for with the audience Entra wants, instead of a file."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer
    from urllib.parse import parse_qs, urlsplit

    e, key = wi_entra
    asked: list[tuple[str, str]] = []

    class GitHub(BaseHTTPRequestHandler):
        def log_message(self, *_args: object) -> None:
            pass

        def do_GET(self) -> None:
            audience = parse_qs(urlsplit(self.path).query)["audience"][0]
            asked.append((audience, self.headers["Authorization"]))
            body = json.dumps({"value": federated_token(key)}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

    server = HTTPServer(("127.0.0.1", 0), GitHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/token?api-version=2.0"
        s = parse(
            [
                "get-token", "--login", "workloadidentity", "--server-id", AKS_SERVER,
                "--client-id", e.sp_workload, "--tenant-id", e.tenant,
                "--authority-host", e.base + "/", "--certificate-authority", str(e.ca_file),
            ],
            {"ACTIONS_ID_TOKEN_REQUEST_URL": url, "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "gh-job"},
        )  # fmt: skip
        assert aks_accepts(e)(EntraClient(s).fetch().access_token)
        assert asked == [(WORKLOAD_AUDIENCE, "bearer gh-job")]
    finally:
        server.shutdown()
        server.server_close()
