"""The main window: every kubeconfig context, grouped by the identity that signs it in.

Opened by a left-click on the tray icon, *Open kubetray* in the menu, or a second `kubetray`.
Where there is no tray it *is* the app (``standalone``): every action of the menu is here,
Quit too, and closing it asks whether to keep kubetray running (minimized, in the taskbar or
dock) or to quit. It shows what the controller reports and forwards clicks, like the menu.
It fits a 1280x720 screen whatever it shows: long links are elided (on a line of their own,
never broken mid-way) and long words break.

The rows are a model (app.ui.identity_model) behind a filter: with hundreds of identities the
view lays out only what is on screen, and a tick changes only the rows whose text changed.
"""

import html
from collections.abc import Callable
from datetime import datetime
from urllib.parse import urlsplit

from PySide6.QtCore import QModelIndex, Qt
from PySide6.QtGui import QCloseEvent, QGuiApplication, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from app.model import ContextUse, IdentityStatus, State
from app.ui import icons
from app.ui.controller import TrayController
from app.ui.dialogs import AddClusterDialog, SettingsDialog
from app.ui.identity_model import COLUMNS, KEY, IdentityModel, Row, filter_proxy
from app.ui.text import (
    breakable,
    details,
    elide,
    kubectl_line,
    plural,
    state_line,
    time_left,
    who,
)
from app.ui.tray_host import where_minimized
from app.ui.views import bring_to_front, show_about

OTHER = "Other contexts"
LINK_TEXT = 64
"""Characters of a login link shown in the window (all of it behind the link and its tip)."""


