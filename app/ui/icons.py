"""Tray icons per overall state, for light and dark panels (sources in resources/icons)."""

import sys
from pathlib import Path

from PySide6.QtGui import QGuiApplication, QIcon, QPalette

from app.model import IdentityStatus, State

OK, EXPIRING, LOGIN, ERROR, NONE = "ok", "expiring", "login", "error", "none"


def resources_dir() -> Path:
    """resources/ in the source tree, or inside a PyInstaller bundle."""
    bundle = getattr(sys, "_MEIPASS", None)
    base = Path(bundle) if bundle else Path(__file__).resolve().parent.parent.parent
    return base / "resources"


def dark_panel() -> bool:
    """Whether the desktop uses a dark theme (the panel is then dark too, as a rule)."""
    palette = QGuiApplication.palette()
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


_icons: dict[tuple[str, str], QIcon] = {}


def icon_files(state: str, dark: bool, platform: str | None = None) -> list[Path]:
    """The image files of a state's icon: on macOS the template image (black and alpha, which
    the menu bar tints for its light or dark look), elsewhere the state's own colours."""
    folder = resources_dir() / "icons"
    if (platform or sys.platform) == "darwin":
        return [folder / "kubetray-template.png", folder / "kubetray-template@2x.png"]
    theme = "dark" if dark else "light"
    return [folder / f"kubetray-{state}-{theme}-{size}.png" for size in (22, 32, 64)]


def state_icon(state: str) -> QIcon:
    """The icon for an overall state (loaded once per state and theme)."""
    theme = "dark" if dark_panel() else "light"
    cached = _icons.get((state, theme))
    if cached is not None:
        return cached
    icon = _icons[(state, theme)] = QIcon()
    for path in icon_files(state, theme == "dark"):
        icon.addFile(str(path))
    icon.setIsMask(sys.platform == "darwin")  # a template image: macOS tints it
    return icon


def app_icon_file() -> Path:
    """kubetray's own picture (notifications, the desktop entry): the wheel, no state."""
    return resources_dir() / "icons" / "kubetray-app-64.png"


def app_icon() -> QIcon:
    """kubetray's window and application icon."""
    icon = QIcon()
    for size in (22, 32, 64):
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
