"""The main window's rows as a Qt item model (Qt's own items, filtered by Qt): identities with
their contexts under them, then the contexts that use no kubetray identity.

A model, not a tree of widgets' items, so that the view lays out only the rows on screen and an
update touches only what changed (issue 33: at 500 identities the window took 150 ms to open
and every tick re-set every cell). ``set_rows`` replaces the rows when identities or contexts
come or go; ``set_texts`` compares and signals ``dataChanged`` for the rows whose texts differ.
"""

from dataclasses import dataclass, field

from PySide6.QtCore import QModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtGui import QStandardItem, QStandardItemModel

KEY = Qt.ItemDataRole.UserRole
"""A row's key: ("identity", name), ("other", ""), or ("context", context name, identity name
or "")."""
COLUMNS = ("Identity / context", "Signed in as", "State", "Time left", "Cluster", "Provider")


@dataclass
class Row:
    key: tuple[str, ...]
    texts: tuple[str, ...]
    tip: str = ""
    children: list["Row"] = field(default_factory=list)


class IdentityModel(QStandardItemModel):
    """Two levels: a top row per identity (and one for the other contexts), a child per
    context. The texts live in Qt's items (the view and the filter read them without calling
    Python); ``Row``s keep what was last set, so a change is found without asking Qt."""

    def __init__(self) -> None:
        super().__init__()
        self.setHorizontalHeaderLabels(list(COLUMNS))
        self._tops: list[Row] = []
        self._where: dict[tuple[str, ...], tuple[int, int]] = {}
        """Each row's key: (top row, child row or -1)."""

    def set_rows(self, tops: list[Row]) -> None:
        """New rows (identities or contexts came or went)."""
        self.removeRows(0, self.rowCount())
        self._tops = tops
        self._where = {}
        root = self.invisibleRootItem()
        for i, top in enumerate(tops):
            items = self._items(top)
            if top.key[0] == "identity":
                font = items[0].font()
                font.setBold(True)
                items[0].setFont(font)
            for j, child in enumerate(top.children):
                items[0].appendRow(self._items(child))
                self._where[child.key] = (i, j)
            root.appendRow(items)
            self._where[top.key] = (i, -1)

    @staticmethod
    def _items(row: Row) -> list[QStandardItem]:
        items = [QStandardItem(text) for text in row.texts]
        if row.tip:
            for item in items:
                item.setToolTip(row.tip)
        items[0].setData(row.key, KEY)
        return items

    def set_texts(
        self, top: int, texts: tuple[str, ...], tip: str, child_texts: list[tuple[str, ...]]
    ) -> None:
        """The texts of top row ``top`` and its children; only the cells that differ are set
        (each a ``dataChanged`` for the view and the filter)."""
        row = self._tops[top]
        if row.texts != texts or row.tip != tip:
            self._set(self.item(top, 0), row, texts, tip)
        parent = self.item(top, 0)
        for j, (child, new) in enumerate(zip(row.children, child_texts, strict=True)):
            if child.texts != new:
                self._set(parent.child(j, 0), child, new, child.tip)

    def _set(self, first: QStandardItem, row: Row, texts: tuple[str, ...], tip: str) -> None:
        parent = first.parent() or self.invisibleRootItem()
        for col, (old, new) in enumerate(zip(row.texts, texts, strict=True)):
            item = parent.child(first.row(), col)
            if old != new:
                item.setText(new)
            if tip != row.tip:
                item.setToolTip(tip)
        row.texts, row.tip = texts, tip

    def find(self, key: object) -> QModelIndex:
        """The index of the row whose key is ``key`` (invalid when there is none)."""
        where = self._where.get(key) if isinstance(key, tuple) else None
        if where is None:
            return QModelIndex()
        top, child = where
        if child < 0:
            return self.index(top, 0)
        return self.index(child, 0, self.index(top, 0))


def filter_proxy(model: IdentityModel) -> QSortFilterProxyModel:
    """The rows that contain a text, in any column, case ignored: a matching context shows
    under its identity, a matching identity with all its contexts."""
    proxy = QSortFilterProxyModel()
    proxy.setSourceModel(model)
    proxy.setFilterKeyColumn(-1)
    proxy.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
    proxy.setRecursiveFilteringEnabled(True)
    proxy.setAutoAcceptChildRows(True)
    return proxy
