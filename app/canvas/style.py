"""Colours, sizes and the bandwidth-to-width scale shared by the canvas items."""

from __future__ import annotations

import math
from fractions import Fraction

from PySide6.QtGui import QColor, QFont

COMPUTE_FILL = QColor("#5b9f4a")
COMPUTE_BORDER = QColor("#386b2c")
SWITCH_FILL = QColor("#3f6fb5")
SWITCH_BORDER = QColor("#284a7d")
SELECTED = QColor("#ff8c1a")
LINK = QColor("#8a94a6")
LINK_TEXT = QColor("#2d3440")
GROUP_FILL = QColor(236, 240, 246, 235)
GROUP_BORDER = QColor("#a9b4c6")
GROUP_TEXT = QColor("#4b5668")

NODE_W = 46.0
NODE_H = 30.0
GRID = 20.0

LABEL_LOD = 0.5
"""Below this zoom node labels are not drawn (keeps huge topologies fast)."""
LINK_LABEL_LOD = 0.5
"""Below this zoom link bandwidths are not drawn."""


def link_width(bandwidth: Fraction) -> float:
    """Pen width for a link: grows with the logarithm of its bandwidth in GB/s."""
    return max(1.0, min(9.0, 1.0 + 1.4 * math.log2(1.0 + float(bandwidth) / 16.0)))


def label_font(point_size: float = 8.0, bold: bool = False) -> QFont:
    font = QFont()
    font.setPointSizeF(point_size)
    font.setBold(bold)
    return font
