"""One login per identity, shared by every caller; a failed login blocks for a while.

* Every caller of an identity that needs a login waits on the *same* login and sees its
  progress (device code, URL, "waiting for the browser") on its own stderr.
* A login that fails, times out or is cancelled blocks the identity for a while: callers fail
  fast with a remedy instead of opening another browser tab (no browser storms), unless the
  user asks for the login (``kubetray login``).
"""

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from app.errors import AppError, CredentialError
from app.oidc.browser import Browser
from app.oidc.errors import LoginError
from app.oidc.tokens import TokenSet

if TYPE_CHECKING:
    from app.providers.base import Settings

log = logging.getLogger(__name__)

BLOCK_AFTER_FAILURE = timedelta(minutes=2)
KEEPALIVE = 10.0


class Conversation(Protocol):
    """A caller waiting for a credential: it can be told things and, if interactive, asked."""

    interactive: bool
    """Its user can answer prompts (spec.interactive and stdin a terminal)."""
    visible: bool
    """What it is told reaches a person (its stderr is a terminal, or it is the tray)."""

    def tell(self, text: str) -> None: ...
    def ask(self, text: str, secret: bool) -> str | None: ...
    def keepalive(self) -> None: ...
    def device_code(self, user_code: str, uri: str) -> None:
        """The device code and where to enter it (``tell`` has already said it in words)."""


class Silent:
    """A caller told nothing and asked nothing (a fast request; the app's own waits)."""

    interactive = False
    visible = False

    def tell(self, text: str) -> None:
        pass

    def ask(self, text: str, secret: bool) -> str | None:
        return None

    def keepalive(self) -> None:
        pass

    def device_code(self, user_code: str, uri: str) -> None:
        pass


class LoginRequired(CredentialError):
    """The identity needs a login and this caller cannot start or wait for one."""


class Login:
    """One login in flight: its waiters, its progress, its outcome (a provider Client's LoginUI)."""

    def __init__(self, name: str, browser: Browser) -> None:
        self.name = name
        self._browser = browser
        self.browser_now: Callable[[], Browser] | None = None
        """The browser as chosen now (Settings may change during the login): open_again's."""
        self._lock = threading.Lock()
        self._history: list[str] = []
        self._listeners: list[Conversation] = []
        self.done = threading.Event()
        self.cancelled = threading.Event()
        self.result: TokenSet | None = None
        self.error: AppError | None = None
        self.url: str | None = None
        self.device: tuple[str, str] | None = None
        self.auth_params: dict[str, str] = {}
        """Added to the authorization request (``prompt=select_account`` to switch account)."""
        self.browser_error: str | None = None
        """What the callers were told when the browser failed."""
        self.browser_why: str | None = None
        """Why the browser did not open, in a few words (e.g. "false exited with code 1")."""
        self.origin: str | None = None
        """The SSH host whose request started it (the browser opens here, on the desktop)."""
        self.explicit = False
        """A person asked for it (kubetray login, the app); else a program's call (kubectl)."""
        self.asked_by: str | None = None
        """Who started it, in a person's words, when its conversation says (the app)."""

    def abort(self, reason: str) -> None:
        """End the wait of every caller now with ``reason`` (kubetray is going away)."""
        self.error = LoginError(reason)
        self.cancelled.set()
        self.done.set()

    def join(self, conv: Conversation) -> None:
        with self._lock:
            self._listeners.append(conv)
            history = list(self._history)
        for text in history:
            conv.tell(text)

    def leave(self, conv: Conversation) -> None:
        with self._lock:
            if conv in self._listeners:
                self._listeners.remove(conv)

    def show(self, text: str, terminal: bool = True) -> None:
        """Tell whoever waits for the login; ``terminal``: also on a headless agent's terminal
        (False for what it said already), always in its log."""
        log.info("login %s: %s", self.name, text, extra={"terminal": terminal})
        with self._lock:
            self._history.append(text)
            listeners = list(self._listeners)
        for conv in listeners:
            conv.tell(text)

    @property
    def browser_available(self) -> bool:
        return self._browser.available()

    def open_browser(self, url: str) -> bool:
        """Open ``url``; False when it did not open. Where a browser was tried, the callers
        have then been told why, with the URL (see _browser_failed)."""
        self.url = url
        if not self._browser.available():
            return False
        return self._browser.open(url, self._browser_failed)

    def open_again(self, url: str) -> bool:
        """Open ``url`` (the login page, or the device code's page) once more, with the browser
        one the person chooses now (Settings → Browser may have changed since the login began):
        the person asked for it in the app."""
        browser = self.browser_now() if self.browser_now is not None else self._browser
        if not browser.available():
            return False

        def failed(why: str) -> None:  # waited for, so the process is reaped
            log.info("login %s: the browser did not open the page again (%s)", self.name, why)

        return browser.open(url, failed, settle=0)  # the GUI thread: it never waits

    def _browser_failed(self, why: str) -> None:
        """Tell the callers the browser failed; the URL once: not again if they have it."""
        if self.done.is_set():
            return
        self.browser_why = why
        with self._lock:
            told = self.url is not None and any(self.url in text for text in self._history)
        self.browser_error = (
            f"The browser did not open ({why}): open the URL above to log in."
            if told
            else f"The browser did not open ({why}). Open this URL to log in: {self.url}"
        )
        self.show(self.browser_error)

    def show_device_code(self, user_code: str, uri: str) -> None:
        self.device = (user_code, uri)
        with self._lock:
            listeners = list(self._listeners)
        for conv in listeners:
            conv.device_code(user_code, uri)

    def prompt(self, text: str, secret: bool) -> str | None:
        with self._lock:
            asked = next((c for c in self._listeners if c.interactive), None)
        if asked is None:
            raise LoginError(
                f"the login to {self.name} needs an answer typed in a terminal",
                f'run "kubetray login {self.name}" in a terminal',
            )
        try:
            return asked.ask(text, secret)
        except LoginError as e:  # nobody answered in time
            raise LoginError(
                f"the login to {self.name} asked {text.strip().rstrip(':')!r}: {e.message}",
                e.hint or f'run "kubetray login {self.name}" in a terminal',
            ) from None

    def wait(self, conv: Conversation) -> TokenSet:
        """Wait for the outcome as ``conv`` (already joined), keeping its connection alive."""
        try:
            while not self.done.wait(KEEPALIVE):
                conv.keepalive()
        finally:
            self.leave(conv)
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


