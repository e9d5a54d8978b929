"""The Secret Service (gnome-keyring, KWallet, KeePassXC) through secretstorage, without keyring.

``import keyring`` and its backend discovery cost ~90 ms and ~9 MB on Linux (it imports every
platform's backend, macOS's running ``find_library``, and jaraco's urllib), on the agent's
first start and in the idle app. Where the person has not configured ``keyring`` (no
``PYTHON_KEYRING_BACKEND``, no ``keyringrc.cfg``) and a Secret Service answers, this is what
keyring would choose anyway: items are read and written exactly as keyring's SecretService
backend does (same attributes, label and collection), so both see the same secrets.
"""

import contextlib
import os
import sys
import threading
import weakref
from collections.abc import Callable
from contextlib import closing
from typing import Any, TypeVar

APPID = "Python keyring library"
"""keyring's SecretService ``appid``: items kubetray wrote through keyring carry it."""


def configured_elsewhere() -> bool:
    """The person chose a keyring backend (environment or keyringrc.cfg): keyring decides."""
    if os.environ.get("PYTHON_KEYRING_BACKEND"):
        return True
    root = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.exists(os.path.join(root, "python_keyring", "keyringrc.cfg"))


def available() -> "SecretService | None":
    """The direct backend, when it is what keyring would pick here; else None."""
    if sys.platform != "linux" or configured_elsewhere():
        return None
    try:
        import secretstorage

        with closing(secretstorage.dbus_init()) as connection:
            if not secretstorage.check_service_availability(connection):
                return None
    except Exception:  # no session bus, no secretstorage: let keyring look further
        return None
    return SecretService()


class Locked(Exception):
    """The collection or item stayed locked (the unlock prompt was dismissed)."""


class _Link:
    """One connection to the session bus, one Secret Service session on it (its key exchange
    done once), and the default collection: kept for the agent's life, used by one call at a
    time (jeepney's blocking connection is not thread-safe)."""

    def __init__(self) -> None:
        import secretstorage
        from secretstorage.util import open_session

        self.lock = threading.Lock()
        self.connection = secretstorage.dbus_init()
        try:
            self.session = open_session(self.connection)
            self.collection = secretstorage.get_default_collection(self.connection, self.session)
        except BaseException:
            self.connection.close()
            raise

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.connection.close()


T = TypeVar("T")


class SecretService:
    """get/set/delete of one secret per (service, username) in the default collection.

    A write after a refresh is the one moment a crash can lose a login: one long-lived
    connection makes it a few milliseconds instead of a new connection, session and key
    exchange each time. A link that fails (the keyring daemon restarted, the bus went away)
    is dropped and the call tried once more on a new one.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._link: _Link | None = None

    def _current(self) -> _Link:
        with self._lock:
            if self._link is None:
                self._link = link = _Link()
                weakref.finalize(self, link.close)  # an instance dropped closes its connection
            return self._link

    def reset(self) -> None:
        """Drop the link (a call on it hangs, or the session bus changed): the next call
        opens a new one."""
        with self._lock:
            link, self._link = self._link, None
        if link is not None:
            link.close()

    def _drop(self, link: _Link) -> None:
        with self._lock:
            if self._link is link:
                self._link = None
        link.close()

    def _use(self, fn: Callable[[Any], T]) -> T:
        for attempt in (1, 2):
            link = self._current()
            with link.lock:
                try:
                    collection = link.collection
                    if collection.is_locked():
                        collection.unlock()
                        if collection.is_locked():
                            raise Locked("the keyring's collection is locked")
                    return fn(collection)
                except Locked:
                    raise
                except Exception:
                    self._drop(link)
                    if attempt == 2:
                        raise
        raise AssertionError("unreachable")

    @staticmethod
    def _query(service: str, username: str) -> dict[str, str]:
        return {"username": username, "service": service}

    def get_password(self, service: str, username: str) -> str | None:
        def get(collection: Any) -> str | None:
            for item in collection.search_items(self._query(service, username)):
                if item.is_locked():
                    item.unlock()
                    if item.is_locked():
                        raise Locked("the keyring item is locked")
                secret: bytes = item.get_secret()
                return secret.decode("utf-8")
            return None

        return self._use(get)

    def set_password(self, service: str, username: str, password: str) -> None:
        attributes = {**self._query(service, username), "application": APPID}
        label = f"Password for '{username}' on '{service}'"
        self._use(lambda collection: collection.create_item(label, attributes, password, True))

    def delete(self, service: str, username: str) -> bool:
        """Delete the first matching item; False when there was none."""

        def delete(collection: Any) -> bool:
            for item in collection.search_items(self._query(service, username)):
                item.delete()
                return True
            return False

        return self._use(delete)
