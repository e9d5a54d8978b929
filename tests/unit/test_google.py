"""The Google provider without Google: which command lines are its, the settings they give,
what it refuses, its index entry, import, and its login rules with a fake engine."""

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest

from app.oidc.errors import LoginError, RefreshRefused
from app.oidc.settings import OIDCSettings
from app.providers import default
from app.providers.base import TokenSet
from app.providers.google import GCLOUD_ADC_CLIENT, GoogleProvider, GoogleSettings, adc
from app.providers.google.login import GoogleLogin
from exec_helper.options import OptionsError

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
G = GoogleProvider()


def wanted(args: list[str], env: Mapping[str, str] | None = None) -> Any:
    return default().wanted(args, None, env or {})


def test_the_plugin_s_command_lines_are_google_s_and_nothing_else_is() -> None:
    for args in (
        ["gke-gcloud-auth-plugin"],
        ["gke-gcloud-auth-plugin", "--use_application_default_credentials"],
        ["--use_application_default_credentials"],
        ["--use_application_default_credentials=true", "-v", "4"],
    ):
        assert wanted(args).kind == "google", args
    assert wanted(["--stored", "x"]).kind == "stored"
    assert wanted(["get-token", "--oidc-issuer-url=https://i", "--oidc-client-id=c"]).kind == "oidc"
    assert not G.recognises([]) and not G.recognises(["--account", "x"])  # gcloud's flags too


def test_every_gke_cluster_is_one_google_login_with_google_s_parameters() -> None:
    one = wanted(["gke-gcloud-auth-plugin"]).settings
    with_project = wanted(["gke-gcloud-auth-plugin", "--project", "p"]).settings
    assert with_project.project == "p" and with_project.key == one.key
    e = one.engine
    assert (e.issuer, e.client_id, e.client_secret) == (
        "https://accounts.google.com",
        *GCLOUD_ADC_CLIENT,
    )
    assert set(e.scopes) == {
        "openid",
        "https://www.googleapis.com/auth/userinfo.email",
        "https://www.googleapis.com/auth/cloud-platform",
    }
    assert dict(e.extra_params) == {"access_type": "offline"} and e.use_access_token
    assert e.listen_addresses == () and e.redirect_hostname == "127.0.0.1"  # any loopback port
    assert one.fallback_name == "google" and not one.named_by_kubeconfig
    # An account: its own identity, a login hint, from the flag or gcloud's variable.
    bob = wanted(["gke-gcloud-auth-plugin", "--account=bob@example.com"]).settings
    assert bob.key != one.key and dict(bob.engine.extra_params)["login_hint"] == "bob@example.com"
    assert (
        wanted(["gke-gcloud-auth-plugin"], {"CLOUDSDK_CORE_ACCOUNT": "bob@example.com"}).settings
        == bob
    )
    assert bob.fallback_name == "bob@example.com"


def test_another_oauth_client_needs_its_secret_and_is_another_identity() -> None:
    with pytest.raises(OptionsError, match="client secret of the OAuth client own"):
        wanted(["gke-gcloud-auth-plugin", "--oidc-client-id=own"])
    own = wanted(
        ["gke-gcloud-auth-plugin"],
        {"KUBETRAY_OIDC_CLIENT_ID": "own", "KUBETRAY_OIDC_CLIENT_SECRET": "GOCSPX-x"},
    ).settings
    assert (
        own.engine.client_id == "own" and own.key != wanted(["gke-gcloud-auth-plugin"]).settings.key
    )
    assert own.engine.redirect_url_keyboard is None  # Google's code page is gcloud's client's


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (["gke-gcloud-auth-plugin", "--impersonate_service_account=sa@p.iam"], {}, "impersonate"),
        (["gke-gcloud-auth-plugin", "--use_edge_cloud"], {}, "Distributed Cloud Edge"),
        (["gke-gcloud-auth-plugin"], {"CLOUDSDK_AUTH_ACCESS_TOKEN": "ya29.secret"}, "is set"),
        (["gke-gcloud-auth-plugin", "--grant-type=password"], {}, "browser login"),
        (["gke-gcloud-auth-plugin", "--stored=x"], {}, "stored credential"),
        (["gke-gcloud-auth-plugin", "--account"], {}, "needs a value"),
        (["gke-gcloud-auth-plugin", "--nope"], {}, "unknown argument '--nope'"),
    ],
)
def test_what_kubetray_does_not_do_is_refused_in_one_line(
    args: list[str], env: dict[str, str], said: str
) -> None:
    with pytest.raises(OptionsError) as e:
        wanted(args, env)
    assert said in str(e.value) and "\n" not in str(e.value) and "ya29.secret" not in str(e.value)


