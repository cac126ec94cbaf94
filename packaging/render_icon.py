"""Render resources/canopy.svg to resources/canopy.png (256x256). Run once after editing
the SVG: ``QT_QPA_PLATFORM=offscreen .venv/bin/python packaging/render_icon.py``."""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

RESOURCES = Path(__file__).resolve().parent.parent / "resources"
SIZE = 256


def render(svg: Path, png: Path, size: int = SIZE) -> None:
    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise SystemExit(f"render_icon: {svg} is not a valid SVG.")
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter)
    painter.end()
    if not image.save(str(png)):
        raise SystemExit(f"render_icon: could not write {png}.")


if __name__ == "__main__":
    app = QGuiApplication(sys.argv)
    render(RESOURCES / "canopy.svg", RESOURCES / "canopy.png")
    print(RESOURCES / "canopy.png")