@dataclass(frozen=True)
class _Block:
    until: datetime
    reason: str
    settings: "Settings"
    """The settings the failed login used: callers that reach the provider otherwise (another
    CA, another listen address) are not blocked by it."""


class Flights:
    """Every identity's login in flight and its block after a failure, by identity key.

    The one owner of both, under its own lock. Logins decides when a login starts (under the
    identity's session lock, so there is one at a time); this keeps it, runs it and blocks.
    """

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._logins: dict[str, Login] = {}
        self._blocks: dict[str, _Block] = {}

    def current(self, key: str) -> Login | None:
        """The login in flight for ``key``, if any."""
        with self._lock:
            return self._logins.get(key)

    def in_flight(self) -> list[Login]:
        """Every login in flight."""
        with self._lock:
            return list(self._logins.values())

    def abort_all(self, reason: str) -> int:
        """End every login in flight: each waiter hears ``reason`` and the identity's name."""
        pending = self.in_flight()
        for login in pending:
            login.abort(f"{reason} while waiting for the login to {login.name}")
        return len(pending)

    def cancel(self, key: str) -> bool:
        """Cancel the login in flight for ``key`` (its waiters are told it was cancelled)."""
        login = self.current(key)
        if login is None:
            return False
        login.cancelled.set()
        return True

    def blocked_reason(
        self, key: str, now: datetime, settings: "Settings | None" = None
    ) -> str | None:
        """Why a new login for ``key`` would not start now: why the last one failed (a recent
        failure), or None.

        A failure blocks only callers that reach the provider the same way: a kubeconfig with
        the right CA is not held back by one without it. No ``settings``: any block (status).
        """
        with self._lock:
            block = self._blocks.get(key)
        if block is None or now >= block.until:
            return None
        if settings is not None and settings != block.settings:
            return None
        return block.reason

    def unblock(self, key: str) -> None:
        """Let the next caller start a login at once (the tokens were forgotten)."""
        with self._lock:
            self._blocks.pop(key, None)

    def forget(self, key: str) -> None:
        """The identity is removed: cancel its login and drop its block."""
        self.cancel(key)
        self.unblock(key)

    def begin(self, key: str, login: Login) -> None:
        """``login`` is the login of ``key`` from now on (the caller made sure none was)."""
        with self._lock:
            self._logins[key] = login

    def run(
        self,
        key: str,
        settings: "Settings",
        login: Login,
        work: Callable[[Login], TokenSet],
        keep: Callable[[TokenSet], None],
        finished: Callable[[AppError | None], None],
    ) -> None:
        """Run ``work`` as the login of ``key`` on its own thread (a caller that hangs up does
        not cancel it for the others); ``keep`` saves the tokens it brings. ``begin`` first."""

        def target() -> None:
            try:
                tokens = work(login)
                keep(tokens)
                self.unblock(key)
                login.result = tokens
                login.show(f"Logged in to {login.name} as {tokens.who()}.")
            except AppError as e:
                login.error = login.error or e  # abort() has told the callers already
                self._block(key, settings, e.message)
            except Exception as e:
                log.exception("login of %s failed", login.name)
                login.error = AppError(
                    f"the login to {login.name} stopped: something kubetray did not expect "
                    f"went wrong ({type(e).__name__})",
                    "the agent's log has the details; try again",
                )
                self._block(key, settings, login.error.message)
            finally:
                with self._lock:
                    if self._logins.get(key) is login:
                        del self._logins[key]
                login.done.set()
                finished(login.error)

        threading.Thread(target=target, name=f"login-{login.name}", daemon=True).start()

    def _block(self, key: str, settings: "Settings", reason: str) -> None:
        with self._lock:
            self._blocks[key] = _Block(self._clock() + BLOCK_AFTER_FAILURE, reason, settings)
