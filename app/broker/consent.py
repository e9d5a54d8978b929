"""Which SSH hosts may have credentials through a forwarded agent, the way ``ssh-add -c`` asks.

A request forwarded from a host nobody has decided about waits for the person's answer in the
app (allow once, for this session, always, or deny); every request from that host arriving
meanwhile waits for the same answer. "Always" and ``kubetray remote deny`` are kept in
``remote-hosts.json`` (read again when it changes, so the command line and the agent agree);
"this session" lasts until the agent stops. The headless agent has nobody to ask: it serves
only hosts allowed beforehand (``kubetray remote allow HOST``).
"""

import threading
import time
from collections.abc import Callable
from datetime import datetime

from app import formats, jsonfile
from app.broker.flight import KEEPALIVE, Conversation
from app.errors import AppError
from app.model import Decision, Question, RemoteHost, Standing

ANSWER_TIMEOUT = 60.0
FORMAT = 1
"""remote-hosts.json's format (app/formats.py); 0.1.0 wrote it without a number."""
MAX_HOSTS = 256
"""Hosts remembered as seen this session (a bound on what callers can make the agent keep)."""


class ConsentRefused(AppError):
    """The forwarded request was not allowed (the remote kubectl reads why)."""


class Consent:
    """The agent's decisions about SSH hosts; ``ask`` is set by the app (None when headless)."""

    def __init__(
        self,
        path: str,
        clock: Callable[[], datetime],
        timeout: float = ANSWER_TIMEOUT,
    ) -> None:
        self._path = path
        self._clock = clock
        self.timeout = timeout
        self.ask: Callable[[Question], None] | None = None
        """Show a question to the person (called on the requesting thread; must not block)."""
        self._lock = threading.Lock()
        self._session: set[str] = set()
        self._pending: dict[str, Question] = {}
        self._seen: dict[str, tuple[str, int]] = {}

    # -- what is kept -------------------------------------------------------------------------

    def _saved(self) -> tuple[list[str], list[str]]:
        """The kept decisions; NewerFormat for a newer kubetray's file (then nobody is served
        without asking, and the file is never rewritten)."""
        doc = jsonfile.load(self._path)
        if not isinstance(doc, dict):
            return [], []
        formats.check(doc, self._path, FORMAT)

        def hosts(key: str) -> list[str]:
            value = doc.get(key)
            return [h for h in value if isinstance(h, str)] if isinstance(value, list) else []

        return hosts("allow"), hosts("deny")

    def _save(self, allow: list[str], deny: list[str]) -> None:
        hosts = {"allow": sorted(set(allow)), "deny": sorted(set(deny))}
        formats.save(self._path, hosts, FORMAT)

    def allow(self, host: str) -> None:
        """Serve ``host`` from now on, without asking (kept)."""
        with self._lock:
            allow, deny = self._saved()
            self._save([*allow, host], [h for h in deny if h != host])

    def deny(self, host: str) -> None:
        """Refuse ``host`` from now on, without asking (kept; ends a session's allowance)."""
        with self._lock:
            allow, deny = self._saved()
            self._save([h for h in allow if h != host], [*deny, host])
            self._session.discard(host)
            pending = self._pending.get(host)
        if pending is not None:
            pending.answer(Decision.DENY)

    def forget(self, host: str) -> bool:
        """Ask again next time (neither allowed nor denied); False when nothing was known."""
        with self._lock:
            allow, deny = self._saved()
            known = host in allow or host in deny or host in self._session
            self._save([h for h in allow if h != host], [h for h in deny if h != host])
            self._session.discard(host)
        return known

    def hosts(self) -> list[RemoteHost]:
        """Every host decided about or seen since the agent started."""
        with self._lock:
            allow, deny = self._saved()
            seen = dict(self._seen)
            session = set(self._session)
        out = []
        for host in sorted({*allow, *deny, *session, *seen}):
            standing = (
                Standing.DENIED
                if host in deny
                else Standing.ALWAYS
                if host in allow
                else Standing.SESSION
                if host in session
                else Standing.ASKS
            )
            last, calls = seen.get(host, (None, 0))
            out.append(RemoteHost(host, standing, last, calls))
        return out

    # -- a forwarded request ------------------------------------------------------------------

    def granted(self, host: str) -> bool:
        """Whether ``host`` may have credentials now, without asking anyone."""
        with self._lock:
            allow, deny = self._saved()
            return host not in deny and (host in allow or host in self._session)

    def check(
        self, host: str, identity: str, cluster: str | None, conv: Conversation | None = None
    ) -> None:
        """Return when ``host`` may have this credential; else raise ConsentRefused.

        While the person decides, ``conv`` (the remote caller) is told so and kept alive.
        """
        self.note_seen(host)
        with self._lock:
            allow, deny = self._saved()
            if host in deny:
                raise ConsentRefused(
                    f"kubetray on your desktop refuses requests forwarded from {host}",
                    f"it was denied there; allow it there with: kubetray remote allow {host}",
                )
            if host in allow or host in self._session:
                return
            ask = self.ask
            if ask is None:
                raise ConsentRefused(
                    f"the kubetray agent on your desktop serves no SSH host it was not told "
                    f"about, and nobody is there to ask about {host}",
                    f"allow it there with: kubetray remote allow {host}",
                )
            question = self._pending.get(host)
            first = question is None
            if question is None:
                question = self._pending[host] = Question(host, cluster, identity)
        if first:
            try:
                ask(question)
            except Exception:  # the app could not show it: an unanswered question
                question.answer(Decision.DENY)
        if conv is not None:
            conv.tell(
                f"Asking on your desktop whether {host} may have a token as {identity} "
                f"(answer there within {self.timeout:g} s)…"
            )
        answered = self._wait(question, conv)
        with self._lock:
            if self._pending.get(host) is question:
                del self._pending[host]
            if question.decision is Decision.SESSION:
                self._session.add(host)
        if first and question.decision is Decision.ALWAYS:  # kept once, not per waiter
            self.allow(host)
        if not answered:
            raise ConsentRefused(
                f"nobody answered on your desktop within {self.timeout:g} s whether {host} may "
                f"have a token as {identity}",
                "answer kubetray's question there, or allow the host there with: "
                f"kubetray remote allow {host}",
            )
        if question.decision is Decision.DENY:
            raise ConsentRefused(f"denied on your desktop: {question.text}")

    def _wait(self, question: Question, conv: Conversation | None) -> bool:
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                question.expired = True
                question.answered.set()  # the app's question closes itself
                return question.decision is not None
            if question.answered.wait(min(left, KEEPALIVE)):
                return question.decision is not None
            if conv is not None:
                conv.keepalive()

    def note_seen(self, host: str) -> None:
        """Count a request from ``host`` (kubetray remote list shows when and how often)."""
        with self._lock:
            if host not in self._seen and len(self._seen) >= MAX_HOSTS:
                return
            _last, calls = self._seen.get(host, (None, 0))
            self._seen[host] = (self._clock().isoformat(timespec="seconds"), calls + 1)


def manage(consent: Consent, action: str, host: str) -> tuple[int, str, str]:
    """``kubetray remote ACTION HOST`` on ``consent``: (exit code, stdout, stderr)."""
    if action == "list":
        import json

        return 0, json.dumps({"remote": [h.to_dict() for h in consent.hosts()]}), ""
    if action == "allow":
        consent.allow(host)
        return 0, f"{host} may have credentials through a forward, always\n", ""
    if action == "deny":
        consent.deny(host)
        return 0, f"{host} is refused from now on\n", ""
    if consent.forget(host):
        return 0, f"{host} will be asked about again\n", ""
    return 1, "", f"nothing was decided about {host}"
