"""Build kubetray's parts from settings. Tests build their own with fakes instead."""

import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.agent.server import IPCServer, Listener
from app.agent.service import Service
from app.broker.broker import Broker, utcnow
from app.broker.consent import Consent
from app.broker.logins import Logins
from app.broker.registry import Registry
from app.oidc.browser import Browser
from app.static_credentials import StoredCredentials
from app.store import choice, keyring_store
from app.store.choice import StoreChoice
from app.store.keyring_store import KeyringSecretStore
from app.store.secret_store import SecretStore
from exec_helper import paths

if TYPE_CHECKING:
    from app.kubeconfig.backups import Backups


def secret_store(timeout: float = keyring_store.TIMEOUT) -> SecretStore:
    """The OS keyring, with sealed files under the config directory."""
    return KeyringSecretStore(os.path.join(paths.config_dir(), "secrets"), timeout)


def token_store(kind: str | None = None) -> StoreChoice:
    """Where the agent keeps login tokens: ``kind``, else the setting (auto by default)."""
    if kind is None:
        from app.settings import Settings

        kind = Settings.load().secret_store
    return choice.choose(kind, KeyringSecretStore(os.path.join(paths.config_dir(), "secrets")))


def stored_credentials(store: SecretStore | None = None) -> StoredCredentials:
    """Stored credentials on the given store (the OS keyring by default)."""
    return StoredCredentials(
        store or secret_store(), os.path.join(paths.config_dir(), "stored.json")
    )


def kubeconfig_backups() -> "Backups":
    """Backups of kubeconfig files: beside them, or in the keyring when they hold secrets."""
    from app.kubeconfig.backups import Backups

    return Backups(os.path.join(paths.state_dir(), "kubeconfig-backups.json"), secret_store)


def remote_hosts() -> Consent:
    """The decisions about SSH hosts that reach the agent through a forward."""
    return Consent(os.path.join(paths.config_dir(), "remote-hosts.json"), utcnow)


def listener() -> Listener:
    """The platform's IPC listener, chosen once, here."""
    if sys.platform == "win32":
        from app.agent.listener_windows import PipeListener

        return PipeListener()
    else:
        from app.agent.listener_unix import UnixListener

        return UnixListener()


@dataclass
class Agent:
    """The agent's parts: what the headless agent serves and what the tray also shows."""

    server: IPCServer
    service: Service
    broker: Broker
    logins: Logins
    store: StoreChoice


def agent(
    store: SecretStore | None = None,
    default_browser: Callable[[], str] | None = None,
    store_kind: str | None = None,
) -> Agent:
    """Broker, logins, service and listener, wired (the listener is not open yet).

    ``store`` (tests) stands for the keyring; otherwise ``store_kind`` or the setting picks
    where tokens live. Stored credentials always use the keyring: they must persist.
    ``default_browser`` gives the browser command for identities that name none (a setting).
    """
    from app.kubeconfig.uses import contexts_by_identity

    tokens = StoreChoice(store, choice.KEYRING, None) if store else token_store(store_kind)

    def browser(command: str | None) -> Browser:
        return Browser(command or (default_browser() if default_browser else None) or None)

    stored = stored_credentials(store)
    registry = Registry(
        os.path.join(paths.config_dir(), "identities.json"),
        reserved=lambda: [s.name for s in stored.list()],
    )
    logins = Logins(tokens.store, registry, clock=utcnow, browser=browser)
    logins.notice = tokens.notice
    threading.Thread(target=logins.load_known, name="load-identities", daemon=True).start()
    broker = Broker(
        stored, registry, logins=logins, contexts=contexts_by_identity, consent=remote_hosts()
    )
    lst = listener()
    service = Service(broker, clock=utcnow, socket=lst.address)
    service.facts = {"store": tokens.kind, "store_notice": tokens.notice}
    return Agent(IPCServer(lst, service), service, broker, logins, tokens)
