"""The tray icon on KDE Plasma: the real plasmashell (Plasma 5.27, its default panel with its
system tray, the StatusNotifierItem host) and kded5 (its StatusNotifierWatcher) on Xvfb, in a
home of their own on the tests' D-Bus session. The icon the app shows (tests/ui/tray_icon.py,
the QIcon the app gives Qt) is found in a screenshot of Plasma's panel and measured as waybar's
is (tests/ui/test_wayland_desktop.py): it stands out by 3:1 and its state's colour is there,
on Plasma's default Breeze panel and on Breeze Dark."""

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.peers import steady
from tests.ui.desktop import grab, require_desktop, tray_icon, xvfb
from tests.ui.test_panel import until
from tests.ui.test_wayland_desktop import colour_present
from tests.ui.wayland import stop

pytestmark = pytest.mark.skipif(
    not os.environ.get("DBUS_SESSION_BUS_ADDRESS"), reason="no D-Bus session: run with-keyring"
)

ACTIVITIES = Path("/usr/lib/x86_64-linux-gnu/libexec/kactivitymanagerd")
"""What plasmashell refuses to start without (the tests' bus starts no service on demand)."""
PANEL = 44
"""Plasma's default panel height (px, scale 1), at the bottom of the screen."""
LOOKS = {"Breeze, Plasma's default": "", "Breeze Dark": "breeze-dark"}
COLOURS = {
    "": Path("/usr/share/color-schemes/BreezeLight.colors"),
    "breeze-dark": Path("/usr/share/plasma/desktoptheme/breeze-dark/colors"),
}
"""Where each look's colours are: the Plasma style's own, else the system's (Breeze Light)."""
ROLES = {
    "ColorScheme-PositiveText": "ForegroundPositive",
    "ColorScheme-NeutralText": "ForegroundNeutral",
    "ColorScheme-NegativeText": "ForegroundNegative",
    "ColorScheme-Highlight": "DecorationFocus",
}
"""The badge's class in the named icon, and the colour Plasma paints it with (KDE's icon
stylesheet): Plasma recolours the icon, so the state shows in Plasma's colours."""


def bus_names() -> str:
    found = subprocess.run(
        [
            "gdbus", "call", "--session", "-d", "org.freedesktop.DBus",
            "-o", "/org/freedesktop/DBus", "-m", "org.freedesktop.DBus.ListNames",
        ],
        capture_output=True,
        text=True,
        timeout=10,
    )  # fmt: skip
    return found.stdout


class Plasma:
    def __init__(self, display: str, env: dict[str, str], look: str) -> None:
        self.display = display
        self.env = env
        self.look = look

    def badge(self, state: str) -> str | None:
        """The colour Plasma paints the state's badge (None: the state has none)."""
        import configparser
        import re

        from app.ui import icons

        source = icons.symbolic_file(state).read_text()
        roles = [ROLES[c] for c in re.findall(r'class="[^"]*?(ColorScheme-[A-Za-z]+)"', source)
                 if c in ROLES]  # fmt: skip
        if not roles:
            return None
        scheme = configparser.ConfigParser(interpolation=None)
        scheme.read(COLOURS[self.look])
        red, green, blue = (int(v) for v in scheme["Colors:Window"][roles[0]].split(","))
        return f"#{red:02x}{green:02x}{blue:02x}"

    def grab(self, path: Path) -> Any:
        """A screenshot of the whole screen (the X server's pixels), as a QImage."""
        return grab(self.env, path)


@contextmanager
def plasma_session(tmp_path: Path, look: str) -> Iterator[Plasma]:
    """Plasma on its own Xvfb, with ``look`` (a Plasma style, "" for its default), in a home
    under ``tmp_path``, until the block ends (also scripts/screenshots.py)."""
    home = tmp_path / "home"
    config = home / ".config"
    config.mkdir(parents=True)
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    if look:  # as System Settings writes it: the Plasma style
        (config / "plasmarc").write_text(f"[Theme]\nname={look}\n")
    with xvfb() as display:
        env = dict(
            os.environ,
            DISPLAY=display,
            HOME=str(home),
            XDG_CONFIG_HOME=str(config),
            XDG_CACHE_HOME=str(home / ".cache"),
            XDG_DATA_HOME=str(home / ".local" / "share"),
            XDG_RUNTIME_DIR=str(runtime),
            XDG_CURRENT_DESKTOP="KDE",
            KDE_FULL_SESSION="true",
            KDE_SESSION_VERSION="5",
            QT_QPA_PLATFORM="xcb",
        )
        log = (tmp_path / "plasma.log").open("w")
        procs = [
            subprocess.Popen([str(ACTIVITIES)], env=env, stdout=log, stderr=log),
            subprocess.Popen(["kded5"], env=env, stdout=log, stderr=log),
        ]
        try:
            until(lambda: "org.kde.ActivityManager" in bus_names(), 30, "kactivitymanagerd")
            until(lambda: "org.kde.StatusNotifierWatcher" in bus_names(), 30, "kded5's watcher")
            procs.append(
                subprocess.Popen(["plasmashell", "--no-respawn"], env=env, stdout=log, stderr=log)
            )
            until(lambda: "org.kde.StatusNotifierHost-" in bus_names(), 60, "Plasma's tray")
            time.sleep(3)  # the panel's first paint
            yield Plasma(display, env, look)
        finally:
            stop(*reversed(procs))
            log.close()


