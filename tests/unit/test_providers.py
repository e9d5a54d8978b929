"""The provider interface: a made-up provider with a command line of its own goes through the
same broker, logins, store, index and status as OIDC, and kubetray-exec's environment reaches
providers as the cloud tools would read it (no network, no OS keyring)."""

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest

from app import compose
from app.broker.logins import store_key
from app.errors import UsageError
from app.model import State
from app.providers import Providers, default
from app.providers.base import (
    NOBODY,
    Check,
    Clock,
    Converted,
    LoginUI,
    RefreshRefused,
    Revocation,
    Shown,
    TokenSet,
    Wanted,
)
from app.static_credentials import StoredCredentials
from app.store.memory_store import MemorySecretStore
from app.usecases.get_credential import _remote_env, resolve
from exec_helper import paths
from exec_helper.options import OptionsError
from tests.fakes import Clock as FakeClock
from tests.fakes import NoBrowser, SilentCaller

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


@dataclass(frozen=True)
class ToolSettings:
    """``tool get-token --account A [--region R]``; EXAMPLE_REGION in the environment."""

    kind: ClassVar[str] = "example"
    account: str
    region: str = "home"

    @property
    def key(self) -> str:
        return f"example|{self.account}"

    @property
    def fallback_name(self) -> str:
        return f"example-{self.account}"

    named_by_kubeconfig: ClassVar[bool] = False
    machine: ClassVar[bool] = False
    can_fetch: ClassVar[bool] = False
    login_needs: ClassVar[str] = NOBODY
    browser_command: ClassVar[str | None] = None
    ca_files: ClassVar[tuple[str, ...]] = ()

    @property
    def group(self) -> str:
        return f"https://{self.region}.example"

    @property
    def where(self) -> str:
        return self.group

    def to_index(self) -> dict[str, Any]:
        return {"account": self.account, "region": self.region}


class ToolClient:
    """Logs in at once; renews with a refresh token it rotates; keeps a counter in ``state``."""

    logins: ClassVar[list[str]] = []
    refused: ClassVar[bool] = False

    def __init__(self, settings: ToolSettings, clock: Clock) -> None:
        self.settings, self.clock = settings, clock

    def _tokens(self, n: int) -> TokenSet:
        now = self.clock()
        return TokenSet(
            expires_at=now + timedelta(hours=1),
            issued_at=now,
            access_token=f"access-{self.settings.account}-{n}",
            refresh_token=f"rt-{n}",
            claims={"name": self.settings.account},
            state={"n": n, "region": self.settings.region},
        )

    def login(self, ui: LoginUI, held: TokenSet | None) -> TokenSet:
        ToolClient.logins.append(self.settings.account)
        ui.show("logging in without anybody")
        return self._tokens(1)

    def fetch(self) -> TokenSet:
        raise AssertionError("not a machine identity")

    def renew(self, tokens: TokenSet) -> TokenSet:
        if ToolClient.refused:
            raise RefreshRefused("the tool refused the refresh token", "log in again")
        return self._tokens(int(tokens.state["n"]) + 1)

    def revoke(self, tokens: TokenSet) -> Revocation:
        return Revocation(True, "revoked")

    def account_choice(self) -> dict[str, str]:
        return {}


