"""Level of detail: text that stays readable at any zoom, shown only where it fits.

Names and bandwidths are :class:`ScreenLabel` children of their items that, while shown,
ignore the view's scale (so they are always drawn at a readable pixel size). After every
zoom the scene calls :func:`choose_texts`: each label shows the longest of its candidate
texts that fits the room its item has on screen (a node's full label, then its short name
without the server prefix), or nothing; a hidden label is still in the item's tooltip.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetricsF, QPainter, QPen
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem, QWidget

from canopy.app.canvas import style

NAME_FONT = style.label_font(8.0)
BANDWIDTH_FONT = style.label_font(8.0)
BLOCK_FONT = style.label_font(9.0, bold=True)
IGNORES_TRANSFORMATIONS = QGraphicsItem.GraphicsItemFlag.ItemIgnoresTransformations
BACKGROUND = QColor(255, 255, 255, 225)
HALO = QBrush(QColor(255, 255, 255, 235))


_METRICS: dict[str, QFontMetricsF] = {}


def _metrics(font: QFont) -> QFontMetricsF:
    """One metrics object per font for all labels (thousands on a large drawing, each
    an object the garbage collector would walk)."""
    key = font.key()
    if key not in _METRICS:
        _METRICS[key] = QFontMetricsF(font)
    return _METRICS[key]


class ScreenLabel(QGraphicsItem):
    """A short text centred on its position, drawn at a fixed pixel size.

    ``anchor`` is where the text hangs from: ``"top"`` puts its top edge at the position
    (a name under a node), ``"centre"`` centres it (a bandwidth on a link), ``"right"``
    ends it there (a caption left of a node). ``boxed`` draws a framed box behind the
    text; ``halo`` only a faint unframed one, so a link passing under a node's name does
    not cross the letters.
    """

    def __init__(self, parent: QGraphicsItem, font: QFont, anchor: str = "centre",
                 boxed: bool = False, color: QColor = style.LINK_TEXT, halo: bool = False):
        super().__init__(parent)
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        self.setAcceptHoverEvents(False)
        self.font = font
        self.metrics = _metrics(font)
        self.anchor = anchor
        self.boxed = boxed
        self.halo = halo
        self.color = color      # shared, never changed in place
        self.border: QColor | None = None
        self.text = ""
        self._rect = QRectF()
        self.setVisible(False)  # an empty label is hidden: painting skips it entirely

    def width_of(self, text: str) -> float:
        """Pixel width ``text`` would take (with the box padding)."""
        lines = text.split("\n")
        return max(self.metrics.horizontalAdvance(line) for line in lines) \
            + (6 if self.boxed else 2)

    def height_of(self, text: str) -> float:
        return self.metrics.height() * (text.count("\n") + 1) + 2

    def set_text(self, text: str) -> None:
        if text == self.text:
            return
        self.prepareGeometryChange()
        self.text = text
        # only a shown label ignores the view's scale: Qt's index checks every such item
        # one by one on each paint and each lookup under the mouse, hidden or not (a
        # 1024-GPU drawing has 5,000 hidden labels)
        self.setFlag(IGNORES_TRANSFORMATIONS, bool(text))
        self.setVisible(bool(text))
        if not text:
            self._rect = QRectF()
            return
        w, h = self.width_of(text), self.height_of(text)
        top = 0.0 if self.anchor == "top" else -h / 2
        left = -w if self.anchor == "right" else -w / 2
        self._rect = QRectF(left, top, w, h)

    def boundingRect(self) -> QRectF:
        return self._rect.adjusted(-1, -1, 1, 1)

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem,
              widget: QWidget | None = None) -> None:
        if not self.text:
            return
        if self.boxed:
            painter.setPen(QPen(self.border or QColor("#a9b4c6"), 0.8))
            painter.setBrush(QBrush(BACKGROUND))
            painter.drawRoundedRect(self._rect, 3, 3)
        elif self.halo:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(HALO)
            painter.drawRoundedRect(self._rect, 3, 3)
        painter.setFont(self.font)
        painter.setPen(self.color)
        painter.drawText(self._rect, Qt.AlignmentFlag.AlignCenter, self.text)


def fitting(label: ScreenLabel, candidates: Sequence[str], room_px: float) -> str:
    """The first candidate whose pixel width fits in ``room_px``, or ``""``."""
    for text in candidates:
        if text and label.width_of(text) <= room_px:
            return text
    return ""
