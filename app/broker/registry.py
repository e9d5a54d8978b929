"""Every identity the agent knows, one state each, and the index that outlives the agent.

The index (``identities.json``, no secrets) remembers each login identity's name and settings
(whatever its provider: ``Settings.to_index``),
so ``kubetray login NAME`` works after a restart and the tray lists identities before their
first use. Names are unique. A name a person chose (``--name``) replaces a name kubetray
made up, once; after that the identity keeps it, so two kubeconfigs that name one login
differently do not rename it back and forth (``kubetray forget NAME`` starts it afresh).
"""

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from app import identity as idmod
from app import jsonfile
from app.model import OIDC, STORED, Identity
from app.providers import Providers, default
from app.providers.base import Settings

INDEX_VERSION = 2
"""An entry is ``{"name", "chosen", "settings"}`` for an OIDC identity (as the first rounds
wrote it), ``{"name", "chosen", "kind", "config"}`` for another provider's: a kubetray that
knows no such kind finds no ``settings`` in it and leaves it alone."""


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
                st = self._states[key] = Entry(Identity(key, name, STORED))
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
                st = self._states[key] = Entry(Identity(key, name, settings.kind), settings)
            else:
                st.identity = Identity(key, name, settings.kind)
            st.chosen = bool(chosen)
            self._save_index()
            return st

    oidc = login
    """The name the first rounds gave ``login`` (OIDC was the only login)."""

    def adopt(self, st: Entry, settings: Settings) -> None:
        """Remember ``settings`` as the ones that worked for ``st`` (index written on change)."""
        with self._lock:
            if st.settings != settings:
                st.settings = settings
                self._save_index()

    def drop(self, keys: Iterable[str]) -> None:
        """Forget stored names that never served (the broker chooses which): what callers
        name must not grow the agent without bound. Nothing of the index changes."""
        with self._lock:
            for key in keys:
                st = self._states.get(key)
                if st is not None and st.settings is None:
                    del self._states[key]

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
        if self._loaded_index:
            return
        doc = jsonfile.load(self._index_path)
        entries = _entries(doc)
        with self._lock:
            if self._loaded_index:
                return
            self._loaded_index = True
            for name, kind, raw, raw_key, chosen in entries:
                try:
                    settings = self.providers.by_kind(kind).from_index(raw)
                except (KeyError, TypeError, ValueError):
                    continue  # written by a newer kubetray, or damaged: skip, keep the rest
                key = settings.key
                if key in self._states or settings.kind != kind:
                    continue
                taken = self._taken(except_key=key)
                identity = Identity(key, idmod.unique_name(name, taken), kind)
                legacy = raw_key if raw_key != key else None
                self._states[key] = Entry(identity, settings, legacy_key=legacy, chosen=chosen)

    def _save_index(self) -> None:
        """Write the login identities' names and non-secret settings (caller holds the lock)."""
        out: dict[str, Any] = {}
        for st in self._states.values():
            if st.settings is None:
                continue
            entry: dict[str, Any] = {"name": st.identity.name}
            if st.settings.kind == OIDC:
                entry["settings"] = st.settings.to_index()
            else:
                entry["kind"] = st.settings.kind
                entry["config"] = st.settings.to_index()
            entry["chosen"] = st.chosen
            out[st.identity.key] = entry
        jsonfile.save(self._index_path, {"version": INDEX_VERSION, "identities": out})


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
