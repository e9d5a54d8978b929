"""Tray icons per overall state (sources and renderer: scripts/render_icons.py, resources/icons).

One icon reads on dark, light and coloured panels alike (a white wheel and a badge with at
least 3:1 contrast on black and on white, each in a black halo; the state shown by the badge's
shape too), so nothing guesses the panel's colour from Qt's palette. On Linux the icon also
carries a *name*, ``kubetray-STATE-symbolic``: a StatusNotifierItem host that finds it in the
icon theme draws that one, recoloured by hosts that recolour (GNOME Shell's AppIndicator
extension, Plasma, GTK panels: the badge keeps a colour class) and as it is by the others
(waybar); any other shows the pixels. The app puts the named icons into the user's hicolor
theme at start (``user_icon_dir``), where hosts look them up. On macOS the icon is a template
image the menu bar tints.
"""

import os
import sys
from pathlib import Path

from PySide6.QtCore import QRect, QSize
from PySide6.QtGui import QIcon, QIconEngine, QPainter, QPixmap

from app.model import IdentityStatus, State

OK, EXPIRING, LOGIN, ERROR, NONE = "ok", "expiring", "login", "error", "none"
STATES = (OK, EXPIRING, LOGIN, ERROR, NONE)
SIZES = (22, 32, 64)


def resources_dir() -> Path:
    """resources/ in the source tree, or inside a PyInstaller bundle."""
    bundle = getattr(sys, "_MEIPASS", None)
    base = Path(bundle) if bundle else Path(__file__).resolve().parent.parent.parent
    return base / "resources"


def symbolic_name(state: str) -> str:
    """The icon-theme name a panel looks the state's one-colour icon up by."""
    return f"kubetray-{state}-symbolic"


def symbolic_file(state: str) -> Path:
    return (
        resources_dir()
        / "icons"
        / "hicolor"
        / "scalable"
        / "status"
        / f"{symbolic_name(state)}.svg"
    )


def icon_files(state: str, platform: str | None = None) -> list[Path]:
    """The image files of a state's icon: on macOS the template images (black and alpha, which
    the menu bar tints for its light or dark look), elsewhere the state's own colours."""
    folder = resources_dir() / "icons"
    if (platform or sys.platform) == "darwin":
        return [
            folder / f"kubetray-{state}-template.png",
            folder / f"kubetray-{state}-template@2x.png",
        ]
    return [folder / f"kubetray-{state}-{size}.png" for size in SIZES]


class _NamedIcon(QIconEngine):
    """The state's pixels under the state's icon-theme name: Qt's StatusNotifierItem sends
    both (IconName and IconPixmap), so a host uses the name where it finds it."""

    def __init__(self, name: str, pixels: QIcon) -> None:
        super().__init__()
        self._name = name
        self._pixels = pixels

    def iconName(self) -> str:
        return self._name

    def paint(self, painter: QPainter, rect: QRect, mode: QIcon.Mode, state: QIcon.State) -> None:
        self._pixels.paint(painter, rect, mode=mode, state=state)

    def pixmap(self, size: QSize, mode: QIcon.Mode, state: QIcon.State) -> QPixmap:
        return self._pixels.pixmap(size, mode, state)

    def actualSize(self, size: QSize, mode: QIcon.Mode, state: QIcon.State) -> QSize:
        return self._pixels.actualSize(size, mode, state)

    def availableSizes(
        self, mode: QIcon.Mode = QIcon.Mode.Normal, state: QIcon.State = QIcon.State.Off
    ) -> list[QSize]:
        return self._pixels.availableSizes(mode, state)

    def clone(self) -> QIconEngine:
        return _NamedIcon(self._name, self._pixels)


_icons: dict[str, QIcon] = {}
_engines: list[QIconEngine] = []
"""Kept for the app's lifetime: Qt holds them through the icons."""


def state_icon(state: str) -> QIcon:
    """The icon for an overall state (made once per state)."""
    cached = _icons.get(state)
    if cached is not None:
        return cached
    pixels = QIcon()
    for path in icon_files(state):
        pixels.addFile(str(path))
    if sys.platform == "darwin":
        pixels.setIsMask(True)  # a template image: macOS tints it
        icon = pixels
    else:
        engine = _NamedIcon(symbolic_name(state), pixels)
        _engines.append(engine)
        icon = QIcon(engine)
    _icons[state] = icon
    return icon


def user_icon_dir() -> Path:
    """The user's hicolor theme folder for status icons (XDG base directories)."""
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share"
    )
    return Path(data) / "icons" / "hicolor" / "scalable" / "status"


def app_icon_file() -> Path:
    """kubetray's own picture (notifications, the desktop entry): the wheel, no state."""
    return resources_dir() / "icons" / "kubetray-app-64.png"


def app_icon() -> QIcon:
    """kubetray's window and application icon."""
    icon = QIcon()
    for size in SIZES:
        icon.addFile(str(resources_dir() / "icons" / f"kubetray-app-{size}.png"))
    return icon


def overall_state(identities: list[IdentityStatus]) -> str:
    """Nothing set up; else error beats login-needed beats expiring beats ok."""
    if not identities:
        return NONE
    states = {i.state for i in identities}
    if states & {State.ERROR, State.NOT_YET_VALID}:  # kubectl fails with these until acted on
        return ERROR
    if any(s.needs_person for s in states):
        return LOGIN
    if State.EXPIRING in states:
        return EXPIRING
    return OK
