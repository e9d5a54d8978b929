"""Regenerate the screenshots in docs/screenshots from the real app under Xvfb with a tray host.

Run `make screenshots` (it installs Xvfb, trayer and the libraries Qt's xcb plugin needs).
It starts Xvfb and trayer, runs the app in-process with its IPC server, logs in to a real
oidc-provider, lets kubetray-exec make real calls, then grabs the tray menu, the device-code
window, the diagnostics window and the add-cluster dialog.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.ui.controller import TrayController
    from app.ui.tray import TrayApp

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "screenshots"
sys.path.insert(0, str(ROOT))


WIDTH = 1100
PANELS = {"dark": "0x000000", "light": "0xffffff"}
"""trayer's tint for a black and a white panel (the icon must read on both)."""


def start_tray(tint: str = "0x2b2b2b") -> subprocess.Popen[bytes]:
    """trayer, a real XEmbed tray, along the top right edge, in the colour ``tint``."""
    return subprocess.Popen(
        [
            "trayer",
            "--edge",
            "top",
            "--align",
            "right",
            "--widthtype",
            "request",
            "--height",
            "28",
            "--tint",
            tint,
            "--transparent",
            "true",
            "--alpha",
            "0",
        ]
    )


def start_display() -> list[subprocess.Popen[bytes]]:
    display = ":97"
    xvfb = subprocess.Popen(
        ["Xvfb", display, "-screen", "0", f"{WIDTH}x700x24", "-nolisten", "tcp"]
    )
    os.environ["DISPLAY"] = display
    os.environ.pop("QT_QPA_PLATFORM", None)
    time.sleep(1.0)
    tray = start_tray()
    time.sleep(1.0)
    procs = [tray, xvfb]
    # A window manager and a notification daemon, as on a person's desktop (when installed).
    if shutil.which("openbox"):
        procs.insert(0, subprocess.Popen(["openbox"], stderr=subprocess.DEVNULL))
    if shutil.which("dunst") and os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
        procs.insert(0, subprocess.Popen(["dunst"], stderr=subprocess.DEVNULL))
    time.sleep(0.5)
    return procs


def main() -> int:
    if not shutil.which("Xvfb") or not shutil.which("trayer"):
        sys.exit("needs Xvfb and trayer: apt-get install xvfb trayer")
    work = Path(tempfile.mkdtemp(prefix="kt-shots-"))
    os.environ.update(
        KUBETRAY_BROWSER="true",  # logins in the shots wait for a browser that never comes
        KUBETRAY_RUNTIME_DIR=str(work / "run"),
        KUBETRAY_CONFIG_DIR=str(work / "config"),
        KUBETRAY_STATE_DIR=str(work / "state"),
        HOME=str(work),
    )
    procs = start_display()
    try:
        status = shoot(work, procs)
    finally:
        for p in procs:
            p.terminate()
    return status or shoot_wayland() or shoot_plasma() or shoot_gnome_dark()


