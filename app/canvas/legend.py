"""Legends floating over the canvas: the link-load colour bar (top left), the links'
bandwidth colours (top right) and the bottleneck cut in words (bottom left)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QLabel, QWidget

from canopy.app.canvas import style
from canopy.app.canvas.overlays import CUT_LINK, TREE_LINK, UNUSED, load_gradient

WIDTH = 236
HEIGHT = 104


class CornerLegend(QWidget):
    """A legend painted in a corner of ``viewport``: a child of the viewport's scroll area
    (so scrolling the canvas does not carry it away), placed again when the viewport
    moves or changes size (:meth:`_place`), and transparent to the mouse."""

    def __init__(self, viewport: QWidget):
        super().__init__(viewport.parentWidget())
        self.viewport = viewport
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        viewport.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() in (QEvent.Type.Resize, QEvent.Type.Move):
            self._place()
        return False

    def _place(self) -> None:
        """Move into this legend's corner of the viewport (each legend has its own)."""
        raise NotImplementedError


class LoadLegend(CornerLegend):
    """Utilisation scale (0 … 100 %), the unused colour, and the tree and cut colours, in
    the top-left corner of ``viewport``."""

    def __init__(self, viewport: QWidget):
        super().__init__(viewport)
        self.setFixedSize(WIDTH, HEIGHT)
        self._place()

    def _place(self) -> None:
        area = self.viewport.geometry()
        self.move(area.left() + 10, area.top() + 10)

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


class BandwidthLegend(CornerLegend):
    """Which colour is which link bandwidth (:mod:`.bandwidth_colours`), in the top-right
    corner of ``viewport``; hidden when all links have one bandwidth."""

    ROW = 15
    MARGIN = 10

    def __init__(self, viewport: QWidget, unit: str = "GB/s"):
        super().__init__(viewport)
        self.unit = unit
        self.classes: list[tuple[str, QColor]] = []
        self.hide()

    def set_classes(self, classes: list[tuple[str, QColor]], unit: str) -> None:
        self.classes, self.unit = list(classes), unit
        width = max([96, *(self.fontMetrics().horizontalAdvance(t) + 56 for t, _ in classes)])
        self.setFixedSize(width, 24 + self.ROW * len(classes))
        self.setVisible(bool(classes))
        self._place()
        self.update()

    def texts(self) -> list[str]:
        return [text for text, _ in self.classes]

    def _place(self) -> None:
        area = self.viewport.geometry()
        self.move(area.right() - self.width() - self.MARGIN, area.top() + self.MARGIN)

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.setPen(QPen(QColor("#a9b4c6"), 1))
        p.setBrush(QBrush(QColor(255, 255, 255, 235)))
        p.drawRoundedRect(QRectF(0.5, 0.5, self.width() - 1, self.height() - 1), 6, 6)
        p.setFont(style.label_font(8.5, bold=True))
        p.setPen(style.LINK_TEXT)
        p.drawText(QRectF(8, 3, self.width() - 16, 18), Qt.AlignmentFlag.AlignLeft,
                   f"Links ({self.unit})" if all(" " not in t for t in self.texts())
                   else "Links")
        p.setFont(style.label_font(8.0))
        for row, (text, colour) in enumerate(self.classes):
            y = 22 + row * self.ROW
            p.setPen(QPen(colour, 4))
            p.drawLine(10, y + 7, 34, y + 7)
            p.setPen(style.LINK_TEXT)
            p.drawText(QRectF(42, y, self.width() - 48, self.ROW),
                       Qt.AlignmentFlag.AlignVCenter, text)
        p.end()


class CutLegend(QLabel):
    """The bottleneck cut in words, and which side is shaded, in the bottom-left corner
    of ``viewport``. It is a child of the viewport's scroll area, not of the viewport,
    which moves its children when the canvas scrolls."""

    MARGIN = 10

    def __init__(self, viewport: QWidget):
        super().__init__(viewport.parentWidget())
        self.viewport = viewport
        self.setWordWrap(True)
        self.setMaximumWidth(460)
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.setStyleSheet("QLabel { background: rgba(255, 255, 255, 235); color: #2d3440; "
                           "border: 1px solid #e08a00; border-radius: 6px; padding: 5px 8px; }")
        viewport.installEventFilter(self)

    def set_cut(self, sentence: str, shaded: str) -> None:
        self.setText(f"<b>Bottleneck cut.</b> {sentence}<br><span style='color:#8a5a00'>"
                     f"Shaded: {shaded}; dark arrows: the links leaving S*.</span>")
        self.setFixedWidth(min(460, max(260, self.viewport.width() - 2 * self.MARGIN)))
        self.adjustSize()
        self._place()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Resize:
            self._place()
        return False

    def _place(self) -> None:
        area = self.viewport.geometry()
        self.move(area.left() + self.MARGIN, area.bottom() - self.height() - self.MARGIN)
