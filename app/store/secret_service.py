"""The Secret Service (gnome-keyring, KWallet, KeePassXC) through secretstorage, without keyring.

``import keyring`` and its backend discovery cost ~90 ms and ~9 MB on Linux (it imports every
platform's backend, macOS's running ``find_library``, and jaraco's urllib), on the agent's
first start and in the idle app. Where the person has not configured ``keyring`` (no
``PYTHON_KEYRING_BACKEND``, no ``keyringrc.cfg``) and a Secret Service answers, this is what
keyring would choose anyway: items are read and written exactly as keyring's SecretService
backend does (same attributes, label and collection), so both see the same secrets.
"""

import os
import sys
from contextlib import closing
from typing import Any

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


class SecretService:
    """get/set/delete of one secret per (service, username) in the default collection."""

    def _collection(self) -> Any:
        import secretstorage

        collection = secretstorage.get_default_collection(secretstorage.dbus_init())
        if collection.is_locked():
            collection.unlock()
            if collection.is_locked():
                collection.connection.close()
                raise Locked("the keyring's collection is locked")
        return collection

    @staticmethod
    def _query(service: str, username: str) -> dict[str, str]:
        return {"username": username, "service": service}

    def get_password(self, service: str, username: str) -> str | None:
        collection = self._collection()
        with closing(collection.connection):
            for item in collection.search_items(self._query(service, username)):
                if item.is_locked():
                    item.unlock()
                    if item.is_locked():
                        raise Locked("the keyring item is locked")
                secret: bytes = item.get_secret()
                return secret.decode("utf-8")
        return None

    def set_password(self, service: str, username: str, password: str) -> None:
        collection = self._collection()
        attributes = {**self._query(service, username), "application": APPID}
        label = f"Password for '{username}' on '{service}'"
        with closing(collection.connection):
            collection.create_item(label, attributes, password, replace=True)

    def delete(self, service: str, username: str) -> bool:
        """Delete the first matching item; False when there was none."""
        collection = self._collection()
        with closing(collection.connection):
            for item in collection.search_items(self._query(service, username)):
                item.delete()
                return True
        return False
