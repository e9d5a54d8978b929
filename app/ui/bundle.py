"""Qt in the installed (PyInstaller) bundle: its run-time hook, run when Qt is first needed.

packaging/kubetray.spec keeps PyInstaller's PySide6 hook out of the start-up hooks (it imports
QtCore, so `kubetray agent` and every command loaded Qt) and ships it as a data file; this runs
it, unchanged, before the desktop app's first Qt import. It sets Qt's plugin path (and PATH on
Windows), relative to the bundle.
"""

import os
import runpy
import sys

HOOKS = ("pyi_rth_pyside6",)


def run_qt_hooks() -> None:
    """Run the bundle's deferred Qt run-time hooks; a bundle without them is left as is."""
    root = getattr(sys, "_MEIPASS", None)
    if root is None:
        return
    for name in HOOKS:
        path = os.path.join(root, "kubetray-hooks", f"{name}.py")
        if os.path.exists(path):
            runpy.run_path(path, run_name=name)