class ToolProvider:
    kind = "example"
    usage = "tool get-token --account A"

    def recognises(self, args: Sequence[str]) -> bool:
        return list(args[:2]) == ["tool", "get-token"]

    def wanted(
        self, args: Sequence[str], config: Mapping[str, Any] | None, env: Mapping[str, str]
    ) -> Wanted:
        rest = list(args[2:])
        if rest[:1] != ["--account"] or len(rest) < 2:
            raise OptionsError("tool get-token needs --account A")
        return Wanted(ToolSettings(rest[1], env.get("EXAMPLE_REGION", "home")))

    def from_index(self, doc: Mapping[str, Any]) -> ToolSettings:
        return ToolSettings(str(doc["account"]), str(doc["region"]))

    def client(self, settings: Any, clock: Clock) -> ToolClient:
        return ToolClient(settings, clock)

    def token(self, settings: Any, tokens: TokenSet, cluster: str | None) -> str | None:
        return f"{tokens.access_token}@{cluster}"

    def renewable(self, settings: Any, tokens: TokenSet) -> bool:
        return bool(tokens.refresh_token)

    def describe(self, settings: Any, tokens: TokenSet | None) -> Shown:
        return Shown(who=tokens.who() if tokens else None, details=(("region", settings.region),))

    def note(self, settings: Any, tokens: TokenSet | None) -> str | None:
        return None

    def checks(self, settings: Any, now: Clock) -> Iterator[Check]:
        yield Check(f"example {settings.region}", True, "reachable")

    def convert(self, exec_: Mapping[str, Any], user: str) -> Converted | None:
        if exec_.get("command") != "tool":
            return None
        return Converted(("tool", *exec_.get("args", [])))


def with_tool(base: Providers) -> Providers:
    flags = [base.by_kind("stored"), base.by_kind("oidc")]
    return Providers([ToolProvider()], flags)  # type: ignore[list-item]


def test_a_provider_of_its_own_goes_through_broker_logins_store_index_and_status(
    tmp_path: Path,
) -> None:
    ToolClient.logins.clear()
    ToolClient.refused = False
    clock = FakeClock(T0)
    store = MemorySecretStore()
    stored = StoredCredentials(store, str(tmp_path / "stored.json"))
    providers = with_tool(default())
    core = compose.core(
        store, stored, str(tmp_path), clock=clock, browser=NoBrowser, providers=providers
    )
    broker = core.broker

    wanted = resolve(
        providers, ["tool", "get-token", "--account", "ann"], None, ("EXAMPLE_REGION=eu",)
    )
    st = broker.identity(wanted, "")
    assert (st.identity.kind, st.identity.name) == ("example", "example-ann")
    cred = broker.get_credential(st, wanted, SilentCaller(), cluster="https://k")
    assert cred.token == "access-ann-1@https://k" and ToolClient.logins == ["ann"]
    # In the store under its kind, with the provider's state; in the index with its settings.
    data = store.get(store_key(st.identity))
    assert store_key(st.identity).startswith("example/") and data is not None
    assert TokenSet.from_bytes(data).state == {"n": 1, "region": "eu"}
    index = json.loads((tmp_path / "identities.json").read_text())["identities"][st.identity.key]
    assert index == {
        "name": "example-ann",
        "kind": "example",
        "config": {"account": "ann", "region": "eu"},
        "chosen": False,
    }
    # Memory serves the hot path; status shows the provider's words.
    assert broker.cached_credential(st, wanted, "https://k2").token == "access-ann-1@https://k2"  # type: ignore[union-attr]
    (row,) = broker.status()
    assert (row.kind, row.state, row.who, row.details) == (
        "example",
        State.READY,
        "ann",
        (("region", "eu"),),
    )
    assert row.logs_in

    # Renewed ahead of expiry like any login, the state carried on.
    clock.advance(minutes=55)
    core.logins.token(st, SilentCaller(), refresh=True)
    assert core.logins.cached(st).state["n"] == 2  # type: ignore[union-attr]

    # Another agent reads the identity back from the index and its tokens from the store.
    again = compose.core(
        store, stored, str(tmp_path), clock=clock, browser=NoBrowser, providers=providers
    )
    again.logins.load_known()
    (row,) = again.broker.status()
    assert (row.name, row.kind, row.details) == ("example-ann", "example", (("region", "eu"),))
    assert row.state == State.READY

    # A refused refresh token: the identity needs a login, said with the provider's reason.
    ToolClient.refused = True
    clock.advance(minutes=58)
    st2 = again.broker.registry.find("example-ann")
    assert st2 is not None
    again.logins.token(st2, SilentCaller(), refresh=True)  # NOBODY: the login runs at once
    assert ToolClient.logins == ["ann", "ann"]


