"""Build kubetray's parts from settings. Tests build their own with fakes instead."""

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from app import fingerprint
from app.agent.server import IPCServer, Listener
from app.agent.service import Service
from app.broker.broker import Broker, no_contexts, utcnow
from app.broker.consent import Consent
from app.broker.logins import Logins
from app.broker.registry import Registry
from app.model import ContextUse, IdentityStatus, State
from app.oidc.browser import Browser
from app.providers import default as default_providers
from app.static_credentials import StoredCredentials
from app.store import choice, keyring_store
from app.store import journal as journal_file
from app.store.choice import StoreChoice
from app.store.keyring_store import KeyringSecretStore
from app.store.secret_store import SecretStore
from app.usecases.account import Account
from app.usecases.get_credential import BusTaker, GetCredential, no_flag
from exec_helper import paths

if TYPE_CHECKING:
    from app.kubeconfig.backups import Backups
    from app.oidc.client import OIDCClient
    from app.oidc.settings import OIDCSettings
    from app.providers import Providers
    from app.usecases.import_kubelogin import ImportKubelogin
    from app.usecases.secrets import Secrets


def secret_store(timeout: float = keyring_store.TIMEOUT) -> KeyringSecretStore:
    """The OS keyring, with sealed files under the config directory."""
    return KeyringSecretStore(os.path.join(paths.config_dir(), "secrets"), timeout)


def token_store(
    kind: str | None = None, keyring: KeyringSecretStore | None = None
) -> choice.TokenStore:
    """Where the agent keeps login tokens: ``kind``, else the setting (auto by default); an
    ``auto`` choice without a keyring moves to one when a caller brings a session bus."""
    if kind is None:
        from app.settings import Settings

        kind = Settings.load().secret_store
    keyring = keyring or KeyringSecretStore(os.path.join(paths.config_dir(), "secrets"))
    journal = os.path.join(paths.state_dir(), journal_file.NAME)
    return choice.TokenStore(
        choice.choose(kind, keyring), keyring, movable=kind == "auto", journal=journal
    )


def stored_credentials(store: SecretStore | None = None) -> StoredCredentials:
    """Stored credentials on the given store (the OS keyring by default)."""
    return StoredCredentials(
        store or secret_store(), os.path.join(paths.config_dir(), "stored.json")
    )


def kubeconfig_backups() -> "Backups":
    """Backups of kubeconfig files: beside them, or in the keyring when they hold secrets."""
    from app.kubeconfig.backups import Backups

    return Backups(os.path.join(paths.state_dir(), "kubeconfig-backups.json"), secret_store)


def import_kubelogin() -> "ImportKubelogin":
    """kubetray import and its undo, on the record of imports (a journal; the keyring for
    records that hold a secret)."""
    from app import installation
    from app.kubeconfig import records
    from app.usecases.import_kubelogin import ImportKubelogin

    journal = os.path.join(paths.state_dir(), "kubeconfig-imports.json")
    imports = records.ImportRecords(journal, secret_store())
    return ImportKubelogin(imports, kubeconfig_backups(), installation.helper_path())


def secrets() -> "Secrets":
    """kubetray secure and unsecure, on the keyring; a running agent hears of each change."""
    from app import installation
    from app.agent import client
    from app.usecases.secrets import Secrets

    store = secret_store()
    return Secrets(
        store,
        stored_credentials(store),
        kubeconfig_backups(),
        installation.helper_path(),
        client.invalidate,
    )


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
class Core:
    """The Qt-free core, wired: what the agent's service and the tray's controller use."""

    broker: Broker
    logins: Logins
    account: Account
    get_credential: GetCredential

    def start(self) -> None:
        """Start its threads: refresh ahead, and the first read of every identity's tokens."""
        self.logins.start()

    def stop(self) -> None:
        self.logins.stop()


