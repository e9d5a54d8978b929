"""Windows: the device code, diagnostics, and the status window used when there is no tray."""

from datetime import datetime

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QColor, QFont, QGuiApplication, QImage, QPixmap
from PySide6.QtWidgets import (
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.model import IdentityStatus
from app.ui.controller import TrayController
from app.ui.text import time_left, who


def qr_pixmap(text: str, scale: int = 6) -> QPixmap:
    """A QR code for ``text`` (segno's matrix, drawn module by module)."""
    import segno  # only when a device code is shown

    matrix = segno.make(text, error="m", micro=False).matrix
    size = len(matrix) + 8  # quiet zone of four modules
    image = QImage(size, size, QImage.Format.Format_RGB32)
    image.fill(QColor("white"))
    for y, row in enumerate(matrix):
        for x, dark in enumerate(row):
            if dark:
                image.setPixel(x + 4, y + 4, QColor("black").rgb())
    return QPixmap.fromImage(image.scaled(size * scale, size * scale))


def bring_to_front(window: QWidget) -> None:
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
        layout.addWidget(QLabel(f"To log in to <b>{name}</b>, open this page on any device:"))
        link = QLabel(f'<a href="{uri}">{uri}</a>')
        link.setOpenExternalLinks(True)
        link.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
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

    def _cancel(self, controller: TrayController, name: str) -> None:
        controller.cancel(name)
        self.close()

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.code)
        self.copy_button.setText("Copied")


class StatusWindow(QWidget):
    """Shown instead of the tray where there is none (GNOME without AppIndicator, offscreen)."""

    def __init__(self, controller: TrayController) -> None:
        super().__init__()
        self.setWindowTitle("kubetray")
        self._controller = controller
        layout = QVBoxLayout(self)
        self.notice = QLabel("")
        self.notice.setWordWrap(True)
        self.table = QTableWidget(0, 4)
        self.table.setHorizontalHeaderLabels(["Identity", "Who", "State", "Time left"])
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        layout.addWidget(QLabel("<b>kubetray</b>: no system tray here, so this window stands in."))
        layout.addWidget(self.table)
        layout.addWidget(self.notice)
        self.resize(620, 260)

    def update_status(self, identities: list[IdentityStatus], now: datetime) -> None:
        self.table.setRowCount(len(identities))
        for row, ident in enumerate(identities):
            for col, text in enumerate(
                [ident.name, who(ident), str(ident.state), time_left(ident.expires, now)]
            ):
                self.table.setItem(row, col, QTableWidgetItem(text))

    def show_notice(self, title: str, text: str) -> None:
        self.notice.setText(f"<b>{title}</b><br>{text}")


class DiagnosticsWindow(QWidget):
    """Recent kubetray-exec calls and the KEP-541-style figures."""

    COLUMNS = ("Time", "Identity", "Cluster", "Caller", "Result", "Latency")

    def __init__(self, controller: TrayController) -> None:
        super().__init__()
        self.setWindowTitle("kubetray diagnostics")
        self._controller = controller
        layout = QVBoxLayout(self)
        self.figures = QLabel()
        self.figures.setTextFormat(Qt.TextFormat.RichText)
        layout.addWidget(self.figures)
        self.table = QTableWidget(0, len(self.COLUMNS))
        self.table.setHorizontalHeaderLabels(list(self.COLUMNS))
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        layout.addWidget(self.table)
        self.timer = QTimer(self)
        self.timer.timeout.connect(self.refresh)
        self.timer.start(2000)
        self.resize(900, 420)
        self.refresh()

    def refresh(self) -> None:
        c = self._controller
        now = c.clock()
        calls = c.calls(200)
        ok, failed = c.counts()
        lines = [f"Calls: {ok} ok, {failed} failed"]
        for ident in c.identities():
            left = time_left(ident.expires, now) or "does not expire"
            line = f"<b>{ident.name}</b>: {ident.state}, {left}"
            if ident.refreshed_at is not None:
                age = int((now - datetime.fromisoformat(ident.refreshed_at)).total_seconds())
                line += f", refresh token rotated {age}s ago ({ident.refreshes} refreshes)"
            lines.append(line)
        self.figures.setText("<br>".join(lines))
        self.table.setRowCount(len(calls))
        for row, rec in enumerate(calls):
            caller = rec.caller
            chain = (
                f"remote: {caller.remote} (over SSH)"
                if caller.remote
                else " ← ".join(filter(None, [caller.name, *caller.parents]))
            )
            cells = [
                rec.time.astimezone().strftime("%H:%M:%S"),
                rec.identity or "-",
                rec.cluster or "-",
                f"{chain} (pid {caller.pid})",
                "ok" if rec.ok else f"failed: {rec.error}",
                f"{rec.latency_ms:.1f} ms",
            ]
            for col, text in enumerate(cells):
                self.table.setItem(row, col, QTableWidgetItem(text))
