"""Shared fixtures: an isolated kubetray per test, real peers found or skipped in one place."""

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.peers import (
    KubetrayEnv,
    StartAgent,
    kubetray_env,
    require,
    running_agent,
    secret_service_available,
)

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before pytest-qt makes the QApplication


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that asks for the real Secret Service is marked keyring, so `-m "not keyring"`
    (make test-fast) leaves it out rather than run it against the user's own keyring."""
    for item in items:
        if "keyring_session" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.keyring)


@pytest.fixture
def kt(tmp_path: Path) -> Iterator[KubetrayEnv]:
    """An isolated kubetray: its own socket directory, config, logs and installed helper."""
    with kubetray_env(tmp_path) as env:
        yield env


@pytest.fixture
def start_agent() -> Iterator[StartAgent]:
    """``start_agent(kt, *args)``: a ``kubetray agent`` that answers, stopped after the test
    (pass or fail) with its stderr shown beside a failure."""
    with contextlib.ExitStack() as agents:
        yield lambda kt, *args: agents.enter_context(running_agent(kt, *args))


@pytest.fixture
def keyring_session() -> None:
    """The real Secret Service (gnome-keyring in the D-Bus session scripts/with-keyring makes)."""
    require(secret_service_available(), "no Secret Service: run the tests with `make test`")


@pytest.fixture
def name() -> str:
    """A credential name no other test uses (the keyring is shared by the whole run)."""
    return f"t-{uuid.uuid4().hex[:10]}"
