"""Render kubetray's app icon for installers: build/kubetray.icns (macOS) or build/kubetray.ico.

Uses Qt (offscreen) on the SVG source, so it runs on any OS with the dev environment:
    python packaging/app_icon.py icns|ico
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "resources" / "icons" / "kubetray-app.svg"


def render(size: int) -> QImage:
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    QSvgRenderer(str(SOURCE)).render(painter)
    painter.end()
    return image


def main() -> int:
    kind = sys.argv[1] if len(sys.argv) > 1 else ""
    if kind not in ("icns", "ico"):
        sys.exit("usage: python packaging/app_icon.py icns|ico")
    _app = QGuiApplication([])
    out = ROOT / "build" / f"kubetray.{kind}"
    out.parent.mkdir(exist_ok=True)
    if kind == "ico":
        render(256).save(str(out), "ICO")  # Qt writes a 256 px icon; Windows scales it
    else:
        iconset = Path(tempfile.mkdtemp()) / "kubetray.iconset"
        iconset.mkdir()
        for size in (16, 32, 128, 256, 512):
            render(size).save(str(iconset / f"icon_{size}x{size}.png"))
            render(size * 2).save(str(iconset / f"icon_{size}x{size}@2x.png"))
        subprocess.run(["iconutil", "-c", "icns", str(iconset), "-o", str(out)], check=True)
        shutil.rmtree(iconset.parent)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
