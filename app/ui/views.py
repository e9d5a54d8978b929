"""Windows: the device code, a login's link, and diagnostics."""

from datetime import datetime
from html import escape

from PySide6.QtCore import QSize, Qt, QTimer
from PySide6.QtGui import (
    QColor,
    QCursor,
    QFont,
    QGuiApplication,
    QImage,
    QPixmap,
    QResizeEvent,
)
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLayout,
    QLineEdit,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from app.model import CallRecord, State
from app.ui.controller import TrayController
from app.ui.text import (
    about_text,
    breakable,
    call_details,
    caller_chain,
    elide,
    plural,
    state_words,
    time_left,
)
from exec_helper import version

SCREEN_SHARE = 0.8
"""The most of the screen a window opens on: room is left for the panel and other windows."""


QR_SIDE = 320
"""The most pixels a QR code takes on a side (a long link makes many modules)."""


def qr_pixmap(text: str, scale: int = 6) -> QPixmap:
    """A QR code for ``text`` (segno's matrix, drawn module by module), at most about QR_SIDE
    pixels wide, never less than two pixels a module (what a phone's camera still reads)."""
    import segno  # only when a device code is shown

    matrix = segno.make(text, error="m", micro=False).matrix
    size = len(matrix) + 8  # quiet zone of four modules
    scale = max(2, min(scale, QR_SIDE // size))
    image = QImage(size, size, QImage.Format.Format_RGB32)
    image.fill(QColor("white"))
    for y, row in enumerate(matrix):
        for x, dark in enumerate(row):
            if dark:
                image.setPixel(x + 4, y + 4, QColor("black").rgb())
    return QPixmap.fromImage(image.scaled(size * scale, size * scale))


def fit_to_screen(window: QWidget, preferred: QSize) -> None:
    """Size ``window`` to ``preferred``, at most SCREEN_SHARE of the screen it opens on (the one
    under the mouse: where the tray icon was clicked), and centre it there."""
    screen = QGuiApplication.screenAt(QCursor.pos()) or QGuiApplication.primaryScreen()
    if screen is None:
        window.resize(preferred)
        return
    room = screen.availableGeometry()
    size = preferred.boundedTo(
        QSize(int(room.width() * SCREEN_SHARE), int(room.height() * SCREEN_SHARE))
    )
    window.resize(size)
    frame = window.frameGeometry()
    frame.moveCenter(room.center())
    window.move(frame.topLeft())


def show_about(box: QMessageBox | None, parent: QWidget | None = None) -> QMessageBox:
    """The About box (not modal), made once and brought to the front again: which kubetray,
    which build, from where; its text can be selected and copied into a bug report."""
    if box is None:
        box = QMessageBox(QMessageBox.Icon.Information, "About kubetray", "", parent=parent)
        box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        box.setModal(False)
    box.setText(about_text())
    bring_to_front(box)
    return box


def bring_to_front(window: QWidget) -> None:
    """Show ``window`` on top, also when it was minimized (show() alone leaves it iconic)."""
    if window.isMinimized():
        window.setWindowState(window.windowState() & ~Qt.WindowState.WindowMinimized)
        if window.isMaximized():
            window.showMaximized()
        else:
            window.showNormal()
    window.show()
    window.raise_()
    window.activateWindow()


class DeviceCodeWindow(QWidget):
    """The code to type at the provider, its URL, a Copy button and a QR code."""

    def __init__(self, controller: TrayController, name: str, code: str, uri: str) -> None:
        super().__init__()
        self.setWindowTitle(f"kubetray: log in to {name}")
        self.code = code
        layout = QVBoxLayout(self)
        intro = QLabel(
            f"To log in to <b>{escape(breakable(name))}</b>, open this page on any device:"
        )
        intro.setWordWrap(True)
        layout.addWidget(intro)
        link = QLabel(f'<a href="{escape(uri)}">{escape(elide(uri, 64))}</a>')
        link.setToolTip(uri)
        link.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        # Through the browser the person chose, like every other "open" of kubetray's.
        link.linkActivated.connect(lambda _u: controller.open_login_page(name))
        layout.addWidget(link)
        layout.addWidget(QLabel("and enter the code:"))
        self.code_label = QLabel(code)
        font = QFont("monospace")
        font.setPointSize(22)
        font.setBold(True)
        self.code_label.setFont(font)
        self.code_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.code_label, alignment=Qt.AlignmentFlag.AlignHCenter)
        self.qr = QLabel()
        self.qr.setPixmap(qr_pixmap(uri))
        layout.addWidget(self.qr, alignment=Qt.AlignmentFlag.AlignHCenter)
        buttons = QHBoxLayout()
        self.copy_button = QPushButton("Copy code")
        self.copy_button.clicked.connect(self.copy)
        self.cancel_button = QPushButton("Cancel login")
        self.cancel_button.clicked.connect(lambda: self._cancel(controller, name))
        buttons.addWidget(self.copy_button)
        buttons.addWidget(self.cancel_button)
        layout.addLayout(buttons)
        # The size of what it shows, fixed: sway floats it so instead of filling the screen.
        layout.setSizeConstraint(QLayout.SizeConstraint.SetFixedSize)

    def _cancel(self, controller: TrayController, name: str) -> None:
        controller.cancel(name)
        self.close()

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.code)
        self.copy_button.setText("Copied")


