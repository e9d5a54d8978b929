"""The main window: every kubeconfig context, grouped by the identity that signs it in.

Opened by a left-click on the tray icon, *Open kubetray* in the menu, or a second `kubetray`.
It shows what the controller reports and forwards clicks, like the menu.
"""

import html
from collections.abc import Callable
from datetime import datetime

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.model import OIDC, ContextUse, IdentityStatus, State
from app.ui.controller import TrayController
from app.ui.text import kubectl_line, time_left, who

OTHER = "Other contexts"
KEY = Qt.ItemDataRole.UserRole
"""An item's key: ("identity", name) or ("context", context name, identity name or "")."""


class MainWindow(QWidget):
    """A tree of identities and their contexts, a search field, and the actions on a row."""

    COLUMNS = ("Identity / context", "Signed in as", "State", "Time left", "Cluster")
    SEARCH_FROM = 8
    """Rows from which the search field is shown."""

    def __init__(self, controller: TrayController, show_diagnostics: Callable[[], None]) -> None:
        super().__init__()
        self.setWindowTitle("kubetray")
        self._controller = controller
        self._signature: object = None
        self._identities: dict[str, IdentityStatus] = {}
        layout = QVBoxLayout(self)
        self.summary = QLabel()
        layout.addWidget(self.summary)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search contexts, clusters, people…")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self._filter)
        self.search.hide()
        layout.addWidget(self.search)
        self.tree = QTreeWidget()
        self.tree.setColumnCount(len(self.COLUMNS))
        self.tree.setHeaderLabels(list(self.COLUMNS))
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.tree.header().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.tree.header().setStretchLastSection(True)
        self.tree.itemSelectionChanged.connect(self._update_buttons)
        self.tree.itemDoubleClicked.connect(lambda *_: self.copy_kubectl_line())
        layout.addWidget(self.tree)
        row = QHBoxLayout()
        self.login_button = QPushButton("Log in")
        self.login_button.clicked.connect(self._log_in)
        self.logout_button = QPushButton("Log out")
        self.logout_button.clicked.connect(lambda: self._on_identity(controller.log_out))
        self.switch_button = QPushButton("Switch account")
        self.switch_button.clicked.connect(lambda: self._on_identity(controller.switch_account))
        self.copy_button = QPushButton("Copy kubectl line")
        self.copy_button.setToolTip("kubectl --context CONTEXT get ns, to try the context")
        self.copy_button.clicked.connect(self.copy_kubectl_line)
        self.diagnostics_button = QPushButton("Diagnostics")
        self.diagnostics_button.clicked.connect(show_diagnostics)
        for button in (
            self.login_button,
            self.logout_button,
            self.switch_button,
            self.copy_button,
        ):
            row.addWidget(button)
        row.addStretch(1)
        row.addWidget(self.diagnostics_button)
        layout.addLayout(row)
        self.notice = QLabel("")
        self.notice.setWordWrap(True)
        self.notice.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.notice)
        self.resize(780, 420)
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
        if signature != self._signature:
            self._signature = signature
            self._rebuild(identities, others, cluster_of)
        for item in self._items():
            key = item.data(0, KEY)
            ident = self._identity_of(item)
            if key[0] == "identity" and ident is not None:
                self._fill_identity(item, ident, now)
            elif ident is not None:
                item.setText(2, str(ident.state))
                item.setText(3, time_left(ident.expires, now))
        n = len(contexts)
        self.summary.setText(
            f"<b>{len(identities)}</b> identities, <b>{n}</b> kubeconfig contexts"
            if identities or contexts
            else "Nothing set up yet: add a cluster from the tray menu, or run kubectl."
        )
        self.search.setVisible(len(identities) + n >= self.SEARCH_FROM)
        self._update_buttons()

    def _rebuild(
        self,
        identities: list[IdentityStatus],
        others: list[ContextUse],
        cluster_of: dict[str, str],
    ) -> None:
        selected = self._selected_key()
        self.tree.clear()
        for ident in identities:
            top = QTreeWidgetItem(self.tree, [ident.name])
            top.setData(0, KEY, ("identity", ident.name))
            font = top.font(0)
            font.setBold(True)
            top.setFont(0, font)
            for name in ident.contexts:
                child = QTreeWidgetItem(top, [name, "", "", "", cluster_of.get(name, "")])
                child.setData(0, KEY, ("context", name, ident.name))
        if others:
            top = QTreeWidgetItem(self.tree, [OTHER])
            top.setData(0, KEY, ("other", ""))
            ours = self._controller.helper_contexts()
            for use in others:
                user = f"user {use.user}" + (
                    " (kubetray, not used yet)" if use.context in ours else ""
                )
                child = QTreeWidgetItem(top, [use.context, user, "", "", use.cluster])
                child.setData(0, KEY, ("context", use.context, ""))
        self.tree.expandAll()
        for item in self._items():
            if item.data(0, KEY) == selected:
                item.setSelected(True)
        self._filter(self.search.text())

    def _fill_identity(self, item: QTreeWidgetItem, ident: IdentityStatus, now: datetime) -> None:
        texts = [
            ident.name,
            who(ident) or ("" if ident.kind == OIDC else ident.kind),
            str(ident.state),
            time_left(ident.expires, now),
            ", ".join(ident.clusters),
        ]
        for col, text in enumerate(texts):
            item.setText(col, text)
        tip = ident.error or ident.note or ""
        for col in range(len(texts)):
            item.setToolTip(col, tip)

    def _tops(self) -> list[QTreeWidgetItem]:
        items = (self.tree.topLevelItem(i) for i in range(self.tree.topLevelItemCount()))
        return [item for item in items if item is not None]

    @staticmethod
    def _children(top: QTreeWidgetItem) -> list[QTreeWidgetItem]:
        items = (top.child(j) for j in range(top.childCount()))
        return [item for item in items if item is not None]

    def _items(self) -> list[QTreeWidgetItem]:
        out = []
        for top in self._tops():
            out.append(top)
            out.extend(self._children(top))
        return out

    def rows(self) -> list[tuple[str, ...]]:
        """Every visible row as its texts, children indented by two spaces (for tests)."""
        out = []
        for item in self._items():
            if item.isHidden():
                continue
            indent = "  " if item.parent() is not None else ""
            out.append(tuple([indent + item.text(0)] + [item.text(c) for c in range(1, 5)]))
        return out

    def select(self, text: str) -> None:
        """Select the first row whose first column is ``text``."""
        for item in self._items():
            if item.text(0) == text:
                self.tree.setCurrentItem(item)
                return
        raise KeyError(text)

    def _filter(self, text: str) -> None:
        needle = text.strip().lower()
        for top in self._tops():
            own = not needle or any(needle in top.text(c).lower() for c in range(5))
            shown = 0
            for child in self._children(top):
                match = own or any(needle in child.text(c).lower() for c in range(5))
                child.setHidden(not match)
                shown += match
            top.setHidden(not (own or shown))

    # -- actions ----------------------------------------------------------------------------

    def _selected(self) -> QTreeWidgetItem | None:
        items = self.tree.selectedItems()
        return items[0] if items else None

    def _selected_key(self) -> object:
        item = self._selected()
        return item.data(0, KEY) if item is not None else None

    def _identity_of(self, item: QTreeWidgetItem | None) -> IdentityStatus | None:
        if item is None:
            return None
        key = item.data(0, KEY)
        name = key[1] if key[0] == "identity" else key[2] if key[0] == "context" else ""
        return self._identities.get(name)

    def _context_of(self, item: QTreeWidgetItem | None) -> str | None:
        """The selected context, or the first context of the selected identity."""
        if item is None:
            return None
        key = item.data(0, KEY)
        if key[0] == "context":
            return str(key[1])
        ident = self._identity_of(item)
        return ident.contexts[0] if ident is not None and ident.contexts else None

    def _update_buttons(self) -> None:
        item = self._selected()
        ident = self._identity_of(item)
        oidc = ident is not None and ident.kind == OIDC
        busy = ident is not None and ident.state is State.LOGGING_IN
        signed_in = ident is not None and ident.state in (State.READY, State.EXPIRING)
        self.login_button.setEnabled(oidc and not busy)
        self.login_button.setText("Log in again" if oidc and signed_in else "Log in")
        self.logout_button.setEnabled(oidc and signed_in and not busy)
        self.switch_button.setEnabled(oidc and not busy)
        self.copy_button.setEnabled(self._context_of(item) is not None)

    def _on_identity(self, action: Callable[[str], None]) -> None:
        ident = self._identity_of(self._selected())
        if ident is not None:
            action(ident.name)

    def _log_in(self) -> None:
        ident = self._identity_of(self._selected())
        if ident is not None:
            again = ident.state in (State.READY, State.EXPIRING)
            self._controller.log_in(ident.name, again=again)

    def copy_kubectl_line(self) -> None:
        context = self._context_of(self._selected())
        if context is None:
            return
        line = kubectl_line(context)
        QGuiApplication.clipboard().setText(line)
        self.notice.setText(f"Copied: <code>{html.escape(line)}</code>")
