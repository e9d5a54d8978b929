"""Which identities SSH hosts may have through a forwarded agent, the way ``ssh-add -c`` asks.

A request forwarded from a host asks the person in the app about that identity on that host
(allow once, for this session, always, or deny); requests for the same identity from the same
host arriving meanwhile wait for the same answer, and a request for another identity asks its
own question. A grant is per identity per host: "this session" lasts until the agent stops,
"always" is kept in ``remote-hosts.json`` (read again when it changes, so the command line and
the agent agree). A Deny refuses the host, every identity, until the agent stops, and settles
the host's other open questions with it; ``kubetray remote deny`` refuses it for good. A host
is asked at most QUESTIONS_PER_HOST questions per QUESTION_WINDOW: past that its requests are
refused at once, in one line. The headless agent has nobody to ask: it serves only what was
allowed beforehand (``kubetray remote allow HOST IDENTITY``).

remote-hosts.json: ``"always": [{"host", "identity"}]`` (the identity's name; ``"key"`` too
when the dialog granted it, so a later identity of the same name is not served), ``"deny":
[host]``. ``"allow": [host]`` is what kubetray 0.1 to this one's predecessor kept for "always":
every identity of the host, though the dialog named one. It is kept in the file as it is (an
older kubetray reading it still serves the host) but grants nothing here: the host is asked
about each identity again (``kubetray remote list`` says so); ``forget`` removes it.
"""

import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from app import formats, jsonfile
from app.broker.flight import KEEPALIVE, Conversation
from app.errors import AppError
from app.model import Decision, Question, RemoteHost, Standing

ANSWER_TIMEOUT = 60.0
FORMAT = 1
"""remote-hosts.json's format (app/formats.py); 0.1.0 wrote it without a number. ``always``
is a new field (an older kubetray keeps it), so the number stays."""
MAX_HOSTS = 256
"""Hosts remembered as seen this session (a bound on what callers can make the agent keep)."""
QUESTIONS_PER_HOST = 4
QUESTION_WINDOW = 60.0
"""At most QUESTIONS_PER_HOST questions about one host in QUESTION_WINDOW seconds: a host
that asks for identity after identity gets a few questions, then a refusal at once."""
MAX_OPEN = 32
"""Questions open at once, every host together."""

