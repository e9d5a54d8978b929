"""The installed launcher's fast request (cached_credential): answered from memory, or nothing
done at all, so that the full request it falls back to never repeats a side effect."""

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from app.broker.consent import Consent
from app.compose import Core
from app.model import Caller
from app.static_credentials import StoredCredential
from app.usecases.get_credential import CredentialRequest
from tests.core import make_core
from tests.fakes import Clock, CountingStore
from tests.unit.test_core import ARGS, FakeProvider, Terminal

V1 = json.dumps(
    {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "spec": {"interactive": True, "cluster": {"server": "https://api.test:6443"}},
    }
)


class Bus:
    """The token store's side of a caller's session bus: wants it, counts offers."""

    def __init__(self, wants: bool) -> None:
        self.wants, self.offered = wants, 0

    def wants_bus(self, address: str) -> bool:
        return self.wants

    def offer_bus(self, address: str) -> bool:
        self.offered += self.wants
        self.wants = False
        return False


class Fixture:
    def __init__(self, tmp_path: Path) -> None:
        self.clock = Clock()
        self.provider = FakeProvider(self.clock)
        self.store = CountingStore()
        self.bus = Bus(wants=False)
        self.asked: list[str] = []
        self.consent = Consent(str(tmp_path / "remote-hosts.json"), self.clock, timeout=0.2)
        self.consent.ask = lambda q: self.asked.append(q.host)
        self.core: Core
        self.core, self.stored = make_core(
            tmp_path,
            self.store,
            self.clock,
            client=self.provider.client,
            consent=self.consent,
            bus=self.bus,
        )

    def request(
        self, args: list[str], exec_info: str = V1, env: tuple[str, ...] = (), remote: str = ""
    ) -> CredentialRequest:
        caller = Caller(pid=4242, parent_pid=4241, remote=remote or None)
        return CredentialRequest(exec_info, tuple(args), env, False, False, caller)

    def at_once(self, args: list[str], **kw: str) -> tuple[int, str, str] | None:
        return self.core.get_credential.at_once(self.request(args, **kw))

    def do(self, args: list[str], **kw: str) -> tuple[int, str, str]:
        """The full request, from a terminal (the fake provider's password login needs one)."""
        req = replace(self.request(args, **kw), stdin_tty=True, stderr_tty=True)
        return self.core.get_credential.do(req, lambda i, v: Terminal())

    def calls(self) -> int:
        return len(self.core.broker.calls())


@pytest.fixture
def f(tmp_path: Path) -> Iterator[Fixture]:
    fixture = Fixture(tmp_path)
    yield fixture
    fixture.core.logins.stop()


def token_of(answer: tuple[int, str, str] | None) -> str:
    assert answer is not None and answer[0] == 0, answer
    return str(json.loads(answer[1])["status"]["token"])


def test_a_stored_credential_is_answered_once_memory_holds_it(f: Fixture) -> None:
    f.stored.save(StoredCredential("team", token="tok-team"), f.clock())
    reads = f.store.gets
    assert f.at_once(["--stored", "team"]) is None  # not read yet: that is the keyring's work
    assert (f.store.gets, f.calls(), f.core.broker.registry.known()) == (reads, 0, [])
    assert token_of(f.do(["--stored", "team"])) == "tok-team"
    reads = f.store.gets
    assert token_of(f.at_once(["--stored", "team"])) == "tok-team"
    assert f.store.gets == reads  # from memory
    assert f.calls() == 2  # counted like any call
    assert f.at_once(["--stored", "team", "--force-refresh"]) is None
    assert f.calls() == 2


def test_what_memory_says_is_wrong_is_answered_at_once(f: Fixture) -> None:
    until = f.clock() + timedelta(hours=1)
    f.stored.save(StoredCredential("team", token="tok-team", not_after=until), f.clock())
    f.do(["--stored", "team"])
    f.clock.advance(hours=2)
    code, out, err = f.at_once(["--stored", "team"]) or (0, "", "")
    assert (code, out) == (1, "") and err.startswith("the credential team expired at")
    assert f.at_once(["--stored", "team"], exec_info="{not json") == f.do(
        ["--stored", "team", "-v=1"], exec_info="{not json"
    )
    code, _, err = f.at_once(["--stored", "team", "--no-such-flag"]) or (0, "", "")
    assert code == 1 and "--no-such-flag" in err
    assert [c.ok for c in f.core.broker.calls()] == [False] * 4 + [True]


def test_an_oidc_identity_without_fresh_tokens_is_left_alone(f: Fixture) -> None:
    assert f.at_once(ARGS) is None  # unknown: naming it is the full request's work
    assert (f.provider.logins, f.calls(), f.core.broker.registry.known()) == (0, 0, [])
    first = token_of(f.do(ARGS))  # the login (a password grant the fake needs no prompt for)
    assert f.provider.logins == 1
    assert token_of(f.at_once(ARGS)) == first
    assert f.calls() == 2
    f.clock.advance(minutes=59)  # due for a refresh: the full request does it
    refreshes = len(f.provider.refreshes)
    assert f.at_once(ARGS) is None
    assert (len(f.provider.refreshes), f.calls()) == (refreshes, 2)
    assert not f.core.logins.in_flight()
    retry = {"apiVersion": "client.authentication.k8s.io/v1alpha1", "kind": "ExecCredential"}
    retry["spec"] = {"response": {"code": 401}}  # type: ignore[assignment]
    assert f.at_once(ARGS, exec_info=json.dumps(retry)) is None  # a 401: never from memory


def test_a_rename_or_a_keyring_move_is_the_full_requests_work(f: Fixture) -> None:
    f.do(ARGS)
    name = f.core.broker.registry.known()[0].identity.name
    assert f.at_once([*ARGS, "--name=chosen"]) is None
    assert f.core.broker.registry.known()[0].identity.name == name
    f.bus.wants = True
    bus = ("DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus",)
    assert f.at_once(ARGS, env=bus) is None
    assert f.bus.offered == 0
    f.do(ARGS, env=bus)
    assert f.bus.offered == 1
    assert f.at_once(ARGS, env=bus) is not None


def test_a_forwarded_request_is_answered_at_once_only_where_consent_was_given(
    f: Fixture,
) -> None:
    first = token_of(f.do(ARGS))

    def seen() -> int:
        return sum(h.calls for h in f.consent.hosts() if h.host == "bastion")

    assert f.at_once(ARGS, remote="bastion") is None
    assert (f.asked, seen(), f.calls()) == ([], 0, 1)  # nobody was asked, nothing counted
    [st] = f.core.broker.registry.known()
    f.consent.allow("bastion", "someone-else")  # another identity's grant serves not this one
    assert f.at_once(ARGS, remote="bastion") is None
    f.consent.allow("bastion", st.identity.name, st.identity.key)
    assert token_of(f.at_once(ARGS, remote="bastion")) == first
    assert (seen(), f.calls()) == (1, 2)
    f.clock.advance(minutes=59)  # due for a refresh: the full request's work, counted there
    assert f.at_once(ARGS, remote="bastion") is None
    assert (seen(), f.calls()) == (1, 2)
    f.consent.deny("bastion")
    assert f.at_once(ARGS, remote="bastion") is None
    assert (f.asked, seen()) == ([], 1)
