"""Build kubetray's parts from settings. Tests build their own with fakes instead."""

import os
import sys

from app.broker.broker import Broker, utcnow
from app.broker.ipc_server import IPCServer, Listener
from app.broker.logins import Logins
from app.broker.service import Service
from app.store.keyring_store import KeyringSecretStore
from app.store.secret_store import SecretStore
from app.stored import StoredCredentials
from exec_helper import paths


def secret_store() -> SecretStore:
    """The OS keyring, with sealed files under the config directory."""
    return KeyringSecretStore(sealed_dir=os.path.join(paths.config_dir(), "secrets"))


def stored_credentials(store: SecretStore | None = None) -> StoredCredentials:
    """Stored credentials on the given store (the OS keyring by default)."""
    return StoredCredentials(
        store or secret_store(), os.path.join(paths.config_dir(), "stored.json")
    )


def listener() -> Listener:
    """The platform's IPC listener, chosen once, here."""
    if sys.platform == "win32":
        from app.broker.listener_windows import PipeListener

        return PipeListener()
    else:
        from app.broker.listener_unix import UnixListener

        return UnixListener()


def agent_server(store: SecretStore | None = None) -> IPCServer:
    """Broker, service and listener, wired (the listener is not open yet)."""
    store = store or secret_store()
    logins = Logins(store, os.path.join(paths.config_dir(), "identities.json"), clock=utcnow)
    broker = Broker(stored_credentials(store), logins=logins)
    lst = listener()
    return IPCServer(lst, Service(broker, clock=utcnow, socket=lst.address))
