"""What identifies an OIDC identity, and the names people see (no network, no store)."""

from pathlib import Path

import pytest

from app.broker.registry import Registry
from app.identity import normalize_issuer, unique_name
from app.oidc.settings import OIDCSettings
from exec_helper.options import OptionsError, resolve


@pytest.mark.parametrize(
    ("spelling", "normal"),
    [
        ("https://idp/", "https://idp"),
        ("https://idp", "https://idp"),
        ("HTTPS://IdP.Example.COM:443/realms/Dev/", "https://idp.example.com/realms/Dev"),
        ("http://127.0.0.1:80/", "http://127.0.0.1"),
        ("http://127.0.0.1:8080//", "http://127.0.0.1:8080"),
        ("https://[::1]:8443/x", "https://[::1]:8443/x"),
    ],
)
def test_issuer_spellings_are_one(spelling: str, normal: str) -> None:
    assert normalize_issuer(spelling) == normal


def settings(*args: str) -> OIDCSettings:
    return OIDCSettings.from_options(resolve(list(args)))


def test_spellings_of_one_login_are_one_identity() -> None:
    base = settings("--oidc-issuer-url=https://idp", "--oidc-client-id=k", "--oidc-extra-scope=a,b")
    same = [
        settings("--oidc-issuer-url=https://IDP/", "--oidc-client-id=k", "--oidc-extra-scope=b,a"),
        settings(
            "--oidc-issuer-url=https://idp:443",
            "--oidc-client-id=k",
            "--oidc-extra-scope=openid,b",
            "--oidc-extra-scope=a",
            "--listen-address=127.0.0.1:8000",  # how, not who
            "--certificate-authority=/tmp/ca.pem",
            "--browser-command=firefox",
        ),
    ]
    assert {s.key for s in same} == {base.key}
    other = [
        settings("--oidc-issuer-url=https://idp", "--oidc-client-id=k2", "--oidc-extra-scope=a,b"),
        settings("--oidc-issuer-url=https://idp", "--oidc-client-id=k", "--oidc-extra-scope=a"),
        settings(
            "--oidc-issuer-url=https://idp",
            "--oidc-client-id=k",
            "--oidc-extra-scope=a,b",
            "--audience=api",
        ),
        settings(
            "--oidc-issuer-url=https://idp/realms/x", "--oidc-client-id=k", "--oidc-extra-scope=a,b"
        ),
    ]
    assert len({s.key for s in other} | {base.key}) == 5


def test_audience_is_sent_as_an_authorization_parameter_last_one_wins() -> None:
    s = settings(
        "--oidc-issuer-url=https://i", "--oidc-client-id=k", "--audience", "a", "--audience=b"
    )
    assert dict(s.extra_params) == {"audience": "b"}


def test_names_are_unique_and_chosen_names_win(tmp_path: Path) -> None:
    reg = Registry(str(tmp_path / "ids.json"), reserved=lambda: ["prod"])
    a = reg.oidc(settings("--oidc-issuer-url=https://idp", "--oidc-client-id=k"))
    assert a.identity.name == "k@idp"
    b = reg.oidc(settings("--oidc-issuer-url=https://idp", "--oidc-client-id=k", "--username=u"))
    assert b.identity.name == "u@idp"
    c = reg.oidc(
        settings("--oidc-issuer-url=https://idp", "--oidc-client-id=k", "--oidc-extra-scope=x"),
        default=lambda: "prod",  # a stored credential has this name already
    )
    assert c.identity.name == "prod-2"
    assert reg.oidc(c.settings, chosen="staging") is c and c.identity.name == "staging"
    assert reg.oidc(c.settings) is c and c.identity.name == "staging"  # the name sticks
    # A second kubeconfig naming the same login otherwise does not rename it (issue 24).
    assert reg.oidc(c.settings, chosen="team-b") is c and c.identity.name == "staging"
    assert unique_name("x", {"x", "x-2"}) == "x-3"
    # After a restart: the same identities, names and settings, from the index alone.
    again = Registry(str(tmp_path / "ids.json"), reserved=lambda: ["prod"])
    assert sorted(st.identity.name for st in again.known()) == ["k@idp", "staging", "u@idp"]
    assert again.find("staging") is not None
    assert again.find("staging").settings == c.settings  # type: ignore[union-attr]
    assert again.oidc(c.settings, chosen="team-b").identity.name == "staging"  # still chosen
    again.remove(c.identity.key)
    assert Registry(str(tmp_path / "ids.json")).find("staging") is None


def test_loading_the_index_lists_the_stored_names_once(tmp_path: Path) -> None:
    """A large index asked for the stored credentials' names once per entry (issue 33)."""
    path = str(tmp_path / "ids.json")
    first = Registry(path, reserved=lambda: ["prod"])
    for i in range(40):
        first.oidc(settings("--oidc-issuer-url=https://idp", f"--oidc-client-id=k{i}"))
    first.oidc(settings("--oidc-issuer-url=https://idp", "--oidc-client-id=p"), chosen="prod")
    asked: list[int] = []
    again = Registry(path, reserved=lambda: asked.append(1) or ["prod"])
    names = [st.identity.name for st in again.known()]
    assert len(asked) == 1
    assert sorted(names) == sorted([f"k{i}@idp" for i in range(40)] + ["prod-2"])