def shoot(work: Path, procs: list[subprocess.Popen[bytes]]) -> int:
    from datetime import UTC, datetime, timedelta

    import requests
    from PySide6.QtCore import QPoint
    from PySide6.QtWidgets import QApplication

    from app import compose
    from app.broker.broker import utcnow
    from app.settings import Settings
    from app.static_credentials import certificate_credential
    from app.store.memory_store import MemorySecretStore
    from app.ui.controller import TrayController
    from app.ui.tray import TrayApp
    from exec_helper.dev_launcher import write_launcher
    from tests.idp import run_idp
    from tests.pki import CA

    app = QApplication(sys.argv)
    OUT.mkdir(parents=True, exist_ok=True)
    store = MemorySecretStore()
    parts = compose.agent(store=store)
    parts.server.listener.open()
    parts.start()
    import threading

    threading.Thread(target=parts.server.serve_forever, daemon=True).start()
    controller = TrayController(parts.core, Settings(), utcnow)
    view = TrayApp(controller)

    def settle(seconds: float = 0.6) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            app.processEvents()
            time.sleep(0.02)

    ca = CA()
    user = ca.issue("ops-admin", org="system:masters", lifetime=timedelta(days=30))
    now = datetime.now(UTC)
    compose.stored_credentials(store).save(
        certificate_credential("prod-admin", user.cert_pem, user.key_pem, "c", "k", now), now
    )
    helper = work / "kubetray-exec"
    write_launcher(str(helper), sys.executable)
    from tests.peers import V1

    with run_idp(password=True) as idp:
        flags = [
            "get-token",
            f"--oidc-issuer-url={idp.issuer}",
            "--oidc-client-id=kubectl",
            "--oidc-extra-scope=email",
            "--oidc-extra-scope=groups",
            "--grant-type=password",
            "--username=alice",
            "--password=pw-alice",
        ]
        # A kubeconfig whose contexts run kubetray-exec: the main window groups them.
        import yaml

        def user(name: str, args: list[str]) -> dict[str, object]:
            exec_ = {"apiVersion": "client.authentication.k8s.io/v1", "command": str(helper)}
            return {"name": name, "user": {"exec": {**exec_, "args": args}}}

        kubeconfig = work / ".kube" / "config"
        kubeconfig.parent.mkdir(exist_ok=True)
        clusters = {"prod": "https://api.prod.example:6443", "dev": "https://api.dev.example:6443"}
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {"name": n, "cluster": {"server": u}} for n, u in clusters.items()
                    ],
                    "users": [
                        user("alice", flags),
                        user("prod-admin", ["--stored", "prod-admin"]),
                        user("staging", ["--stored", "staging"]),
                    ],
                    "contexts": [
                        {"name": c, "context": {"cluster": k, "user": u}}
                        for c, k, u in (
                            ("dev", "dev", "alice"),
                            ("dev-admin", "dev", "alice"),
                            ("prod", "prod", "prod-admin"),
                            ("staging", "dev", "staging"),
                        )
                    ],
                    "current-context": "dev",
                }
            )
        )
        env = dict(os.environ, KUBERNETES_EXEC_INFO=V1, KUBECONFIG=str(kubeconfig))
        for args in (flags, flags, ["--stored", "prod-admin"], ["--stored", "staging"]):
            subprocess.run(
                [str(helper), *args], env=env, capture_output=True, timeout=60, check=False
            )
        from app.oidc.settings import OIDCSettings

        pending = OIDCSettings(
            issuer=idp.issuer,
            client_id="other-audience",
            scopes=("openid", "email"),
            grant_type="device-code",
        )
        parts.logins.identity(pending, "staging-oidc")
        # A browser login in flight (the "browser" is `true`: it opens nothing), with a long
        # authorize URL: the menu keeps one short line for it.
        browsing = OIDCSettings(
            issuer=idp.issuer,
            client_id="kubectl",
            scopes=("openid", "email", "groups", "offline_access"),
            grant_type="authcode",
        )
        parts.logins.identity(browsing, "team-dev")
        controller.log_in("team-dev")
        settle(2.0)
        view.refresh()
        # The tray menu, popped up under the tray icon, with the browsing identity's submenu.
        geometry = view.tray.geometry() if view.tray is not None else None
        view.menu.popup(QPoint(geometry.x() if geometry else 700, 30))
        settle(1.0)
        entry = view.identity_menus["team-dev"].menuAction()
        view.menu.setActiveAction(entry)
        view.identity_menus["team-dev"].popup(
            view.menu.actionGeometry(entry).topLeft() + view.menu.pos() + QPoint(-10, 0)
        )
        settle(1.0)
        screen = app.primaryScreen()
        shot = screen.grabWindow(0, WIDTH - 720, 0, 720, 330)
        shot.save(str(OUT / "tray-menu.png"))
        view.identity_menus["team-dev"].hide()
        view.menu.hide()
        shoot_panels(procs, settle)
        # The desktop's notification (dunst here) when the browser did not open.
        if view.desktop_notifications.available():
            controller.notify.emit(
                "browser",
                "team-dev",
                "The browser did not open for team-dev",
                "Open the login page, or copy the link into a browser.",
            )
            settle(1.5)
            screen.grabWindow(0, 1100 - 460, 0, 460, 200).save(str(OUT / "notification.png"))
        controller.cancel("team-dev")
        # A real device authorization request at oidc-provider, shown by the app's window.
        doc = requests.post(
            f"{idp.issuer}/device/auth",
            data={"client_id": "kubectl", "scope": "openid"},
            timeout=10,
        ).json()
        view.show_device_code(
            "kubectl@" + idp.issuer[7:], doc["user_code"], doc["verification_uri"]
        )
        settle()
        next(iter(view.device_windows.values())).grab().save(str(OUT / "device-code.png"))
        view.show_diagnostics()
        settle()
        assert view.diagnostics is not None
        view.diagnostics.table.selectRow(0)  # its detail pane, below the table
        settle()
        view.diagnostics.grab().save(str(OUT / "diagnostics.png"))
        shoot_main_window(view, settle)
        # An SSH host's first request, as the desktop asks about it.
        from app.model import Decision, Question

        question = Question("devvm", "https://api.prod.example:6443", "alice@idp.example")
        controller.consent_asked.emit(question)
        settle()
        view.consent_dialogs["devvm as alice@idp.example"].grab().save(str(OUT / "ssh-consent.png"))
        question.answer(Decision.DENY)
        shoot_add_cluster(controller, idp.issuer, settle)
        shoot_login_dialog(controller, settle)
    view.shutdown()
    parts.server.shutdown()
    parts.stop()
    print(f"wrote {sorted(p.name for p in OUT.iterdir())}")
    return 0


