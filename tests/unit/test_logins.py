"""Logins without a provider: who takes part in a login, and when."""

import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import ClassVar

import pytest

from app.broker.logins import Logins
from app.broker.registry import Registry
from app.oidc.errors import LoginError
from app.oidc.settings import OIDCSettings
from app.oidc.tokens import TokenSet
from app.store.memory_store import MemorySecretStore
from tests.fakes import NoBrowser, SilentCaller


class PromptingClient:
    """A provider client whose password login asks at once (no network to hide a race)."""

    def __init__(self, settings: OIDCSettings, clock) -> None:  # type: ignore[no-untyped-def]
        self.clock = clock

    def password(self, ui) -> TokenSet:  # type: ignore[no-untyped-def]
        user = ui.prompt("Username: ", False)
        now = self.clock()
        return TokenSet(
            expires_at=now + timedelta(hours=1),
            issued_at=now,
            id_token=f"token-{user}",
            claims={"sub": user},
        )


class Terminal:
    interactive = True
    visible = True

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked: list[str] = []

    def tell(self, text: str) -> None:
        pass

    def keepalive(self) -> None:
        pass

    def device_code(self, user_code: str, uri: str) -> None:
        pass

    def ask(self, text: str, secret: bool) -> str | None:
        self.asked.append(text)
        return self.answer


def test_the_caller_that_starts_a_login_gets_its_first_prompt(tmp_path: Path) -> None:
    logins = Logins(
        MemorySecretStore(),
        Registry(str(tmp_path / "ids.json")),
        lambda: datetime.now(UTC),
        browser=NoBrowser,
        client=PromptingClient,
    )
    try:
        for i in range(50):
            settings = OIDCSettings(
                issuer=f"https://idp{i}.invalid", client_id="c", grant_type="password"
            )
            terminal = Terminal(f"user{i}")
            tokens = logins.token(logins.identity(settings), terminal)
            assert terminal.asked == ["Username: "] and tokens.claims["sub"] == f"user{i}"
    finally:
        logins.stop()


class MachineClient:
    """A provider client for client credentials: each fetch a new token, ``lifetime`` long."""

    lifetime: ClassVar[timedelta] = timedelta(hours=1)
    fetched: ClassVar[list[str]] = []

    def __init__(self, settings: OIDCSettings, clock) -> None:  # type: ignore[no-untyped-def]
        self.clock = clock

    def client_credentials(self) -> TokenSet:
        now = self.clock()
        self.fetched.append(f"token-{len(self.fetched)}")
        return TokenSet(
            expires_at=now + self.lifetime,
            issued_at=now,
            access_token=self.fetched[-1],
            claims={"client_id": "ci"},
        )


def _machine_logins(tmp_path: Path, lifetime: timedelta) -> tuple[Logins, OIDCSettings]:
    MachineClient.fetched = []
    MachineClient.lifetime = lifetime
    logins = Logins(
        MemorySecretStore(),
        Registry(str(tmp_path / "ids.json")),
        lambda: datetime.now(UTC),
        browser=NoBrowser,
        client=MachineClient,
    )
    settings = OIDCSettings(
        issuer="https://idp.invalid",
        client_id="ci",
        client_secret="s",
        grant_type="client-credentials",
        use_access_token=True,
    )
    return logins, settings


def test_a_machine_identity_needs_nobody_and_is_served_from_memory(tmp_path: Path) -> None:
    logins, settings = _machine_logins(tmp_path, timedelta(hours=1))
    try:
        st = logins.identity(settings)
        caller = SilentCaller()  # no terminal, no display, no browser, and --no-login
        first = logins.token(st, caller, may_login=False)
        assert first.access_token == "token-0" and first.who() == "ci"
        assert logins.token(st, caller, may_login=False) is first
        assert MachineClient.fetched == ["token-0"] and caller.told == []
        relogin = logins.token(st, caller, explicit=True, relogin=True)  # kubetray login --force
        assert relogin.access_token == "token-1"
        assert logins.expiring(datetime.now(UTC), timedelta(days=1)) == []  # it renews itself
    finally:
        logins.stop()


def test_a_machine_token_is_fetched_again_ahead_of_expiry(tmp_path: Path) -> None:
    logins, settings = _machine_logins(tmp_path, timedelta(seconds=2))
    logins.start()
    try:
        st = logins.identity(settings)
        assert logins.token(st, SilentCaller(), may_login=False).access_token == "token-0"
        # renewed ahead, again and again (counted once the renewal is kept, after the fetch)
        deadline = time.monotonic() + 5
        while logins.view(st, datetime.now(UTC)).refreshes < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert logins.view(st, datetime.now(UTC)).refreshes >= 2
        assert len(MachineClient.fetched) >= 3
    finally:
        logins.stop()


def test_a_machine_identity_remembered_without_its_secret_says_what_to_do(
    tmp_path: Path,
) -> None:
    logins, settings = _machine_logins(tmp_path, timedelta(hours=1))
    try:
        st = logins.identity(replace(settings, client_secret=None))
        with pytest.raises(LoginError, match="needs its client secret") as e:
            logins.token(st, SilentCaller())
        assert e.value.hint and "--oidc-client-secret" in e.value.hint
        assert MachineClient.fetched == []
    finally:
        logins.stop()
