"""Write kubetray's icon SVG sources and render them to PNG with Qt (offscreen).

Run: .venv/bin/python scripts/render_icons.py. It writes, under resources/icons:

* ``kubetray-STATE.svg`` and ``kubetray-STATE-{22,32,64}.png``: the tray icon of each overall
  state (ok, expiring, login, error, none: nothing set up yet) for panels that show the
  pixels they are sent (XEmbed trays, Windows, a StatusNotifierItem host that cannot find the
  icon by name). One set reads on any panel, black, white or coloured (waybar's default tray
  is blue): a white wheel and a state-coloured badge, each inside a black halo, so one of the
  two always stands out by 3:1 or more (WCAG 2.1, non-text); every badge colour has 3:1 with
  black and with white, and its mark is black (tests/ui/test_icons.py measures it).
* ``hicolor/scalable/status/kubetray-STATE-symbolic.svg``: the same picture, for panels that
  recolour a symbolic icon (GNOME Shell with the AppIndicator extension and GTK panels replace
  every fill with their text colour, and the ``success``/``warning``/``error`` classes with
  theirs; Plasma swaps the ``current-color-scheme`` stylesheet, ``ColorScheme-Text`` for the
  body, ``-Background`` for the halo and mark, ``-PositiveText``/``-NeutralText``/
  ``-NegativeText``/``-Highlight`` for the badge) and for those that show it as it is
  (waybar): there the stylesheet's own colours are the ones above. The halo is a stroke
  (GTK before 3.24.50 leaves strokes as they are), drawn first, so a recolouring panel at
  worst fattens the silhouette in its own colour.
* ``kubetray-STATE-template.png`` and ``@2x``: macOS template images (black and alpha; the
  menu bar tints them for its light or dark look).
* ``kubetray-app.svg`` and ``kubetray-app-*.png``: the program's own picture, no state.

The state is shown by shape as well as colour, for people who do not tell the colours apart:
a check (ok), a clock (expiring), an exclamation mark in a square (log in), a cross in a
diamond (error), a dash (nothing set up). The geometry is built once with QPainterPath (strokes turned into
outlines, the wheel cut around the badge) and written as SVG path data.
"""

import math
import os
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QByteArray, QPointF, Qt
from PySide6.QtGui import QGuiApplication, QImage, QPainter, QPainterPath, QPainterPathStroker
from PySide6.QtSvg import QSvgRenderer

OUT = Path(__file__).resolve().parent.parent / "resources" / "icons"
SYMBOLIC = OUT / "hicolor" / "scalable" / "status"
STATES = ("ok", "expiring", "login", "error", "none")
BADGE = {  # each has >= 3:1 contrast with black and with white (so its black mark reads)
    "ok": "#2e8540",
    "expiring": "#b86e00",
    "login": "#2f6fd6",
    "error": "#d13b3b",
    "none": "#7a7a7a",
}
BODY = "#ffffff"
"""The wheel, as drawn where nobody recolours it (21:1 on black, 4.3:1 on waybar's blue)."""
HALO = "#000000"
"""Around the wheel and the badge, and the badge's mark (21:1 on white, 4.9:1 on waybar's
blue; on black the wheel and the badge stand out instead)."""
HALO_WIDTH = 4.0
"""The halo's stroke, in the 32-unit grid: half of it outside the shape, 1 px at 16 px."""
CLASSES = {  # the badge's colour class: GTK's, then Plasma's
    "ok": "success ColorScheme-PositiveText",
    "expiring": "warning ColorScheme-NeutralText",
    "login": "warning ColorScheme-Highlight",
    "error": "error ColorScheme-NegativeText",
    "none": "",  # grey wherever it is drawn: nothing is set up, no state to colour
}
APP_COLOUR = "#326ce5"
"""The app icon (windows, notifications, the desktop entry, installers): the wheel alone, in
Kubernetes blue, so a failure notice does not carry the "ready" check mark."""
SIZE = 32
CX, CY = 13.0, 13.0  # the wheel's centre
BX, BY, BR = 24.0, 24.0, 7.5  # the badge's centre and radius
GAP = 1.8  # room between the wheel and the badge


def stroke(path: QPainterPath, width: float) -> QPainterPath:
    stroker = QPainterPathStroker()
    stroker.setWidth(width)
    stroker.setCapStyle(Qt.PenCapStyle.RoundCap)
    stroker.setJoinStyle(Qt.PenJoinStyle.RoundJoin)
    return stroker.createStroke(path).simplified()


def circle(x: float, y: float, r: float) -> QPainterPath:
    path = QPainterPath()
    path.addEllipse(QPointF(x, y), r, r)
    return path


def polyline(*points: tuple[float, float]) -> QPainterPath:
    path = QPainterPath(QPointF(*points[0]))
    for point in points[1:]:
        path.lineTo(QPointF(*point))
    return path


def wheel(with_badge: bool) -> QPainterPath:
    """A seven-spoked wheel (Kubernetes' helm), cut around the badge when there is one."""
    shape = stroke(circle(CX, CY, 8.5), 2.4).united(circle(CX, CY, 2.6))
    for i in range(7):
        a = i * 2 * math.pi / 7
        spoke = polyline((CX, CY), (CX + 11.2 * math.sin(a), CY - 11.2 * math.cos(a)))
        shape = shape.united(stroke(spoke, 2.0))
    if with_badge:
        shape = shape.subtracted(circle(BX, BY, BR + GAP))
    return shape.simplified()


