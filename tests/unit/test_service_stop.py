"""`kubetray stop`: the agent answers before it goes, and goes even if the caller has hung up."""

import os
from pathlib import Path

import pytest

from app.broker.broker import Broker, utcnow
from app.broker.logins import Logins
from app.broker.registry import Registry
from app.broker.service import Service
from app.static_credentials import StoredCredentials
from app.store.memory_store import MemorySecretStore


def test_stop_answers_first_and_stops_even_when_the_caller_is_gone(tmp_path: Path) -> None:
    store = MemorySecretStore()
    registry = Registry(str(tmp_path / "identities.json"))
    logins = Logins(store, registry, utcnow)
    stored = StoredCredentials(store, str(tmp_path / "stored.json"))
    service = Service(Broker(stored, registry, logins=logins), utcnow, str(tmp_path / "sock"))
    events: list[object] = []
    service.on_stop = lambda _when_idle: events.append("stopping")
    try:
        # A shutdown that starts before the answer is sent can cut the caller off
        # ("Connection reset by peer" from `kubetray stop` although the agent stopped).
        service.handle({"op": "stop"}, os.getpid(), lambda doc: events.append(doc["exit"]), dict)
        assert events == [0, "stopping"]

        def hung_up(_doc: object) -> None:
            raise BrokenPipeError

        with pytest.raises(OSError):
            service.handle({"op": "stop"}, os.getpid(), hung_up, dict)
        assert events == [0, "stopping", "stopping"]
    finally:
        logins.stop()
