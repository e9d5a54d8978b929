"""kubetray on Wayland as a person meets it: sway (headless), waybar (its tray is a
StatusNotifierItem host and its own watcher), mako (notifications), the real app with Qt's
wayland plugin, and a real oidc-provider. Run by scripts/screenshots.py (`make screenshots`)
as an unprivileged user (sway refuses root) inside `dbus-run-session`:

    python scripts/wayland_session.py OUT_DIR

It writes panel crops of the icon on a dark and a light waybar (signed in, and a login
needed), mako's notification, and prints one line per check; exit 1 if any check failed:
the icon registers with waybar's watcher, kubectl's login is one notification that is
withdrawn when cancelled, the menu offers *Copy link…* and its window's Copy button puts the
link on the Wayland clipboard (read back with wl-paste), and the app quits cleanly.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.idp import run_idp  # noqa: E402
from tests.peers import V1  # noqa: E402
from tests.ui.panel import Panel, open_dbus_router  # noqa: E402

WIDTH, HEIGHT, BAR = 1280, 720, 30
PANELS = {"dark": ("#000000", "#ffffff"), "light": ("#ffffff", "#000000")}
SWAY = f"output HEADLESS-1 resolution {WIDTH}x{HEIGHT}\ndefault_border none\n"
WAYBAR = {
    "layer": "top",
    "position": "top",
    "height": BAR,
    "modules-center": ["clock"],
    "modules-right": ["tray"],
    "tray": {"icon-size": 22, "spacing": 8},
}
failures: list[str] = []


def check(ok: bool, what: str) -> None:
    print(f"wayland: {'ok' if ok else 'FAILED'}: {what}", flush=True)
    if not ok:
        failures.append(what)


def until(test: Callable[[], object], timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if test():
                return True
        except Exception:
            pass
        time.sleep(0.1)
    return False


def style(work: Path, panel: str) -> None:
    background, text = PANELS[panel]
    (work / "waybar.css").write_text(
        "* { font-family: sans-serif; font-size: 13px; }\n"
        f"window#waybar {{ background: {background}; color: {text}; }}\n"
    )


def grim(out: Path, region: str | None = None) -> None:
    subprocess.run(["grim", *(["-g", region] if region else []), str(out)], check=True)


def main() -> int:
    out = Path(sys.argv[1])
    work = Path(tempfile.mkdtemp(prefix="kt-wayland-"))
    runtime = Path(os.environ["XDG_RUNTIME_DIR"])
    (work / "sway.conf").write_text(SWAY)
    (work / "waybar.json").write_text(json.dumps(WAYBAR))
    style(work, "dark")
    env = dict(os.environ, WLR_BACKENDS="headless", WLR_LIBINPUT_NO_DEVICES="1")
    env.setdefault("WLR_RENDERER", "pixman")
    procs: list[subprocess.Popen[bytes]] = []
    log = (work / "desktop.log").open("wb")
    quiet = {"stdout": log, "stderr": log}
    procs.append(subprocess.Popen(["sway", "-c", str(work / "sway.conf")], env=env, **quiet))

    def sockets() -> list[str]:
        return [
            p.name for p in runtime.iterdir() if p.name.startswith("wayland-") and p.is_socket()
        ]

    if not until(sockets):
        print("wayland: sway did not start", file=sys.stderr)
        return 1
    display = sockets()[0]
    os.environ["WAYLAND_DISPLAY"] = display
    os.environ["SWAYSOCK"] = str(next(runtime.glob("sway-ipc.*.sock")))  # for swaymsg
    waybar = subprocess.Popen(
        ["waybar", "-c", str(work / "waybar.json"), "-s", str(work / "waybar.css")], **quiet
    )
    procs += [waybar, subprocess.Popen(["mako"], **quiet)]
    try:
        with run_idp(password=True) as idp, open_dbus_router() as router:
            return session(
                out, work, idp.issuer, waybar, Panel(router, lambda ms: time.sleep(ms / 1000))
            )
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            proc.wait(10)


def session(
    out: Path, work: Path, issuer: str, waybar: "subprocess.Popen[bytes]", panel: Panel
) -> int:
    from exec_helper.dev_launcher import write_launcher

    helper = work / "kubetray-exec"
    write_launcher(str(helper), sys.executable)
    kt = dict(
        os.environ,
        KUBETRAY_RUNTIME_DIR=str(work / "run"),
        KUBETRAY_CONFIG_DIR=str(work / "config"),
        KUBETRAY_STATE_DIR=str(work / "state"),
        KUBETRAY_BROWSER="true",  # a browser that "opens": the login waits for the person
        PYTHONPATH=str(ROOT),
        QT_QPA_PLATFORM="wayland",
    )
    app_log = (work / "app.log").open("w")
    app = subprocess.Popen(
        [sys.executable, "-m", "app", "app", "--store", "memory"],
        env=kt,
        stdout=app_log,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
    )

    def kubectl(*flags: str) -> subprocess.CompletedProcess[str]:
        args = [f"--oidc-issuer-url={issuer}", "--oidc-client-id=kubectl", *flags]
        return subprocess.run(
            [str(helper), "get-token", *args],
            env=dict(kt, KUBERNETES_EXEC_INFO=V1),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def panel_shot(name: str) -> None:
        time.sleep(1.0)
        grim(out / f"{name}.png", f"{WIDTH - 120},0 120x{BAR}")

    try:
        check(until(lambda: len(panel.items()) == 1), "the icon registered with waybar's watcher")
        check(
            kubectl("--grant-type=password", "--username=alice", "--password=pw-alice").returncode
            == 0,
            "kubectl's password login through the app",
        )
        check(
            until(lambda: panel.properties()["IconName"] == "kubetray-ok-symbolic"),
            "icon: signed in",
        )
        for theme in ("dark", "light"):
            style(work, theme)
            waybar.send_signal(signal.SIGUSR2)  # waybar reloads its style
            panel_shot(f"wayland-{theme}-ok")
        # kubectl needs a login the person must do: the app's notification (mako), one.
        device = threading.Thread(target=kubectl, args=("--grant-type=device-code",), daemon=True)
        device.start()
        check(
            until(lambda: "enter code" in json.dumps(panel.layout())),
            "a device-code login in the menu",
        )
        check(until(lambda: len(makoctl_list()) == 1), "one notification on screen (mako)")
        grim(out / "wayland-notification.png", f"{WIDTH - 420},0 420x160")
        for theme in ("light", "dark"):
            style(work, theme)
            waybar.send_signal(signal.SIGUSR2)
            panel_shot(f"wayland-{theme}-login")
        row = next(e for e in panel.layout() if "enter code" in e["label"])
        labels = [c["label"] for c in row["children"]]
        check("Copy link…" in labels, "the menu offers Copy link… (a window of ours) on Wayland")
        panel.click("Copy link…", within=row["label"][:10])
        time.sleep(1.0)
        grim(out / "wayland-link-window.png")
        copied = copy_from_link_window()
        link = next((line for line in app_text(work) if "/device" in line), "")
        check(
            bool(copied) and copied in link,
            f"Copy in the link window: wl-paste gives {copied[:60]!r}",
        )
        panel.click("Cancel login", within=row["label"][:10])
        check(
            until(lambda: makoctl_list() == []),
            "the notification withdrawn when the login was cancelled",
        )
        device.join(30)
        panel.click("Quit kubetray")
        app.wait(20)
        text = (work / "app.log").read_text()
        check(
            app.returncode == 0 and "Traceback" not in text, f"quit cleanly (exit {app.returncode})"
        )
    finally:
        if app.poll() is None:
            app.terminate()
            app.wait(10)
    print(f"wayland: {'clean' if not failures else 'NOT CLEAN: ' + '; '.join(failures)}")
    return 1 if failures else 0


def makoctl_list() -> list[dict]:  # type: ignore[type-arg]
    done = subprocess.run(["makoctl", "list"], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)["data"][0]


def app_text(work: Path) -> list[str]:
    return (work / "app.log").read_text().splitlines()


def copy_from_link_window() -> str:
    """Press Return in the link window (its Copy button has the focus), as a person would, with
    a virtual keyboard (wtype), and read the clipboard back with wl-paste."""
    tree = json.loads(
        subprocess.run(
            ["swaymsg", "-t", "get_tree"], capture_output=True, text=True, check=False
        ).stdout
    )
    windows = [n for n in walk(tree) if str(n.get("name", "")).startswith("kubetray: the login")]
    if not windows:
        return ""
    subprocess.run(
        ["swaymsg", f"[con_id={windows[-1]['id']}] focus"], capture_output=True, check=False
    )
    time.sleep(0.3)
    # -s 500: the virtual keyboard is new to the seat; Qt needs a moment to take its keymap.
    subprocess.run(
        ["wtype", "-s", "500", "-k", "Return"], capture_output=True, timeout=5, check=False
    )
    time.sleep(0.5)
    pasted = subprocess.run(
        ["wl-paste", "--no-newline"], capture_output=True, text=True, timeout=5, check=False
    )
    return pasted.stdout


def walk(node: dict) -> list[dict]:  # type: ignore[type-arg]
    out = [node]
    for child in node.get("nodes", []) + node.get("floating_nodes", []):
        out.extend(walk(child))
    return out


if __name__ == "__main__":
    sys.exit(main())
