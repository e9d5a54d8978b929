"""The identity rules with a fake provider and a fake clock: single flight, blocking after a
failure, refresh ahead, rotation, logout, forget, and the true state after a restart."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from app.broker.broker import Broker
from app.broker.flight import BLOCK_AFTER_FAILURE, Login, LoginRequired
from app.broker.logins import Logins, store_key
from app.broker.refresh import RefreshScheduler
from app.broker.registry import Entry, Registry
from app.model import State
from app.oidc.errors import LoginError, RefreshFailed
from app.oidc.settings import Metadata, OIDCSettings
from app.oidc.tokens import Revocation, TokenSet
from app.static_credentials import StoredCredentials
from app.store.memory_store import MemorySecretStore
from exec_helper.options import resolve
from tests.fakes import Clock, NoBrowser, SilentCaller

ARGS = ["--oidc-issuer-url=https://idp.test", "--oidc-client-id=kubectl", "--grant-type=password"]


class FakeProvider:
    """A provider that issues tokens for an hour, rotates refresh tokens and counts calls."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.logins = 0
        self.refreshes: list[str] = []
        self.revoked: list[str] = []
        self.valid_refresh: set[str] = set()
        self.fail_login = False
        self.login_started = threading.Event()
        self.release = threading.Event()
        self.release.set()
        self.select_account = False
        self.auth_params: list[dict[str, str]] = []
        self.id_token_on_refresh = True
        self.bad_id_token_on_refresh = False
        self.answer = threading.Event()
        """Cleared: refreshes wait for it (a provider slow to answer)."""
        self.answer.set()

    def client(self, settings: OIDCSettings, clock: object) -> "FakeClient":
        return FakeClient(self, settings)

    def issue(self, n: int) -> TokenSet:
        now = self.clock()
        rt = f"rt-{n}-{len(self.refreshes)}"
        self.valid_refresh.add(rt)
        return TokenSet(
            expires_at=now + timedelta(hours=1),
            issued_at=now,
            id_token=f"id-{n}-{len(self.refreshes)}",
            refresh_token=rt,
            claims={"sub": "alice", "email": "alice@example.test"},
        )


class FakeClient:
    def __init__(self, provider: FakeProvider, settings: OIDCSettings) -> None:
        self.p = provider
        self.settings = settings

    def password(self, ui: Login) -> TokenSet:
        self.p.logins += 1
        self.p.login_started.set()
        self.p.release.wait(5)
        if "/no-such-ca.pem" in self.settings.ca_files:
            raise LoginError("cannot reach the provider: CERTIFICATE_VERIFY_FAILED")
        if self.p.fail_login:
            raise LoginError("the provider refused the login (invalid_grant)")
        return self.p.issue(self.p.logins)

    def authorization_code(self, ui: Login, keyboard: bool = False) -> TokenSet:
        self.p.auth_params.append(dict(ui.auth_params))
        return self.password(ui)

    def refresh(self, tokens: TokenSet) -> TokenSet:
        self.p.answer.wait(10)
        rt = tokens.refresh_token
        if rt not in self.p.valid_refresh:  # a strict provider: reuse revokes the grant
            raise LoginError(f"refresh token reused: {rt}")
        self.p.valid_refresh.discard(rt or "")
        self.p.refreshes.append(rt or "")
        issued = self.p.issue(self.p.logins)
        if self.p.bad_id_token_on_refresh:  # rotated, then the id_token fails its checks
            raise RefreshFailed(
                "the provider's id_token is not acceptable",
                None,
                replace(tokens, refresh_token=issued.refresh_token),
            )
        if not self.p.id_token_on_refresh:  # what OIDCClient.refresh makes of such an answer
            return replace(tokens, refresh_token=issued.refresh_token, no_id_token_on_refresh=True)
        return tokens.with_refresh(issued)

    def revoke(self, tokens: TokenSet) -> Revocation:
        self.p.revoked.append(tokens.refresh_token or "")
        return Revocation(True, "revoked at the provider")

    def metadata(self) -> Metadata:
        return Metadata(
            issuer="https://idp.test",
            authorization_endpoint="https://idp.test/auth",
            token_endpoint="https://idp.test/token",
            jwks_uri="https://idp.test/jwks",
            device_authorization_endpoint=None,
            revocation_endpoint="https://idp.test/revoke",
            end_session_endpoint=None,
            grant_types_supported=(),
            code_challenge_methods_supported=("S256",),
            id_token_signing_alg_values_supported=("RS256",),
            prompt_values_supported=("login", "select_account") if self.p.select_account else (),
        )


