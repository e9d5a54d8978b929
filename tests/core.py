"""The Qt-free core wired for a test, the way compose wires it for the agent, with fakes."""

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from app import compose
from app.broker.broker import utcnow
from app.broker.logins import store_key
from app.compose import Core
from app.oidc.tokens import TokenSet
from app.static_credentials import StoredCredentials
from app.store.memory_store import MemorySecretStore
from app.store.secret_store import SecretStore
from tests.fakes import NoBrowser


def make_core(
    tmp_path: Path,
    store: SecretStore | None = None,
    clock: Callable[[], datetime] = utcnow,
    **parts: Any,
) -> tuple[Core, StoredCredentials]:
    """A core over ``store`` (a fresh memory store by default) with its index in ``tmp_path``;
    ``parts`` (browser, client, contexts, consent ...) go to compose.core. No browser unless
    given. Nothing runs until the test calls ``start()``; ``stop()`` is the test's."""
    store = store or MemorySecretStore()
    stored = StoredCredentials(store, str(tmp_path / "stored.json"))
    parts.setdefault("browser", NoBrowser)
    return compose.core(store, stored, str(tmp_path), clock=clock, **parts), stored


def give_tokens(core: Core, store: SecretStore, name: str, tokens: TokenSet) -> None:
    """The identity ``name`` has ``tokens``, as if it had logged in before the agent started."""
    st = core.logins.find(name)
    assert st is not None, name
    store.set(store_key(st.identity), tokens.to_bytes())
    core.logins.load_known()
