"""Every identity the agent knows, one state each, and the index that outlives the agent.

The index (``identities.json``, no secrets) remembers each login identity's name and settings
(whatever its provider: ``Settings.to_index``),
so ``kubetray login NAME`` works after a restart and the tray lists identities before their
first use. Names are unique. A name a person chose (``--name``) replaces a name kubetray
made up, once; after that the identity keeps it, so two kubeconfigs that name one login
differently do not rename it back and forth (``kubetray forget NAME`` starts it afresh).
"""

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from app import fingerprint, formats, jsonfile
from app import identity as idmod
from app.errors import AppError
from app.model import OIDC, STORED, Identity
from app.providers import Providers, default
from app.providers.base import Settings

log = logging.getLogger(__name__)

INDEX_VERSION = 2
"""identities.json's format (app/formats.py): 1 was the first round's {name: entry} map. An
entry is ``{"name", "chosen", "settings"}`` for an OIDC identity (as the first rounds wrote
it), ``{"name", "chosen", "kind", "config"}`` for another provider's: a kubetray that knows no
such kind finds no ``settings`` in it, keeps it as it is and writes it back. An entry whose
login is needed because the provider refused its refresh token also has ``"login_needed":
{"reason", "tokens"}`` (why, and the ``issued_at`` of the tokens it was said of): a kubetray
before it keeps that field and writes it back, so it counts only while those tokens are the
identity's."""


@dataclass(eq=False)
class Entry:
    """An identity the agent knows, and what the index remembers of it.

    The registry owns it: ``identity`` (its name) and ``settings`` change only through
    Registry methods, under the registry's lock. What happens to the identity lives with its
    owners, keyed by ``identity.key``: its tokens with Logins, its login in flight with
    Flights, its calls with the Broker.
    """

    identity: Identity
    settings: Settings | None = None
    """The settings of its last successful login or refresh (login identities; None for a
    stored credential): what refresh-ahead and ``kubetray login NAME`` use. Callers bring
    their own (see Logins)."""
    legacy_key: str | None = None
    """The key an earlier kubetray stored this identity's tokens under (moved on first read)."""
    chosen: bool = False
    """Its name was given with ``--name``: no later ``--name`` renames it."""
    kept: dict[str, Any] | None = None
    """What a newer kubetray wrote in its index entry (``settings`` included) that this one
    does not know: written back as it was."""
    new: bool = False
    """A request of this run made it (it was not in the index): ``discard`` may take it back."""
    login_needed: tuple[str, str] | None = None
    """Why it needs a login (the provider refused its refresh token), and the ``issued_at``
    of the tokens that was said of: it outlives the agent (see INDEX_VERSION)."""


