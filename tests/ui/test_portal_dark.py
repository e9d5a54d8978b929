"""GNOME's dark style, as GNOME says it: the XDG desktop portal's ``color-scheme``, served by the
real xdg-desktop-portal with its GTK backend reading ``org.gnome.desktop.interface``. The real
app (Qt's xcb plugin on Xvfb, XDG_CURRENT_DESKTOP=GNOME, in its own process) shows its window
dark, and light again when the person turns dark style off, read from the screen's pixels.

Qt's own GNOME/GTK themes read the GTK theme, which GNOME leaves light: the window was light."""

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.peers import KubetrayEnv, require
from tests.ui.desktop import grab, require_desktop, running_app, xvfb
from tests.ui.test_panel import until
from tests.ui.wayland import stop

pytestmark = pytest.mark.skipif(
    not os.environ.get("DBUS_SESSION_BUS_ADDRESS"), reason="no D-Bus session: run with-keyring"
)

PORTAL = Path("/usr/libexec/xdg-desktop-portal")
PORTAL_GTK = Path("/usr/libexec/xdg-desktop-portal-gtk")


class Desktop:
    """Xvfb with GNOME's portal stack on the tests' bus; its GSettings in a key file the test
    writes, as gsettings would."""

    def __init__(self, display: str, settings: Path) -> None:
        self.display = display
        self.settings = settings

    def prefer(self, scheme: str) -> None:
        """Dark style on or off, as GNOME Settings does: org.gnome.desktop.interface."""
        part = self.settings.with_suffix(".part")
        part.write_text(f"[org/gnome/desktop/interface]\ncolor-scheme='{scheme}'\n")
        part.replace(self.settings)

    def portal_says(self) -> str:
        found = subprocess.run(
            [
                "gdbus", "call", "--session", "-d", "org.freedesktop.portal.Desktop",
                "-o", "/org/freedesktop/portal/desktop",
                "-m", "org.freedesktop.portal.Settings.Read",
                "org.freedesktop.appearance", "color-scheme",
            ],
            capture_output=True,
            text=True,
            timeout=10,
        )  # fmt: skip
        return found.stdout.strip()

    def lightness(self, window: str, save: Path | None = None) -> float:
        """The mean lightness (0 black, 1 white) of a grid of the window's pixels (the window
        saved as ``save`` too)."""
        path = save or self.settings.parent / "window.png"
        image = grab(dict(os.environ, DISPLAY=self.display), path, window)
        w, h = image.width(), image.height()
        points = [(x, y) for x in range(w // 10, w, w // 10) for y in range(h // 10, h, h // 10)]
        return sum(image.pixelColor(x, y).lightnessF() for x, y in points) / len(points)


@contextmanager
def gnome_portal(tmp_path: Path) -> Iterator[Desktop]:
    """Xvfb with GNOME's portal stack, dark style on, until the block ends (also
    scripts/screenshots.py)."""
    config = tmp_path / "portal-config"
    (config / "glib-2.0" / "settings").mkdir(parents=True)
    with xvfb() as display:
        desktop = Desktop(display, config / "glib-2.0" / "settings" / "keyfile")
        desktop.prefer("prefer-dark")
        env = dict(
            os.environ,
            DISPLAY=display,
            XDG_CURRENT_DESKTOP="GNOME",
            XDG_CONFIG_HOME=str(config),
            GSETTINGS_BACKEND="keyfile",
        )
        procs = [
            subprocess.Popen([str(PORTAL_GTK), "-r"], env=env, stderr=subprocess.DEVNULL),
        ]
        try:
            until(
                lambda: subprocess.run(
                    ["gdbus", "introspect", "--session", "-d",
                     "org.freedesktop.impl.portal.desktop.gtk",
                     "-o", "/org/freedesktop/portal/desktop"],
                    capture_output=True,
                ).returncode == 0,
                what="xdg-desktop-portal-gtk on the bus",
            )  # fmt: skip
            procs.append(subprocess.Popen([str(PORTAL), "-r"], env=env, stderr=subprocess.DEVNULL))
            until(lambda: "uint32 1" in desktop.portal_says(), what="the portal's dark style")
            yield desktop
        finally:
            stop(*reversed(procs))


@pytest.fixture
def gnome(tmp_path: Path) -> Iterator[Desktop]:
    require_desktop("Xvfb", "xdotool", "gdbus")
    require(PORTAL.exists() and PORTAL_GTK.exists(), "not installed: xdg-desktop-portal-gtk")
    with gnome_portal(tmp_path) as desktop:
        yield desktop


def test_the_portal_s_answer_in_either_shape_and_what_it_asks() -> None:
    from PySide6.QtCore import Qt

    from app.ui.appearance import scheme_of

    assert scheme_of(("v", ("u", 1))) is Qt.ColorScheme.Dark  # Read, portals before 1.17
    assert scheme_of(("u", 2)) is Qt.ColorScheme.Light  # ReadOne, SettingChanged
    assert scheme_of(("u", 0)) is Qt.ColorScheme.Unknown  # no preference: Qt's own
    assert scheme_of(("s", "dark")) is Qt.ColorScheme.Unknown  # not the spec's: ignored
    assert scheme_of(("u", 7)) is Qt.ColorScheme.Unknown


def main_window(display: str, pid: int) -> str:
    found = subprocess.run(
        ["xdotool", "search", "--onlyvisible", "--pid", str(pid), "--name", "^kubetray$"],
        env=dict(os.environ, DISPLAY=display),
        capture_output=True,
        text=True,
    )
    return found.stdout.split()[0] if found.stdout.split() else ""


def test_gnome_s_dark_style_darkens_the_window_and_turning_it_off_lightens_it(
    kt: KubetrayEnv, gnome: Desktop
) -> None:
    # No tray on this desktop (GNOME without AppIndicator): the window stands in, visible.
    with running_app(
        kt, gnome.display, ["dev=https://idp.invalid"], XDG_CURRENT_DESKTOP="GNOME"
    ) as app:
        until(lambda: main_window(gnome.display, app.proc.pid), what="the main window")
        window = main_window(gnome.display, app.proc.pid)
        until(lambda: gnome.lightness(window) < 0.35, timeout=15, what="the window dark")
        assert "prefers the dark look" in app.stderr()

        gnome.prefer("default")  # dark style off in GNOME Settings
        until(lambda: "uint32 0" in gnome.portal_says(), what="the portal's change")
        until(lambda: gnome.lightness(window) > 0.6, timeout=15, what="the window light again")
        assert "Traceback" not in app.stderr()
