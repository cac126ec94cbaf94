"""Every link's bandwidth at a glance: links coloured by bandwidth, keyed in a legend.

A bandwidth printed on a link needs a spot on it that covers no other link, node or
label; in a dense drawing (a 2 x MI250 server's Infinity Fabric mesh under its
InfiniBand fan) many links have none at a readable zoom. So the drawing also colours
every link by its bandwidth, one colour per distinct bandwidth (up to :data:`PALETTE`'s
length; the widest links darkest), and the canvas's legend names them: a link whose
number does not fit still shows its bandwidth by its colour. Overlays (a cut, a tree,
link load) recolour links over this and bring their own legends.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

from PySide6.QtGui import QColor

from canopy.app.canvas import style

PALETTE = (QColor("#2f5f98"), QColor("#c27c2c"), QColor("#3a9a8f"), QColor("#8a94a6"),
           QColor("#a65d8a"), QColor("#6b8e23"), QColor("#b5651d"), QColor("#4a4f5c"))
"""Colours of the bandwidth classes, fastest first: blue, ochre, teal, grey, mauve,
olive, brown, slate (none is a load colour, the tree's purple or the cut's near-black)."""


def bandwidth_classes(bandwidths: Iterable[tuple[Fraction, str]]
                      ) -> list[tuple[str, QColor]]:
    """(text, colour) per distinct bandwidth, fastest first; empty when there is only one
    (nothing to tell apart) or more than the palette holds (the links keep the plain
    link colour, and their numbers and tooltips say)."""
    distinct: dict[Fraction, str] = {}
    for value, text in bandwidths:
        distinct.setdefault(value, text)
    if not 2 <= len(distinct) <= len(PALETTE):
        return []
    ranked = sorted(distinct, reverse=True)
    return [(distinct[value], PALETTE[i]) for i, value in enumerate(ranked)]


def colour_of(text: str, classes: list[tuple[str, QColor]]) -> QColor:
    """The colour of a link labelled ``text`` (the plain link colour without classes)."""
    for name, colour in classes:
        if name == text:
            return colour
    return style.LINK