def identities_at_rest() -> list[IdentityStatus]:
    """What kubetray knows while no agent runs (``kubetray status``): the stored credentials
    and the login identities of identities.json, as State.STORED (present; whether tokens
    are held is the agent's to say: the keyring is not read for a status)."""
    stored = stored_credentials().list()
    out = [
        IdentityStatus(
            name=s.name, kind=s.kind, state=State.STORED, expires=s.not_after, subject=s.subject
        )
        for s in stored
    ]
    registry = Registry(
        os.path.join(paths.config_dir(), "identities.json"),
        reserved=lambda: [s.name for s in stored],
    )
    for st in registry.known():
        if st.settings is None:
            continue
        shown = registry.providers.of(st.settings).describe(st.settings, None)
        out.append(
            IdentityStatus(
                name=st.identity.name,
                kind=st.identity.kind,
                state=State.STORED,
                who=shown.who,
                issuer=shown.issuer,
                client_id=shown.client_id,
                details=shown.details,
            )
        )
    return out


def core(
    store: SecretStore,
    stored: StoredCredentials,
    config_dir: str,
    *,
    clock: Callable[[], datetime] = utcnow,
    browser: Callable[[str | None], Browser] = Browser,
    client: "Callable[[OIDCSettings, Callable[[], datetime]], OIDCClient] | None" = None,
    contexts: Callable[[str | None], dict[str, list[ContextUse]]] = no_contexts,
    consent: Consent | None = None,
    kubeconfig_flag: Callable[[int | None], str | None] = no_flag,
    bus: BusTaker | None = None,
    providers: "Providers | None" = None,
) -> Core:
    """Registry, logins, broker and use cases over ``store`` (tokens) and ``stored`` (static
    credentials), with the index in ``config_dir``. Tests pass fakes for the rest (``client``:
    the OIDC engine's client factory, for every provider built on it)."""
    registry = Registry(
        os.path.join(config_dir, "identities.json"),
        reserved=lambda: [s.name for s in stored.list()],
        providers=providers or default_providers(client),
    )
    logins = Logins(store, registry, clock=clock, browser=browser)
    broker = Broker(stored, registry, logins, clock, contexts, consent)
    get = GetCredential(broker, clock, kubeconfig_flag, bus)
    return Core(broker, logins, Account(broker), get)


@dataclass
class Agent:
    """The agent's parts: what the headless agent serves and what the tray also shows."""

    server: IPCServer
    service: Service
    core: Core
    store: choice.TokenStore

    @property
    def broker(self) -> Broker:
        return self.core.broker

    @property
    def logins(self) -> Logins:
        return self.core.logins

    def start(self) -> None:
        """Start the core's threads; the listener is opened by whoever serves it."""
        self.core.start()

    def stop(self) -> None:
        self.core.stop()


def agent(
    store: SecretStore | None = None,
    default_browser: Callable[[], str] | None = None,
    store_kind: str | None = None,
) -> Agent:
    """The core, its service and the listener, wired; nothing runs until ``start()`` and the
    listener is opened.

    ``store`` (tests) stands for the keyring; otherwise ``store_kind`` or the setting picks
    where tokens live. Stored credentials always use the keyring: they must persist.
    ``default_browser`` gives the browser command for identities that name none (a setting).
    """
    from app.agent import peer
    from app.kubeconfig.uses import contexts_by_identity

    if store is not None:
        tokens = choice.TokenStore(StoreChoice(store, choice.KEYRING, None))
        credentials = store
    else:
        keyring = KeyringSecretStore(os.path.join(paths.config_dir(), "secrets"))
        tokens, credentials = token_store(store_kind, keyring), keyring

    def browser(command: str | None) -> Browser:
        return Browser(command or (default_browser() if default_browser else None) or None)

    fingerprint.use(fingerprint.store_source(tokens.get, tokens.set))
    parts = core(
        tokens,
        stored_credentials(credentials),
        paths.config_dir(),
        browser=browser,
        contexts=contexts_by_identity,
        consent=remote_hosts(),
        kubeconfig_flag=peer.kubeconfig_flag,
        bus=tokens,
    )
    parts.logins.notice = tokens.chosen.notice
    tokens.on_move.append(lambda: setattr(parts.logins, "notice", None))
    lst = listener()
    service = Service(parts.broker, parts.get_credential, parts.account, socket=lst.address)
    service.store_facts = tokens.facts
    return Agent(IPCServer(lst, service), service, parts, tokens)