# -- the icon on a dark and a light panel --------------------------------------------------------


def shoot_panels(procs: list[subprocess.Popen[bytes]], settle: "Callable[[float], None]") -> None:
    """The icon in trayer (XEmbed) on a black and on a white panel: trayer restarts in each
    colour and Qt docks the icon in the new tray by itself."""
    from PySide6.QtWidgets import QApplication

    tray = next(p for p in procs if p.args[0] == "trayer")  # type: ignore[index]
    for name, tint in PANELS.items():
        tray.terminate()
        tray.wait(5)
        procs[procs.index(tray)] = tray = start_tray(tint)
        settle(2.5)
        screen = QApplication.primaryScreen()
        screen.grabWindow(0, WIDTH - 120, 0, 120, 28).save(str(OUT / f"x11-{name}-panel.png"))


def shoot_wayland() -> int:
    """scripts/wayland_session.py as an unprivileged user (sway refuses root), when sway is
    installed and we are root: the icon on waybar, dark and light, and mako's notification."""
    import pwd
    import shutil as sh

    if not sh.which("sway") or os.geteuid() != 0:
        print("wayland: skipped (needs sway, waybar, mako, grim, wtype and root to make a user)")
        return 0
    user = "kubetray-desktop"
    try:
        pwd.getpwnam(user)
    except KeyError:
        subprocess.run(["useradd", "-m", "-c", "kubetray screenshots", user], check=True)
    entry = pwd.getpwnam(user)
    runtime = Path(f"/run/user/{entry.pw_uid}")
    runtime.mkdir(parents=True, exist_ok=True)
    os.chown(runtime, entry.pw_uid, entry.pw_gid)
    runtime.chmod(0o700)
    out = Path(tempfile.mkdtemp(prefix="kt-wayland-shots-"))
    os.chown(out, entry.pw_uid, entry.pw_gid)
    env = [
        f"HOME={entry.pw_dir}",
        f"XDG_RUNTIME_DIR={runtime}",
        "PATH=/usr/bin:/bin",
        "LANG=C.UTF-8",
    ]
    done = subprocess.run(
        [
            "runuser",
            "-u",
            user,
            "--",
            "env",
            "-i",
            *env,
            "dbus-run-session",
            "--",
            sys.executable,
            str(ROOT / "scripts" / "wayland_session.py"),
            str(out),
        ],
        cwd="/tmp",
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    print("\n".join(line for line in done.stdout.splitlines() if line.startswith("wayland:")))
    for png in out.glob("*.png"):
        sh.copy(png, OUT / png.name)
    return done.returncode


def shoot_plasma() -> int:
    """The icon in KDE Plasma's system tray (the real plasmashell, tests/ui/test_plasma_desktop)
    on its default Breeze panel and on Breeze Dark, in two states."""
    from tests.ui.desktop import tray_icon
    from tests.ui.test_plasma_desktop import LOOKS, PANEL, PLASMA_PROGRAMS, plasma_session

    if any(shutil.which(p) is None and not os.path.exists(p) for p in PLASMA_PROGRAMS):
        print("plasma: skipped (needs plasma-desktop, kded5, kactivitymanagerd, Xvfb)")
        return 0
    for name, look in zip(("light", "dark"), LOOKS.values(), strict=True):
        with (
            tempfile.TemporaryDirectory(prefix="kt-plasma-shots-") as tmp,
            plasma_session(Path(tmp), look) as plasma,
            tray_icon(plasma.env) as show,
        ):
            for state in ("ok", "login"):
                show(state)
                time.sleep(3)  # Plasma fades a new icon in
                shot = plasma.grab(Path(tmp) / "shot.png")
                crop = shot.copy(shot.width() - 300, shot.height() - PANEL, 300, PANEL)
                crop.save(str(OUT / f"plasma-{name}-{state}.png"))
    print("plasma: the icon on Breeze and Breeze Dark")
    return 0


def shoot_gnome_dark() -> int:
    """The main window under GNOME's dark style, as the real xdg-desktop-portal says it
    (tests/ui/test_portal_dark): the app in its own process, its window standing in (no tray)."""
    from tests.ui.test_panel import until
    from tests.ui.test_portal_dark import PORTAL_GTK, gnome_portal, main_window

    if not PORTAL_GTK.exists() or not shutil.which("xdotool"):
        print("gnome: skipped (needs xdg-desktop-portal-gtk and xdotool)")
        return 0
    with (
        tempfile.TemporaryDirectory(prefix="kt-gnome-shots-") as tmp,
        gnome_portal(Path(tmp)) as desktop,
    ):
        env = dict(
            os.environ,
            DISPLAY=desktop.display,
            QT_QPA_PLATFORM="xcb",
            XDG_CURRENT_DESKTOP="GNOME",
            KUBETRAY_RUNTIME_DIR=f"{tmp}/run",
            KUBETRAY_CONFIG_DIR=f"{tmp}/config",
            KUBETRAY_STATE_DIR=f"{tmp}/state",
        )
        app = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "ui" / "tray_app.py"), "dev=https://idp.invalid"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            until(lambda: main_window(desktop.display, app.pid), 30, "the main window")
            window = main_window(desktop.display, app.pid)
            until(lambda: desktop.lightness(window) < 0.35, 15, "the window dark")
            desktop.lightness(window, OUT / "gnome-dark-main-window.png")
        finally:
            app.terminate()
            app.wait(20)
    print("gnome: the main window under dark style")
    return 0