class Terminal(SilentCaller):
    interactive = True
    visible = True


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def provider(clock: Clock) -> FakeProvider:
    return FakeProvider(clock)


@pytest.fixture
def store() -> MemorySecretStore:
    return MemorySecretStore()


def make(tmp_path: Path, store: MemorySecretStore, clock: Clock, provider: FakeProvider):  # type: ignore[no-untyped-def]
    registry = Registry(str(tmp_path / "ids.json"))
    logins = Logins(store, registry, clock, browser=NoBrowser, client=provider.client)
    broker = Broker(StoredCredentials(store, str(tmp_path / "s.json")), registry, logins, clock)
    return broker, logins


@pytest.fixture
def core(tmp_path: Path, store: MemorySecretStore, clock: Clock, provider: FakeProvider):  # type: ignore[no-untyped-def]
    broker, logins = make(tmp_path, store, clock, provider)
    yield broker, logins
    logins.stop()


def stored_refresh_token(store: MemorySecretStore, st: Entry) -> str | None:
    """The refresh token the secret store holds for ``st`` (what a restart would read)."""
    data = store.get(store_key(st.identity))
    return TokenSet.from_bytes(data).refresh_token if data else None


def token(broker: Broker, args: list[str] = ARGS) -> str | None:
    opts = resolve(args)
    return broker.get_credential(broker.identity(opts), opts, Terminal()).token


def test_fifty_callers_share_one_login(core, provider: FakeProvider) -> None:  # type: ignore[no-untyped-def]
    broker, _ = core
    provider.release.clear()
    with ThreadPoolExecutor(50) as pool:
        futures = [pool.submit(token, broker) for _ in range(50)]
        assert provider.login_started.wait(5)
        time.sleep(0.1)  # let every caller arrive while the login runs
        provider.release.set()
        tokens = {f.result(timeout=10) for f in futures}
    assert tokens == {"id-1-0"} and provider.logins == 1


def test_a_failed_login_blocks_callers_until_the_user_asks(core, provider, clock) -> None:  # type: ignore[no-untyped-def]
    broker, logins = core
    provider.fail_login = True
    with pytest.raises(LoginError, match="invalid_grant"):
        token(broker)
    start = time.monotonic()
    with pytest.raises(LoginRequired, match="login required") as e:
        token(broker)
    assert time.monotonic() - start < 0.5 and "kubetray login" in str(e.value.hint)
    assert provider.logins == 1  # no login storm
    st = broker.identity(resolve(ARGS))
    assert broker.status()[0].state is State.NEEDS_LOGIN
    assert "invalid_grant" in (broker.status()[0].error or "")
    provider.fail_login = False
    assert logins.token(st, Terminal(), explicit=True).id_token == "id-2-0"  # kubetray login
    clock.advance(seconds=BLOCK_AFTER_FAILURE.total_seconds() + 1)
    assert token(broker) == "id-2-0"


def test_one_callers_settings_never_block_or_poison_another(core, provider) -> None:  # type: ignore[no-untyped-def]
    broker, _ = core
    wrong_ca = [*ARGS, "--certificate-authority=/no-such-ca.pem"]
    with pytest.raises(LoginError, match="CERTIFICATE_VERIFY_FAILED"):
        token(broker, wrong_ca)
    with pytest.raises(LoginRequired):  # the same kubeconfig again: blocked, no storm
        token(broker, wrong_ca)
    assert token(broker, ARGS) == "id-2-0"  # the right kubeconfig is not held back
    assert token(broker, wrong_ca) == "id-2-0"  # and serves the other from memory
    st = broker.identity(resolve(ARGS))
    assert st.settings is not None and st.settings.ca_files == ()  # what worked is kept
    assert provider.logins == 2


def test_the_block_ends_by_itself(core, provider, clock) -> None:  # type: ignore[no-untyped-def]
    broker, _ = core
    provider.fail_login = True
    with pytest.raises(LoginError):
        token(broker)
    provider.fail_login = False
    clock.advance(seconds=BLOCK_AFTER_FAILURE.total_seconds() + 1)
    assert token(broker) == "id-2-0"


