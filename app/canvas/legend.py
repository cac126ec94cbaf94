"""The link-load legend: a colour bar floating in the canvas's top-left corner."""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QWidget

from canopy.app.canvas import style
from canopy.app.canvas.overlays import CUT_LINK, TREE_LINK, UNUSED, load_gradient

WIDTH = 236
HEIGHT = 104


class LoadLegend(QWidget):
    """Utilisation scale (0 … 100 %), the unused colour, and the tree and cut colours."""

    def __init__(self, parent: QWidget):
        super().__init__(parent)
        self.setFixedSize(WIDTH, HEIGHT)
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.move(10, 10)

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.setPen(QPen(QColor("#a9b4c6"), 1))
        p.setBrush(QBrush(QColor(255, 255, 255, 235)))
        p.drawRoundedRect(QRectF(0.5, 0.5, WIDTH - 1, HEIGHT - 1), 6, 6)
        p.setFont(style.label_font(8.5, bold=True))
        p.setPen(style.LINK_TEXT)
        p.drawText(QRectF(10, 4, WIDTH - 20, 18), Qt.AlignmentFlag.AlignLeft,
                   "Link utilisation (load / bandwidth)")
        bar = QRectF(10, 26, WIDTH - 20, 12)
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(QBrush(load_gradient(bar)))
        p.drawRect(bar)
        p.setFont(style.label_font(7.5))
        p.setPen(style.LINK_TEXT)
        for i, text in enumerate(("0 %", "25 %", "50 %", "75 %", "100 %")):
            x = bar.left() + bar.width() * i / 4
            align = (Qt.AlignmentFlag.AlignLeft if i == 0 else Qt.AlignmentFlag.AlignRight
                     if i == 4 else Qt.AlignmentFlag.AlignHCenter)
            left = x if i == 0 else x - 40 if i == 4 else x - 20
            p.drawText(QRectF(left, 40, 40, 14), align, text)
        for row, (color, text) in enumerate([(UNUSED, "unused"),
                                             (TREE_LINK, "selected tree"),
                                             (CUT_LINK, "leaves the bottleneck cut")]):
            y = 58 + row * 14
            p.setPen(QPen(color, 4))
            p.drawLine(12, y + 7, 34, y + 7)
            p.setPen(style.LINK_TEXT)
            p.drawText(QRectF(42, y, WIDTH - 50, 14), Qt.AlignmentFlag.AlignVCenter, text)
        p.end()
