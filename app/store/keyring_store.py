"""The OS keyring (through ``keyring``), with large secrets sealed in files under a keyring key.

Small values go into one keyring item each. Larger ones (Windows Credential Manager caps an item
at 2.5 KB; a certificate chain and its key exceed that) are encrypted with AES-256-GCM under a
data key that lives only in the keyring; the ciphertext sits in ``<config>/secrets/`` and the
keyring item names the file. The item key is the AEAD associated data, so one sealed file
cannot stand in for another. Nothing secret ever reaches disk in plaintext.
"""

import base64
import hashlib
import os
import re
import secrets
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from app import atomic_file, formats
from app.errors import SecretLost, StoreError, StoreUnavailable

SERVICE = "kubetray"
DATA_KEY_ITEM = "kubetray/data-key"
INLINE_LIMIT = 1024
"""Bytes stored directly in an item; base64 makes 1 KiB ≈ 1.4 KB, under every platform's cap."""
TIMEOUT = 15.0
"""A keyring can block on an unlock prompt nobody sees; never hang a caller on it."""

_INLINE, _SEALED = "inline:", "sealed:"
"""Format 1 of a keyring item (app/formats.py): the value in base64, or the name of a file
sealed with AES-256-GCM (12-byte nonce, then ciphertext and tag; the item key is the associated
data) under the data key. A later format names itself: ``inline.v2:``, ``sealed.v2:``."""
_NEWER = re.compile(r"^(inline|sealed)\.v(\d{1,6}):")
_REMEDY = (
    "kubetray keeps lasting secrets only in the OS keyring: on a desktop, start and unlock a "
    "Secret Service provider (gnome-keyring, KWallet, KeePassXC); on a server, run one for your "
    "shell: dbus-run-session -- bash, then in it: printf %s PASSWORD | gnome-keyring-daemon "
    "--unlock --components=secrets (OIDC logins work without a keyring, tokens in memory)"
)
T = TypeVar("T")
_ONE_AT_A_TIME = threading.Lock()
"""Every keyring call of this process, one at a time, whichever store or backend makes it
(each SecretService link serializes only its own). gnome-keyring (42, Debian 12) served
parallel calls wrongly under load: an existing item read as missing (a read then made a new
data key, and every sealed secret was lost), and near 1,300 items it died, taking its unlocked
collection with it. It answers one call at a time anyway."""


class NoKeyring(StoreUnavailable):
    """There is no usable OS keyring at all (not merely a locked or slow one)."""

    def __init__(
        self, message: str, hint: str | None = None, chosen: str = "", why: str = ""
    ) -> None:
        super().__init__(message, hint)
        self.chosen = chosen
        """The backend keyring fell back to (its fail or null keyring), when it named one: for
        the log, never for a person."""
        self.why = why or message
        """What is missing, in plain words (``message`` says it after "no OS keyring here")."""


def _missing() -> str:
    """Which keyring service is missing here, in plain words."""
    if sys.platform == "darwin":
        return "the macOS Keychain cannot be reached"
    if sys.platform == "win32":
        return "the Windows Credential Manager cannot be reached"
    services = "Secret Service such as gnome-keyring, KWallet or KeePassXC"
    if not os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
        return f"there is no D-Bus session bus, so no {services}"
    return f"no {services} answers on the D-Bus session bus"


def no_keyring(chosen: str = "") -> NoKeyring:
    why = _missing()
    return NoKeyring(f"no OS keyring here: {why}", _REMEDY, chosen, why)


