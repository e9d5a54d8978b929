"""The tray icon reads on a black panel and on a white one (GNOME's top bar is black; issue 30
found the old light-theme icon nearly invisible there), and its state can be told by shape
alone, for people who do not tell the colours apart. Contrast is WCAG 2.1's ratio, which asks
at least 3:1 for graphics (success criterion 1.4.11)."""

from itertools import combinations

import pytest
from PySide6.QtCore import QByteArray, QRectF, Qt
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

from app.ui import icons

SIZE = 22  # what panels draw (GNOME, waybar's default; KDE at 22 to 24)


def luminance(color: QColor) -> float:
    def channel(c: float) -> float:
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    return (
        0.2126 * channel(color.redF())
        + 0.7152 * channel(color.greenF())
        + 0.0722 * channel(color.blueF())
    )


def contrast(a: QColor, b: QColor) -> float:
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def on_panel(image: QImage, panel: str) -> QImage:
    out = QImage(image.size(), QImage.Format.Format_RGB32)
    out.fill(QColor(panel))
    painter = QPainter(out)
    painter.drawImage(0, 0, image)
    painter.end()
    return out


def render_svg(source: str, size: int = SIZE) -> QImage:
    """An SVG (a file's path, or the text itself) rendered as a panel of ``size`` shows it."""
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    data = QByteArray(source.encode()) if source.startswith("<") else source
    QSvgRenderer(data).render(painter, QRectF(0, 0, size, size))
    painter.end()
    return image


def readable_share(image: QImage, panel: str) -> float:
    """Of the icon's fully drawn pixels, the share that stands out from ``panel`` by at least
    3:1 as drawn on it. Anti-aliased rims (partly transparent) are left out: softer by nature."""
    shown = on_panel(image, panel)
    background = QColor(panel)
    drawn = readable = 0
    for y in range(image.height()):
        for x in range(image.width()):
            pixel = image.pixelColor(x, y)
            if pixel.alpha() < 255:
                continue
            drawn += 1
            readable += contrast(shown.pixelColor(x, y), background) >= 3.0
    assert drawn > 0
    return readable / drawn


def source_fills(state: str) -> list[str]:
    """The colours of the state's icon, as written: wheel, badge, mark."""
    import re

    source = (icons.resources_dir() / "icons" / f"kubetray-{state}.svg").read_text()
    return re.findall(r'fill="(#[0-9a-f]{6})"', source)


@pytest.mark.parametrize("state", icons.STATES)
@pytest.mark.parametrize("panel", ["#000000", "#ffffff"], ids=["black panel", "white panel"])
def test_each_state_reads_on_a_black_and_a_white_panel(qapp, state: str, panel: str) -> None:  # type: ignore[no-untyped-def]
    wheel, badge, _mark = source_fills(state)
    assert contrast(QColor(wheel), QColor(panel)) >= 3.0
    assert contrast(QColor(badge), QColor(panel)) >= 3.0
    # Its outline on the panel: the wheel and the badge, drawn without the mark inside the
    # badge (whose contrast is with the badge: test_the_badge_mark_stands_out_from_the_badge).
    source = (icons.resources_dir() / "icons" / f"kubetray-{state}.svg").read_text()
    outline = source[: source.rindex("<path")] + "</svg>"
    assert readable_share(render_svg(outline), panel) == 1.0
    # A panel that cannot recolour the named icon draws it as it is: it must read too.
    symbolic = render_svg(str(icons.symbolic_file(state)))
    assert readable_share(symbolic, panel) == 1.0


def test_the_badge_mark_stands_out_from_the_badge(qapp) -> None:  # type: ignore[no-untyped-def]
    """The white mark (check, clock, !, cross, dash) on each badge colour, at 3:1 or more."""
    for state in icons.STATES:
        _wheel, badge, mark = source_fills(state)
        assert contrast(QColor(badge), QColor(mark)) >= 3.0, state


def test_the_states_differ_by_shape_alone(qapp) -> None:  # type: ignore[no-untyped-def]
    """The one-colour icons (what a recolouring panel and macOS show) of any two states differ
    in a visible part of their shape, not in colour."""
    masks = {}
    for state in icons.STATES:
        image = render_svg(str(icons.symbolic_file(state)))
        masks[state] = {
            (x, y)
            for y in range(SIZE)
            for x in range(SIZE)
            if image.pixelColor(x, y).alpha() >= 128
        }
    for a, b in combinations(icons.STATES, 2):
        assert len(masks[a] ^ masks[b]) >= 8, (a, b)  # pixels drawn in one and not the other
