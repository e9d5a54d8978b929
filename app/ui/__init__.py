"""The desktop app (PySide6). The only package that imports Qt; the broker stays Qt-free."""

import sys

if getattr(sys, "frozen", False):  # the installed bundle: Qt's run-time hook runs now, not at start
    from app.ui.bundle import run_qt_hooks

    run_qt_hooks()