PLASMA_PROGRAMS = ("Xvfb", "plasmashell", "kded5", "gdbus", str(ACTIVITIES))


@pytest.fixture(params=LOOKS.values(), ids=LOOKS.keys())
def plasma(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Plasma]:
    require_desktop(*PLASMA_PROGRAMS)
    with plasma_session(tmp_path, request.param) as session:
        yield session


def panel_strip(shot: Any) -> tuple[Any, Any]:
    """The panel (the screen's bottom PANEL rows) and its background colour."""
    strip = shot.copy(0, shot.height() - PANEL, shot.width(), PANEL)
    return strip, strip.pixelColor(strip.width() // 2, 2)


def without(crop: Any, colour: str, background: Any, near: int = 48) -> Any:
    """``crop`` with the badge (the box around the pixels of ``colour``, its mark and its
    anti-aliased edge) painted as the panel: what is left is the wheel."""
    from PySide6.QtGui import QColor

    from tests.ui.test_icons import distance

    want = QColor(colour)
    hits = [
        (x, y)
        for y in range(crop.height())
        for x in range(crop.width())
        if distance(crop.pixelColor(x, y), want) <= near
    ]
    out = crop.copy()
    if not hits:
        return out
    xs, ys = [x for x, _ in hits], [y for _, y in hits]
    for y in range(max(min(ys) - 1, 0), min(max(ys) + 2, out.height())):
        for x in range(max(min(xs) - 1, 0), min(max(xs) + 2, out.width())):
            out.setPixelColor(x, y, background)
    return out


def items(strip: Any, background: Any) -> list[tuple[int, int]]:
    """The panel's right half as runs of columns that are not its background: (left, right)
    of each item (tray icons, the clock), separated by 2 or more background columns."""
    from tests.ui.test_icons import distance

    runs: list[tuple[int, int]] = []
    start = None
    gap = 0
    for x in range(strip.width() // 2, strip.width()):
        busy = any(
            distance(strip.pixelColor(x, y), background) > 8 for y in range(4, strip.height() - 4)
        )
        if busy:
            start = x if start is None else start
            gap = 0
        elif start is not None:
            gap += 1
            if gap >= 2:
                runs.append((start, x - gap))
                start, gap = None, 0
    return runs


def test_the_icon_reads_on_plasma_s_panel_in_every_state(
    qapp, plasma: Plasma, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtGui import QColor

    from tests.ui.test_icons import contrast, legibility, reads

    # Plasma's tray before the icon (it puts a new item left of the ones it has), once its
    # panel has painted them all: the same items in two grabs in a row.
    before = steady(
        lambda: items(*panel_strip(plasma.grab(tmp_path / "before.png"))), 60, "Plasma's panel"
    )
    tray_left = before[0][0]
    measured = {}
    with tray_icon(plasma.env) as show:
        for state in ("none", "ok", "expiring", "login", "error"):
            show(state)
            badge = plasma.badge(state)
            found: list[Any] = []

            def drawn(
                state: str = state, badge: str | None = badge, found: list[Any] = found
            ) -> bool:
                strip, background = panel_strip(plasma.grab(tmp_path / f"{state}.png"))
                new = [r for r in items(strip, background) if r[1] < tray_left]
                if not new:
                    return False
                left, right = new[-1]  # the item nearest the tray's others: ours
                crop = strip.copy(left - 2, 2, right - left + 5, PANEL - 4)
                steady = bool(found) and found[0] == crop  # Plasma fades a new icon in
                found[:] = [crop, background]
                return steady and (badge is None or colour_present(crop, badge))

            until(drawn, 30, f"the {state} icon in Plasma's tray")
            crop, background = found
            # The wheel reads by 3:1 as waybar's whole icon must (Plasma paints it in its text
            # colour). The badge is in Plasma's own state colour, as its own status icons are:
            # measured and printed, not held to 3:1 (Breeze Light's are 2.2 to 2.6:1).
            wheel = without(crop, badge, QColor(background)) if badge else crop
            measured[state] = (
                legibility(wheel, QColor(background)),
                round(contrast(QColor(badge), QColor(background)), 2) if badge else None,
            )
            assert reads(wheel, QColor(background)), (state, background.name(), measured[state])
    print(f"Plasma: {measured}")