class Registry:
    """Identities by key, with their unique names; persisted for login identities."""

    def __init__(
        self,
        index_path: str,
        reserved: Callable[[], Iterable[str]] = tuple,
        providers: Providers | None = None,
    ) -> None:
        """``reserved`` lists names taken outside the registry (stored credentials);
        ``providers`` read the index's settings (default: every provider of this kubetray)."""
        self.providers = providers or default()
        self._index_path = index_path
        self._reserved = reserved
        self._lock = threading.Lock()
        self._states: dict[str, Entry] = {}
        self._loaded_index = False
        self._kept: dict[str, Any] = {}
        """The index's own fields and entries this version cannot read, written back as read."""
        self.problem: AppError | None = None
        """Why the index could not be read last time (a newer format, permissions): until it
        can, identities live in memory only and the index is never written."""

    @property
    def index_path(self) -> str:
        return self._index_path

    # -- lookups --------------------------------------------------------------------------

    def get(self, key: str) -> Entry | None:
        with self._lock:
            return self._states.get(key)

    def find(self, name: str) -> Entry | None:
        """An identity by the name people see."""
        for st in self.known():
            if st.identity.name == name:
                return st
        return None

    def known(self) -> list[Entry]:
        """Every identity of this run and of the index, in the order first seen."""
        self._load_index()
        with self._lock:
            return list(self._states.values())

    # -- creation -------------------------------------------------------------------------

    def stored(self, name: str) -> Entry:
        """The state of the stored credential ``name`` (created on first use)."""
        key = idmod.stored_key(name)
        with self._lock:
            st = self._states.get(key)
            if st is None:
                st = self._states[key] = Entry(Identity(key, name, STORED), new=True)
            return st

    def identity(
        self,
        settings: Settings,
        chosen: str | None = None,
        default: Callable[[], str] | None = None,
    ) -> Entry:
        """The identity ``settings`` name: a stored credential's, or a login's (see login)."""
        if settings.kind == STORED:
            return self.stored(settings.fallback_name)
        return self.login(settings, chosen, default)

    def login(
        self,
        settings: Settings,
        chosen: str | None = None,
        default: Callable[[], str] | None = None,
    ) -> Entry:
        """The login identity ``settings`` name, created on first sight and remembered.

        ``chosen``: a name a person gave (``--name``): it names a new identity, and renames an
        existing one only if that one's name was made up (see the module). Otherwise a new
        identity is named ``default()`` (the kubeconfig user, for settings named by it), else
        ``settings.fallback_name`` (``user@issuer-host``, the account).
        """
        self._load_index()
        key = settings.key
        with self._lock:
            st = self._states.get(key)
            if st is not None and (not chosen or st.chosen or chosen == st.identity.name):
                return st
            by_user = default() if default and settings.named_by_kubeconfig else None
            wanted = chosen or by_user or settings.fallback_name
            taken = self._taken(except_key=key)
            name = idmod.unique_name(wanted, taken)
            if st is None:
                st = Entry(Identity(key, name, settings.kind), settings, new=True)
                self._states[key] = st
                self._tell_other_credential(st)
            else:
                st.identity = Identity(key, name, settings.kind)
            st.chosen = bool(chosen)
            self._save_index()
            return st

    def proposed(
        self, settings: Settings, default: Callable[[], str] | None = None
    ) -> tuple[Identity, bool]:
        """The identity login(settings, None, default) would return, named as it would be
        but neither kept nor written, and whether it is new (a stored credential's is in the
        store): what a question about an SSH host's request names before anything is made."""
        self._load_index()
        key = settings.key
        with self._lock:
            st = self._states.get(key)
            if st is not None:
                return st.identity, False
            if settings.kind == STORED:
                return Identity(key, settings.fallback_name, STORED), False
            by_user = default() if default and settings.named_by_kubeconfig else None
            name = idmod.unique_name(by_user or settings.fallback_name, self._taken(key))
            return Identity(key, name, settings.kind), True

    oidc = login

    def _tell_other_credential(self, st: Entry) -> None:
        """Say that a new identity is one already known with another credential (a secret or
        certificate rotated, or another one of the app's): never the secret (caller holds the
        lock)."""
        base = fingerprint.base(st.identity.key)
        if base == st.identity.key:
            return
        others = [
            o.identity.name
            for k, o in self._states.items()
            if k != st.identity.key and fingerprint.base(k) == base
        ]
        if others:
            log.warning(
                "%s: another credential than %s's (a new or rotated secret or certificate): "
                "its own identity, used from this request on",
                st.identity.name,
                " and ".join(others),
            )

    """The name the first rounds gave ``login`` (OIDC was the only login)."""

    def adopt(self, st: Entry, settings: Settings) -> None:
        """Remember ``settings`` as the ones that worked for ``st`` (index written on change)."""
        with self._lock:
            if st.settings != settings:
                st.settings = settings
                self._save_index()

    def note_login_needed(self, st: Entry, why: tuple[str, str] | None) -> None:
        """Remember why ``st`` needs a login (see Entry.login_needed), or that it no longer
        does (None); the index is written on change."""
        with self._lock:
            if st.login_needed != why:
                st.login_needed = why
                if st.settings is not None:
                    self._save_index()

    def discard(self, key: str) -> None:
        """Take back an identity a request of this run made (the broker decides when: it
        never served and nobody waits on it), out of the index too. Identities read from the
        index stay: forgetting those is ``remove``."""
        with self._lock:
            st = self._states.get(key)
            if st is None or not st.new:
                return
            del self._states[key]
            if st.settings is not None:
                self._save_index()

    def remove(self, key: str) -> None:
        """Forget an identity (its secrets are the caller's business)."""
        self._load_index()
        with self._lock:
            if self._states.pop(key, None) is not None:
                self._save_index()

    def _taken(self, except_key: str) -> set[str]:
        names = {st.identity.name for k, st in self._states.items() if k != except_key}
        return names | set(self._reserved())

    # -- the index ------------------------------------------------------------------------

    def _load_index(self) -> None:
        """Read the index once. One this kubetray cannot read (a newer format, permissions) is
        never written over: ``problem`` says why, the identities of this run are served from
        memory, and the next call reads it again (the person may have mended it)."""
        if self._loaded_index:
            return
        try:
            doc = jsonfile.load(self._index_path)
            if isinstance(doc, dict) and formats.FIELD in doc:
                formats.check(doc, self._index_path, INDEX_VERSION)
        except AppError as e:
            if self.problem is None or self.problem.message != e.message:
                log.warning("%s", e.one_line())
            self.problem = e
            return
        self.problem = None
        entries = _entries(doc)
        reserved = self._reserved()
        with self._lock:
            if self._loaded_index:
                return
            self._loaded_index = True
            # Names taken so far, kept up to date: the stored names read once, not once per
            # entry (a large index made the first status quadratic, issue 33).
            taken = {st.identity.name for st in self._states.values()} | set(reserved)
            if isinstance(doc, dict) and doc.get(formats.FIELD) == INDEX_VERSION:
                read = {raw_key for _, _, _, raw_key, _ in entries}  # once, not once per entry
                self._kept = {
                    "top": formats.unknown(doc, ("identities",)),
                    "entries": {
                        k: r for k, r in (doc.get("identities") or {}).items() if k not in read
                    },
                }
            for name, kind, raw, raw_key, chosen in entries:
                try:
                    settings = self.providers.by_kind(kind).from_index(raw)
                except (KeyError, TypeError, ValueError):  # a kind this kubetray lacks, or
                    # damaged: kept as it was, not served
                    self._kept.setdefault("entries", {})[raw_key] = _raw_entry(doc, raw_key)
                    continue
                key = settings.key
                if key in self._states or settings.kind != kind:
                    continue
                identity = Identity(key, idmod.unique_name(name, taken), kind)
                taken.add(identity.name)
                legacy = raw_key if raw_key != key else None
                kept = _unknown_of_entry(doc, raw_key, raw, settings)
                entry = Entry(identity, settings, legacy, chosen, kept or None)
                entry.login_needed = _login_needed(_raw_entry(doc, raw_key))
                self._states[key] = entry

    def _save_index(self) -> None:
        """Write the login identities' names and non-secret settings (caller holds the lock);
        nothing while the index on disk cannot be read (it would be lost)."""
        if not self._loaded_index:
            return
        out: dict[str, Any] = {
            k: v for k, v in (self._kept.get("entries") or {}).items() if v is not None
        }
        for st in self._states.values():
            if st.settings is None:
                continue
            kept = dict(st.kept or {})
            section = _section(st.settings.kind)
            settings = {**kept.pop(section, {}), **st.settings.to_index()}
            entry: dict[str, Any] = {**kept, "name": st.identity.name}
            if st.settings.kind != OIDC:
                entry["kind"] = st.settings.kind
            entry[section] = settings
            entry["chosen"] = st.chosen
            if st.login_needed is not None:
                reason, tokens = st.login_needed
                entry[LOGIN_NEEDED] = {"reason": reason, "tokens": tokens}
            out[st.identity.key] = entry
        doc = {**(self._kept.get("top") or {}), "identities": out}
        jsonfile.save(self._index_path, formats.stamped(doc, INDEX_VERSION))