_Grant = tuple[str, str]
"""(host, identity key)"""


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
        self._session: dict[_Grant, str] = {}
        """(host, identity key) → the identity's name, allowed until the agent stops."""
        self._denied: set[str] = set()
        """Hosts denied in the dialog: refused until the agent stops."""
        self._pending: dict[_Grant, Question] = {}
        self._asked: dict[str, list[float]] = {}
        """Per host, when its recent questions were asked (monotonic)."""
        self._seen: dict[str, tuple[str, int]] = {}
        self._refused: dict[tuple[str, str], str] = {}
        """(host, identity name) → the identity's key, of recent refusals: ``kubetray remote
        allow HOST NAME`` after one allows that identity even if it is named otherwise by the
        time it is made (by a local kubectl's kubeconfig)."""

    # -- what is kept -------------------------------------------------------------------------

    def _saved(self) -> dict[str, Any]:
        """The kept decisions; NewerFormat for a newer kubetray's file (then nobody is served
        without asking, and the file is never rewritten)."""
        doc = jsonfile.load(self._path)
        if not isinstance(doc, dict):
            return {"allow": [], "deny": [], "always": []}
        formats.check(doc, self._path, FORMAT)

        def hosts(key: str) -> list[str]:
            value = doc.get(key)
            return [h for h in value if isinstance(h, str)] if isinstance(value, list) else []

        value = doc.get("always")
        always = [
            g
            for g in (value if isinstance(value, list) else [])
            if isinstance(g, dict)
            and isinstance(g.get("host"), str)
            and isinstance(g.get("identity"), str)
        ]
        return {"allow": hosts("allow"), "deny": hosts("deny"), "always": always}

    def _save(self, saved: dict[str, Any]) -> None:
        always = {(g["host"], g["identity"]): g for g in saved["always"]}
        formats.save(
            self._path,
            {
                "allow": sorted(set(saved["allow"])),
                "deny": sorted(set(saved["deny"])),
                "always": [always[k] for k in sorted(always)],
            },
            FORMAT,
        )

    @staticmethod
    def _always(
        saved: dict[str, Any], host: str, identity: str, key: str, new: bool = False
    ) -> bool:
        """A kept grant names the identity by key where it was known (its name may have
        changed since, or be taken by another one later), else by name: then only an identity
        that exists (a host could otherwise make one under that name, choosing an issuer and
        client id that spell it)."""
        return any(
            g["host"] == host
            and (g["key"] == key if "key" in g else g["identity"] == identity and not new)
            for g in saved["always"]
        )

    @staticmethod
    def _by_name_only(saved: dict[str, Any], host: str, identity: str) -> bool:
        return any(
            g["host"] == host and "key" not in g and g["identity"] == identity
            for g in saved["always"]
        )

    def allow(self, host: str, identity: str, key: str | None = None) -> None:
        """Serve ``identity`` to ``host`` from now on, without asking (kept). ``key``: the
        identity's key, when known (then only that identity, not a later one of its name)."""
        with self._lock:
            key = key or self._refused.get((host, identity))
            saved = self._saved()
            grant: dict[str, str] = {"host": host, "identity": identity}
            if key is not None:
                grant["key"] = key
            saved["always"] = [
                g for g in saved["always"] if (g["host"], g["identity"]) != (host, identity)
            ] + [grant]
            saved["deny"] = [h for h in saved["deny"] if h != host]
            self._save(saved)
            self._denied.discard(host)

    def deny(self, host: str) -> None:
        """Refuse ``host`` from now on, every identity, without asking (kept; ends what was
        allowed for this session)."""
        with self._lock:
            saved = self._saved()
            saved["deny"] = [*saved["deny"], host]
            saved["always"] = [g for g in saved["always"] if g["host"] != host]
            self._save(saved)
            self._session = {g: n for g, n in self._session.items() if g[0] != host}
            pending = [q for (h, _), q in self._pending.items() if h == host]
        for question in pending:
            question.deny_host()

    def forget(self, host: str, identity: str | None = None) -> bool:
        """Ask again next time (neither allowed nor denied), about every identity of ``host``
        or only ``identity``; False when nothing was known."""
        with self._lock:
            saved = self._saved()

            def mine(h: str, name: str) -> bool:
                return h == host and identity in (None, name)

            kept = [g for g in saved["always"] if not mine(g["host"], g["identity"])]
            session = {g: n for g, n in self._session.items() if not mine(g[0], n)}
            known = len(kept) < len(saved["always"]) or len(session) < len(self._session)
            saved["always"] = kept
            self._session = session
            if identity is None:
                known = known or host in saved["allow"] or host in saved["deny"]
                known = known or host in self._denied
                saved["allow"] = [h for h in saved["allow"] if h != host]
                saved["deny"] = [h for h in saved["deny"] if h != host]
                self._denied.discard(host)
                self._asked.pop(host, None)
            self._save(saved)
        return known

    def hosts(self) -> list[RemoteHost]:
        """Every host decided about or seen since the agent started."""
        with self._lock:
            saved = self._saved()
            seen = dict(self._seen)
            session = dict(self._session)
            denied = set(self._denied)
        always = [(g["host"], g["identity"]) for g in saved["always"]]
        names = {*saved["allow"], *saved["deny"], *denied, *seen}
        names |= {h for h, _ in always} | {h for h, _ in session}
        out = []
        for host in sorted(names):
            granted = {i: Standing.SESSION for (h, _), i in session.items() if h == host}
            granted |= {i: Standing.ALWAYS for h, i in always if h == host}
            standing = (
                Standing.DENIED
                if host in saved["deny"] or host in denied
                else Standing.ALWAYS
                if Standing.ALWAYS in granted.values()
                else Standing.SESSION
                if granted
                else Standing.OLD_ALLOW
                if host in saved["allow"]
                else Standing.ASKS
            )
            last, calls = seen.get(host, (None, 0))
            out.append(RemoteHost(host, standing, last, calls, tuple(sorted(granted.items()))))
        return out

    # -- a forwarded request ------------------------------------------------------------------

    def granted(self, host: str, identity: str, key: str | None = None, new: bool = False) -> bool:
        """Whether ``host`` may have ``identity`` (of ``key``; ``new``: not made yet) now,
        without asking anyone."""
        key = identity if key is None else key
        with self._lock:
            saved = self._saved()
            return self._granted(saved, host, identity, key, new)

    def _granted(
        self, saved: dict[str, Any], host: str, identity: str, key: str, new: bool = False
    ) -> bool:
        if host in saved["deny"] or host in self._denied:
            return False
        return (host, key) in self._session or self._always(saved, host, identity, key, new)

    def check(
        self,
        host: str,
        identity: str,
        cluster: str | None,
        conv: Conversation | None = None,
        key: str | None = None,
        new: bool = False,
    ) -> None:
        """Return when ``host`` may have ``identity`` (of ``key``; ``new``: it does not exist
        yet); else raise ConsentRefused. Nothing is written unless the person answers
        "always".

        While the person decides, ``conv`` (the remote caller) is told so and kept alive.
        """
        key = identity if key is None else key
        self.note_seen(host)
        with self._lock:
            saved = self._saved()
            if host in saved["deny"] or host in self._denied:
                raise _host_refused(host, identity, kept=host in saved["deny"])
            if self._granted(saved, host, identity, key, new):
                return
            ask = self.ask
            if ask is None:
                self._refused.pop((host, identity), None)
                self._refused[(host, identity)] = key
                while len(self._refused) > MAX_HOSTS:
                    del self._refused[next(iter(self._refused))]
                if self._by_name_only(saved, host, identity):
                    raise ConsentRefused(
                        f"the kubetray agent on your desktop has no login {identity} yet, and "
                        f"{host} was allowed that name before kubetray knew which login it is",
                        f"allow it again there, now that it does: "
                        f"kubetray remote allow {host} {identity}",
                    )
                raise ConsentRefused(
                    f"the kubetray agent on your desktop serves an SSH host only the identities "
                    f"it was told about, and nobody is there to ask whether {host} may have a "
                    f"token as {identity}",
                    f"allow it there with: kubetray remote allow {host} {identity}",
                )
            question = self._pending.get((host, key))
            first = question is None
            if question is None:
                self._may_ask(host)
                question = self._pending[(host, key)] = Question(host, cluster, identity, new)
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
        others: list[Question] = []
        with self._lock:
            if self._pending.get((host, key)) is question:
                del self._pending[(host, key)]
            if question.decision is Decision.SESSION:
                self._session[(host, key)] = identity
            denied = question.decision is Decision.DENY and not question.expired
            if first and denied and not question.host_denied:
                # The person denied the host: its other identities' questions are moot.
                self._denied.add(host)
                others = [q for (h, _), q in self._pending.items() if h == host]
        for other in others:
            other.deny_host()
        if question.host_denied:
            raise _host_refused(host, identity, kept=host not in self._denied)
        if first and question.decision is Decision.ALWAYS:  # kept once, not per waiter
            self.allow(host, identity, key)
        if not answered:
            raise ConsentRefused(
                f"nobody answered on your desktop within {self.timeout:g} s whether {host} may "
                f"have a token as {identity}",
                "answer kubetray's question there, or allow it there with: "
                f"kubetray remote allow {host} {identity}",
            )
        if question.decision is Decision.DENY:
            raise ConsentRefused(f"denied on your desktop: {question.text}")

    def _may_ask(self, host: str) -> None:
        """Count a new question about ``host`` (under the lock), or refuse it at once."""
        now = time.monotonic()
        recent = [t for t in self._asked.get(host, []) if now - t < QUESTION_WINDOW]
        if len(recent) >= QUESTIONS_PER_HOST or len(self._pending) >= MAX_OPEN:
            self._asked[host] = recent
            raise ConsentRefused(
                f"kubetray on your desktop asks no more questions about {host} for now "
                f"({len(recent)} in the last {QUESTION_WINDOW:g} s)",
                "answer the ones asked there, or allow it there with: "
                f"kubetray remote allow {host} IDENTITY",
            )
        if host not in self._asked and len(self._asked) >= MAX_HOSTS:
            for old in [h for h, ts in self._asked.items() if not ts or now - ts[-1] >= 60]:
                del self._asked[old]
        self._asked[host] = [*recent, now]

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


