"""The app's tray icon alone, on a real panel: `python tests/ui/tray_icon.py` puts the named
icons where the app does (app.ui.app.install_symbolic_icons), shows icons.state_icon("none")
(the QIcon the app gives QSystemTrayIcon: its name and its pixels), then the state named on
each line of stdin, saying "shown STATE" on stdout. Run by tests/ui/test_wayland_desktop.py."""

import sys

from PySide6.QtWidgets import QApplication, QSystemTrayIcon


def main() -> int:
    from PySide6.QtCore import QSocketNotifier

    from app.ui import icons
    from app.ui.app import install_symbolic_icons

    app = QApplication(sys.argv)
    app.setDesktopFileName("kubetray")
    install_symbolic_icons()
    tray = QSystemTrayIcon(icons.state_icon("none"))
    tray.show()
    print("shown none", flush=True)

    def read() -> None:
        line = sys.stdin.readline().strip()
        if not line:
            app.quit()
            return
        tray.setIcon(icons.state_icon(line))
        print(f"shown {line}", flush=True)

    notifier = QSocketNotifier(sys.stdin.fileno(), QSocketNotifier.Type.Read)
    notifier.activated.connect(read)
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
