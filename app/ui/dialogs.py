"""Dialogs: a login's prompt, an SSH host's request, Add cluster, Settings."""

import base64
import html
from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app import autostart, installation
from app.errors import AppError
from app.model import Decision, Question
from app.oidc.settings import Metadata
from app.ui import icons
from app.ui.controller import Added, LoginFacts, TrayController
from app.ui.text import breakable, capability_words, elide, kubectl_line


def ask(parent: QWidget | None, name: str, text: str, secret: bool) -> str | None:
    """A login's question (username, password, pasted code) in a dialog."""
    mode = QLineEdit.EchoMode.Password if secret else QLineEdit.EchoMode.Normal
    value, ok = QInputDialog.getText(parent, f"kubetray: log in to {name}", text, mode)
    return value if ok else None


def ask_login(controller: TrayController, name: str, text: str, secret: bool) -> str | None:
    """A login's prompt. The provider's password login asks "Username: " then "Password: ":
    one dialog takes both, and its password answers the second prompt."""
    kept = controller.kept_answer(name, text, secret)
    if kept is not None:
        return kept
    username = not secret and text.strip().lower().startswith("username")
    dialog = LoginDialog(controller.login_facts(name), text, secret, with_password=username)
    bring_forward(dialog)
    if dialog.exec() != QDialog.DialogCode.Accepted:
        return None
    if username:
        controller.keep_answer(name, dialog.password.text())
    return dialog.answer.text()


def bring_forward(dialog: QWidget) -> None:
    dialog.show()
    dialog.raise_()
    dialog.activateWindow()


class LoginDialog(QDialog):
    """A login's question in one dialog that says whose login it is, at which provider, and
    who asked: username and password together for a password login."""

    def __init__(
        self,
        facts: LoginFacts,
        text: str,
        secret: bool,
        with_password: bool = False,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"kubetray: log in to {facts.name}")
        self.setWindowIcon(icons.state_icon(icons.LOGIN))
        at = f" at <b>{html.escape(breakable(facts.provider))}</b>" if facts.provider else ""
        self.intro = QLabel(
            f"Log in to <b>{html.escape(breakable(facts.name))}</b>{at}.<br>"
            f"Asked by {html.escape(breakable(facts.asked_by))}."
        )
        self.intro.setWordWrap(True)
        form = QFormLayout()
        self.answer = QLineEdit()
        if secret:
            self.answer.setEchoMode(QLineEdit.EchoMode.Password)
        form.addRow(text.strip().rstrip(":") or "Answer", self.answer)
        self.password = QLineEdit()
        self.password.setEchoMode(QLineEdit.EchoMode.Password)
        if with_password:
            form.addRow("Password", self.password)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Log in")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.intro)
        layout.addLayout(form)
        layout.addWidget(buttons)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.setMinimumWidth(440)
        self.answer.setFocus()


def shown(name: str) -> str:
    """A host or identity as a consent question shows it (a remote host chooses how long a
    new identity's name is: the dialog stays a dialog)."""
    return breakable(elide(name, 120))


def scope(question: Question) -> str:
    """What each answer grants, as the consent dialog says it."""
    host, identity = shown(question.host), shown(question.identity)
    return (
        f"Allow once: this request only. For this session: {host} may have tokens as "
        f"{identity} until kubetray stops, without asking. Always: the same, kept. Either way "
        f"{host} is asked about any other identity. Deny: {host} is refused, every identity, "
        "until kubetray stops."
    )


def consent_key(question: Question) -> str:
    """The app's handle of a consent question: one per identity per host."""
    return f"{question.host} as {question.identity}"


