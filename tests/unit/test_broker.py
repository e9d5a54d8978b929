"""The broker: identities, memory cache, single flight, expiry, status."""

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest

from app import jsonfile
from app.broker.broker import Broker
from app.broker.logins import Logins
from app.broker.registry import Registry
from app.errors import CredentialError, UsageError
from app.model import Credential, State
from app.oidc.errors import LoginError
from app.static_credentials import StoredCredential, StoredCredentials
from app.store.memory_store import MemorySecretStore
from exec_helper.options import resolve
from tests.fakes import Clock, CountingStore, NoBrowser, SilentCaller


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store() -> CountingStore:
    return CountingStore(delay=0.05)


@pytest.fixture
def stored(store: CountingStore, tmp_path: Path) -> StoredCredentials:
    return StoredCredentials(store, str(tmp_path / "stored.json"))


@pytest.fixture
def broker(stored: StoredCredentials, clock: Clock, tmp_path: Path) -> Broker:
    return Broker(stored, Registry(str(tmp_path / "identities.json")), clock=clock)


def get(broker: Broker, args: list[str], conv: SilentCaller | None = None) -> Credential:
    opts = resolve(args)
    return broker.get_credential(broker.identity(opts), opts, conv or SilentCaller())


def test_identity_keys(broker: Broker) -> None:
    a = broker.identity(
        resolve(["--oidc-issuer-url=https://i", "--oidc-client-id=c", "--oidc-extra-scope=b,a"])
    )
    b = broker.identity(
        resolve(
            [
                "--oidc-issuer-url=https://i",
                "--oidc-client-id=c",
                "--oidc-extra-scope=a",
                "--oidc-extra-scope=b",
            ]
        )
    )
    c = broker.identity(resolve(["--oidc-issuer-url=https://i", "--oidc-client-id=c"]))
    assert a is b and a.identity.key != c.identity.key and a.identity.name == "c@i"
    assert c.identity.name == "c@i-2"  # never two identities under one name
    assert broker.identity(resolve(["--stored", "x"])).identity.key == "stored:x"
    with pytest.raises(UsageError, match="not told which credential"):
        broker.identity(resolve([]))


def test_concurrent_callers_share_one_fetch(
    broker: Broker, stored: StoredCredentials, store: CountingStore, clock: Clock
) -> None:
    stored.save(StoredCredential(name="p", token="tok"), clock())
    store.gets = 0
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: get(broker, ["--stored", "p"]), range(8)))
    assert {cred.token for cred in results} == {"tok"}
    assert store.gets == 1
    get(broker, ["--stored", "p"])
    assert store.gets == 1  # served from memory
    get(broker, ["--stored", "p", "--force-refresh"])
    assert store.gets == 2


def test_invalidate_reloads(broker: Broker, stored: StoredCredentials, clock: Clock) -> None:
    stored.save(StoredCredential(name="p", token="one"), clock())
    assert get(broker, ["--stored", "p"]).token == "one"
    stored.save(StoredCredential(name="p", token="two"), clock())
    assert get(broker, ["--stored", "p"]).token == "one"
    broker.invalidate("p")
    assert get(broker, ["--stored", "p"]).token == "two"


def test_expired_credential_is_refused_and_shown(
    broker: Broker, stored: StoredCredentials, clock: Clock
) -> None:
    stored.save(
        StoredCredential(
            name="c", certificate_pem="C", key_pem="K", not_after=clock() + timedelta(hours=1)
        ),
        clock(),
    )
    assert get(broker, ["--stored", "c"]).certificate_pem == "C"
    clock.advance(hours=2)
    with pytest.raises(CredentialError, match="expired at"):
        get(broker, ["--stored", "c"])
    entry = next(i for i in broker.status() if i.name == "c")
    assert entry.state is State.ERROR and entry.error and "expired" in entry.error


