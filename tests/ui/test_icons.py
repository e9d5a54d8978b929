"""The tray icon reads on a black panel, a white one and waybar's default blue tray (GNOME's top
bar is black; issue 30 found the old light-theme icon nearly invisible there, issue 39 the grey
one on waybar), as drawn by a panel that shows the named icon as it is and by one that shows
its pixels; and its state can be told by shape alone, for people who do not tell the colours
apart. Contrast is WCAG 2.1's ratio, which asks at least 3:1 for graphics (success criterion
1.4.11): the icon's silhouette must be drawn in a colour that has it, whatever the panel."""

from itertools import combinations

import pytest
from PySide6.QtCore import QByteArray, QRectF, Qt
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

from app.ui import icons

SIZE = 22  # what panels draw (GNOME, waybar's default; KDE at 22 to 24)
PANELS = {"black panel": "#000000", "white panel": "#ffffff", "waybar's tray": "#2980b9"}
"""waybar's tray: the background its default style.css gives ``#tray``."""


def luminance(color: QColor) -> float:
    def channel(c: float) -> float:
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    return (
        0.2126 * channel(color.redF())
        + 0.7152 * channel(color.greenF())
        + 0.0722 * channel(color.blueF())
    )


def distance(a: QColor, b: QColor) -> int:
    """How far apart two colours are: the largest difference of their red, green and blue."""
    return max(abs(a.red() - b.red()), abs(a.green() - b.green()), abs(a.blue() - b.blue()))


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


def legibility(shown: QImage, panel: QColor) -> tuple[float, float]:
    """How well an icon drawn on ``panel`` reads, from its pixels as shown (a render, or a
    screenshot): of the pixels that differ from the panel (the icon), the share that stands out
    from it by 3:1 or more; and how much of the icon's extent (its width and height, the lesser)
    those pixels span. A silhouette drawn in a colour that reads scores high on both."""
    icon: list[tuple[int, int]] = []
    out: list[tuple[int, int]] = []
    for y in range(shown.height()):
        for x in range(shown.width()):
            pixel = shown.pixelColor(x, y)
            if distance(pixel, panel) <= 8:
                continue
            icon.append((x, y))
            if contrast(pixel, panel) >= 3.0:
                out.append((x, y))
    assert icon, "no icon there"
    if not out:
        return 0.0, 0.0

    def extent(points: list[tuple[int, int]], axis: int) -> int:
        return max(p[axis] for p in points) - min(p[axis] for p in points) + 1

    span = min(extent(out, a) / extent(icon, a) for a in (0, 1))
    return len(out) / len(icon), span


def reads(shown: QImage, panel: QColor) -> bool:
    """A third of the icon's pixels or more stand out by 3:1, spanning 80 % of its extent
    (the grey icon of issue 39 on waybar's blue tray: none at 22 px; this one drawn by waybar
    at its default 16 px, where anti-aliasing softens a third of the pixels: 38 % and all)."""
    share, span = legibility(shown, panel)
    return share >= 1 / 3 and span >= 0.8


def source_fills(state: str) -> list[str]:
    """The colours of the state's icon, as written: wheel, badge, mark."""
    import re

    source = (icons.resources_dir() / "icons" / f"kubetray-{state}.svg").read_text()
    return re.findall(r'fill="(#[0-9a-f]{6})"', source)


@pytest.mark.parametrize("state", icons.STATES)
@pytest.mark.parametrize("panel", PANELS.values(), ids=PANELS.keys())
def test_each_state_reads_on_any_panel(qapp, state: str, panel: str) -> None:  # type: ignore[no-untyped-def]
    background = QColor(panel)
    # Its pixels (XEmbed, IconPixmap) and its named icon drawn as it is (waybar).
    colour = render_svg(str(icons.resources_dir() / "icons" / f"kubetray-{state}.svg"))
    symbolic = render_svg(str(icons.symbolic_file(state)))
    for image in (colour, symbolic):
        assert reads(on_panel(image, panel), background), legibility(
            on_panel(image, panel), background
        )
    _wheel, badge, _mark = source_fills(state)
    # The badge, in the state's colour, reads on black and white even without its halo.
    if panel in ("#000000", "#ffffff"):
        assert contrast(QColor(badge), background) >= 3.0


def test_the_named_icon_keeps_the_state_s_colour_class(qapp) -> None:  # type: ignore[no-untyped-def]
    """A panel that recolours (GTK: the success, warning and error classes; Plasma: its
    ColorScheme classes) still shows the state in colour; one that does not shows ours."""
    for state, cls in (("ok", "success"), ("expiring", "warning"), ("error", "error")):
        source = icons.symbolic_file(state).read_text()
        assert f'class="{cls} ColorScheme-' in source, state
        (_wheel, badge, _mark) = source_fills(state)
        assert f"color:{badge};" in source, state


def test_the_badge_mark_stands_out_from_the_badge(qapp) -> None:  # type: ignore[no-untyped-def]
    """The mark (check, clock, !, cross, dash) on each badge colour, at 3:1 or more."""
    for state in icons.STATES:
        _wheel, badge, mark = source_fills(state)
        assert contrast(QColor(badge), QColor(mark)) >= 3.0, state


def test_the_states_differ_by_shape_alone(qapp) -> None:  # type: ignore[no-untyped-def]
    """The one-colour icons (macOS's template images; what a panel that paints every part in
    its text colour shows of the named one, the halo aside) of any two states differ in a
    visible part of their shape, not in colour."""
    masks = {}
    for state in icons.STATES:
        image = QImage(str(icons.resources_dir() / "icons" / f"kubetray-{state}-template.png"))
        masks[state] = {
            (x, y)
            for y in range(SIZE)
            for x in range(SIZE)
            if image.pixelColor(x, y).alpha() >= 128
        }
    for a, b in combinations(icons.STATES, 2):
        assert len(masks[a] ^ masks[b]) >= 8, (a, b)  # pixels drawn in one and not the other
