"""A Wayland desktop for tests: sway (headless, pixman) run as an unprivileged user (sway
refuses root), and clients run as the tests' own user connecting to its socket by path:
waybar (a StatusNotifierItem host with its own watcher, in its default style), mako (the
notification daemon, on the tests' D-Bus session), grim (screenshots)."""

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.peers import require
from tests.ui.desktop import require_desktop

USER = "kubetray-desktop"
"""The user sway runs as when the tests run as root (scripts/screenshots.py uses it too)."""
WIDTH, HEIGHT = 1280, 720
RUNUSER = "/usr/sbin/runuser"  # not on the PATH of every root shell


def _user() -> pwd.struct_passwd | None:
    """Whom sway runs as: None for the tests' own user, else USER (made when missing)."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "-m", "-c", "kubetray tests", USER], check=True)
        return pwd.getpwnam(USER)


@contextmanager
def sway(log: Path) -> Iterator[dict[str, str]]:
    """A headless sway until the block ends; yields the variables a client needs
    (WAYLAND_DISPLAY as a path, XDG_RUNTIME_DIR)."""
    require_desktop("sway")
    require(os.geteuid() != 0 or Path(RUNUSER).exists(), "no runuser (util-linux)")
    user = _user()
    runtime = Path(tempfile.mkdtemp(prefix="kt-sway-"))
    conf = runtime / "sway.conf"
    conf.write_text(f"output HEADLESS-1 resolution {WIDTH}x{HEIGHT}\ndefault_border none\n")
    conf.chmod(0o644)
    env = {
        "HOME": user.pw_dir if user else os.environ.get("HOME", "/tmp"),
        "XDG_RUNTIME_DIR": str(runtime),
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "WLR_BACKENDS": "headless",
        "WLR_LIBINPUT_NO_DEVICES": "1",
        "WLR_RENDERER": "pixman",
    }
    command = ["sway", "-c", str(conf)]
    if user is not None:
        os.chown(runtime, user.pw_uid, user.pw_gid)
        command = [RUNUSER, "-u", USER, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items())]
        command += ["sway", "-c", str(conf)]
    runtime.chmod(0o700)
    with log.open("ab") as out:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + 20
        while not (
            (sockets := sorted(p for p in runtime.glob("wayland-*") if p.is_socket()))
            and (ipc := sorted(runtime.glob("sway-ipc.*.sock")))
        ):
            assert proc.poll() is None, log.read_text(errors="replace")[-2000:]
            assert time.monotonic() < deadline, "sway did not make its sockets"
            time.sleep(0.05)
        client_runtime = Path(tempfile.mkdtemp(prefix="kt-wl-client-"))
        yield {
            "WAYLAND_DISPLAY": str(sockets[0]),
            "XDG_RUNTIME_DIR": str(client_runtime),
            "SWAYSOCK": str(ipc[0]),  # for swaymsg
        }
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        shutil.rmtree(runtime, ignore_errors=True)


def start(args: list[str], wayland: dict[str, str], log: Path) -> "subprocess.Popen[bytes]":
    """A Wayland client (``args``) on the tests' D-Bus session, its output in ``log``."""
    env = dict(os.environ, **wayland)
    env.pop("DISPLAY", None)
    with log.open("ab") as out:
        return subprocess.Popen(args, env=env, stdout=out, stderr=out)


def stop(*procs: "subprocess.Popen[bytes]") -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