class LinkWindow(QDialog):
    """A login's link in a small window of ours: Copy works here on Wayland too (a compositor
    gives the clipboard only to a focused window with recent input, never to a tray menu or a
    notification), and the whole address can be read and selected."""

    def __init__(self, controller: TrayController, name: str, link: str) -> None:
        super().__init__()
        self.setWindowTitle(f"kubetray: the login link for {name}")
        self._controller = controller
        self._name = name
        layout = QVBoxLayout(self)
        intro = QLabel(
            f"To log in to <b>{escape(breakable(name))}</b>, open this address in a browser:"
        )
        intro.setWordWrap(True)
        layout.addWidget(intro)
        self.link = QLineEdit(link)
        self.link.setReadOnly(True)
        self.link.setCursorPosition(0)
        self.link.setToolTip(link)
        layout.addWidget(self.link)
        buttons = QHBoxLayout()
        self.copy_button = QPushButton("Copy link")
        self.copy_button.setDefault(True)  # Return copies (a dialog's default button)
        self.copy_button.clicked.connect(self.copy)
        self.open_button = QPushButton("Open login page")
        self.open_button.clicked.connect(self.open)
        buttons.addWidget(self.copy_button)
        buttons.addWidget(self.open_button)
        buttons.addStretch(1)
        layout.addLayout(buttons)
        self.said = QLabel("")
        self.said.setMinimumHeight(self.said.fontMetrics().height())  # room for what it says
        layout.addWidget(self.said)
        self.resize(520, self.sizeHint().height())
        # Its own height, fixed: a tiling compositor (sway) floats a window whose height cannot
        # change at the size it asks for, instead of stretching it over the whole screen.
        self.setFixedHeight(self.sizeHint().height())
        self.copy_button.setFocus()

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.link.text())
        self.said.setText("Copied: paste it into any browser.")

    def open(self) -> None:
        if self._controller.open_login_page(self._name):
            self.said.setText("Opened in your browser.")
        else:
            self.said.setText("The browser did not start: copy the link instead.")