class KeyringSecretStore:
    """SecretStore on the OS keyring."""

    def __init__(self, sealed_dir: str, timeout: float = TIMEOUT) -> None:
        self._sealed_dir = sealed_dir
        self._timeout = timeout
        self._lock = threading.Lock()
        self._chosen: Any = None
        """The direct Secret Service backend, or False once keyring must choose."""
        self._key: bytes | None = None
        """The data key, once read: a sealed write after a refresh is the moment a crash can
        lose a login, and one keyring round trip less makes it shorter."""

    # -- the keyring, behind a timeout and one error translation ----------------------------

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["value"] = fn(*args)
            except BaseException as e:
                box["error"] = e

        late = StoreUnavailable(
            f"the OS keyring did not answer within {self._timeout:.0f} s",
            "it may be waiting for an unlock prompt: unlock it and try again",
        )
        # One call at a time (see _ONE_AT_A_TIME). A call given up on lets the next one go,
        # on a new connection: it does not hold the others back.
        if not _ONE_AT_A_TIME.acquire(timeout=self._timeout):
            raise late
        try:
            worker = threading.Thread(target=run, name="keyring", daemon=True)
            worker.start()
            worker.join(self._timeout)
            if worker.is_alive():
                reset = getattr(self._chosen, "reset", None)
                if reset is not None:  # that call holds the connection: the next takes a new one
                    reset()
                raise late
        finally:
            _ONE_AT_A_TIME.release()
        if "error" in box:
            raise _translate(box["error"]) from box["error"]
        return box["value"]  # type: ignore[no-any-return]

    def _backend(self) -> Any:
        if self._chosen is None:
            from app.store import secret_service

            self._chosen = secret_service.available() or False
        if self._chosen:
            return self._chosen  # the Secret Service, as keyring would pick it, without keyring
        import keyring

        backend = keyring.get_keyring()
        name = f"{type(backend).__module__}.{type(backend).__name__}"
        if "fail" in name.split(".") or "Plaintext" in name or "null" in name.split("."):
            raise no_keyring(name)
        return backend

    def recheck(self) -> None:
        """Look for the keyring again at the next use (the session bus changed)."""
        self._key = None
        reset = getattr(self._chosen, "reset", None)
        if reset is not None:
            reset()
        self._chosen = None
        if "keyring" in sys.modules:  # keyring remembers the backend it chose at first use
            import keyring.core

            keyring.core.init_backend()

    def check_usable(self) -> None:
        """Raise NoKeyring when this machine has no usable keyring (no item is read)."""
        self._call(self._backend)

    def _get_item(self, key: str) -> str | None:
        value: str | None = self._call(lambda: self._backend().get_password(SERVICE, key))
        return value

    def _set_item(self, key: str, value: str) -> None:
        self._call(lambda: self._backend().set_password(SERVICE, key, value))

    def _delete_item(self, key: str) -> bool:
        def delete() -> bool:
            backend = self._backend()
            if hasattr(backend, "delete"):
                return bool(backend.delete(SERVICE, key))
            import keyring.errors

            try:
                backend.delete_password(SERVICE, key)
            except keyring.errors.PasswordDeleteError:
                return False
            return True

        return self._call(delete)

    # -- sealed files -------------------------------------------------------------------------

    def _data_key(self, fresh: bool = False) -> bytes:
        """The key sealed files are encrypted with (kept once read), made on the first seal."""
        key = self._existing_key(fresh)
        if key is None:
            encoded = base64.b64encode(AESGCM.generate_key(bit_length=256)).decode()
            self._set_item(DATA_KEY_ITEM, encoded)
            key = self._key = base64.b64decode(encoded)
        return key

    def _existing_key(self, fresh: bool = False) -> bytes | None:
        """The data key, as kept unless ``fresh``; None when the keyring holds none."""
        if self._key is not None and not fresh:
            return self._key
        encoded = self._get_item(DATA_KEY_ITEM)
        if encoded is None:
            return None
        self._key = base64.b64decode(encoded)
        return self._key

    def _sealed_path(self, key: str) -> str:
        name = hashlib.sha256(key.encode()).hexdigest()[:32] + ".sealed"
        return os.path.join(self._sealed_dir, name)

    def _seal(self, key: str, value: bytes) -> str:
        nonce = secrets.token_bytes(12)
        blob = nonce + AESGCM(self._data_key()).encrypt(nonce, value, key.encode())
        path = self._sealed_path(key)
        try:  # a full disk or a kill leaves no half-sealed secret behind
            atomic_file.write(path, blob, 0o600)
        except OSError as e:
            raise StoreError(f"cannot write the sealed secret {path}: {e.strerror or e}") from None
        return os.path.basename(path)

    def _unseal(self, key: str, filename: str) -> bytes:
        path = os.path.join(self._sealed_dir, os.path.basename(filename))
        try:
            with open(path, "rb") as f:
                blob = f.read()
        except FileNotFoundError:
            raise SecretLost(
                f"the sealed secret file for {key} is missing ({path})",
                "store the credential again",
            ) from None
        for fresh in (False, True):  # the key kept may be stale: once more with the keyring's
            # Read, never made here: a new key opens no file sealed before, and would lose every
            # one of them. A keyring that fails now raises that failure, not a lost secret.
            data_key = self._existing_key(fresh)
            if data_key is None:
                raise SecretLost(
                    f"the keyring holds no key for the sealed secret file of {key}",
                    "store the credential again",
                )
            try:
                return AESGCM(data_key).decrypt(blob[:12], blob[12:], key.encode())
            except Exception:  # noqa: S112 - any failure to decrypt says the same
                continue
        raise SecretLost(
            f"the sealed secret file for {key} does not decrypt with the keyring's key",
            "store the credential again",
        )

    # -- SecretStore --------------------------------------------------------------------------

    def get(self, key: str) -> bytes | None:
        item = self._get_item(key)
        if item is None:
            return None
        if item.startswith(_INLINE):
            return base64.b64decode(item[len(_INLINE) :])
        if item.startswith(_SEALED):
            return self._unseal(key, item[len(_SEALED) :])
        newer = _NEWER.match(item)
        if newer:
            raise formats.newer(f"the keyring item {key}", int(newer[2]), 1)
        raise StoreError(f"the keyring item for {key} is not one kubetray wrote")

    def set(self, key: str, value: bytes) -> None:
        with self._lock:
            if len(value) <= INLINE_LIMIT:
                self._set_item(key, _INLINE + base64.b64encode(value).decode())
                self._remove_sealed(key)
            else:
                self._set_item(key, _SEALED + self._seal(key, value))

    def delete(self, key: str) -> bool:
        with self._lock:
            removed = self._delete_item(key)
            return self._remove_sealed(key) or removed

    def _remove_sealed(self, key: str) -> bool:
        try:
            os.remove(self._sealed_path(key))
        except FileNotFoundError:
            return False
        return True


def _translate(error: BaseException) -> BaseException:
    """Native keyring errors → StoreError with a remedy; everything else unchanged."""
    if isinstance(error, StoreError):
        return error
    from app.store.secret_service import Locked

    if isinstance(error, Locked):
        return StoreUnavailable("the OS keyring is locked", "unlock it and try again")
    if type(error).__module__.split(".")[0] in ("secretstorage", "jeepney"):
        return StoreUnavailable(f"the Secret Service failed: {error}", _REMEDY)
    try:
        import keyring.errors as ke
    except ImportError:  # pragma: no cover - keyring is a dependency
        return error
    if isinstance(error, ke.NoKeyringError):
        return no_keyring()
    if isinstance(error, ke.KeyringLocked):
        return StoreUnavailable("the OS keyring is locked", "unlock it and try again")
    if isinstance(error, ke.InitError):
        return StoreUnavailable(f"the OS keyring could not be opened: {error}", _REMEDY)
    if isinstance(error, ke.KeyringError):
        return StoreError(f"the OS keyring failed: {error}")
    return error