def test_oidc_identity_nobody_can_log_in_to(
    stored: StoredCredentials, clock: Clock, tmp_path: Path
) -> None:
    registry = Registry(str(tmp_path / "identities.json"))
    logins = Logins(MemorySecretStore(), registry, clock, browser=NoBrowser)
    broker = Broker(stored, registry, logins=logins, clock=clock)
    caller = SilentCaller()
    opts = resolve(["--oidc-issuer-url=https://idp", "--oidc-client-id=kubectl"])
    with pytest.raises(CredentialError, match="login required for kubectl@idp") as e:
        broker.get_credential(broker.identity(opts), opts, caller, cluster="https://k")
    assert "nothing here can show a login" in str(e.value.hint)
    assert caller.told == []  # no login was started
    entry = broker.status()[0]
    assert entry.state is State.NEEDS_LOGIN and entry.clusters == ("https://k",)
    assert entry.calls == 1
    logins.stop()


def test_status_lists_stored_before_use(
    broker: Broker, stored: StoredCredentials, clock: Clock
) -> None:
    stored.save(StoredCredential(name="a", token="x"), clock())
    stored.save(
        StoredCredential(
            name="b",
            certificate_pem="C",
            key_pem="K",
            not_after=clock() + timedelta(days=3),
            subject="CN=u",
        ),
        clock(),
    )
    by_name = {i.name: i for i in broker.status()}
    assert by_name["a"].kind == "token" and by_name["a"].state is State.READY
    assert by_name["a"].expires is None
    assert by_name["b"].kind == "client-certificate" and by_name["b"].subject == "CN=u"
    assert stored.remove("a") is True and stored.remove("a") is False
    assert [i.name for i in broker.status()] == ["b"]