def container(state: str) -> QPainterPath:
    """The badge's outline: a disc, a rounded square for a login that is needed, a diamond for
    an error (silhouettes that differ where colours may not be told apart)."""
    if state == "login":
        path = QPainterPath()
        r = BR - 0.4
        path.addRoundedRect(BX - r, BY - r, 2 * r, 2 * r, 2.2, 2.2)
        return path
    if state == "error":
        r = BR + 0.9
        path = polyline((BX, BY - r), (BX + r, BY), (BX, BY + r), (BX - r, BY))
        path.closeSubpath()
        return path
    return circle(BX, BY, BR)


def glyph(state: str) -> QPainterPath:
    """The state's mark inside the badge."""
    if state == "ok":
        return stroke(polyline((20.6, 24.3), (23.0, 26.7), (27.6, 21.6)), 2.3)
    if state == "expiring":
        return stroke(polyline((24.0, 20.0), (24.0, 24.4), (27.0, 26.2)), 2.1)
    if state == "login":
        return stroke(polyline((24.0, 20.0), (24.0, 24.6)), 2.4).united(circle(24.0, 27.8, 1.3))
    if state == "error":
        a, b = 21.6, 26.4
        return stroke(polyline((a, a), (b, b)), 2.1).united(stroke(polyline((b, a), (a, b)), 2.1))
    return stroke(polyline((20.8, 24.0), (27.2, 24.0)), 2.4)


def svg_path(path: QPainterPath) -> str:
    """``path`` as SVG path data (absolute commands)."""
    out: list[str] = []
    i = 0
    while i < path.elementCount():
        e = path.elementAt(i)
        if e.isMoveTo():
            out.append(f"M{e.x:.2f} {e.y:.2f}")
        elif e.isLineTo():
            out.append(f"L{e.x:.2f} {e.y:.2f}")
        else:  # a curve: this element and the two data elements after it
            c2, end = path.elementAt(i + 1), path.elementAt(i + 2)
            out.append(f"C{e.x:.2f} {e.y:.2f} {c2.x:.2f} {c2.y:.2f} {end.x:.2f} {end.y:.2f}")
            i += 2
        i += 1
    return "".join(out) + "Z"


def rule(path: QPainterPath) -> str:
    return "evenodd" if path.fillRule() == Qt.FillRule.OddEvenFill else "nonzero"


def svg(body: str, size: int = SIZE) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{size}" height="{size}" '
        f'viewBox="0 0 {SIZE} {SIZE}">{body}</svg>\n'
    )


def shape(path: QPainterPath, fill: str, extra: str = "") -> str:
    return f'<path{extra} fill="{fill}" fill-rule="{rule(path)}" d="{svg_path(path)}"/>'


def layers(state: str, body: str, halo: str, badge: str) -> str:
    """The halo, the wheel, the badge (its mark cut out) and the mark, in these colours
    (``currentColor`` with a class, for a panel to recolour)."""
    silhouette = wheel(True).united(container(state)).simplified()

    def attrs(colour: str, cls: str) -> str:
        return f' class="{cls}"' if colour == "currentColor" else ""

    halo_path = (
        f'<path{attrs(halo, "ColorScheme-Background")} fill="none" stroke="{halo}" '
        f'stroke-width="{HALO_WIDTH}" stroke-linejoin="round" d="{svg_path(silhouette)}"/>'
    )
    return (
        halo_path
        + shape(wheel(True), body, attrs(body, "ColorScheme-Text"))
        + shape(
            container(state).subtracted(glyph(state)),
            badge if CLASSES[state] else BADGE[state],
            attrs(badge, CLASSES[state]) if CLASSES[state] else "",
        )
        + shape(glyph(state), halo, attrs(halo, "ColorScheme-Background"))
    )


def colour_svg(state: str) -> str:
    return svg(layers(state, BODY, HALO, BADGE[state]))


def mono(state: str) -> QPainterPath:
    """The whole icon in one colour: the wheel, and the badge with its mark cut out."""
    return wheel(True).united(container(state).subtracted(glyph(state))).simplified()


def symbolic_svg(state: str) -> str:
    badge = f" .{CLASSES[state].split()[-1]} {{ color:{BADGE[state]}; }}" if CLASSES[state] else ""
    style = (
        '<style id="current-color-scheme" type="text/css">'
        f".ColorScheme-Text {{ color:{BODY}; }} .ColorScheme-Background {{ color:{HALO}; }}"
        f"{badge}</style>"
    )
    return svg(style + layers(state, "currentColor", "currentColor", "currentColor"), 16)


def render(source: str, size: int, target: Path) -> None:
    renderer = QSvgRenderer(QByteArray(source.encode()))
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    renderer.render(painter)
    painter.end()
    image.save(str(target))


def main() -> int:
    QGuiApplication(sys.argv)
    SYMBOLIC.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("kubetray-*"):  # what an earlier version wrote (light/dark sets)
        old.unlink()
    written = 0
    for state in STATES:
        source = colour_svg(state)
        (OUT / f"kubetray-{state}.svg").write_text(source)
        for size in (22, 32, 64):
            render(source, size, OUT / f"kubetray-{state}-{size}.png")
        (SYMBOLIC / f"kubetray-{state}-symbolic.svg").write_text(symbolic_svg(state))
        template = svg(shape(mono(state), "#000000"))
        render(template, 22, OUT / f"kubetray-{state}-template.png")
        render(template, 44, OUT / f"kubetray-{state}-template@2x.png")
        written += 7
    app = svg(shape(wheel(False), APP_COLOUR))
    (OUT / "kubetray-app.svg").write_text(app)
    for size in (22, 32, 64):
        render(app, size, OUT / f"kubetray-app-{size}.png")
    print(f"wrote {written + 4} files to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
