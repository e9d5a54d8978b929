"""Between the Qt-free broker and the widgets: events in, actions out, no widget code.

Logins call the observer methods from worker threads; they only emit signals, which Qt
delivers on the GUI thread. Actions that block (a login, a logout, a discovery probe) run on
worker threads and report back through signals. Never touch a widget from here.
"""

import contextlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from PySide6.QtCore import QFileSystemWatcher, QObject, QTimer, Signal

from app import compose
from app.broker.logins import Login, Silent
from app.compose import Core
from app.errors import AppError
from app.model import CallRecord, ContextUse, Decision, IdentityStatus, Question, RemoteHost
from app.settings import Settings

PROMPT_TIMEOUT = 300.0
CHANGES_COALESCE_MS = 500
"""The core's changes within this many milliseconds make one look at its status: a kubectl
loop (every call is a change) costs the tray two looks a second at most, as the old
once-a-second clock did, and nothing when idle."""
DIALOG_CA_HINT = (
    "choose the CA certificate that signed the provider's certificate as Provider CA file"
)
DIALOG_CLUSTER_CA_HINT = (
    "choose the CA certificate that signed the API server's certificate as Cluster CA file "
    "(the cluster's administrators have it; a kubeconfig that works holds it as "
    "certificate-authority-data), then add again"
)


@dataclass(frozen=True)
class LoginFacts:
    """What a login's dialog says about it: whose login, at which provider, asked by whom."""

    name: str
    provider: str
    """The provider's host (the issuer's), or "" when unknown."""
    asked_by: str


@dataclass(frozen=True)
class Added:
    """What Add cluster wrote, for its dialog."""

    context: str
    files: tuple[str, ...]
    identity: str
    """The identity the context logs in as, now known to kubetray ("" if none)."""
    unchecked: str = ""
    """Why the API server's certificate could not be checked, with what to do ("" if it was)."""


class _Answer:
    """A prompt's answer, handed from the GUI thread to the waiting login thread."""

    def __init__(self) -> None:
        self.value: str | None = None
        self.ready = threading.Event()


class DesktopConversation:
    """The app as a participant of every login: it shows progress and answers prompts."""

    interactive = True
    visible = True

    def __init__(self, controller: "TrayController", name: str, origin: str | None = None) -> None:
        self._controller = controller
        self._name = name
        self._origin = origin
        """The SSH host whose kubectl asked: every line says so (the browser opens here)."""

    def tell(self, text: str) -> None:
        if self._origin:
            text = f"{text} (asked from {self._origin}, over SSH)"
        self._controller.progress.emit(self._name, text)

    def keepalive(self) -> None:
        pass

    def device_code(self, user_code: str, uri: str) -> None:
        self._controller.device_code.emit(self._name, user_code, uri)

    def ask(self, text: str, secret: bool) -> str | None:
        answer = _Answer()
        self._controller.prompt.emit(self._name, text, secret, answer)
        answer.ready.wait(PROMPT_TIMEOUT)
        return answer.value


class WaitingConversation(Silent):
    """The menu's own wait for a login: silent, because the app already takes part in every
    login (login_started) and shows its progress once."""

    visible = True
    asked_by = "you, from kubetray"
    """What the login's dialogs say started it."""


