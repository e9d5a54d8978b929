"""GKE through kubetray, against what is not kubetray's.

* kubeconfigs written by gcloud 528's own writer (tests/google/gcloud_kubeconfig.py), imported
  with ``kubetray import`` and run by real kubectl;
* a Google stand-in built from Google's documentation on the real npm oidc-provider
  (tests/oidc/google.mjs: client secret required, access_type=offline, no refresh token on a
  second consent without prompt=consent, no rotation, Google's errors and tokeninfo);
* an API stand-in that accepts what GKE accepts (a Google access token whose tokeninfo has an
  email and the userinfo.email scope);
* the real ``gcloud auth application-default login`` (its browser login through the tests'
  chromium) and the real ``gke-gcloud-auth-plugin``, beside kubetray.
"""

import base64
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.apiserver import NAMESPACES, APIServer, google_access_tokens
from tests.google import gcloud_kubeconfig
from tests.idp import BROWSE, IdP, browser_available, browser_log, run_idp
from tests.peers import KubetrayEnv, StartAgent, kubectl_binaries, require
from tests.pki import CA

KUBECTL = "1.33"
PLUGIN = "/usr/bin/gke-gcloud-auth-plugin"
PROJECT = "kubetray-proof"


@pytest.fixture
def google() -> Iterator[IdP]:
    with run_idp("google.mjs", ttl={"AccessToken": 3599}) as g:
        yield g


@pytest.fixture
def browser(kt: KubetrayEnv, keyring_session: None, tmp_path: Path) -> Path:
    require(browser_available(), "needs Debian chromium and Python playwright (make test)")
    log = tmp_path / "browser.jsonl"
    kt.env.update(KUBETRAY_BROWSER=BROWSE, KUBETRAY_TEST_BROWSER_LOG=str(log))
    return log


@pytest.fixture
def api(google: IdP) -> Iterator[APIServer]:
    with APIServer(CA(), check_token=google_access_tokens(google.issuer + "/tokeninfo")) as a:
        yield a


def gcloud_config(path: Path, api: APIServer, *clusters: tuple[str, dict[str, Any]]) -> Path:
    """What ``gcloud container clusters get-credentials`` writes for each cluster, by gcloud's
    own writer, pointed at the API stand-in."""
    require(gcloud_kubeconfig.available(), "needs the Google Cloud SDK (gcloud 528, see PEERS)")
    ca = base64.b64encode(api.ca_pem).decode()
    for name, extra in clusters:
        gcloud_kubeconfig.write(path, cluster=name, server=api.url, ca_data=ca, **extra)
    return path


def context(name: str) -> str:
    return f"gke_{PROJECT}_europe-west1_{name}"


def kubectl(
    kt: KubetrayEnv, config: Path, ctx: str, **env: str
) -> subprocess.CompletedProcess[str]:
    binaries = kubectl_binaries()
    require(KUBECTL in binaries, f"kubectl {KUBECTL} is not installed")
    return subprocess.run(
        [
            binaries[KUBECTL],
            "--kubeconfig",
            str(config),
            "--context",
            ctx,
            "get",
            "ns",
            "-o",
            "name",
        ],
        env={**kt.env, **env},
        capture_output=True,
        text=True,
        timeout=180,
    )


def users(config: Path) -> dict[str, dict[str, Any]]:
    return {u["name"]: u["user"] for u in yaml.safe_load(config.read_text())["users"]}


def counts(g: IdP) -> dict[str, int]:
    with urllib.request.urlopen(g.issuer + "/test/counts", timeout=10) as r:
        return dict(json.load(r))


