"""Write kubetray's icon SVG sources and render them to PNG with Qt (offscreen).

Five tray states (ok, expiring, login, error, none: nothing set up yet), each for light and dark panels, the
app icon, and a monochrome macOS template image. Run: .venv/bin/python scripts/render_icons.py
"""

import os
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QByteArray, Qt
from PySide6.QtGui import QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

OUT = Path(__file__).resolve().parent.parent / "resources" / "icons"
STATES = {  # badge colour, badge glyph (SVG path in a 10x10 box at the badge)
    "ok": ("#2e9e4f", "M3 7.5 L5.5 10 L10.5 4.5"),
    "expiring": ("#e0a100", "M7 3.5 V7.5 L9.5 9"),
    "login": ("#2f6fd6", "M7 3 V8 M7 10 V10.5"),
    "error": ("#d13b3b", "M4.5 4.5 L9.5 9.5 M9.5 4.5 L4.5 9.5"),
    "none": ("#8a8a8a", "M4 7 H10"),  # nothing set up yet
}
THEMES = {"light": "#2b2b2b", "dark": "#f2f2f2"}  # the panel they are read on: light or dark
APP_COLOUR = "#326ce5"
"""The app icon (windows, notifications, the desktop entry, installers): the wheel alone, in
Kubernetes blue, so a failure notice does not carry the "ready" check mark."""

WHEEL = (
    # A seven-spoked wheel (Kubernetes' helm) drawn as strokes in a 32x32 box.
    '<circle cx="14" cy="14" r="9" fill="none" stroke="{fg}" stroke-width="2.5"/>'
    '<circle cx="14" cy="14" r="2.6" fill="{fg}"/>'
    + "".join(
        f'<line x1="14" y1="14" x2="{14 + 11.5 * __import__("math").sin(a * 2 * 3.14159 / 7):.2f}" '
        f'y2="{14 - 11.5 * __import__("math").cos(a * 2 * 3.14159 / 7):.2f}" stroke="{{fg}}" '
        'stroke-width="2" stroke-linecap="round"/>'
        for a in range(7)
    )
)


def svg(fg: str, badge: str | None, glyph: str | None) -> str:
    body = WHEEL.format(fg=fg)
    if badge and glyph:
        body += (
            f'<g transform="translate(18 18)"><circle cx="7" cy="7" r="7" fill="{badge}"/>'
            f'<path d="{glyph}" fill="none" stroke="#ffffff" stroke-width="2" '
            'stroke-linecap="round" stroke-linejoin="round"/></g>'
        )
    return f'<svg xmlns="http://www.w3.org/2000/svg" width="32" height="32" viewBox="0 0 32 32">{body}</svg>\n'


def render(source: Path, size: int, target: Path) -> None:
    renderer = QSvgRenderer(QByteArray(source.read_bytes()))
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    renderer.render(painter)
    painter.end()
    image.save(str(target))


def main() -> int:
    QGuiApplication(sys.argv)
    OUT.mkdir(parents=True, exist_ok=True)
    sources = []
    for state, (badge, glyph) in STATES.items():
        for theme, fg in THEMES.items():
            path = OUT / f"kubetray-{state}-{theme}.svg"
            path.write_text(svg(fg, badge, glyph))
            sources.append(path)
    app = OUT / "kubetray-app.svg"  # the program's own picture: no state badge
    app.write_text(svg(APP_COLOUR, None, None))
    sources.append(app)
    template = OUT / "kubetray-template.svg"  # macOS colours template images itself
    template.write_text(svg("#000000", None, None))
    sources.append(template)
    for path in sources:
        for size in (22, 32, 64):
            render(path, size, path.with_name(f"{path.stem}-{size}.png"))
    render(template, 44, template.with_name("kubetray-template@2x.png"))
    render(template, 22, template.with_name("kubetray-template.png"))
    print(f"wrote {len(list(OUT.iterdir()))} files to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
