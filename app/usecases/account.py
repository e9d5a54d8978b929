"""What a person does with a login identity: log in, switch account, log out, forget, cancel.

The agent's service (``kubetray login`` / ``logout`` / ``cancel`` / ``forget``) and the tray's
controller both call these; each outcome is a value, and the words for it are the caller's
(the CLI's console lines, the tray's notifications).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from app.broker.broker import Broker
from app.broker.flight import Conversation
from app.broker.logins import Logins
from app.broker.registry import Entry
from app.errors import AppError
from app.model import STORED
from app.oidc.tokens import Revocation, TokenSet


@dataclass(frozen=True)
class LoggedIn:
    """A login that worked: who is logged in to which identity, until when."""

    name: str
    who: str
    until: datetime

    @classmethod
    def of(cls, st: Entry, tokens: TokenSet) -> "LoggedIn":
        return cls(st.identity.name, tokens.who(), tokens.expires_at)


class Account:
    """The account actions, on the broker's logins."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def _oidc(self) -> Logins:
        if self._broker.logins is None:
            raise AppError("logins are not enabled in this agent")
        return self._broker.logins

    def _unknown(self, message: str, hint: str) -> AppError:
        """A name not found; while identities.json cannot be read, that is the likely cause."""
        problem = self._broker.registry.problem
        if problem is not None:
            return AppError(f"{message}: {problem.message}", problem.hint)
        return AppError(message, hint)

    def _find(self, name: str) -> Entry:
        st = self._oidc().find(name)
        if st is None:
            raise self._unknown(
                f"no identity to log in to named {name!r}",
                "kubetray status lists them; or give the kubetray-exec flags",
            )
        return st

    def log_in(
        self, conv: Conversation, name: str = "", args: Sequence[str] = (), force: bool = False
    ) -> LoggedIn:
        """Log in to ``name``, or to the identity kubetray-exec ``args`` name (created if new).

        A login the person asks for is never held back by a recent failure; ``force`` logs in
        again even with valid tokens. Raises OptionsError for bad ``args``.
        """
        logins = self._oidc()
        settings = None
        if args:
            wanted = self._broker.providers.wanted(list(args))
            st = self._broker.identity(wanted)
            if st.identity.kind == STORED:
                raise AppError(f"{st.identity.name} is a stored credential: nothing to log in to")
            settings = wanted.settings
        else:
            st = self._find(name)
        tokens = logins.token(st, conv, explicit=True, relogin=force, settings=settings)
        return LoggedIn.of(st, tokens)

    def register(self, args: Sequence[str]) -> str:
        """Make the identity kubetray-exec ``args`` name known (as a written kubeconfig user
        will at kubectl's first call), without logging in; its name."""
        st = self._broker.identity(self._broker.providers.wanted(list(args)))
        if st.identity.kind == STORED:
            raise AppError(f"{st.identity.name} is a stored credential: nothing to log in to")
        return st.identity.name

    def can_pick_account(self, name: str) -> bool | None:
        """Whether the provider of ``name`` lets the person pick another account at login
        (``prompt=select_account`` in its discovery); None when it cannot be asked."""
        st = self._find(name)
        try:
            return bool(self._oidc().account_choice(st))
        except AppError:
            return None

    def switch_account(self, name: str, conv: Conversation) -> LoggedIn:
        """Log in again, letting the person pick another account where the provider can."""
        st = self._find(name)
        return LoggedIn.of(st, self._oidc().switch_account(st, conv))

    def log_out(self, name: str) -> Revocation:
        """Forget the tokens of ``name``; what the provider said about revoking them."""
        outcome = self._oidc().logout(name)
        if outcome is None:
            raise self._unknown(
                f"no identity named {name!r} to log out of", "kubetray status lists them"
            )
        return outcome

    def forget(self, name: str) -> None:
        """Log out of ``name`` and remove it (kubectl's next use brings it back)."""
        if not self._oidc().forget(name):
            raise self._unknown(
                f"no identity named {name!r} to remove", "kubetray status lists them"
            )

    def cancel(self, name: str) -> None:
        """Cancel the login in flight for ``name``."""
        if not self._oidc().cancel(name):
            raise AppError(f"no login in progress for {name!r}")
