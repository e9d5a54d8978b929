"""The keyring store against a fake Secret Service: one call at a time whatever the callers,
and a data key that only sealing makes (issue 33: under parallel load gnome-keyring read an
existing item as missing, and a read then replaced the data key, losing every sealed secret)."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from app.errors import SecretLost, StoreUnavailable
from app.store import secret_service
from app.store.keyring_store import DATA_KEY_ITEM, INLINE_LIMIT, KeyringSecretStore


class FakeSecretService:
    """Items in a dict; notes how many calls overlap, and can fail or forget on demand."""

    def __init__(self) -> None:
        self.items: dict[str, str] = {}
        self.inside = 0
        self.most_inside = 0
        self.forget: set[str] = set()
        """Keys read as missing (what the overloaded gnome-keyring did)."""
        self.fail = False
        self._lock = threading.Lock()

    def _enter(self) -> None:
        with self._lock:
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
        time.sleep(0.002)  # a D-Bus round trip
        if self.fail:
            self._leave()
            raise secret_service.Locked("the keyring's collection is locked")

    def _leave(self) -> None:
        with self._lock:
            self.inside -= 1

    def get_password(self, service: str, username: str) -> str | None:
        self._enter()
        try:
            return None if username in self.forget else self.items.get(username)
        finally:
            self._leave()

    def set_password(self, service: str, username: str, password: str) -> None:
        self._enter()
        try:
            self.items[username] = password
        finally:
            self._leave()

    def delete(self, service: str, username: str) -> bool:
        self._enter()
        try:
            return self.items.pop(username, None) is not None
        finally:
            self._leave()


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeSecretService:
    service = FakeSecretService()
    monkeypatch.setattr(secret_service, "available", lambda: service)
    return service


def test_parallel_callers_reach_the_keyring_one_at_a_time(
    fake: FakeSecretService, tmp_path: Path
) -> None:
    store = KeyringSecretStore(str(tmp_path / "secrets"))
    other = KeyringSecretStore(str(tmp_path / "secrets"))  # the agent has two: one keyring

    def work(i: int) -> bytes | None:
        mine = store if i % 2 else other
        value = f"secret {i}".encode() * (1 if i % 3 else 200)  # some sealed, some inline
        mine.set(f"k/{i}", value)
        return mine.get(f"k/{i}")

    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(work, range(60)))
    assert got == [f"secret {i}".encode() * (1 if i % 3 else 200) for i in range(60)]
    assert fake.most_inside == 1


def test_a_read_never_makes_a_new_data_key(fake: FakeSecretService, tmp_path: Path) -> None:
    store = KeyringSecretStore(str(tmp_path / "secrets"))
    big = b"x" * (INLINE_LIMIT + 1)
    store.set("tokens/a", big)
    store.set("tokens/b", big)
    data_key = fake.items[DATA_KEY_ITEM]
    later = KeyringSecretStore(str(tmp_path / "secrets"))  # the agent, started again
    fake.forget = {DATA_KEY_ITEM}  # read as missing, once
    with pytest.raises(SecretLost, match="holds no key"):
        later.get("tokens/a")
    fake.forget = set()
    assert fake.items[DATA_KEY_ITEM] == data_key
    assert later.get("tokens/a") == big and later.get("tokens/b") == big


def test_a_failing_keyring_is_not_a_lost_secret(fake: FakeSecretService, tmp_path: Path) -> None:
    """Logins drop tokens that are lost; a keyring that fails for a moment must not look so."""
    KeyringSecretStore(str(tmp_path / "secrets")).set("tokens/a", b"y" * (INLINE_LIMIT + 1))
    store = KeyringSecretStore(str(tmp_path / "secrets"))  # the agent, started again
    real_get = fake.get_password

    def fail_on_the_key(service: str, username: str) -> str | None:
        fake.fail = username == DATA_KEY_ITEM
        return real_get(service, username)

    fake.get_password = fail_on_the_key  # type: ignore[method-assign]
    with pytest.raises(StoreUnavailable) as e:
        store.get("tokens/a")
    assert not isinstance(e.value, SecretLost)
    fake.fail = False
    fake.get_password = real_get  # type: ignore[method-assign]
    assert store.get("tokens/a") == b"y" * (INLINE_LIMIT + 1)