# -- the main window and its dialogs -----------------------------------------------------------


def shoot_main_window(view: "TrayApp", settle: "Callable[[float], None]") -> None:
    """The main window as it opens: the first row selected, the line saying what to do."""
    view.show_main_window()
    settle(0.6)
    assert view.main_window is not None
    view.main_window.grab().save(str(OUT / "main-window.png"))


def shoot_add_cluster(
    controller: "TrayController", issuer: str, settle: "Callable[[float], None]"
) -> None:
    """Add cluster after Check provider: what the provider offers, in plain words."""
    from app.ui.dialogs import AddClusterDialog

    dialog = AddClusterDialog(controller)
    dialog.context.setText("staging")
    dialog.server.setText("https://api.staging.example:6443")
    dialog.issuer.setText(issuer)
    dialog.client_id.setText("kubectl")
    dialog.show()
    dialog.probe()
    settle(1.5)
    dialog.grab().save(str(OUT / "add-cluster.png"))
    dialog.close()


def shoot_login_dialog(controller: "TrayController", settle: "Callable[[float], None]") -> None:
    """A password login's one dialog: username and password, whose login, who asked."""
    from app.ui.dialogs import LoginDialog

    facts = controller.login_facts("alice")
    dialog = LoginDialog(facts, "Username: ", False, with_password=True)
    dialog.answer.setText("alice")
    dialog.show()
    settle(0.6)
    dialog.grab().save(str(OUT / "login-dialog.png"))
    dialog.close()


if __name__ == "__main__":
    sys.exit(main())