def test_index_of_the_first_round_is_read_in_todays_form(tmp_path: Path) -> None:
    index = tmp_path / "ids.json"
    index.write_text(
        '{"kubectl@idp": {"key": "oidc|https://idp/|kubectl|||", "settings": '
        '{"issuer": "https://idp/", "client_id": "kubectl", "scopes": ["openid"]}}}'
    )
    reg = Registry(str(index))
    st = reg.find("kubectl@idp")
    assert st is not None and st.settings is not None and st.settings.issuer == "https://idp"
    assert st.legacy_key == "oidc|https://idp/|kubectl|||"
    same = reg.oidc(settings("--oidc-issuer-url=https://idp", "--oidc-client-id=kubectl"))
    assert same is st


def test_a_chosen_name_renames_the_records_of_calls_too(tmp_path: Path) -> None:
    """Diagnostics shows the name a person chose for the calls made before they chose it."""
    from datetime import UTC, datetime

    from app.broker.broker import Broker
    from app.model import Caller, CallRecord
    from app.static_credentials import StoredCredentials
    from app.store.memory_store import MemorySecretStore
    from exec_helper.options import resolve

    broker = Broker(
        StoredCredentials(MemorySecretStore(), str(tmp_path / "s.json")),
        Registry(str(tmp_path / "ids.json")),
    )
    args = ["--oidc-issuer-url=https://idp", "--oidc-client-id=k"]
    first = broker.identity(resolve(args))
    assert first.identity.name == "k@idp"
    broker.record(CallRecord(datetime.now(UTC), "k@idp", None, Caller(pid=1), True, None, 1.0))
    broker.identity(resolve([*args, "--name=team"]))
    assert [r.identity for r in broker.calls()] == ["team"]


def test_request_headers_are_how_the_provider_is_reached_not_who_logs_in() -> None:
    base = settings("--oidc-issuer-url=https://idp", "--oidc-client-id=k")
    with_header = settings(
        "--oidc-issuer-url=https://idp", "--oidc-client-id=k", "--oidc-request-header=Origin=o"
    )
    assert with_header.key == base.key and with_header.request_headers == (("Origin", "o"),)
    assert with_header != base  # a provider client of its own
    assert "Origin" not in repr(with_header)


def test_a_machine_identity_is_not_the_person_who_logs_in_with_its_client() -> None:
    person = settings("--oidc-issuer-url=https://idp", "--oidc-client-id=k")
    machine = settings(
        "--oidc-issuer-url=https://idp",
        "--oidc-client-id=k",
        "--oidc-client-secret=s",
        "--grant-type=client-credentials",
    )
    assert machine.machine and not person.machine
    assert machine.key != person.key and machine.fallback_name == "k@idp"


def test_the_index_keeps_no_request_header(tmp_path: Path) -> None:
    s = settings(
        "--oidc-issuer-url=https://idp",
        "--oidc-client-id=k",
        "--oidc-request-header=X-Api-Key=topsecret",
    )
    Registry(str(tmp_path / "ids.json")).oidc(s)
    assert "topsecret" not in (tmp_path / "ids.json").read_text()
    again = Registry(str(tmp_path / "ids.json")).find("k@idp")
    assert again is not None and again.settings is not None
    assert again.settings.request_headers == () and again.identity.key == s.key


def test_kubelogins_old_listen_port_and_access_type_flags() -> None:
    s = settings(
        "--oidc-issuer-url=https://idp",
        "--oidc-client-id=k",
        "--listen-address=127.0.0.1:9999",
        "--listen-port=8000,18000",
        "--oidc-access-type=offline",
    )
    assert s.listen_addresses == ("127.0.0.1:8000", "127.0.0.1:18000")  # as kubelogin: it wins
    assert dict(s.extra_params) == {"access_type": "offline"}
    with pytest.raises(OptionsError, match="--listen-port takes a port number"):
        settings("--oidc-issuer-url=https://idp", "--oidc-client-id=k", "--listen-port=x")


def test_client_credentials_need_the_client_secret() -> None:
    with pytest.raises(OptionsError, match="needs --oidc-client-secret"):
        settings(
            "--oidc-issuer-url=https://i", "--oidc-client-id=k", "--grant-type=client-credentials"
        )


def test_why_a_login_is_needed_is_kept_in_the_index_and_dropped_once_a_login_works(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ids.json"
    first = Registry(str(path))
    st = first.oidc(settings("--oidc-issuer-url=https://idp", "--oidc-client-id=kubectl"))
    why = ("the provider refused the refresh token (invalid_grant)", "2026-11-28T10:00:00+00:00")
    first.note_login_needed(st, why)
    again = Registry(str(path)).find(st.identity.name)
    assert again is not None and again.login_needed == why and again.kept is None
    first.note_login_needed(st, None)
    assert Registry(str(path)).find(st.identity.name).login_needed is None  # type: ignore[union-attr]
    assert "login_needed" not in path.read_text()
    # A damaged field is not read, and not written back either.
    path.write_text(path.read_text().replace('"chosen"', '"login_needed": 7, "chosen"'))
    damaged = Registry(str(path))
    entry = damaged.find(st.identity.name)
    assert entry is not None and entry.login_needed is None and entry.kept is None
