"""Answer the modal dialog a click opens (its exec() blocks the test until it is answered)."""

from collections.abc import Callable

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QDialog, QMessageBox, QWidget


def _modal() -> QWidget | None:
    shown = [
        w
        for w in QApplication.topLevelWidgets()
        if isinstance(w, QDialog) and w.isVisible() and w.isModal()
    ]
    return QApplication.activeModalWidget() or (shown[-1] if shown else None)


def when_modal(action: Callable[[QWidget], None], tries: int = 200) -> None:
    """Run ``action`` on the next modal dialog, once it shows (polled on Qt's loop)."""

    def poll(left: int) -> None:
        widget = _modal()
        if widget is None and left:
            QTimer.singleShot(20, lambda: poll(left - 1))
        elif widget is not None:
            action(widget)

    QTimer.singleShot(0, lambda: poll(tries))


def reject_noting(asked: list[str]) -> Callable[[QWidget], None]:
    """An action for when_modal: note a message box's text and informative text in ``asked``,
    then cancel it."""

    def reject(box: QWidget) -> None:
        assert isinstance(box, QMessageBox)
        asked.append(box.text() + " " + box.informativeText())
        box.reject()

    return reject