def test_refresh_ahead_rotates_and_never_presents_a_used_token(
    core, provider, clock, store
) -> None:  # type: ignore[no-untyped-def]
    broker, logins = core
    assert token(broker) == "id-1-0"
    st = broker.identity(resolve(ARGS))
    for n in range(1, 6):
        clock.advance(minutes=55)  # past refresh_due (expiry - 1.5 x 6 min)
        logins._renew_job(st.identity.key)  # what the scheduler thread does
        logins._renew_job(st.identity.key)  # a second wake-up finds nothing due
        assert len(provider.refreshes) == n
        assert token(broker) == f"id-1-{n}"
    assert len(set(provider.refreshes)) == 5 and provider.logins == 1
    # The rotated refresh token is in the store, not only in memory.
    registry = Registry(logins.registry._index_path)
    restarted = Logins(store, registry, clock, browser=NoBrowser, client=provider.client)
    try:
        again = restarted.find(st.identity.name)
        assert again is not None
        clock.advance(minutes=61)  # expired: the caller waits for the refresh
        assert restarted.token(again, Terminal()).id_token == "id-1-6"
    finally:
        restarted.stop()


def test_a_refresh_without_id_token_keeps_the_rotated_token_and_says_so(
    core, provider, clock, store
) -> None:  # type: ignore[no-untyped-def]
    broker, logins = core
    token(broker)
    st = broker.identity(resolve(ARGS))
    provider.id_token_on_refresh = False
    clock.advance(minutes=55)
    logins._renew_job(st.identity.key)  # refresh ahead: rotated, no id_token
    assert provider.refreshes == ["rt-1-0"] and stored_refresh_token(store, st) == "rt-1-1"
    assert token(broker) == "id-1-0"  # the login's id_token is still valid for minutes
    logins._renew_job(st.identity.key)  # nothing scheduled again: it would not help
    assert provider.refreshes == ["rt-1-0"]
    note = broker.status()[0].note
    assert note and "no id_token on refresh" in note and "--oidc-use-access-token" in note
    clock.advance(minutes=5)
    assert token(broker) == "id-2-1"  # expired: a login, never a reused refresh token
    assert provider.logins == 2 and len(provider.refreshes) == len(set(provider.refreshes))


def test_a_refresh_that_fails_after_rotation_never_loses_the_new_token(
    core, provider, clock, store
) -> None:  # type: ignore[no-untyped-def]
    broker, logins = core
    token(broker)
    st = broker.identity(resolve(ARGS))
    provider.bad_id_token_on_refresh = True
    clock.advance(minutes=55)
    logins._renew_job(st.identity.key)
    assert stored_refresh_token(store, st) == "rt-1-1"  # kept in the store
    provider.bad_id_token_on_refresh = False
    clock.advance(seconds=30)
    logins._renew_job(st.identity.key)  # the retry presents the rotated token
    assert provider.refreshes == ["rt-1-0", "rt-1-1"]
    assert token(broker) == "id-1-2"


def test_a_stale_token_is_served_while_one_refresh_runs_behind(core, provider, clock) -> None:  # type: ignore[no-untyped-def]
    broker, _ = core
    token(broker)
    clock.advance(minutes=59)  # within the margin, still valid: nobody waits on the provider
    provider.answer.clear()
    start = time.monotonic()
    with ThreadPoolExecutor(20) as pool:
        results = set(pool.map(lambda _: token(broker), range(20)))
    assert results == {"id-1-0"} and time.monotonic() - start < 2
    provider.answer.set()
    deadline = time.monotonic() + 5
    while token(broker) != "id-1-1" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert token(broker) == "id-1-1" and provider.refreshes == ["rt-1-0"]


def test_an_expired_token_waits_for_one_refresh(core, provider, clock) -> None:  # type: ignore[no-untyped-def]
    broker, _ = core
    token(broker)
    clock.advance(minutes=61)
    with ThreadPoolExecutor(20) as pool:
        results = set(pool.map(lambda _: token(broker), range(20)))
    assert results == {"id-1-1"} and provider.refreshes == ["rt-1-0"]


def test_state_after_a_restart_is_the_true_one(tmp_path, store, clock, provider) -> None:  # type: ignore[no-untyped-def]
    broker, logins = make(tmp_path, store, clock, provider)
    token(broker)
    logins.stop()
    broker, logins = make(tmp_path, store, clock, provider)  # the agent restarted
    try:
        assert [s.state for s in broker.status()] == [State.NEEDS_LOGIN]  # not read yet
        logins.load_known()  # what the agent does at start, on a worker thread
        status = broker.status()
        assert [s.state for s in status] == [State.READY]
        assert status[0].who == "alice@example.test" and status[0].calls == 0
    finally:
        logins.stop()