class MainWindow(QWidget):
    """A tree of identities and their contexts, a search field, and the actions on a row."""

    COLUMNS = COLUMNS
    SEARCH_FROM = 8
    """Rows from which the search field is shown."""
    FIT_ROWS = 200
    """Rows whose text sizes the columns: all of 1,000 rows took most of the first open."""

    def __init__(self, controller: TrayController, show_diagnostics: Callable[[], None]) -> None:
        super().__init__()
        self.setWindowTitle("kubetray")
        self._controller = controller
        self._signature: object = None
        self._identities: dict[str, IdentityStatus] = {}
        self._shown: dict[str, tuple[IdentityStatus, str]] = {}
        """What each identity's row was last filled from (its status, its time left)."""
        self.standalone = False
        """No tray: this window is the app (closing it asks)."""
        self.stood_in_at: float | None = None
        """When it came up by itself for a missing tray (time.monotonic), None when the person
        opened it."""
        self.open_login_page_of: Callable[[str], object] = controller.open_login_page
        """Opens a login's page in the chosen browser (the tray app gives its own, which shows
        the link when no browser starts)."""
        layout = QVBoxLayout(self)
        self.summary = QLabel()
        layout.addWidget(self.summary)
        self.search = QLineEdit()
        self.search.setPlaceholderText(
            "Filter by identity, person, issuer, cluster, state… (Ctrl+F)"
        )
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self._filter)
        self.search.hide()
        layout.addWidget(self.search)
        QShortcut(QKeySequence.StandardKey.Find, self, self.focus_search)
        self.model = IdentityModel()
        self.proxy = filter_proxy(self.model)
        self.tree = QTreeView()
        self.tree.setModel(self.proxy)
        self.tree.setUniformRowHeights(True)
        self.tree.setEditTriggers(
            QAbstractItemView.EditTrigger.NoEditTriggers
        )  # no row measured but those on screen
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        header = self.tree.header()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setResizeContentsPrecision(self.FIT_ROWS)
        header.setStretchLastSection(True)
        self.tree.selectionModel().currentChanged.connect(lambda *_: self._update_buttons())
        self.tree.doubleClicked.connect(lambda *_: self.copy_kubectl_line())
        layout.addWidget(self.tree)
        self.detail = QLabel("")
        self.detail.setWordWrap(True)
        self.detail.setTextFormat(Qt.TextFormat.RichText)
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        self.detail.linkActivated.connect(lambda _url: self.open_login_page())
        layout.addWidget(self.detail)
        row = QHBoxLayout()
        self.login_button = QPushButton("Log in")
        self.login_button.clicked.connect(self._log_in)
        self.logout_button = QPushButton("Log out")
        self.logout_button.clicked.connect(lambda: self._on_identity(controller.log_out))
        self.switch_button = QPushButton("Switch account")
        self.switch_button.clicked.connect(lambda: self._on_identity(self.switch_account))
        # While a login runs: the person can finish it elsewhere or stop it.
        self.cancel_button = QPushButton("Cancel login")
        self.cancel_button.clicked.connect(lambda: self._on_identity(controller.cancel))
        self.open_button = QPushButton("Open login page")
        self.open_button.clicked.connect(self.open_login_page)
        self.copy_link_button = QPushButton("Copy link")
        self.copy_link_button.setToolTip("The login page's address, to open in any browser")
        self.copy_link_button.clicked.connect(self.copy_login_link)
        self.copy_button = QPushButton("Copy kubectl line")
        self.copy_button.setToolTip("kubectl --context CONTEXT get ns, to try the context")
        self.copy_button.clicked.connect(self.copy_kubectl_line)
        for button in (
            self.login_button,
            self.logout_button,
            self.switch_button,
            self.cancel_button,
            self.open_button,
            self.copy_link_button,
            self.copy_button,
        ):
            row.addWidget(button)
        row.addStretch(1)
        layout.addLayout(row)
        row2 = QHBoxLayout()
        self.add_button = QPushButton("Add cluster…")
        self.add_button.clicked.connect(self.add_cluster)
        self.settings_button = QPushButton("Settings…")
        self.settings_button.clicked.connect(self.show_settings)
        self.diagnostics_button = QPushButton("Diagnostics")
        self.diagnostics_button.clicked.connect(show_diagnostics)
        self.about_button = QPushButton("About")
        self.about_button.setToolTip("Which kubetray this is: version, build, where it runs from")
        self.about_button.clicked.connect(self.show_about)
        self.about: QMessageBox | None = None
        # Apart from the login buttons: removing is not a slip of the mouse away.
        self.remove_button = QPushButton("Remove identity…")
        self.remove_button.setToolTip(
            "Log out and forget this identity in kubetray (its kubeconfig entries stay)"
        )
        self.remove_button.clicked.connect(self.remove)
        self.all_button = QPushButton("Log in to all")
        self.all_button.setToolTip("Log in to every identity that is signed out")
        self.all_button.clicked.connect(controller.log_in_to_all)
        self.quit_button = QPushButton("Quit kubetray")
        self.quit_button.setToolTip(
            "kubectl then starts the headless agent when it needs a login (no window, no icon)"
        )
        self.quit_button.clicked.connect(self._quit)
        for button in (
            self.all_button,
            self.add_button,
            self.settings_button,
            self.diagnostics_button,
            self.about_button,
        ):
            row2.addWidget(button)
        row2.addStretch(1)
        row2.addWidget(self.remove_button)
        row2.addWidget(self.quit_button)
        layout.addLayout(row2)
        self.store_notice = QLabel("")
        self.store_notice.setWordWrap(True)
        layout.addWidget(self.store_notice)
        self.notice = QLabel("")
        self.notice_about: str | None = None
        """The identity the notice is about, when it stands in for a notification."""
        self.notice.setWordWrap(True)
        self.notice.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.notice)
        self.question: QMessageBox | None = None
        """The open question (remove, switch account), for tests to answer."""
        self.add_dialog: AddClusterDialog | None = None
        self.settings_dialog: SettingsDialog | None = None
        controller.switch_checked.connect(self._switch_checked)
        # A login's link arrives after it started (the device code, the browser's URL):
        # Open login page and Copy link follow it at once, not at the next tick.
        controller.device_code.connect(self._login_moved)
        controller.progress.connect(self._login_moved)
        self.setWindowIcon(icons.app_icon())
        self.resize(900, 480)
        self._update_buttons()

    # -- contents ---------------------------------------------------------------------------

    def update_status(self, identities: list[IdentityStatus], now: datetime) -> None:
        """Show ``identities`` and the kubeconfig's contexts; rebuild only when the rows change."""
        contexts = self._controller.contexts()
        cluster_of = {c.context: c.cluster for c in contexts}
        self._identities = {i.name: i for i in identities}
        claimed = {name for i in identities for name in i.contexts}
        others = [c for c in contexts if c.context not in claimed]
        signature = (
            tuple((i.name, i.contexts) for i in identities),
            tuple(c.context for c in others),
            tuple(cluster_of.items()),
        )
        lefts = [time_left(ident.expires, now) for ident in identities]
        if signature != self._signature:
            self._signature = signature
            self._rebuild([self._identity_row(i, now, cluster_of) for i in identities], others)
        else:
            for top, (ident, left) in enumerate(zip(identities, lefts, strict=True)):
                if self._shown.get(ident.name) == (ident, left):
                    continue  # the same status and time left: the same texts
                row = self._identity_row(ident, now, cluster_of)
                self.model.set_texts(top, row.texts, row.tip, [c.texts for c in row.children])
        self._shown = {i.name: (i, left) for i, left in zip(identities, lefts, strict=True)}
        n = len(contexts)
        self.summary.setText(
            f"{plural(len(identities), 'identity', 'identities')}, "
            f"{plural(n, 'kubeconfig context')}"
            if identities or contexts
            else "Nothing set up yet: click <b>Add cluster…</b>, or run kubectl with a "
            "kubeconfig that uses kubetray."
        )
        self.search.setVisible(len(identities) + n >= self.SEARCH_FROM)
        self.all_button.setVisible(len(self._controller.logins.stale(now)) > 1)
        notice = self._controller.store_notice
        self.store_notice.setText(
            f"<i>{html.escape(notice[:1].upper() + notice[1:])}</i>" if notice else ""
        )
        self.store_notice.setVisible(bool(notice))
        self._update_buttons()

    def _rebuild(self, tops: list[Row], others: list[ContextUse]) -> None:
        selected = self._selected()
        if others:
            ours = self._controller.helper_contexts()
            tops.append(
                Row(
                    ("other", ""),
                    (OTHER, "", "", "", "", ""),
                    children=[
                        Row(
                            ("context", use.context, ""),
                            (
                                use.context,
                                f"user {use.user}"
                                + (" (kubetray, not used yet)" if use.context in ours else ""),
                                "",
                                "",
                                use.cluster,
                                "",
                            ),
                        )
                        for use in others
                    ],
                )
            )
        self.model.set_rows(tops)
        self.tree.expandAll()
        keep = self.proxy.mapFromSource(self.model.find(selected))
        if not keep.isValid():
            keep = self.proxy.index(0, 0)  # something is always selected: the buttons say what
        if keep.isValid():
            self.tree.setCurrentIndex(keep)

    @staticmethod
    def _identity_row(ident: IdentityStatus, now: datetime, cluster_of: dict[str, str]) -> Row:
        """An identity's row and its contexts', as they read now."""
        state, left = state_line(ident), time_left(ident.expires, now)
        texts = (
            ident.name,
            who(ident) or ("" if ident.logs_in else ident.kind),
            state,
            left,
            ", ".join(ident.clusters),
            urlsplit(ident.issuer).netloc if ident.issuer else "",
        )
        return Row(
            ("identity", ident.name),
            texts,
            tip="\n".join(filter(None, [ident.error or ident.note, details(ident)])),
            children=[
                Row(
                    ("context", name, ident.name),
                    (name, "", state, left, cluster_of.get(name, ""), ""),
                )
                for name in ident.contexts
            ],
        )

    def _visible(self, parent: QModelIndex = QModelIndex()) -> list[QModelIndex]:  # noqa: B008
        """Every row the filter lets through, each top row followed by its children."""
        out = []
        for i in range(self.proxy.rowCount(parent)):
            index = self.proxy.index(i, 0, parent)
            out.append(index)
            out.extend(self._visible(index))
        return out

    def rows(self) -> list[tuple[str, ...]]:
        """Every visible row as its texts, children indented by two spaces (for tests)."""
        out = []
        for index in self._visible():
            indent = "  " if index.parent().isValid() else ""
            texts = [str(index.siblingAtColumn(c).data()) for c in range(len(self.COLUMNS))]
            out.append((indent + texts[0], *texts[1:]))
        return out

    def select(self, text: str) -> None:
        """Select the first row whose first column is ``text``."""
        for index in self._visible():
            if index.data() == text:
                self.tree.setCurrentIndex(index)
                return
        raise KeyError(text)

    def select_identity(self, name: str) -> bool:
        """Select the identity ``name`` (its row's buttons act on it); False when no row
        shows it (not listed yet, or filtered out by the search)."""
        try:
            self.select(name)
        except KeyError:
            return False
        return True

    def selected_text(self) -> str | None:
        """The first column of the selected row."""
        index = self.tree.currentIndex()
        return str(index.siblingAtColumn(0).data()) if index.isValid() else None

    def focus_search(self) -> None:
        """The filter, ready to type in (Ctrl+F, and *All N identities…* in the menu)."""
        self.search.show()
        self.search.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.search.selectAll()

    def _filter(self, text: str) -> None:
        self.proxy.setFilterFixedString(text.strip())
        self.tree.expandAll()
        if not self.tree.currentIndex().isValid() and self.proxy.rowCount():
            self.tree.setCurrentIndex(self.proxy.index(0, 0))

    # -- actions ----------------------------------------------------------------------------

    def _selected(self) -> tuple[str, ...] | None:
        """The selected row's key (see app.ui.identity_model.KEY)."""
        index = self.tree.currentIndex()
        key = index.data(KEY) if index.isValid() else None
        return tuple(key) if key is not None else None

    def _identity_of(self, key: tuple[str, ...] | None) -> IdentityStatus | None:
        if key is None:
            return None
        name = key[1] if key[0] == "identity" else key[2] if key[0] == "context" else ""
        return self._identities.get(name)

    def _context_of(self, key: tuple[str, ...] | None) -> str | None:
        """The selected context, or the first context of the selected identity."""
        if key is None:
            return None
        if key[0] == "context":
            return str(key[1])
        ident = self._identity_of(key)
        return ident.contexts[0] if ident is not None and ident.contexts else None

    def _login_moved(self, *_args: object) -> None:
        self._update_buttons()

    def _update_buttons(self) -> None:
        item = self._selected()
        ident = self._identity_of(item)
        oidc = ident is not None and ident.logs_in
        busy = oidc and ident is not None and ident.state is State.LOGGING_IN
        signed_in = ident is not None and ident.state in (State.READY, State.EXPIRING)
        link = self._controller.login_link(ident.name) if busy and ident is not None else None
        for button in (self.login_button, self.logout_button, self.switch_button):
            button.setVisible(not busy)
        for button in (self.cancel_button, self.open_button, self.copy_link_button):
            button.setVisible(busy)
        unused = ident is None and self._unused_context(item) is not None
        self.login_button.setEnabled((oidc and not busy) or unused)
        self.login_button.setText("Log in again" if oidc and signed_in else "Log in")
        self.logout_button.setEnabled(oidc and signed_in and not busy)
        self.switch_button.setEnabled(oidc and not busy)
        self.cancel_button.setEnabled(busy)
        self.open_button.setEnabled(link is not None)
        self.copy_link_button.setEnabled(link is not None)
        self.copy_button.setEnabled(self._context_of(item) is not None)
        self.remove_button.setEnabled(oidc)
        self.detail.setText(self._detail(item, ident, link))

    def _detail(
        self, item: tuple[str, ...] | None, ident: IdentityStatus | None, link: str | None
    ) -> str:
        """What the selected row needs from the person, or why its buttons are off."""
        if item is None:
            if self.proxy.rowCount():
                return "Select an identity or a context to log in, log out or copy a kubectl line."
            return "Add a cluster to start: kubetray then logs you in when kubectl needs it."
        if ident is None:
            if item[0] == "other":
                return "These contexts do not use kubetray: there is nothing to log in to here."
            if self._unused_context(item) is not None:
                return (
                    "kubectl has not used this context yet: <b>Log in</b> signs you in for it now."
                )
            if item[0] == "context":
                return (
                    "This context does not use a kubetray login (or kubectl has not used it "
                    "yet): kubetray cannot log it in. Copy its kubectl line to try it."
                )
            return ""
        name = f"<b>{html.escape(ident.name)}</b>"
        if not ident.logs_in:
            return (
                f"{name} is a stored credential: there is no login. "
                "kubetray store replaces it when it expires."
            )
        if ident.state is State.LOGGING_IN:
            problem = self._controller.browser_problem(ident.name)
            if problem:
                text = f"{name}: the browser did not open. Open the login page yourself"
            elif link:
                text = f"{name}: finish the login in your browser, or open the login page again"
            else:
                text = f"{name}: logging in… (Cancel login stops it)"
            if link:  # on a line of its own that never breaks: a URL cut mid-way is no link
                shown = html.escape(elide(link, LINK_TEXT))
                text += (
                    ':<p style="white-space:pre; margin:0">'
                    f'<a href="{html.escape(link)}" title="{html.escape(link)}">{shown}</a></p>'
                )
            return text
        reason = ident.error or ident.note
        prefix = f"{name}: {html.escape(breakable(reason))}<br>" if reason else ""
        if ident.state in (State.READY, State.EXPIRING):
            return prefix + f"{name} is signed in. kubectl uses it without asking."
        return prefix + f"{name} is signed out: click <b>Log in</b> (or kubectl logs you in)."

    def _on_identity(self, action: Callable[[str], None]) -> None:
        ident = self._identity_of(self._selected())
        if ident is not None:
            action(ident.name)

    def _unused_context(self, key: tuple[str, ...] | None) -> str | None:
        """A context whose user runs kubetray-exec but that kubectl has not used yet."""
        if key is None or key[0] != "context" or key[2]:
            return None
        return str(key[1]) if key[1] in self._controller.helper_contexts() else None

    def _log_in(self) -> None:
        item = self._selected()
        ident = self._identity_of(item)
        context = self._unused_context(item)
        if ident is None and context is not None:
            self._controller.log_in_context(context)
            self._say(f"Logging in for {html.escape(context)}…")
            return
        if ident is not None:
            again = ident.state in (State.READY, State.EXPIRING)
            self._controller.log_in(ident.name, again=again)

    def open_login_page(self) -> None:
        """The selected login's page, in the browser the person chose."""
        ident = self._identity_of(self._selected())
        if ident is not None and self._controller.login_link(ident.name):
            self.open_login_page_of(ident.name)

    def copy_login_link(self) -> None:
        ident = self._identity_of(self._selected())
        link = self._controller.login_link(ident.name) if ident is not None else None
        if ident is not None and link:
            QGuiApplication.clipboard().setText(link)
            self._say("Copied the login link: open it in any browser.")
            self.notice_about = ident.name  # goes when the login ends (withdraw_notice)

    def switch_account(self, name: str) -> None:
        """Ask the provider first: switching where it cannot offer another account would log
        the same person in again."""
        self.switch_button.setEnabled(False)
        self._say(f"Asking the provider of {html.escape(name)}…")
        self._controller.check_switch_account(name)

    def _switch_checked(self, name: str, can_pick: object) -> None:
        self._update_buttons()
        self._say("")
        if can_pick is not False:
            self._controller.switch_account(name)
            return
        ident = self._identities.get(name)
        provider = html.escape(self._controller.login_facts(name).provider or "The provider")
        signed_in = ident is not None and ident.state in (State.READY, State.EXPIRING)
        agreed = self._ask(
            QMessageBox.Icon.Question,
            f"kubetray: switch account for {name}",
            f"{provider} cannot offer to pick another account.",
            "Logging in again would most likely sign the same person in. "
            + (
                f"Log out of {name} first, then log out at the provider's page in your "
                "browser, and log in as the other person."
                if signed_in
                else "Log out at the provider's page in your browser first, then log in."
            ),
            ("Log out" if signed_in else "Log in anyway", QMessageBox.ButtonRole.AcceptRole),
        )
        if agreed and signed_in:
            self._controller.log_out(name)
        elif agreed:
            self._controller.log_in(name)

    def remove(self) -> None:
        ident = self._identity_of(self._selected())
        if ident is None:
            return
        if self._ask(
            QMessageBox.Icon.Warning,
            f"kubetray: remove {ident.name}",
            f"Remove {ident.name} from kubetray?",
            "kubetray logs it out and forgets it. Its kubeconfig contexts stay: the next kubectl "
            "call with them adds it again and asks you to log in.",
            ("Remove", QMessageBox.ButtonRole.DestructiveRole),
            cancel_first=True,
        ):
            self._controller.remove(ident.name)
            self._say(f"Removed {html.escape(ident.name)}.")

    def _ask(
        self,
        icon: QMessageBox.Icon,
        title: str,
        text: str,
        details: str,
        action: tuple[str, QMessageBox.ButtonRole],
        cancel_first: bool = False,
        other: tuple[str, QMessageBox.ButtonRole] | None = None,
    ) -> bool | None:
        """A question with one action (and ``other``, if given) and Cancel (kept in
        ``question`` for tests): True when the action was chosen, None for ``other``, False
        for Cancel. ``cancel_first``: Cancel is the default (a destructive act)."""
        box = QMessageBox(self)
        box.setIcon(icon)
        box.setWindowTitle(title)
        box.setText(text)
        box.setInformativeText(details)
        chosen = box.addButton(*action)
        second = box.addButton(*other) if other is not None else None
        box.addButton(QMessageBox.StandardButton.Cancel)
        if cancel_first:
            box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        self.question = box
        box.exec()
        clicked = box.clickedButton()
        if second is not None and clicked is second:
            return None
        return clicked is chosen

    def add_cluster(self) -> None:
        if self.add_dialog is None or not self.add_dialog.isVisible():
            self.add_dialog = AddClusterDialog(self._controller, self)
        bring_to_front(self.add_dialog)

    def show_about(self) -> None:
        self.about = show_about(self.about, self)

    def show_settings(self) -> None:
        if self.settings_dialog is None or not self.settings_dialog.isVisible():
            self.settings_dialog = SettingsDialog(self._controller, self)
        bring_to_front(self.settings_dialog)

    def copy_kubectl_line(self) -> None:
        context = self._context_of(self._selected())
        if context is None:
            return
        line = kubectl_line(context)
        QGuiApplication.clipboard().setText(line)
        self._say(f"Copied: <code>{html.escape(breakable(line))}</code>")

    def _quit(self) -> None:
        QApplication.quit()  # looked up when clicked (tests replace it)

    def _say(self, text: str) -> None:
        """A line of the window's own (not about a notification)."""
        self.notice.setText(text)
        self.notice_about = None

    def show_notice(self, title: str, text: str, about: str | None = None) -> None:
        """A notification, where the desktop has no service to show it (and no tray);
        ``about``: the identity it is about (withdraw_notice takes it back once moot)."""
        self.notice.setText(f"<b>{html.escape(title)}</b><br>{html.escape(breakable(text))}")
        self.notice_about = about

    def withdraw_notice(self, about: str) -> None:
        """The notice about ``about`` is answered or moot (a login done, cancelled): gone, as a
        desktop notification would be; another notice or message stays."""
        if self.notice_about == about:
            self.notice.setText("")
            self.notice_about = None

    def set_standalone(self, standalone: bool) -> None:
        """No tray (True): this window is the app, and closing it asks first."""
        self.standalone = standalone
        self.setWindowTitle("kubetray" if not standalone else "kubetray (no system tray here)")

    def closeEvent(self, event: QCloseEvent) -> None:
        # Spontaneous: the person closed it (the window manager asked). Quit and the end of the
        # app close it too (Qt 6's quit() closes every window first): those just close.
        if not (self.standalone and event.spontaneous()):
            super().closeEvent(event)  # with a tray the icon stays: the window comes back
            return
        event.ignore()
        self.ask_close()

    def ask_close(self) -> None:
        """No tray and the person closes the window: keep kubetray running (minimized where
        the desktop shows minimized windows, else without a window) or quit."""
        where = where_minimized()
        running = (
            f"Keep it running minimized (in {where}; running kubetray again also brings this "
            "window back)"
            if where
            else "Keep it running without a window (running kubetray again brings it back)"
        )
        keep = self._ask(
            QMessageBox.Icon.Question,
            "kubetray: keep running?",
            "There is no system tray here: this window is kubetray.",
            f"kubectl's logins need kubetray running. {running}, or quit: kubectl then starts "
            "the headless agent, which asks for logins in its terminal.",
            ("Keep running", QMessageBox.ButtonRole.AcceptRole),
            other=("Quit kubetray", QMessageBox.ButtonRole.DestructiveRole),
        )
        if keep is True and where:
            self.showMinimized()
        elif keep is True:  # nothing would show it minimized (or it cannot be: sway)
            self.hide()
        elif keep is None:
            QApplication.quit()