class TrayController(QObject):
    """The app's model: broker state for the views, the user's actions for the broker."""

    changed = Signal()
    started_login = Signal(str)
    finished_login = Signal(str, str)  # name, error ("" when it worked)
    needs_login = Signal(str, str)  # name, reason
    progress = Signal(str, str)  # name, text
    device_code = Signal(str, str, str)  # name, user code, verification URI
    prompt = Signal(str, str, bool, object)  # name, text, secret, _Answer
    notify = Signal(str, str, str, str)  # kind, identity name, title, text
    probed = Signal(object)  # Metadata or AppError
    cluster_added = Signal(object)  # Added or AppError
    consent_asked = Signal(object)  # consent.Question: an SSH host's first request
    switch_checked = Signal(str, object)  # name, whether the provider can offer another account
    _begun = Signal(str, bool)  # name, started by a program (kubectl), not by a person
    _ended = Signal(str, str, bool)  # name, error, cancelled (by a person or by Quit)
    _refresh_refused = Signal(str, str)  # name, why
    _core_changed = Signal()  # from any thread: the core's changes.tell()

    def __init__(self, core: Core, settings: Settings, clock: Callable[[], datetime]) -> None:
        super().__init__()
        self.broker = broker = core.broker
        self.logins = logins = core.logins
        self.account = core.account
        self.settings = settings
        self.clock = clock
        self.store_notice: str | None = None
        """Shown in the menu when tokens will not outlive the app (no OS keyring)."""
        self._warned_expiring: set[tuple[str, str]] = set()
        self._kept: dict[str, str] = {}
        """A password typed with the username in one dialog, for the login's next prompt."""
        logins.desktop = True
        self.apply_settings()
        logins.observers.append(self)
        if broker.consent is not None:
            broker.consent.ask = self.consent_asked.emit  # the person decides about SSH hosts
        self._waiting_untold: set[str] = set()
        self._required_told: set[str] = set()
        self._cancelled_by_person: set[str] = set()
        self._refresh_told: set[str] = set()
        self._begun.connect(self._on_started)
        self._ended.connect(self._on_finished)
        self.needs_login.connect(self._on_required)
        self.progress.connect(self._on_progress)
        self.finished_login.connect(self._forget_login)
        self.device_code.connect(self._on_device_code)
        self.prompt.connect(self._on_prompt)  # before the view's: it opens a modal dialog
        self._refresh_refused.connect(self._on_refresh_refused)
        # What the core says changed reaches the views as one `changed` per burst, on the GUI
        # thread (a kubectl loop tells it tens of times a second).
        self._soon = QTimer(self)
        self._soon.setSingleShot(True)
        self._soon.setInterval(CHANGES_COALESCE_MS)
        self._soon.timeout.connect(self.changed.emit)
        self._core_changed.connect(self._changed_soon)
        self._listener = self._core_changed.emit
        logins.changes.listen(self._listener)
        self._watcher = QFileSystemWatcher(self)
        self._watched: list[str] = []
        self._watcher.fileChanged.connect(self._file_changed)
        self._watcher.directoryChanged.connect(self._file_changed)
        self._watch_files()

    def _watch_files(self) -> None:
        """What other processes write and the views show: the stored credentials' and the
        identities' indexes, and kubectl's kubeconfig files (a context added or removed). Their
        directories too: a file written whole and renamed into place leaves a file's watch."""
        from app.kubeconfig.view import default_paths

        files = [os.path.abspath(f) for f in (*self.broker.files(), *default_paths())]
        folders = {os.path.dirname(f) for f in files}
        self._watched = files
        paths = [p for p in (*folders, *files) if os.path.exists(p)]
        if paths:
            self._watcher.addPaths(paths)

    def _file_changed(self, _path: str) -> None:
        gone = [f for f in self._watched if f not in self._watcher.files() and os.path.isfile(f)]
        if gone:  # replaced: watched again
            self._watcher.addPaths(gone)
        self._changed_soon()

    def _changed_soon(self) -> None:
        if not self._soon.isActive():
            self._soon.start()

    def apply_settings(self) -> None:
        """Make the settings take effect (after loading, and after the Settings window)."""
        self.logins.margin = timedelta(seconds=max(30, self.settings.refresh_margin_seconds))

    def detach(self) -> None:
        """Stop observing the logins (the app is closing)."""
        if self in self.logins.observers:
            self.logins.observers.remove(self)
        self.logins.changes.ignore(self._listener)
        self._soon.stop()
        self.logins.desktop = False
        if self.broker.consent is not None:
            self.broker.consent.ask = None

    # -- LoginObserver (worker threads) -------------------------------------------------------

    def login_started(self, login: Login) -> None:
        login.join(DesktopConversation(self, login.name, login.origin))
        self._begun.emit(login.name, not login.explicit)
        self.started_login.emit(login.name)

    def login_finished(self, login: Login) -> None:
        error = login.error.one_line() if login.error else ""
        self.finished_login.emit(login.name, error)
        self._ended.emit(login.name, error, login.cancelled.is_set())  # a person's, or Quit

    def login_required(self, name: str, reason: str) -> None:
        self.needs_login.emit(name, reason)

    def refresh_failed(self, name: str, reason: str, final: bool) -> None:
        if final:
            self._refresh_refused.emit(name, reason)

    # -- notifications (GUI thread): one per event, none for what the person did -------------

    def _on_started(self, name: str, by_program: bool) -> None:
        self._required_told.discard(name)
        self._cancelled_by_person.discard(name)
        if by_program:
            self._waiting_untold.add(name)  # said once, when it is clear how to log in

    def _on_finished(self, name: str, error: str, cancelled: bool) -> None:
        self.changed.emit()
        self._waiting_untold.discard(name)
        if cancelled:
            self._cancelled_by_person.add(name)  # kubectl's retries hear it; the person knows
        elif not error:
            self._refresh_told.discard(name)
        elif self.settings.notify_failures:
            self.notify.emit("failure", name, f"Login to {name} failed", error)

    def _in_flight(self, name: str) -> Login | None:
        return next((lg for lg in self.logins.in_flight() if lg.name == name), None)

    def logging_in(self, name: str) -> bool:
        """Whether a login to ``name`` is in flight."""
        return self._in_flight(name) is not None

    def _on_progress(self, name: str, text: str) -> None:
        login = self._in_flight(name)
        if login is None:
            return
        if text == login.browser_error:
            self._waiting_untold.discard(name)  # this one says kubectl waits, too
            if self.settings.notify_failures:
                self.notify.emit(
                    "browser",
                    name,
                    f"The browser did not open for {name}",
                    "Open the login page, or copy the link into a browser."
                    + (f" ({login.browser_why})" if login.browser_why else ""),
                )
        elif login.url and not login.device and text.startswith("Waiting for the login"):
            self._tell_waiting(name, "Log in in the browser window that opened.")
        elif login.url and not login.device and text.startswith("Open this URL"):
            self._tell_waiting(name, "Open the login page to log in.")

    def _on_device_code(self, name: str, code: str, uri: str) -> None:
        host = urlsplit(uri).netloc or uri
        self._tell_waiting(name, f"Enter the code {code} at {host}.")

    def _on_prompt(self, name: str, text: str, _secret: bool, _answer: object) -> None:
        self._tell_waiting(name, f"kubetray asks: {text.strip()}")

    def _tell_waiting(self, name: str, how: str) -> None:
        """kubectl started this login (not the person, in the app): say so once, and how."""
        if name not in self._waiting_untold:
            return
        self._waiting_untold.discard(name)
        if self.settings.notify_login_needed:
            self.notify.emit("waiting", name, f"kubectl needs you to log in to {name}", how)

    def _on_required(self, name: str, reason: str) -> None:
        """A blocked identity was asked for again (each kubectl retry): once per block, and not
        at all when the block is the person's own cancel."""
        if name in self._cancelled_by_person or name in self._required_told:
            return
        self._required_told.add(name)
        if self.settings.notify_login_needed:
            self.notify.emit("login", name, f"kubectl needs you to log in to {name}", reason)

    def _on_refresh_refused(self, name: str, reason: str) -> None:
        if name in self._refresh_told:
            return
        self._refresh_told.add(name)
        if self.settings.notify_failures:
            self.notify.emit(
                "refresh",
                name,
                f"{name} needs a new login",
                f"The provider refused to refresh it ({reason}).",
            )

    def login_stage(self, name: str) -> str:
        """Where the login in flight for ``name`` stands, in a few words (the tray's line)."""
        login = self._in_flight(name)
        if login is None:
            return "logging in"
        if login.device:
            return f"enter code {login.device[0]}"
        if login.browser_error:
            return "the browser did not open"
        if login.url:
            return "waiting for browser"
        return "logging in"

    def login_link(self, name: str) -> str | None:
        """Where the person logs in for the login in flight: the page or the device URL."""
        login = self._in_flight(name)
        if login is None:
            return None
        return login.device[1] if login.device else login.url

    def check_expiring(self) -> None:
        """Warn once per token when it expires within 10 minutes and cannot refresh."""
        if not self.settings.notify_expiring:
            return
        for name, expires in self.logins.expiring(self.clock(), timedelta(minutes=10)):
            key = (name, expires.isoformat())
            if key not in self._warned_expiring:
                self._warned_expiring.add(key)
                left = (expires - self.clock()).total_seconds()
                self.notify.emit(
                    "expiring",
                    name,
                    f"{name} expires in {int(left // 60)} min",
                    "It cannot refresh: log in again to keep working.",
                )

    # -- actions (start on the GUI thread, run on workers) --------------------------------------

    def identities(self) -> list[IdentityStatus]:
        """Every identity with its state, as the views show them."""
        return self.broker.status()

    def contexts(self) -> list[ContextUse]:
        """Every context of kubectl's view (KUBECONFIG), kubetray's or not."""
        from app.kubeconfig.uses import all_contexts  # yaml: once, then cached per file stamp

        return all_contexts(None)

    def helper_contexts(self) -> set[str]:
        """The contexts whose user runs kubetray-exec (in use or not yet)."""
        from app.kubeconfig.uses import contexts_by_identity

        return {u.context for uses in contexts_by_identity(None).values() for u in uses}

    def calls(self, limit: int) -> list[CallRecord]:
        """The most recent kubetray-exec calls, newest first."""
        return self.broker.calls(limit)

    def counts(self) -> tuple[int, int]:
        """Calls recorded: (succeeded, failed)."""
        return self.broker.counts()

    def _run(self, name: str, work: Callable[[], object]) -> None:
        def target() -> None:
            try:
                work()
            except AppError:
                pass  # login_finished has reported it
            finally:
                self.changed.emit()

        threading.Thread(target=target, name=name, daemon=True).start()

    def log_in(self, name: str, again: bool = False) -> None:
        conv = WaitingConversation()
        self._run(f"login-{name}", lambda: self.account.log_in(conv, name, force=again))

    def switch_account(self, name: str) -> None:
        """Log in again, asking the provider to let the person pick another account."""
        conv = WaitingConversation()
        self._run(f"login-{name}", lambda: self.account.switch_account(name, conv))

    def log_in_context(self, context: str) -> None:
        """Log in as the identity a kubetray context names, one kubectl has not used yet (it
        becomes known to kubetray, as at kubectl's first call)."""
        from app.kubeconfig.view import default_paths
        from app.usecases import setup_cluster

        conv = WaitingConversation()

        def work() -> None:
            args = setup_cluster.identity_args(context, default_paths())
            name = self.account.register(args)
            self.changed.emit()
            self.account.log_in(conv, name)

        self._run(f"login-{context}", work)

    def check_switch_account(self, name: str) -> None:
        """Ask the provider whether it can offer another account (its discovery, on a worker);
        ``switch_checked`` carries True, False, or None when it could not be asked."""

        def work() -> None:
            try:
                self.switch_checked.emit(name, self.account.can_pick_account(name))
            except AppError:
                self.switch_checked.emit(name, None)

        threading.Thread(target=work, name=f"switch-{name}", daemon=True).start()

    def open_login_page(self, name: str) -> bool:
        """Open the login in flight's page (or the device code's page) with the browser the
        person chose (Settings, KUBETRAY_BROWSER, or the identity's own), not xdg-open's.
        False when there is no login in flight or the browser could not be started."""
        login = self._in_flight(name)
        link = self.login_link(name)
        if login is None or not link:
            return False
        return login.open_again(link)

    def browser_problem(self, name: str) -> str | None:
        """Why the browser did not open for the login in flight, if it did not."""
        login = self._in_flight(name)
        return login.browser_error if login is not None else None

    def login_facts(self, name: str) -> LoginFacts:
        """Whose login asks, at which provider, and who started it (for its dialogs)."""
        status = next((i for i in self.identities() if i.name == name), None)
        issuer = status.issuer if status is not None else None
        provider = (urlsplit(issuer).netloc if issuer else "") or ""
        login = self._in_flight(name)
        if login is not None and login.origin:
            asked_by = f"kubectl on {login.origin} (over SSH)"
        elif login is not None and login.asked_by:
            asked_by = login.asked_by
        elif login is not None and login.explicit:
            asked_by = "kubetray login"
        else:
            asked_by = "kubectl, through kubetray-exec"
        return LoginFacts(name, provider, asked_by)

    def keep_answer(self, name: str, answer: str) -> None:
        """Keep the password typed beside the username for the login's "Password" prompt."""
        self._kept[name] = answer

    def kept_answer(self, name: str, text: str, secret: bool) -> str | None:
        """The kept password, when ``text`` is the login's password prompt (handed out once)."""
        if secret and text.strip().lower().startswith("password"):
            return self._kept.pop(name, None)
        return None

    def _forget_login(self, name: str, _error: str) -> None:
        self._kept.pop(name, None)

    def answer_consent(self, question: Question, decision: Decision) -> None:
        """The person's answer to an SSH host's request (the waiting request goes on)."""
        question.answer(decision)
        self.changed.emit()

    def remote_hosts(self) -> list[RemoteHost]:
        """SSH hosts decided about or seen, for Settings."""
        return self.broker.consent.hosts() if self.broker.consent else []

    def decide_remote(self, host: str, action: str, identity: str | None = None) -> None:
        """Settings: allow IDENTITY to HOST always, deny HOST, or forget the decision about
        it or one of its identities (ask again)."""
        consent = self.broker.consent
        if consent is None:
            return
        if action == "allow" and identity:
            known = self.broker.registry.find(identity)
            consent.allow(host, identity, known.identity.key if known else None)
        elif action == "deny":
            consent.deny(host)
        elif action == "forget":
            consent.forget(host, identity)

    def remove(self, name: str) -> None:
        """Log out of ``name`` and remove it from kubetray (kubectl's next use brings it back)."""
        self._run(f"forget-{name}", lambda: self.account.forget(name))

    def log_in_to_all(self) -> None:
        for name in self.logins.stale(self.clock()):
            self.log_in(name)

    def log_out(self, name: str) -> None:
        self._run(f"logout-{name}", lambda: self.account.log_out(name))

    def cancel(self, name: str) -> None:
        with contextlib.suppress(AppError):  # it ended meanwhile: nothing to cancel
            self.account.cancel(name)

    def issuer_problem(self, issuer: str) -> str | None:
        """What is wrong with an issuer URL as typed (None: worth asking the provider)."""
        from app.usecases import setup_cluster

        return setup_cluster.issuer_problem(issuer)

    def server_problem(self, server: str) -> str | None:
        """What is wrong with an API server URL as typed (None: worth a handshake)."""
        from app.usecases import setup_cluster

        return setup_cluster.server_problem(server)

    def default_kubeconfig(self) -> str:
        """Where kubectl would write a new entry."""
        from app.kubeconfig import view  # yaml: only when someone adds a cluster

        return view.default_path()

    def add_cluster(
        self,
        *,
        kubeconfig: str,
        context: str,
        server: str,
        ca_data: str | None,
        issuer: str,
        client_id: str,
        scopes: tuple[str, ...],
        provider_ca_data: str | None = None,
        listen_addresses: tuple[str, ...] = (),
    ) -> None:
        """Write a cluster, an OIDC user and a context; ``cluster_added`` carries the result."""
        from app import installation
        from app.kubeconfig.setup import Setup
        from app.usecases import setup_cluster

        request = Setup(
            issuer=issuer,
            client_id=client_id,
            helper=installation.helper_path(),
            scopes=scopes,
            context=context,
            server=server,
            ca_data=ca_data,
            provider_ca_data=provider_ca_data,
            listen_addresses=listen_addresses,
        )

        def work() -> None:
            try:
                tls = setup_cluster.check_server(
                    context, server, ca_data, kubeconfig, DIALOG_CLUSTER_CA_HINT
                )
                backups = compose.kubeconfig_backups()
                done = setup_cluster.run(request, [kubeconfig], backups, "Add cluster")
                args = setup_cluster.identity_args(done.context, [kubeconfig])
                name = self.account.register(args) if args else ""
                unchecked = "" if tls.verdict == "pass" else tls.detail
                if unchecked and tls.remedy:
                    unchecked += f" ({tls.remedy})"
                files = tuple(str(w.path) for w in done.written)
                self.cluster_added.emit(Added(done.context, files, name, unchecked))
                self.changed.emit()
            except AppError as e:
                self.cluster_added.emit(e)
            except OSError as e:
                self.cluster_added.emit(AppError(f"cannot write {kubeconfig}: {e.strerror}"))

        threading.Thread(target=work, name="add-cluster", daemon=True).start()

    def probe(self, issuer: str, client_id: str, provider_ca_data: str | None = None) -> None:
        """Fetch the provider's discovery document; ``probed`` carries the result."""
        from app.usecases import setup_cluster

        def work() -> None:
            try:
                self.probed.emit(
                    setup_cluster.probe(issuer, client_id, provider_ca_data, DIALOG_CA_HINT)
                )
            except AppError as e:
                self.probed.emit(e)

        threading.Thread(target=work, name="probe", daemon=True).start()