def test_logout_revokes_and_forget_removes(core, provider, tmp_path) -> None:  # type: ignore[no-untyped-def]
    broker, logins = core
    token(broker)
    name = broker.status()[0].name
    assert logins.logout(name) == Revocation(True, "revoked at the provider")
    assert provider.revoked == ["rt-1-0"]
    assert broker.status()[0].state is State.NEEDS_LOGIN
    assert logins.forget(name)
    assert broker.status() == []
    assert Registry(str(tmp_path / "ids.json")).known() == []
    assert not logins.forget(name)


def test_switch_account_asks_the_provider_to_choose(core, provider) -> None:  # type: ignore[no-untyped-def]
    broker, logins = core
    args = ["--oidc-issuer-url=https://idp.test", "--oidc-client-id=kubectl"]
    st = broker.identity(resolve(args))
    provider.select_account = True
    logins.switch_account(st, Terminal())
    provider.select_account = False
    logins.switch_account(st, Terminal())
    assert provider.auth_params == [{"prompt": "select_account"}, {}]


def test_scheduler_calls_back_when_due() -> None:
    from datetime import UTC

    called = threading.Event()
    keys: list[str] = []

    def refresh(key: str) -> None:
        keys.append(key)
        called.set()

    sched = RefreshScheduler(lambda: datetime.now(UTC), refresh)
    sched.start()
    try:
        sched.schedule("late", datetime.now(UTC) + timedelta(hours=1))
        sched.schedule("soon", datetime.now(UTC) + timedelta(milliseconds=50))
        assert called.wait(2) and keys == ["soon"]
    finally:
        sched.stop()


def test_unreadable_tokens_mean_a_login_not_a_dead_end(tmp_path, clock, provider) -> None:  # type: ignore[no-untyped-def]
    """A keyring item whose sealed secret is gone (another kubetray configuration on the same
    keyring wrote it) is dropped: the caller logs in again instead of failing for good."""
    from app.errors import SecretLost

    class LostStore(MemorySecretStore):
        def get(self, key: str) -> bytes | None:
            if super().get(key) == b"sealed-elsewhere":
                raise SecretLost("the sealed secret file is missing", "store it again")
            return super().get(key)

    store = LostStore()
    broker, logins = make(tmp_path, store, clock, provider)
    try:
        st = broker.identity(resolve(ARGS))
        store.set(store_key(st.identity), b"sealed-elsewhere")
        assert token(broker) == "id-1-0" and provider.logins == 1
    finally:
        logins.stop()


class FailingClient(FakeClient):
    """The provider's refresh fails the way ``provider.refresh_error`` says."""

    def refresh(self, tokens: TokenSet) -> TokenSet:
        error = getattr(self.p, "refresh_error", None)
        if error is not None:
            self.p.refreshes.append(tokens.refresh_token or "")
            raise error
        return super().refresh(tokens)


@pytest.fixture
def failing(tmp_path: Path, store: MemorySecretStore, clock: Clock, provider: FakeProvider):  # type: ignore[no-untyped-def]
    registry = Registry(str(tmp_path / "ids.json"))
    logins = Logins(
        store, registry, clock, browser=NoBrowser, client=lambda s, c: FailingClient(provider, s)
    )
    broker = Broker(StoredCredentials(store, str(tmp_path / "s.json")), registry, logins, clock)
    yield broker, logins
    logins.stop()


def run_for(logins: Logins, st: Entry, clock: Clock, seconds: int) -> None:
    """What the scheduler does over ``seconds`` of the fake clock: a wake-up every second."""
    for _ in range(seconds):
        clock.advance(seconds=1)
        logins._renew_job(st.identity.key)


def test_a_failing_refresh_backs_off_and_never_storms(failing, provider, clock) -> None:  # type: ignore[no-untyped-def]
    from app.oidc.errors import ProviderUnavailable

    broker, logins = failing
    token(broker)
    st = broker.identity(resolve(ARGS))
    provider.refresh_error = ProviderUnavailable("nothing answers at idp.test:443")
    clock.advance(minutes=51)  # the refresh is due
    run_for(logins, st, clock, 180)
    assert 5 <= len(provider.refreshes) <= 8  # 2, 4, 8, 16, 32, 60, 60 s (+ up to half)
    status = broker.status()[0]
    assert status.refresh_error and "nothing answers" in status.refresh_error
    assert status.retry_at is not None and status.state is State.EXPIRING  # still valid
    provider.refresh_error = None
    run_for(logins, st, clock, 95)
    assert token(broker) != "id-1-0" and broker.status()[0].refresh_error is None


