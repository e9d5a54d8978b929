"""A long session in the real app, then Quit: run as `python tests/ui/long_session.py ISSUER
HELPER [KUBECONFIG]` (offscreen), by tests/ui/test_quit.py, and under a real X desktop by
scripts/person_run.py (`make screenshots`), which also passes a kubeconfig for Add cluster.

The app is `app.ui.app.run()`, as `python -m app` runs it. kubectl's part is played by
kubetray-exec calls from a thread; the person's part (answering one password dialog, cancelling
the next, cancelling a login, opening Diagnostics and the main window) by a timer on the GUI
thread that finds the dialogs and the menu's entries as a person would. Then SIGTERM.
"""

import os
import signal
import subprocess
import sys
import threading
import time

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QMenu

from app.ui.dialogs import AddClusterDialog, LoginDialog

V1 = '{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","spec":{"interactive":false}}'


def main() -> int:
    issuer, helper = sys.argv[1], sys.argv[2]
    kubeconfig = sys.argv[3] if len(sys.argv) > 3 else None
    app = QApplication(sys.argv)  # before run(): the timer below needs it
    app.setQuitOnLastWindowClosed(False)
    wanted: list[str] = []  # menu entries for the person to click, in order
    answers = ["pw-bob", None]  # the first password dialog answered, the second cancelled

    adding: list[str] = []  # Add cluster's steps: fill, saved, logging in

    def add_cluster(dialog: AddClusterDialog) -> None:
        """The person fills Add cluster in, saves, and clicks Log in now."""
        if not adding:
            dialog.context.setText("person-run")
            dialog.server.setText("https://127.0.0.1:9")  # nobody there: added with a warning
            dialog.issuer.setText(issuer)
            dialog.client_id.setText("kubectl")
            dialog.kubeconfig.setText(kubeconfig or "")
            dialog.save()
            adding.append("saved")
        elif adding == ["saved"] and getattr(dialog, "login_button", None) is not None:
            dialog.login_button.click()
            adding.append("logging in")

    def person() -> None:
        for widget in QApplication.topLevelWidgets():
            if isinstance(widget, AddClusterDialog) and widget.isVisible():
                add_cluster(widget)
            if isinstance(widget, LoginDialog) and widget.isVisible() and answers:
                answer = answers.pop(0)
                if answer is None:
                    widget.reject()
                else:
                    widget.answer.setText(answer)
                    widget.accept()
        if wanted:
            for menu in QApplication.topLevelWidgets():
                if not isinstance(menu, QMenu):
                    continue
                for action in _actions(menu):
                    if action.text() == wanted[0] and action.isEnabled():
                        wanted.pop(0)
                        action.trigger()
                        return

    timer = QTimer()
    timer.timeout.connect(person)
    timer.start(50)

    def kubectl(*flags: str) -> subprocess.CompletedProcess[str]:
        args = [f"--oidc-issuer-url={issuer}", "--oidc-client-id=kubectl", *flags]
        env = dict(os.environ, KUBERNETES_EXEC_INFO=V1)
        return subprocess.run(
            [helper, "get-token", *args], env=env, capture_output=True, text=True, timeout=60
        )

    def session() -> None:
        password = "--grant-type=password"
        while kubectl(password, "--username=alice", "--password=pw-alice").returncode != 0:
            time.sleep(0.2)
        kubectl(password, "--username=bob")  # a password dialog, answered
        kubectl(password, "--username=carol")  # a password dialog, cancelled
        device = threading.Thread(target=kubectl, args=("--grant-type=device-code",))
        device.start()
        time.sleep(1.0)
        wanted.extend(["Cancel login", "Diagnostics", "Open kubetray"])
        device.join()
        while wanted:
            time.sleep(0.05)
        if kubeconfig:  # the person's part on a real desktop: log out, Add cluster, Log in now
            wanted.extend(["Log out", "Add cluster…"])
            deadline = time.monotonic() + 20
            while adding != ["saved", "logging in"] and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(1.0)
            wanted.append("Cancel login")  # the new cluster's login, waiting for a browser
            while wanted and time.monotonic() < deadline:
                time.sleep(0.05)
            if wanted or adding != ["saved", "logging in"]:
                print(f"person run: stuck at {wanted or adding}", file=sys.stderr)
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGTERM)

    # kubectl once the app listens (its loop runs): earlier, kubetray-exec would start an agent.
    QTimer.singleShot(0, threading.Thread(target=session, daemon=True).start)
    from app.ui.app import run

    return run(store="memory")


def _actions(menu: QMenu) -> list:  # type: ignore[type-arg]
    out = []
    for action in menu.actions():
        if not action.isVisible():  # what a person sees: a row hides what its state lacks
            continue
        out.append(action)
        sub = action.menu()
        if isinstance(sub, QMenu):
            out.extend(_actions(sub))
    return out


if __name__ == "__main__":
    sys.exit(main())