def test_the_adc_file_is_where_gcloud_and_google_auth_look(tmp_path: Path) -> None:
    home = Path("~").expanduser()
    assert adc.path({}) == str(home / ".config" / "gcloud" / adc.FILE)
    assert adc.path({"CLOUDSDK_CONFIG": str(tmp_path)}) == str(tmp_path / adc.FILE)
    named = {"GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "k.json"), "CLOUDSDK_CONFIG": "/x"}
    assert adc.path(named) == str(tmp_path / "k.json")
    w = wanted(["--use_application_default_credentials"], named)
    assert (
        w.settings.adc == str(tmp_path / "k.json")
        and w.settings.key == f"google|adc|{tmp_path / 'k.json'}"
    )
    assert w.local_paths == ("GOOGLE_APPLICATION_CREDENTIALS",)  # not from an SSH host


def test_only_a_person_s_adc_login_is_taken_over(tmp_path: Path) -> None:
    missing = tmp_path / "none.json"
    with pytest.raises(LoginError, match="no application default credentials") as e:
        adc.read(str(missing))
    assert e.value.hint and "gcloud auth application-default login" in e.value.hint
    sa = tmp_path / "sa.json"
    sa.write_text(json.dumps({"type": "service_account", "private_key": "-----BEGIN"}))
    with pytest.raises(LoginError, match="holds service_account credentials") as e:
        adc.read(str(sa))
    assert "BEGIN" not in e.value.message + (e.value.hint or "")
    user = tmp_path / "adc.json"
    user.write_text(
        json.dumps(
            {
                "type": "authorized_user",
                "client_id": "c",
                "client_secret": "s",
                "refresh_token": "1//r",
                "quota_project_id": "q",
            }
        )
    )
    found = adc.read(str(user))
    assert (found.client_id, found.refresh_token, found.quota_project_id) == ("c", "1//r", "q")
    assert "1//r" not in repr(found)


def test_the_index_keeps_no_secret_and_gcloud_s_client_comes_back_whole() -> None:
    for args, env in (
        (["gke-gcloud-auth-plugin", "--account=a@b", "--project=p"], {}),
        (
            ["gke-gcloud-auth-plugin"],
            {"KUBETRAY_OIDC_CLIENT_ID": "own", "KUBETRAY_OIDC_CLIENT_SECRET": "sekrit"},
        ),
    ):
        s = wanted(args, env).settings
        doc = json.loads(json.dumps(s.to_index()))
        assert "sekrit" not in json.dumps(doc) and GCLOUD_ADC_CLIENT[1] not in json.dumps(doc)
        back = G.from_index(doc)
        assert back.key == s.key and back.project == s.project
        if s.default_client:
            assert back == s  # its secret is public: in the code, not the index
        else:
            assert back.engine.client_secret is None  # the tokens' state carries it


def test_import_converts_the_plugin_by_any_path_and_leaves_what_it_cannot_serve() -> None:
    for command in (
        "gke-gcloud-auth-plugin",
        "/usr/lib/google-cloud-sdk/bin/gke-gcloud-auth-plugin",
        r"C:\\sdk\\bin\\gke-gcloud-auth-plugin.exe",
    ):
        found = G.convert({"command": command}, "gke_p_z_c")
        assert found is not None and found.args == ("gke-gcloud-auth-plugin",)
    adc_user = G.convert(
        {"command": "gke-gcloud-auth-plugin", "args": ["--use_application_default_credentials"]},
        "u",
    )
    assert adc_user is not None and adc_user.args == (
        "gke-gcloud-auth-plugin",
        "--use_application_default_credentials",
    )
    with pytest.raises(OptionsError, match="impersonate"):
        G.convert(
            {"command": "gke-gcloud-auth-plugin", "args": ["--impersonate_service_account=x"]}, "u"
        )
    assert G.convert({"command": "kubelogin", "args": ["get-token"]}, "u") is None


# -- the login rules, with a fake engine --------------------------------------------------


class Engine:
    """What Google answers, per its documentation: a refresh token on a first consent or with
    prompt=consent; none on refresh; ``person`` is who logs in next."""

    person = "alice"
    consented: ClassVar[set[tuple[str, str]]] = set()
    urls: ClassVar[list[dict[str, str]]] = []
    refused: ClassVar[str | None] = None

    def __init__(self, settings: OIDCSettings, clock: Any) -> None:
        self.settings = settings

    def _tokens(self, rt: str | None) -> TokenSet:
        return TokenSet(
            expires_at=NOW + timedelta(hours=1),
            issued_at=NOW,
            access_token=f"ya29.{self.person}-{len(Engine.urls)}",
            refresh_token=rt,
            claims={"sub": f"1{self.person}", "email": f"{self.person}@gmail.test"},
        )

    def authorization_code(self, ui: Any, keyboard: bool = False) -> TokenSet:
        params = {**dict(self.settings.extra_params), **ui.auth_params}
        Engine.urls.append(params)
        first = (self.person, self.settings.client_id) not in Engine.consented
        Engine.consented.add((self.person, self.settings.client_id))
        offline = params.get("access_type") == "offline"
        consent = "consent" in params.get("prompt", "").split()
        return self._tokens(f"1//{self.person}" if offline and (first or consent) else None)

    def refresh(self, tokens: TokenSet) -> TokenSet:
        Engine.urls.append({"refresh_with": self.settings.client_id})
        if Engine.refused:
            raise RefreshRefused(f"the provider refused the refresh token ({Engine.refused})")
        return tokens.with_refresh(self._tokens(None))

    def revoke(self, tokens: TokenSet) -> Any:
        raise AssertionError("not in these tests")


class UI:
    browser_available = True

    def __init__(self, params: dict[str, str] | None = None) -> None:
        self.auth_params = params or {}
        self.shown: list[str] = []

    def show(self, text: str) -> None:
        self.shown.append(text)


@pytest.fixture(autouse=True)
def fresh_google() -> None:
    Engine.person, Engine.consented, Engine.urls, Engine.refused = "alice", set(), [], None


def client(args: list[str], env: Mapping[str, str] | None = None) -> GoogleLogin:
    settings: GoogleSettings = wanted(["gke-gcloud-auth-plugin", *args], env).settings
    return GoogleLogin(settings, lambda: NOW, Engine)


def test_without_a_refresh_token_kubetray_asks_for_consent_and_keeps_one_it_has() -> None:
    c = client([])
    first = c.login(UI(), None)  # nothing held: consent asked at once
    assert first.refresh_token == "1//alice" and Engine.urls[-1]["prompt"] == "consent"
    # Logging in again (kubetray login --force): no consent screen; Google sends no refresh
    # token for a second consent, and the one held is kept: it is the same person.
    again = c.login(UI(), first)
    assert "prompt" not in Engine.urls[-1] and again.refresh_token == "1//alice"
    assert len(Engine.urls) == 2


def test_switching_to_a_person_who_consented_before_asks_for_consent_once_more() -> None:
    c = client([])
    held = c.login(UI(), None)
    Engine.consented.add(("bob", GCLOUD_ADC_CLIENT[0]))  # bob used this client before
    Engine.person = "bob"
    ui = UI({"prompt": "select_account"})
    switched = c.login(ui, held)
    assert switched.refresh_token == "1//bob" and switched.who() == "bob@gmail.test"
    assert [u.get("prompt") for u in Engine.urls[1:]] == [
        "select_account",
        "select_account consent",
    ]
    assert any("consent screen" in line for line in ui.shown)


def test_the_account_the_kubeconfig_names_is_the_one_logged_in() -> None:
    with pytest.raises(LoginError, match=r"as alice@gmail\.test, but the kubeconfig asks for bob"):
        client(["--account=bob@gmail.test"]).login(UI(), None)
    assert Engine.urls[-1]["login_hint"] == "bob@gmail.test"


def test_another_client_is_kept_with_the_tokens_and_refreshes_with_them() -> None:
    env = {"KUBETRAY_OIDC_CLIENT_ID": "own", "KUBETRAY_OIDC_CLIENT_SECRET": "GOCSPX-own"}
    c = client([], env)
    tokens = c.login(UI(), None)
    assert tokens.state == {"client_id": "own", "client_secret": "GOCSPX-own"}
    remembered = GoogleLogin(G.from_index(c.settings.to_index()), lambda: NOW, Engine)
    fresh = remembered.renew(tokens)  # after a restart: the secret comes from the keyring
    assert (
        Engine.urls[-1] == {"refresh_with": "own"} and fresh.refresh_token == tokens.refresh_token
    )
    assert fresh.state == tokens.state


def test_a_workspace_reauth_is_said_as_such() -> None:
    c = client([])
    tokens = c.login(UI(), None)
    Engine.refused = "invalid_grant: reauth related error (invalid_rapt)"
    with pytest.raises(RefreshRefused, match="organisation's session control"):
        c.renew(tokens)


def test_gcloud_s_adc_login_is_taken_over_and_followed(tmp_path: Path) -> None:
    where = tmp_path / "application_default_credentials.json"

    def gcloud_login(rt: str) -> None:
        where.write_text(
            json.dumps(
                {
                    "type": "authorized_user",
                    "client_id": GCLOUD_ADC_CLIENT[0],
                    "client_secret": GCLOUD_ADC_CLIENT[1],
                    "refresh_token": rt,
                }
            )
        )

    gcloud_login("1//from-gcloud")
    c = client(["--use_application_default_credentials"], {"CLOUDSDK_CONFIG": str(tmp_path)})
    assert c.settings.login_needs == "nobody"
    tokens = c.login(UI(), None)
    assert tokens.refresh_token == "1//from-gcloud" and tokens.state["adc"] == str(where)
    assert not [u for u in Engine.urls if "access_type" in u]  # no browser: a refresh
    before = where.read_text()
    c.renew(tokens)
    assert where.read_text() == before  # gcloud's file is gcloud's
    gcloud_login("1//newer")  # gcloud auth application-default login again
    newer = c.renew(tokens)
    assert newer.refresh_token == "1//newer"
    revoked = c.revoke(newer)
    assert not revoked.revoked and "gcloud auth application-default revoke" in revoked.reason
    # Google refuses it, and the file holds the same: gcloud must log in again.
    Engine.refused = "invalid_grant: Token has been expired or revoked."
    with pytest.raises(RefreshRefused, match="Google refused gcloud's") as e:
        c.renew(newer)
    assert e.value.hint and "gcloud auth application-default login" in e.value.hint


def test_a_request_header_that_is_not_one_http_header_is_refused_as_for_oidc() -> None:
    """The same check as kubelogin's flags (app.oidc.settings): one line, the value not in it."""
    with pytest.raises(OptionsError, match="X-Key: the value holds a line break") as refused:
        wanted(["gke-gcloud-auth-plugin", "--oidc-request-header=X-Key=top\r\nsecret"])
    assert "secret" not in str(refused.value) and "\n" not in str(refused.value)
    ok = wanted(["gke-gcloud-auth-plugin", "--oidc-request-header=X-Key=k1"]).settings
    assert ok.engine.request_headers == (("X-Key", "k1"),)