class ConsentDialog(QDialog):
    """An SSH host's first request for an identity: allow once, for this session, always, or
    deny (ssh-add -c).

    It closes itself when the question is settled elsewhere (timed out, or denied from the
    command line).
    """

    CHOICES = (
        ("Allow once", Decision.ONCE),
        ("Allow for this session", Decision.SESSION),
        ("Always allow", Decision.ALWAYS),
        ("Deny", Decision.DENY),
    )

    def __init__(
        self, controller: TrayController, question: Question, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle(
            f"kubetray: {elide(question.host, 60)} asks for a token as "
            f"{elide(question.identity, 60)}"
        )
        self._controller = controller
        self.question = question
        text = QLabel(
            f"<b>{html.escape(shown(question.host))}</b> wants a token"
            + (f" for <b>{html.escape(shown(question.cluster))}</b>" if question.cluster else "")
            + f" as <b>{html.escape(shown(question.identity))}</b>"
            + (" (a new identity: allowing it lets the request make it)" if question.new else "")
            + ".<br>kubectl there is waiting, through your SSH session's forward.<br><small>"
            + html.escape(scope(question))
            + "</small>"
        )
        text.setWordWrap(True)
        buttons = QDialogButtonBox()
        self.buttons: dict[str, QPushButton] = {}
        for label, decision in self.CHOICES:
            role = (
                QDialogButtonBox.ButtonRole.RejectRole
                if decision is Decision.DENY
                else QDialogButtonBox.ButtonRole.AcceptRole
            )
            button = buttons.addButton(label, role)
            button.clicked.connect(lambda _=False, d=decision: self._answer(d))
            self.buttons[label] = button
        layout = QVBoxLayout(self)
        layout.addWidget(text)
        layout.addWidget(buttons)
        self._watch = QTimer(self)
        self._watch.timeout.connect(self._settled_elsewhere)
        self._watch.start(250)

    def _answer(self, decision: Decision) -> None:
        self._controller.answer_consent(self.question, decision)
        self._watch.stop()
        self.accept()

    def reject(self) -> None:  # Escape or the window's close button: no answer is a Deny
        self._answer(Decision.DENY)

    def _settled_elsewhere(self) -> None:
        if self.question.answered.is_set():
            self._watch.stop()
            self.done(QDialog.DialogCode.Rejected)


class AddClusterDialog(QDialog):
    """Probe an OpenID provider, then write a kubeconfig user and context running kubetray-exec."""

    def __init__(self, controller: TrayController, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("kubetray: add cluster")
        self.setWindowIcon(icons.state_icon(icons.OK))
        self._controller = controller
        self.metadata: Metadata | None = None
        self.identity = ""
        """The identity the written context logs in as (known to kubetray once written)."""
        self.done_line = ""
        """The kubectl line to try, once the cluster is written."""
        form = QFormLayout()
        self.context = QLineEdit()
        self.server = QLineEdit()
        self.server.setPlaceholderText("https://api.cluster.example:6443")
        self.ca_file = QLineEdit()
        self.ca_file.setPlaceholderText("unless its certificate is publicly trusted")
        browse = QPushButton("…")
        browse.clicked.connect(self._pick_ca)
        ca_row = QHBoxLayout()
        ca_row.addWidget(self.ca_file)
        ca_row.addWidget(browse)
        self.issuer = QLineEdit()
        self.issuer.setPlaceholderText("https://idp.example/realms/k8s")
        self.client_id = QLineEdit()
        self.provider_ca = QLineEdit()
        self.provider_ca.setPlaceholderText("only for a provider with a private CA")
        self.listen = QLineEdit()
        self.listen.setPlaceholderText("e.g. 127.0.0.1:8000, only if the provider wants it exact")
        self.scopes = QLineEdit("email groups")
        self.kubeconfig = QLineEdit(controller.default_kubeconfig())
        form.addRow("Context name", self.context)
        form.addRow("API server", self.server)
        form.addRow("Cluster CA file", ca_row)
        form.addRow("Issuer URL", self.issuer)
        form.addRow("Client ID", self.client_id)
        form.addRow("Provider CA file", self.provider_ca)
        form.addRow("Local port for the browser login", self.listen)
        form.addRow("Extra scopes", self.scopes)
        form.addRow("Kubeconfig", self.kubeconfig)
        self.probe_button = QPushButton("Check provider")
        self.probe_button.clicked.connect(self.probe)
        self.found = QLabel("")
        self.found.setWordWrap(True)
        self.found.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.button(QDialogButtonBox.StandardButton.Save).setText("Add to kubeconfig")
        self.buttons.button(QDialogButtonBox.StandardButton.Save).setEnabled(False)
        self.buttons.accepted.connect(self.save)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.probe_button)
        layout.addWidget(self.found, 1)
        layout.addWidget(self.buttons)
        # Room for URLs and a provider's error, and resizable for longer ones.
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.setSizeGripEnabled(True)
        self.setMinimumWidth(620)
        controller.probed.connect(self._show_probe)
        controller.cluster_added.connect(self._added)

    def _pick_ca(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Cluster CA certificate")
        if path:
            self.ca_file.setText(path)

    def probe(self) -> None:
        problem = self._controller.issuer_problem(self.issuer.text())
        if problem:
            self.found.setText(f"<b>{html.escape(problem, quote=False)}</b>")
            self.issuer.setFocus()
            return
        self.found.setText("Asking the provider…")
        self.probe_button.setEnabled(False)
        ok, ca = self._read_b64(self.provider_ca, "provider CA")
        if not ok:
            self.probe_button.setEnabled(True)
            return
        self._controller.probe(self.issuer.text().strip(), self.client_id.text().strip(), ca)

    def _show_probe(self, result: object) -> None:
        self.probe_button.setEnabled(True)
        if isinstance(result, AppError):
            self.metadata = None
            self.found.setText(_error_html(result))
            self.buttons.button(QDialogButtonBox.StandardButton.Save).setEnabled(False)
            return
        assert isinstance(result, Metadata)
        self.metadata = result
        marks = {"yes": "✔", "no": "✘", "unknown": "?"}
        rows = "".join(
            f"<li>{marks[c.state]} {capability_words(c.name)}"
            f"{f' ({c.detail})' if c.detail else ''}"
            f"{' (not listed in discovery)' if c.state == 'unknown' else ''}</li>"
            for c in result.capabilities()
        )
        self.found.setText(f"<b>{result.issuer}</b> supports:<ul>{rows}</ul>")
        self.buttons.button(QDialogButtonBox.StandardButton.Save).setEnabled(True)

    def scopes_to_request(self) -> tuple[str, ...]:
        """The form's scopes, plus offline_access when the provider offers it."""
        scopes = self.scopes.text().replace(",", " ").split()
        if self.metadata and "offline_access" in self.metadata.scopes_supported:
            scopes.append("offline_access")
        return tuple(scopes)

    def _read_b64(self, field: QLineEdit, what: str) -> tuple[bool, str | None]:
        """(readable, the named file as base64 or None when the field is empty); says why not."""
        path = field.text().strip()
        if not path:
            return True, None
        try:
            return True, base64.b64encode(Path(path).read_bytes()).decode()
        except OSError as e:
            self.found.setText(f"<b>Cannot read the {what} file {path}:</b> {e.strerror}")
            return False, None

    def save(self) -> None:
        problem = self._controller.server_problem(self.server.text()) or (
            self._controller.issuer_problem(self.issuer.text())
        )
        if problem:
            self.found.setText(f"<b>{html.escape(problem, quote=False)}</b>")
            return
        ok, ca_data = self._read_b64(self.ca_file, "cluster CA")
        ok2, provider_ca = self._read_b64(self.provider_ca, "provider CA")
        if not (ok and ok2):
            return
        self.buttons.setEnabled(False)
        self._controller.add_cluster(
            kubeconfig=self.kubeconfig.text().strip(),
            context=self.context.text().strip() or self.client_id.text().strip(),
            server=self.server.text().strip(),
            ca_data=ca_data,
            issuer=self.issuer.text().strip(),
            client_id=self.client_id.text().strip(),
            scopes=self.scopes_to_request(),
            provider_ca_data=provider_ca,
            listen_addresses=tuple(self.listen.text().replace(",", " ").split()),
        )

    def _added(self, result: object) -> None:
        self.buttons.setEnabled(True)
        if isinstance(result, AppError):
            self.found.setText("<b>Not added.</b> " + _error_html(result))
            return
        assert isinstance(result, Added)
        files = ", ".join(result.files)
        line = kubectl_line(result.context)
        self.identity = result.identity
        said = f"<b>Added context {html.escape(result.context)}</b> to {html.escape(files)}."
        if result.unchecked:
            # Not verified (unreachable, or no TLS): say so rather than promise that it works.
            said += "<br>Could not check the API server: " + html.escape(result.unchecked)
        if result.identity:
            said += (
                f"<br>Log in to <b>{html.escape(result.identity)}</b> now, then try: "
                f"<code>{html.escape(line)}</code>"
            )
        else:
            said += f"<br>Try it: <code>{html.escape(line)}</code>"
        self.done_line = line
        self.found.setText(said)
        self.buttons.button(QDialogButtonBox.StandardButton.Save).hide()
        self.buttons.button(QDialogButtonBox.StandardButton.Cancel).setText("Close")
        if result.identity:
            self.login_button = self.buttons.addButton(
                "Log in now", QDialogButtonBox.ButtonRole.ActionRole
            )
            self.login_button.clicked.connect(self._log_in_now)
            self.login_button.setDefault(True)

    def _log_in_now(self) -> None:
        self._controller.log_in(self.identity)
        self.accept()


def _wrapped(text: str) -> QLabel:
    """A label that wraps instead of widening (or cutting off) its dialog."""
    label = QLabel(text)
    label.setWordWrap(True)
    return label


def _error_html(error: AppError) -> str:
    """An error as the dialogs show it: the sentence, then what to do (long words break)."""
    text = f"<b>{html.escape(breakable(error.message), quote=False)}</b>"
    if error.hint:
        text += f"<br>{html.escape(breakable(error.hint), quote=False)}"
    return text


class SettingsDialog(QDialog):
    """Start at login, browser command, notifications."""

    def __init__(self, controller: TrayController, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("kubetray settings")
        self.setWindowIcon(icons.state_icon(icons.OK))
        self._controller = controller
        s = controller.settings
        form = QFormLayout()
        self.start_at_login = QCheckBox("Start kubetray when I log in")
        self.start_at_login.setChecked(s.start_at_login)
        self.browser = QLineEdit(s.browser_command)
        self.browser.setPlaceholderText("the desktop's default browser")
        self.margin = QSpinBox()
        self.margin.setRange(30, 3600)
        self.margin.setSuffix(" s")
        self.margin.setValue(s.refresh_margin_seconds)
        self.notify_login = QCheckBox("when kubectl needs me to log in")
        self.notify_login.setChecked(s.notify_login_needed)
        self.notify_expiring = QCheckBox("when a login expires soon and cannot refresh")
        self.notify_expiring.setChecked(s.notify_expiring)
        self.notify_failures = QCheckBox("when a login fails")
        self.notify_failures.setChecked(s.notify_failures)
        form.addRow(self.start_at_login)
        form.addRow("Browser command", self.browser)
        self.margin.setToolTip(
            "kubetray renews a sign-in (with its refresh token) this long before it expires, "
            "so kubectl never waits for it."
        )
        form.addRow(_wrapped("Renew sign-ins this long before they expire"), self.margin)
        form.addRow(QLabel("Notify me:"))
        form.addRow(self.notify_login)
        form.addRow(self.notify_expiring)
        form.addRow(self.notify_failures)
        self.problem = _wrapped("")
        self.problem.hide()
        form.addRow(self.problem)
        form.addRow(
            _wrapped(
                "SSH hosts that ask for tokens through a forward (kubetray ssh), and the "
                "identities each may have. Select an identity to allow it always, a host to "
                "deny it, either to have kubetray ask again:"
            )
        )
        self.remote = QListWidget()
        self.remote.setToolTip("kubetray remote list shows the same; allow, deny or ask again")
        self.remote.itemSelectionChanged.connect(self._update_remote_buttons)
        form.addRow(self.remote)
        remote_buttons = QHBoxLayout()
        self.remote_buttons: list[QPushButton] = []
        for label, action in (("Always allow", "allow"), ("Deny", "deny"), ("Ask again", "forget")):
            button = QPushButton(label)
            button.clicked.connect(lambda _=False, a=action: self._decide(a))
            remote_buttons.addWidget(button)
            self.remote_buttons.append(button)
        remote_buttons.addStretch(1)
        form.addRow(remote_buttons)
        self._fill_remote()
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.save)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(buttons)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.setMinimumWidth(600)

    def _fill_remote(self) -> None:
        self.remote.clear()
        hosts = self._controller.remote_hosts()
        for h in hosts:
            item = QListWidgetItem(f"{h.host}: {h.standing}")
            item.setData(Qt.ItemDataRole.UserRole, (h.host, ""))
            self.remote.addItem(item)
            for name, standing in h.identities:
                item = QListWidgetItem(f"    as {name}: {standing}")
                item.setData(Qt.ItemDataRole.UserRole, (h.host, name))
                self.remote.addItem(item)
        if not hosts:
            item = QListWidgetItem("No SSH host has asked yet.")
            item.setFlags(Qt.ItemFlag.NoItemFlags)
            self.remote.addItem(item)
        self._update_remote_buttons()

    def _update_remote_buttons(self) -> None:
        item = self.remote.currentItem()
        chosen = (
            item is not None and item.isSelected() and bool(item.data(Qt.ItemDataRole.UserRole))
        )
        identity = bool(chosen and item is not None and item.data(Qt.ItemDataRole.UserRole)[1])
        for button in self.remote_buttons:  # "Always allow" needs an identity
            button.setEnabled(chosen and (identity or button is not self.remote_buttons[0]))

    def _decide(self, action: str) -> None:
        item = self.remote.currentItem()
        if item is not None:
            host, identity = item.data(Qt.ItemDataRole.UserRole)
            self._controller.decide_remote(host, action, identity or None)
            self._fill_remote()

    def save(self) -> None:
        s = self._controller.settings
        s.start_at_login = self.start_at_login.isChecked()
        s.browser_command = self.browser.text().strip()
        s.notify_login_needed = self.notify_login.isChecked()
        s.notify_expiring = self.notify_expiring.isChecked()
        s.notify_failures = self.notify_failures.isChecked()
        s.refresh_margin_seconds = self.margin.value()
        try:
            s.save()  # refused over a settings.json it cannot use (edited meanwhile, newer)
        except AppError as e:
            self.problem.setText(_error_html(e))
            self.problem.show()
            return
        self._controller.apply_settings()
        # --at-login: the session starts it, often before the panel: it waits for the tray.
        autostart.set_enabled(s.start_at_login, installation.login_command())
        self.accept()