def served(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert done.returncode == 0, done.stderr
    return [line.removeprefix("namespace/") for line in done.stdout.split()]


def status(kt: KubetrayEnv) -> dict[str, dict[str, Any]]:
    done = kt.kubetray("status", "--json")
    assert done.returncode == 0, done.stderr
    return {i["name"]: i for i in json.loads(done.stdout)["identities"]}


@pytest.mark.kubectl
def test_gcloud_users_are_imported_and_one_google_login_serves_every_gke_cluster(
    kt: KubetrayEnv, google: IdP, api: APIServer, browser: Path, tmp_path: Path
) -> None:
    config = gcloud_config(
        kt.inputs() / "config",
        api,
        ("main", {}),
        ("second", {}),
        ("sa", {"impersonate": f"ci@{PROJECT}.iam.gserviceaccount.com"}),
    )
    before = config.read_text()
    done = kt.kubetray("import", f"--kubeconfig={config}", "--yes")
    assert done.returncode == 0, done.stderr
    # The impersonating user stays with the plugin, and the line says why.
    assert f"left {context('sa')}" in done.stderr and "impersonate" in done.stderr
    after = users(config)
    for name in ("main", "second"):
        exec_ = after[context(name)]["exec"]
        assert Path(exec_["command"]).name == "kubetray-exec" and os.path.isabs(exec_["command"])
        assert exec_["args"] == ["gke-gcloud-auth-plugin"]
        assert exec_["provideClusterInfo"] is True  # what gcloud wrote, kept
        assert exec_["apiVersion"] == "client.authentication.k8s.io/v1beta1"
    assert after[context("sa")]["exec"]["command"] == "gke-gcloud-auth-plugin"

    # kubectl on the first cluster: one browser login at "Google", with Google's parameters.
    kt.env["KUBETRAY_OIDC_ISSUER_URL"] = google.issuer  # the stand-in instead of Google
    assert served(kubectl(kt, config, context("main"))) == NAMESPACES
    (opened,) = [e for e in browser_log(browser) if e["event"] == "opened"]
    url = opened["url"]
    assert "access_type=offline" in url and "prompt=consent" in url
    assert "client_id=764086051850-6qr4p6gpi6hn506pt8ejuq83di341hur" in url
    assert "code_challenge_method=S256" in url and "redirect_uri=http%3A%2F%2F127.0.0.1%3A" in url
    assert "cloud-platform" in url and "userinfo.email" in url
    # The second cluster: the same Google account, no second login.
    assert served(kubectl(kt, config, context("second"))) == NAMESPACES
    assert len([e for e in browser_log(browser) if e["event"] == "opened"]) == 1
    assert counts(google).get("authorization_code") == 1

    # status and doctor show the Google account.
    (ident,) = [i for i in status(kt).values() if i["kind"] == "google"]
    assert ident["name"] == "google" and ident["who"] == "alice@gmail.test"
    assert ["account", "alice@gmail.test"] in ident["details"] and ident["refreshable"]
    doctor = kt.kubetray("doctor", f"--kubeconfig={config}")
    assert f"Google {google.issuer}" in doctor.stdout, doctor.stdout
    assert f"clock vs {google.issuer}" in doctor.stdout

    # The undo puts back exactly what gcloud wrote.
    done = kt.kubetray("import", "--undo", f"--kubeconfig={config}", "--yes")
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(config.read_text()) == yaml.safe_load(before)


def test_google_refreshes_without_rotation_and_a_workspace_reauth_asks_for_a_login(
    kt: KubetrayEnv, browser: Path, api: APIServer
) -> None:
    with run_idp("google.mjs", ttl={"AccessToken": 20}) as google:
        api.check_token = google_access_tokens(google.issuer + "/tokeninfo")
        env = {"KUBETRAY_OIDC_ISSUER_URL": google.issuer}
        args = ["gke-gcloud-auth-plugin"]
        first = kt.run_helper(*args, extra_env=env)
        assert first.returncode == 0, first.stderr
        token = json.loads(first.stdout)["status"]["token"]
        assert token.startswith("ya29.") and api.check_token(token)
        time.sleep(12)  # past the refresh margin of a 20 s token: refreshed, not a login
        again = kt.run_helper(*args, extra_env=env)
        fresh = json.loads(again.stdout)["status"]["token"]
        assert fresh != token and api.check_token(fresh)
        assert counts(google).get("refresh_token", 0) >= 1
        assert counts(google).get("authorization_code") == 1

        # A Workspace session control: Google refuses the refresh with invalid_rapt. The
        # person is asked to log in (here the browser does), and told why.
        urllib.request.urlopen(google.issuer + "/test/reauth?email=alice@gmail.test").close()
        after = kt.run_helper(*args, "--force-refresh", extra_env=env)  # as after a 401
        assert after.returncode == 0, after.stderr
        assert (
            "google needs a login: Google asks you to sign in again: your organisation's "
            "session control ended this login" in after.stderr
        ), after.stderr
        assert counts(google).get("authorization_code") == 2
        # The new login asked for consent: kubetray held no refresh token any more.
        opened = [e["url"] for e in browser_log(browser) if e["event"] == "opened"]
        assert len(opened) == 2 and "prompt=consent" in opened[1]


def test_gcloud_application_default_login_is_taken_over_and_both_keep_working(
    kt: KubetrayEnv, google: IdP, api: APIServer, browser: Path, tmp_path: Path
) -> None:
    """gcloud auth application-default login (the real gcloud, its browser login through the
    tests' chromium) writes ADC; a kubeconfig written with use_application_default_credentials
    runs kubetray-exec, which takes that login over into the keyring. gcloud's file stays as it
    was, and the real gke-gcloud-auth-plugin still gets tokens from it."""
    require(shutil.which("gcloud") is not None, "needs gcloud (the machine's google-cloud-cli)")
    gcloud_dir = tmp_path / "gcloud"
    gcloud_dir.mkdir()
    opener = f"sh -c '{sys.executable} {BROWSE.split()[-1]} \"$1\" >/dev/null 2>&1 &' _ %s"
    done = subprocess.run(
        ["gcloud", "auth", "application-default", "login"],
        env={
            **{k: v for k, v in kt.env.items() if k != "REQUESTS_CA_BUNDLE"},
            "CLOUDSDK_CONFIG": str(gcloud_dir),
            "CLOUDSDK_AUTH_AUTH_HOST": google.issuer + "/o/oauth2/v2/auth",
            "CLOUDSDK_AUTH_TOKEN_HOST": google.issuer + "/token",
            "OAUTHLIB_INSECURE_TRANSPORT": "1",  # the stand-in speaks http on 127.0.0.1
            "DISPLAY": ":kubetray-test",  # gcloud opens a browser only where it sees a display
            "BROWSER": opener,  # Python's webbrowser, which gcloud uses
            "KUBETRAY_TEST_USER": "bob",
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    adc_file = gcloud_dir / "application_default_credentials.json"
    assert adc_file.exists(), done.stderr
    written = adc_file.read_text()
    assert json.loads(written)["type"] == "authorized_user"

    config = gcloud_config(kt.inputs() / "config", api, ("adc", {"adc": True}))
    assert kt.kubetray("import", f"--kubeconfig={config}", "--yes").returncode == 0
    exec_ = users(config)[context("adc")]["exec"]
    assert exec_["args"] == ["gke-gcloud-auth-plugin", "--use_application_default_credentials"]
    opened_before = len([e for e in browser_log(browser) if e["event"] == "opened"])
    env = {"KUBETRAY_OIDC_ISSUER_URL": google.issuer, "CLOUDSDK_CONFIG": str(gcloud_dir)}
    assert served(kubectl(kt, config, context("adc"), **env)) == NAMESPACES
    # no login: gcloud's was taken over (its own browser's later lines may still arrive)
    assert len([e for e in browser_log(browser) if e["event"] == "opened"]) == opened_before
    (ident,) = [i for i in status(kt).values() if i["kind"] == "google"]
    assert ident["who"] == "bob@gmail.test" and ident["name"] == "google-adc"
    assert ["from", "gcloud application-default login"] in ident["details"]
    assert adc_file.read_text() == written  # gcloud's file as gcloud wrote it

    # The real plugin, from gcloud's file (with the token_uri Go's x/oauth2 honours: gcloud
    # writes none, and Google's is not reachable here), still gets a token GKE accepts.
    require(os.path.exists(PLUGIN), "needs gke-gcloud-auth-plugin (the machine's SDK)")
    copy = tmp_path / "adc-for-the-plugin.json"
    copy.write_text(json.dumps({**json.loads(written), "token_uri": google.issuer + "/token"}))
    plugin = subprocess.run(
        [PLUGIN, "--use_application_default_credentials"],
        env={
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),
            "GOOGLE_APPLICATION_CREDENTIALS": str(copy),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert plugin.returncode == 0, plugin.stderr
    assert api.check_token(json.loads(plugin.stdout)["status"]["token"])

    # Logout forgets kubetray's copy and leaves gcloud's login alone.
    out = kt.kubetray("logout", "google-adc")
    assert out.returncode == 0 and "gcloud" in out.stdout + out.stderr, out.stdout + out.stderr
    again = subprocess.run(
        [PLUGIN, "--use_application_default_credentials"],
        env={
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),
            "GOOGLE_APPLICATION_CREDENTIALS": str(copy),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 0 and api.check_token(json.loads(again.stdout)["status"]["token"])


def test_what_kubetray_does_not_do_for_gke_is_one_line(
    kt: KubetrayEnv, keyring_session: None, start_agent: StartAgent
) -> None:
    agent = start_agent(kt)
    done = kt.run_helper("gke-gcloud-auth-plugin", "--impersonate_service_account=sa@p.iam")
    assert done.returncode == 1 and "does not impersonate service accounts" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    done = kt.run_helper(
        "gke-gcloud-auth-plugin", extra_env={"CLOUDSDK_AUTH_ACCESS_TOKEN": "ya29.x"}
    )
    assert done.returncode == 1 and "CLOUDSDK_AUTH_ACCESS_TOKEN is set" in done.stderr
    assert "ya29.x" not in done.stderr
    done = kt.run_helper("--use_edge_cloud", "--impersonate_service_account=x")
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1
    # The cloud tools' variables reach the agent, and no secret among them is kept anywhere.
    secret = "aws-secret-0123456789"
    kt.run_helper(
        "gke-gcloud-auth-plugin", "--use_edge_cloud", extra_env={"AWS_SECRET_ACCESS_KEY": secret}
    )
    assert secret not in json.dumps(kt.calls()) and "ya29.x" not in json.dumps(kt.calls())
    log = agent.stop()
    assert secret not in log and "ya29.x" not in log
