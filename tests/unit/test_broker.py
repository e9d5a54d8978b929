"""The broker: identities, memory cache, single flight, expiry, status."""

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest

from app.broker.broker import Broker, identity_for
from app.broker.logins import Logins
from app.errors import CredentialError, UsageError
from app.store.memory_store import MemorySecretStore
from app.stored import StoredCredential, StoredCredentials
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
def broker(stored: StoredCredentials, clock: Clock) -> Broker:
    return Broker(stored, clock=clock)


def test_identity_keys() -> None:
    a = identity_for(
        resolve(["--oidc-issuer-url=https://i", "--oidc-client-id=c", "--oidc-extra-scope=b,a"])
    )
    b = identity_for(
        resolve(
            [
                "--oidc-issuer-url=https://i",
                "--oidc-client-id=c",
                "--oidc-extra-scope=a",
                "--oidc-extra-scope=b",
            ]
        )
    )
    c = identity_for(resolve(["--oidc-issuer-url=https://i", "--oidc-client-id=c"]))
    assert a == b and a.key != c.key and a.name == "c@i"
    assert identity_for(resolve(["--stored", "x"])).key == "stored:x"
    with pytest.raises(UsageError, match="not told which credential"):
        identity_for(resolve([]))


def test_concurrent_callers_share_one_fetch(
    broker: Broker, stored: StoredCredentials, store: CountingStore, clock: Clock
) -> None:
    stored.save(StoredCredential(name="p", token="tok"), clock())
    store.gets = 0
    with ThreadPoolExecutor(8) as pool:
        results = list(
            pool.map(lambda _: broker.get_credential(resolve(["--stored", "p"])), range(8))
        )
    assert {cred.token for _, cred in results} == {"tok"}
    assert store.gets == 1
    broker.get_credential(resolve(["--stored", "p"]))
    assert store.gets == 1  # served from memory
    broker.get_credential(resolve(["--stored", "p", "--force-refresh"]))
    assert store.gets == 2


def test_invalidate_reloads(broker: Broker, stored: StoredCredentials, clock: Clock) -> None:
    stored.save(StoredCredential(name="p", token="one"), clock())
    assert broker.get_credential(resolve(["--stored", "p"]))[1].token == "one"
    stored.save(StoredCredential(name="p", token="two"), clock())
    assert broker.get_credential(resolve(["--stored", "p"]))[1].token == "one"
    broker.invalidate("p")
    assert broker.get_credential(resolve(["--stored", "p"]))[1].token == "two"


def test_expired_credential_is_refused_and_shown(
    broker: Broker, stored: StoredCredentials, clock: Clock
) -> None:
    stored.save(
        StoredCredential(
            name="c", certificate_pem="C", key_pem="K", not_after=clock() + timedelta(hours=1)
        ),
        clock(),
    )
    assert broker.get_credential(resolve(["--stored", "c"]))[1].certificate_pem == "C"
    clock.advance(hours=2)
    with pytest.raises(CredentialError, match="expired at"):
        broker.get_credential(resolve(["--stored", "c"]))
    entry = next(i for i in broker.status()["identities"] if i["name"] == "c")
    assert entry["state"] == "error" and "expired" in entry["error"]


def test_oidc_identity_nobody_can_log_in_to(
    stored: StoredCredentials, clock: Clock, tmp_path: Path
) -> None:
    logins = Logins(
        MemorySecretStore(), str(tmp_path / "identities.json"), clock, browser=NoBrowser
    )
    broker = Broker(stored, logins=logins, clock=clock)
    caller = SilentCaller()
    with pytest.raises(CredentialError, match="login required for kubectl@idp") as e:
        broker.get_credential(
            resolve(["--oidc-issuer-url=https://idp", "--oidc-client-id=kubectl"]),
            cluster="https://k",
            conv=caller,
        )
    assert "nothing here can show a login" in str(e.value.hint)
    assert caller.told == []  # no login was started
    entry = broker.status()["identities"][0]
    assert (
        entry["state"] == "needs login"
        and entry["clusters"] == ["https://k"]
        and entry["calls"] == 1
    )


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
    by_name = {i["name"]: i for i in broker.status()["identities"]}
    assert (
        by_name["a"]["kind"] == "token"
        and by_name["a"]["state"] == "ready"
        and by_name["a"]["expires"] is None
    )
    assert by_name["b"]["kind"] == "client-certificate" and by_name["b"]["subject"] == "CN=u"
    assert stored.remove("a") is True and stored.remove("a") is False
    assert [i["name"] for i in broker.status()["identities"]] == ["b"]