def test_what_no_provider_recognises_is_said_with_every_way_to_name_a_credential() -> None:
    providers = with_tool(default())
    with pytest.raises(UsageError) as e:
        providers.wanted([], None, {})
    assert e.value.message == "kubetray-exec was not told which credential to serve"
    assert e.value.hint and "--stored NAME" in e.value.hint and "tool get-token" in e.value.hint
    with pytest.raises(OptionsError, match="needs --account"):
        providers.wanted(["tool", "get-token"], None, {})
    # kubetray's own flags still mean what they meant.
    assert providers.wanted(["--stored", "x"]).settings.key == "stored:x"


def test_the_cloud_tools_variables_reach_the_agent_and_not_from_an_ssh_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("AWS_PROFILE", "AZURE_CLIENT_ID", "AAD_LOGIN_METHOD", "CLOUDSDK_CONFIG"):
        monkeypatch.setenv(name, "x")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/adc.json")
    monkeypatch.setenv("AWSPROFILE", "not a cloud tool's")
    monkeypatch.setenv("KUBETRAY_RUNTIME_DIR", "/run/how-to-reach")
    sent = dict(item.split("=", 1) for item in paths.kubetray_env())
    assert sent["AWS_PROFILE"] == "x" and sent["GOOGLE_APPLICATION_CREDENTIALS"] == "/adc.json"
    assert {"AZURE_CLIENT_ID", "AAD_LOGIN_METHOD", "CLOUDSDK_CONFIG"} <= set(sent)
    assert "AWSPROFILE" not in sent and "KUBETRAY_RUNTIME_DIR" not in sent
    remote = _remote_env(tuple(f"{k}={v}" for k, v in sent.items()))
    # what names the request (the profile update-kubeconfig puts in the exec env) still comes
    assert [item for item in remote if item.startswith(paths.PASSED_ENV_PREFIXES)] == [
        "AWS_PROFILE=x"
    ]


def test_the_index_keeps_what_it_cannot_read_and_says_so_of_a_newer_format(
    tmp_path: Path,
) -> None:
    """app/formats.py's rules for providers' entries: a kind this kubetray lacks (a cloud's
    identity read by a kubetray without that cloud) and fields a provider does not know are kept and
    written back; an index of a newer format is said in one line and left alone."""
    from app.broker.registry import Registry
    from app.formats import NewerFormat
    from app.providers.google import GoogleProvider

    index = tmp_path / "identities.json"
    google = GoogleProvider().wanted(["gke-gcloud-auth-plugin", "--project=p"], None, {}).settings
    doc = {
        "version": 2,
        "kubetray": "9.0.0",
        "identities": {
            "nimbus|arn:nimbus::1:role/x": {
                "name": "prod-eks",
                "kind": "nimbus",
                "config": {"role": "x"},
                "chosen": True,
            },
            google.key: {
                "name": "google",
                "kind": "google",
                "config": {**google.to_index(), "tint": "blue"},
                "chosen": False,
                "pinned": True,
            },
        },
    }
    index.write_text(json.dumps(doc))
    registry = Registry(str(index))
    (st,) = registry.known()
    assert st.identity.kind == "google" and st.settings == google
    registry.login(google, chosen="work")  # a rename: the index is written again
    written = json.loads(index.read_text())["identities"]
    assert (
        written["nimbus|arn:nimbus::1:role/x"] == doc["identities"]["nimbus|arn:nimbus::1:role/x"]
    )
    mine = written[google.key]
    assert mine["name"] == "work" and mine["pinned"] is True and mine["config"]["tint"] == "blue"
    assert mine["config"]["project"] == "p" and "client_secret" not in json.dumps(mine)

    index.write_text(json.dumps({**doc, "version": 3}))
    newer = Registry(str(index))
    assert newer.known() == []  # none of its identities, and it says why
    assert isinstance(newer.problem, NewerFormat)
    assert "format 3" in newer.problem.message and "\n" not in newer.problem.one_line()
    newer.login(google, chosen="work")  # served from memory: never written over
    assert json.loads(index.read_text())["version"] == 3