@pytest.mark.parametrize("n", [3, 60])
def test_status_reads_the_stored_index_once_whatever_the_number_of_identities(
    n: int, clock: Clock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tray asks for status every second: one read of stored.json per call, not one per
    stored identity the agent has served (issue 33: 500 of them took 19 % CPU idle)."""
    index = str(tmp_path / "stored.json")
    stored = StoredCredentials(MemorySecretStore(), index)
    broker = Broker(stored, Registry(str(tmp_path / "identities.json")), clock=clock)
    expiry = clock() + timedelta(days=1)
    for i in range(n):
        stored.save(StoredCredential(name=f"s{i}", token=f"t{i}", not_after=expiry), clock())
    for i in range(n - 1):  # served, so known to the agent; the last one only in the index
        get(broker, ["--stored", f"s{i}"])
    reads: list[str] = []
    read = jsonfile.load
    monkeypatch.setattr(jsonfile, "load", lambda path: reads.append(path) or read(path))
    rows = broker.status()
    assert reads.count(index) == 1
    assert sorted(r.name for r in rows) == sorted(f"s{i}" for i in range(n))
    assert {(r.kind, r.state, r.expires) for r in rows} == {
        ("token", State.READY, expiry.isoformat())
    }
    assert [r.calls for r in rows if r.name == f"s{n - 1}"] == [0]


def test_stored_credentials_are_handed_out_before_their_end(
    broker: Broker, stored: StoredCredentials, clock: Clock
) -> None:
    """A client caches until expirationTimestamp: it must ask again before the end (a TLS
    alert or a 401 otherwise), by the same margin as OIDC tokens."""
    now = clock()
    stored.save(
        StoredCredential(
            name="c",
            certificate_pem="C",
            key_pem="K",
            not_before=now - timedelta(hours=8),
            not_after=now + timedelta(hours=2),
        ),
        now,
    )
    end = get(broker, ["--stored", "c"]).expires
    assert end == now + timedelta(hours=1)  # 10 % of its ten hours before the end
    stored.save(StoredCredential(name="t", token="t", not_after=now + timedelta(hours=1)), now)
    assert get(broker, ["--stored", "t"]).expires == now + timedelta(minutes=59)  # the floor
    stored.save(StoredCredential(name="plain", token="p"), now)
    assert get(broker, ["--stored", "plain"]).expires is None  # nothing known: none given


def test_a_credential_not_valid_yet_is_refused_and_shown(
    broker: Broker, stored: StoredCredentials, clock: Clock
) -> None:
    start = clock() + timedelta(hours=1)
    cred = StoredCredential(
        name="c",
        certificate_pem="C",
        key_pem="K",
        not_before=start,
        not_after=start + timedelta(days=1),
    )
    stored.save(cred, clock())
    assert next(i for i in broker.status() if i.name == "c").state is State.NOT_YET_VALID
    with pytest.raises(CredentialError, match="not valid before"):
        get(broker, ["--stored", "c"])
    clock.advance(hours=2)
    broker.invalidate("c")
    assert get(broker, ["--stored", "c"]).certificate_pem == "C"
    assert next(i for i in broker.status() if i.name == "c").state is State.READY


def test_a_stored_name_nobody_stored_is_not_kept(
    broker: Broker, stored: StoredCredentials, clock: Clock
) -> None:
    with pytest.raises(CredentialError, match="no stored credential named 'nosuch'"):
        get(broker, ["--stored", "nosuch"])
    assert broker.status() == []  # a typo is not an identity
    start = clock() + timedelta(hours=1)
    cred = StoredCredential(name="later", token="t", not_before=start)
    stored.save(cred, clock())
    with pytest.raises(CredentialError, match="not valid before"):
        get(broker, ["--stored", "later"])
    (entry,) = broker.status()  # one that is stored stays, with what went wrong
    assert entry.name == "later" and entry.state is State.ERROR and entry.calls == 1


class _NothingConfigured:
    """A machine identity's client with nothing to sign in with (no cloud credentials)."""

    fetches = 0

    def __init__(self, settings: object, clock: object) -> None:
        pass

    def client_credentials(self) -> object:
        _NothingConfigured.fetches += 1
        raise LoginError("Unable to locate credentials", "configure them")


MACHINE = [
    "--oidc-issuer-url=https://idp",
    "--oidc-client-id=ci",
    "--oidc-client-secret=s",
    "--grant-type=client-credentials",
]
PERSON = ["--oidc-issuer-url=https://idp", "--oidc-client-id=kubectl"]


def test_an_identity_that_needs_nobody_and_failed_at_once_is_not_kept(
    stored: StoredCredentials, clock: Clock, tmp_path: Path
) -> None:
    index = tmp_path / "identities.json"
    registry = Registry(str(index))
    logins = Logins(
        MemorySecretStore(), registry, clock, browser=NoBrowser, client=_NothingConfigured
    )
    broker = Broker(stored, registry, logins=logins, clock=clock)
    try:
        for _ in range(2):  # the second is not held back by the first one's failure
            with pytest.raises(LoginError, match="Unable to locate credentials"):
                get(broker, MACHINE)
        assert _NothingConfigured.fetches == 2
        assert broker.status() == [] and not (jsonfile.load(str(index)) or {}).get("identities")
        with pytest.raises(CredentialError, match="login required for kubectl@idp"):
            get(broker, PERSON)  # a person's login: it stays, awaiting them
        assert [i.name for i in broker.status()] == ["kubectl@idp"]
        assert list(jsonfile.load(str(index))["identities"]) == [
            broker.identity(resolve(PERSON)).identity.key
        ]
    finally:
        logins.stop()


def test_an_identity_of_the_index_stays_whatever_its_failure(
    stored: StoredCredentials, clock: Clock, tmp_path: Path
) -> None:
    index = str(tmp_path / "identities.json")
    first = Registry(index)
    first.login(Broker(stored, first).wanted(resolve(MACHINE)).settings)
    registry = Registry(index)  # the next run reads it back
    logins = Logins(
        MemorySecretStore(), registry, clock, browser=NoBrowser, client=_NothingConfigured
    )
    broker = Broker(stored, registry, logins=logins, clock=clock)
    try:
        with pytest.raises(LoginError):
            get(broker, MACHINE)
        (entry,) = broker.status()
        assert entry.name == "ci@idp" and entry.error and "Unable to locate" in entry.error
        assert len(jsonfile.load(index)["identities"]) == 1
    finally:
        logins.stop()