class DiagnosticsWindow(QWidget):
    """Recent kubetray-exec calls and the KEP-541-style figures; a selected call's details
    (the whole caller chain, the whole error) in a pane below the table.

    Each identity's figures are a line of plain text in a scrolling pane, which lays out only
    the lines on screen: as one rich-text label, 500 identities took 150 ms to open."""

    COLUMNS = ("Time", "Identity", "Cluster", "Caller", "Result", "Latency")
    CALLER, RESULT = 3, 4

    def __init__(self, controller: TrayController) -> None:
        super().__init__()
        self.setWindowTitle(f"kubetray diagnostics: kubetray {version.describe()}")
        self._controller = controller
        self._records: list[CallRecord] = []
        self._selected: CallRecord | None = None
        layout = QVBoxLayout(self)
        self.figures = QLabel()
        self.figures.setTextFormat(Qt.TextFormat.RichText)
        self.figures.setWordWrap(True)  # a long line must not widen the window
        self.figures.setToolTip(about_text())  # which kubetray, which build, from where
        layout.addWidget(self.figures)
        self.identities = QPlainTextEdit()
        self.identities.setReadOnly(True)
        self.identities.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.identities.setPlaceholderText("No identities yet.")
        self._identities_text = ""
        self.table = QTableWidget(0, len(self.COLUMNS))
        self.table.setHorizontalHeaderLabels(list(self.COLUMNS))
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        # The caller chain takes the room left and is elided; a long error is cut at a quarter
        # of the window: both are whole in the detail pane.
        header.setSectionResizeMode(self.CALLER, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(self.RESULT, QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(False)
        self.table.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.table.setWordWrap(False)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QTableWidget.SelectionMode.SingleSelection)
        self.table.itemSelectionChanged.connect(self._show_selected)
        self.detail = QTextEdit()
        self.detail.setReadOnly(True)
        self.detail.setPlaceholderText("Select a call to see its caller chain and error in full.")
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.identities)
        split.addWidget(self.table)
        split.addWidget(self.detail)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 2)
        split.setStretchFactor(2, 1)
        layout.addWidget(split)
        self.timer = QTimer(self)
        self.timer.timeout.connect(self.refresh)
        self.timer.start(2000)
        fit_to_screen(self, QSize(960, 560))
        self.refresh()

    def refresh(self) -> None:
        c = self._controller
        now = c.clock()
        calls = c.calls(200)
        ok, failed = c.counts()
        identities = c.identities()
        self.figures.setText(
            "<br>".join(
                [
                    escape(f"kubetray {version.describe()}"),
                    f"Calls: {ok} ok, {failed} failed; "
                    + plural(len(identities), "identity", "identities"),
                ]
            )
        )
        lines = []
        for ident in identities:
            line = f"{ident.name}: {state_words(ident.state)}"
            left = time_left(ident.expires, now)
            if left:
                line += f", {left}"
            elif ident.state in (State.READY, State.EXPIRING, State.STORED):
                line += ", no expiry"  # a token that says none; signed out has nothing to expire
            if ident.refreshed_at is not None:
                age = int((now - datetime.fromisoformat(ident.refreshed_at)).total_seconds())
                line += f", refresh token rotated {age}s ago ({ident.refreshes} refreshes)"
            if ident.error:  # why it is signed out or stuck: a blocked login, a refused refresh
                line += f": {ident.error}"
            lines.append(line)
        text = "\n".join(lines)
        if text != self._identities_text:  # keeps the scroll position when nothing changed
            self._identities_text = text
            bar = self.identities.verticalScrollBar()
            at = bar.value()
            self.identities.setPlainText(text)
            bar.setValue(at)
        self._records = calls
        blocked = self.table.blockSignals(True)  # a refill is not a new selection
        try:
            self.table.setRowCount(len(calls))
            for row, rec in enumerate(calls):
                chain = caller_chain(rec.caller)
                cells = [
                    rec.time.astimezone().strftime("%H:%M:%S"),
                    rec.identity or "-",
                    rec.cluster or "-",
                    chain,
                    "ok" if rec.ok else f"failed: {rec.error}",
                    f"{rec.latency_ms:.1f} ms",
                ]
                for col, text in enumerate(cells):
                    item = QTableWidgetItem(text)
                    if col in (self.CALLER, self.RESULT):
                        item.setToolTip(text)
                    self.table.setItem(row, col, item)
            self.table.clearSelection()
            if self._selected in calls:
                self.table.selectRow(calls.index(self._selected))
        finally:
            self.table.blockSignals(blocked)
        self._fit_result_column()

    def _fit_result_column(self) -> None:
        wanted = self.table.sizeHintForColumn(self.RESULT)
        self.table.setColumnWidth(self.RESULT, max(60, min(wanted, self.width() // 4)))

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit_result_column()

    def _show_selected(self) -> None:
        rows = {i.row() for i in self.table.selectedIndexes()}
        if len(rows) != 1:
            return  # keep the last call's details while the table refills
        row = rows.pop()
        if row < len(self._records):
            self._selected = self._records[row]
            html = "".join(
                f"<tr><td><b>{escape(label)}</b></td><td>{escape(text)}</td></tr>"
                for label, text in call_details(self._selected)
            )
            self.detail.setHtml(f"<table cellspacing='2' cellpadding='2'>{html}</table>")

    def select(self, row: int) -> None:
        """Select the call on ``row`` (0 is the newest), as a click does."""
        self.table.selectRow(row)
