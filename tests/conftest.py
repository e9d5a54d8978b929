"""Shared fixtures: an isolated kubetray per test, real peers found or skipped in one place."""

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.peers import KubetrayEnv, kubetray_env, require, secret_service_available

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before pytest-qt makes the QApplication


@pytest.fixture
def kt(tmp_path: Path) -> Iterator[KubetrayEnv]:
    """An isolated kubetray: its own socket directory, config, logs and installed helper."""
    with kubetray_env(tmp_path) as env:
        yield env


@pytest.fixture
def keyring_session() -> None:
    """The real Secret Service (gnome-keyring in the D-Bus session scripts/with-keyring makes)."""
    require(secret_service_available(), "no Secret Service: run the tests with `make test`")


@pytest.fixture
def name() -> str:
    """A credential name no other test uses (the keyring is shared by the whole run)."""
    return f"t-{uuid.uuid4().hex[:10]}"