def _host_refused(host: str, identity: str, kept: bool) -> ConsentRefused:
    """The line for a request from a denied host: for good (``kept``), or until the agent
    stops (a Deny in the dialog)."""
    if kept:
        return ConsentRefused(
            f"kubetray on your desktop refuses requests forwarded from {host}",
            f"it was denied there; allow it there with: kubetray remote allow {host} {identity}",
        )
    return ConsentRefused(
        f"kubetray on your desktop refuses requests forwarded from {host} until its agent "
        "stops (denied there)",
        f"to be asked again, run there: kubetray remote forget {host}",
    )


def manage(
    consent: Consent,
    action: str,
    host: str,
    identity: str | None = None,
    key: str | None = None,
) -> tuple[int, str, str]:
    """``kubetray remote ACTION HOST [IDENTITY]`` on ``consent``: (exit code, stdout, stderr).
    ``key``: the key of the identity of that name, where the agent knows it."""
    if action == "list":
        import json

        return 0, json.dumps({"remote": [h.to_dict() for h in consent.hosts()]}), ""
    if action == "allow":
        if not identity:
            return (
                1,
                "",
                f"name the identity {host} may have: kubetray remote allow {host} IDENTITY",
            )
        consent.allow(host, identity, key)
        return 0, f"{host} may have tokens as {identity} through a forward, always\n", ""
    if action == "deny":
        consent.deny(host)
        return 0, f"{host} is refused from now on, every identity\n", ""
    if consent.forget(host, identity or None):
        what = f"about {identity} " if identity else ""
        return 0, f"{host} will be asked {what}again\n", ""
    return 1, "", f"nothing was decided about {host}" + (f" as {identity}" if identity else "")
