"""Logins without a provider: who takes part in a login, and when."""

from datetime import UTC, datetime, timedelta
from pathlib import Path

from app.broker.logins import Logins
from app.broker.registry import Registry
from app.oidc.settings import OIDCSettings
from app.oidc.tokens import TokenSet
from app.store.memory_store import MemorySecretStore
from tests.fakes import NoBrowser


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