def _section(kind: str) -> str:
    """Where an entry holds its settings: ``settings`` (OIDC, as ever) or ``config``."""
    return "settings" if kind == OIDC else "config"


LOGIN_NEEDED = "login_needed"


def _login_needed(entry: object) -> tuple[str, str] | None:
    """An index entry's ``login_needed`` (None when it has none, or not in this form)."""
    field = entry.get(LOGIN_NEEDED) if isinstance(entry, dict) else None
    if isinstance(field, dict):
        reason, tokens = field.get("reason"), field.get("tokens")
        if isinstance(reason, str) and reason and isinstance(tokens, str):
            return reason, tokens
    return None


def _raw_entry(doc: object, key: str) -> Any:
    if isinstance(doc, dict) and doc.get(formats.FIELD) == INDEX_VERSION:
        return (doc.get("identities") or {}).get(key)
    return None


def _unknown_of_entry(
    doc: object, key: str, raw: dict[str, Any], settings: Settings
) -> dict[str, Any]:
    """The fields of an index entry (and of its settings) this version does not know: what
    ``to_index`` does not write."""
    entry = _raw_entry(doc, key)
    if not isinstance(entry, dict):
        return {}
    section = _section(settings.kind)
    mine = ("name", "kind", section, "chosen", LOGIN_NEEDED)
    out = {k: v for k, v in entry.items() if k not in mine}
    known = set(settings.to_index()) | set(getattr(settings, "SECRETS", ()))
    extra_settings = {k: v for k, v in raw.items() if k not in known}
    if extra_settings:
        out[section] = extra_settings
    return out


def _entries(doc: object) -> list[tuple[str, str, dict[str, Any], str, bool]]:
    """(name, kind, settings, key as written, name chosen) of an index: this version's, or
    the first round's (whose names count as made up: a ``--name`` may still replace them)."""
    if not isinstance(doc, dict):
        return []
    if doc.get("version") == INDEX_VERSION and isinstance(doc.get("identities"), dict):
        out = []
        for key, r in doc["identities"].items():
            if not isinstance(r, dict) or not r.get("name"):
                continue
            kind, raw = OIDC, r.get("settings")
            if "settings" not in r:
                kind, raw = str(r.get("kind")), r.get("config")
            if isinstance(raw, dict):
                out.append((str(r["name"]), kind, raw, str(key), r.get("chosen") is True))
        return out
    return [  # {name: {key, settings}}: the key is recomputed in today's normal form
        (str(name), OIDC, r["settings"], str(r.get("key")), False)
        for name, r in doc.items()
        if isinstance(r, dict) and isinstance(r.get("settings"), dict)
    ]
