"""The demo's parts a restart and a stopped demo rely on (app/demo)."""

import os
import socket
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from app.demo import known
from app.demo.apiserver import DemoAPIServer
from app.demo.provider import DemoProvider, Refresh
from app.demo.run import STATE_ENV, hand_over, take_over


def test_a_stopped_demo_is_told_apart_from_a_running_one_and_from_other_providers() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        settings = SimpleNamespace(issuer=f"http://127.0.0.1:{port}", client_id="kubetray-demo")
        assert known.stopped(settings)  # bound, not listening: refused
        s.listen()
        assert not known.stopped(settings)
        other = SimpleNamespace(issuer=f"http://127.0.0.1:{port}", client_id="someone")
        s.close()
        assert not known.stopped(other)  # not the demo: the login's own words stand
    assert "kubetray demo" in known.start_hint()


@pytest.fixture
def servers() -> Iterator[tuple[DemoProvider, DemoAPIServer]]:
    provider = DemoProvider().start()
    api = DemoAPIServer(lambda _token: True).start()
    yield provider, api
    provider.stop()
    api.stop()


def test_a_restart_hands_the_demo_over_with_its_key_refresh_tokens_and_sockets(
    servers: tuple[DemoProvider, DemoAPIServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, api = servers
    provider.store.refresh["good"] = Refresh("good", "openid email")
    provider.store.refresh["used"] = Refresh("used", "openid", revoked=True)
    env = hand_over(provider, api)()
    monkeypatch.setitem(os.environ, STATE_ENV, env[STATE_ENV])
    carried = take_over()
    assert carried is not None and STATE_ENV not in os.environ
    again = DemoProvider(key=carried.key, listening=carried.idp, refresh=carried.refresh)
    assert again.issuer == provider.issuer and again.public_jwks() == provider.public_jwks()
    assert set(again.store.refresh) == {"good"}  # a revoked one stays refused
    assert carried.tls == (api.ca_pem, api.key_pem)
    assert carried.api.getsockname() == ("127.0.0.1", int(api.url.rsplit(":", 1)[1]))
    for sock in (carried.idp, carried.api):  # in this one process: the fixture closes them
        sock.detach()


def test_a_handover_meant_for_another_process_is_not_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(os.environ, STATE_ENV, f"999 {os.getpid() + 1}")
    assert take_over() is None and STATE_ENV not in os.environ