def test_a_rejected_answer_after_rotation_keeps_the_new_token_and_backs_off(
    failing, provider, clock, store
) -> None:  # type: ignore[no-untyped-def]
    """The storm of a clock 90 s apart: the answer is refused after the provider rotated, and
    the next try was due in the past. Now: the rotated token kept, the next try after a pause."""
    broker, logins = failing
    token(broker)
    st = broker.identity(resolve(ARGS))
    provider.bad_id_token_on_refresh = True
    clock.advance(minutes=51)
    run_for(logins, st, clock, 60)
    assert 4 <= len(provider.refreshes) <= 6  # not one a wake-up
    assert len(set(provider.refreshes)) == len(provider.refreshes)  # none presented twice
    assert stored_refresh_token(store, st) == f"rt-1-{len(provider.refreshes)}"


def test_a_refused_refresh_token_is_dropped_once_and_a_login_is_asked_with_why(
    failing, provider, clock, store
) -> None:  # type: ignore[no-untyped-def]
    from app.oidc.errors import RefreshRefused

    broker, logins = failing
    token(broker)
    st = broker.identity(resolve(ARGS))
    provider.refresh_error = RefreshRefused("the provider refused the refresh token (x)")
    clock.advance(minutes=51)
    run_for(logins, st, clock, 120)
    assert provider.refreshes == ["rt-1-0"]  # presented once, then dropped
    assert stored_refresh_token(store, st) is None
    status = broker.status()[0]
    assert status.state is State.NEEDS_LOGIN and status.error
    assert "refused the refresh token" in status.error
    clock.advance(minutes=10)  # the id_token has expired: a caller needs a login
    with pytest.raises(LoginRequired, match=r"login required for .*: the provider refused"):
        opts = resolve(ARGS)
        broker.get_credential(broker.identity(opts), opts, SilentCaller())


class LockedStore(MemorySecretStore):
    """A keyring that refuses writes while locked."""

    locked = False

    def set(self, key: str, value: bytes) -> None:
        if self.locked:
            from app.errors import StoreUnavailable

            raise StoreUnavailable("the OS keyring is locked", "unlock it and try again")
        super().set(key, value)


def test_a_locked_store_keeps_every_token_in_memory_and_catches_up(
    tmp_path, clock, provider
) -> None:  # type: ignore[no-untyped-def]
    store = LockedStore()
    broker, logins = make(tmp_path, store, clock, provider)  # type: ignore[arg-type]
    try:
        token(broker)
        st = broker.identity(resolve(ARGS))
        store.locked = True
        for n in range(1, 4):
            clock.advance(minutes=55)
            logins._renew_job(st.identity.key)
            assert token(broker) == f"id-1-{n}"  # served from memory, never dropped
        assert broker.status()[0].store_error == "the OS keyring is locked; unlock it and try again"
        assert stored_refresh_token(store, st) == "rt-1-0"
        store.locked = False
        clock.advance(seconds=60)
        logins._renew_job(st.identity.key)  # the retry of the write
        assert stored_refresh_token(store, st) == "rt-1-3"
        assert broker.status()[0].store_error is None
    finally:
        logins.stop()


def test_the_scheduler_runs_two_per_provider_and_four_in_all() -> None:
    from datetime import UTC

    now = datetime.now(UTC)
    lock = threading.Lock()
    running: dict[str, int] = {}
    most: dict[str, int] = {}
    peak = [0]
    done = threading.Semaphore(0)
    slow_provider = threading.Event()

    def run(key: str) -> None:
        group = key.split("/")[0]
        with lock:
            running[group] = running.get(group, 0) + 1
            most[group] = max(most.get(group, 0), running[group])
            peak[0] = max(peak[0], sum(running.values()))
        if group == "slow":
            slow_provider.wait(5)  # a provider that does not answer
        else:
            time.sleep(0.01)
        with lock:
            running[group] -= 1
        done.release()

    sched = RefreshScheduler(lambda: now, run)
    for i in range(6):
        sched.schedule(f"slow/{i}", now, "slow")
    for group in ("a", "b"):
        for i in range(10):
            sched.schedule(f"{group}/{i}", now, group)
    sched.start()
    try:
        for _ in range(20):  # every job of the answering providers, while "slow" hangs
            assert done.acquire(timeout=5)
        assert most == {"slow": 2, "a": 2, "b": 2} and peak[0] <= 4
    finally:
        slow_provider.set()
        sched.stop()
