"""A link on the canvas: width grows with bandwidth, one-way links carry an arrow.

Parallel links between the same two nodes bow apart (``offset``) so each stays visible
and clickable. Overlays (a bottleneck cut, a tree's routes, link load) recolour a link
with :meth:`LinkItem.set_highlight` without touching the scene; they may also mark the
direction data runs with an arrowhead and a short badge (a tree's hop order).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, cast

from PySide6.QtCore import QLineF, QPointF, QRectF, Qt
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFontMetricsF,
    QPainter,
    QPainterPath,
    QPainterPathStroker,
    QPen,
    QPolygonF,
)
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem, QWidget

from canopy.app.canvas import style
from canopy.app.canvas.labels import BANDWIDTH_FONT, ScreenLabel
from canopy.engine.model.topology import Link, format_gbps
from canopy.engine.model.units import GBPS, from_gbps

if TYPE_CHECKING:
    from canopy.app.canvas.scene import TopologyScene

ARROW = 11.0
NAME_HALF_WIDTH = 30.0
"""About half the width of a node's name under it, in pixels (labels near a node keep
clear of it)."""
NAME_HEIGHT = 14.0
LINK_LABEL_MIN_ZOOM = 0.2
"""Below this zoom no bandwidths are drawn on links."""
SPOTS = tuple(t for k in range(1, 10) for t in (0.5 - 0.045 * k, 0.5 + 0.045 * k))
"""Other places along a link (from its source) its bandwidth may go when the preferred
one is taken by a name, another label or another link, nearest the middle first."""
BESIDE = 11
"""How many of the places along the line (the middle first) are also tried beside it."""
STAGGER = 0.18
"""How far apart (as a fraction of the link) labels of parallel links are moved."""
NODE_RADIUS = 17.0
BOW_FROM = 80.0
"""Row/column links 1.5 to 10 times this long bow out of the row (server-internal links)."""
BOW = 0.08
MARK_AT = 0.7
"""Where an overlay's direction arrow sits, as a fraction of the stretch of link between
the two nodes' names, from the sending end."""
MARK_CLEAR = 14.0
"""Pixels a direction badge keeps away from a node and its name."""
MARK_FONT = style.label_font(7.5, bold=True)
MARK_PAD = 26.0
_MARK_METRICS = QFontMetricsF(MARK_FONT)
_NO_BRUSH = Qt.BrushStyle.NoBrush
_MARK_EDGE = QPen(QColor("white"), 1.0)
_SOLID = Qt.PenStyle.SolidLine
_ROUND_CAP = Qt.PenCapStyle.RoundCap
_FLAT_CAP = Qt.PenCapStyle.FlatCap
OUTLINE = 2.5
"""Width of an overlay outline on each side of the line."""


def label_text(link: Link, unit: str) -> str:
    """The bandwidth label of ``link`` in ``unit``: the bare number for GB/s (the default
    the quick start names), the number and unit otherwise."""
    number = format_gbps(from_gbps(link.bandwidth, unit))
    return number if unit == GBPS else f"{number} {unit}"


class LinkItem(QGraphicsItem):
    """Mirrors one :class:`~canopy.engine.model.topology.Link`, identified by its document key.

    Its label is the bandwidth in ``unit``, the topology's ``bandwidth_unit``; a unit
    other than GB/s is written out ("400 Gb/s"), so the file's unit shows on the canvas.
    """

    def __init__(self, key: int, link: Link, unit: str = GBPS, zoom: float = 1.0):
        super().__init__()
        self.key = key
        self.unit = unit
        self.source = link.source
        self.target = link.target
        self.duplex = link.duplex
        self.width = style.link_width(link.bandwidth)
        self.text = label_text(link, unit)
        self.bandwidth = link.bandwidth
        self.color = style.LINK
        """Its bandwidth's colour (:mod:`canopy.app.canvas.bandwidth_colours`)."""
        self.offset = 0.0
        self.rank = 0.0
        self.label_near: str | None = None
        self.highlight: tuple[QColor, float] | None = None
        self.marks: tuple[tuple[str, str], ...] = ()
        self.outline: QColor | None = None
        self._p1 = QPointF()
        self._p2 = QPointF()
        self._path = QPainterPath()
        self._bounds = QRectF()
        self._line_bounds = QRectF()
        self._mid = QPointF()
        self._mid_valid = False
        self._mark_shapes: dict[tuple[str, str, float], tuple[QPolygonF, QRectF | None,
                                                            QPointF]] = {}
        """:meth:`_mark_geometry`'s answers until the line or the pen changes (a repaint
        of the canvas paints every badge)."""
        self._text_rect = QRectF()
        self._straight: QLineF | None = None
        self._zoom = zoom
        """The view's zoom its bandwidth is placed for (0: not placed yet)."""
        self._length = 0.0
        self.bandwidth_label = ScreenLabel(self, BANDWIDTH_FONT, boxed=True)
        self.setFlags(QGraphicsItem.GraphicsItemFlag.ItemIsSelectable
                      | QGraphicsItem.GraphicsItemFlag.ItemUsesExtendedStyleOption)
        self.setZValue(5)
        self.refresh(link)

    def refresh(self, link: Link, unit: str | None = None) -> None:
        """Take ends, bandwidth and direction from the model (and a new ``unit``)."""
        self.unit = unit or self.unit
        self.source, self.target = link.source, link.target
        self.duplex = link.duplex
        self.width = style.link_width(link.bandwidth)
        self.text = label_text(link, self.unit)
        self.bandwidth = link.bandwidth
        arrow = "⟷" if link.duplex else "→"
        latency = "" if link.latency is None else f", latency {format_gbps(link.latency)} µs"
        value = f"{format_gbps(from_gbps(link.bandwidth, self.unit))} {self.unit}"
        if self.unit != GBPS:
            value += f" ({format_gbps(link.bandwidth)} GB/s)"
        self.setToolTip(f"{link.source} {arrow} {link.target}: {value}"
                        f"{' each way' if link.duplex else ' one-way'}{latency}")
        label = self.bandwidth_label
        w, h = label.width_of(self.text), label.height_of(self.text)
        self._text_rect = QRectF(-w / 2, -h / 2, w, h)
        self._rebuild()

    def set_ends(self, p1: QPointF, p2: QPointF) -> None:
        """New end points (node centres), from the scene when a node moves."""
        self._p1, self._p2 = QPointF(p1), QPointF(p2)
        self._rebuild()

    def set_geometry(self, p1: QPointF, p2: QPointF, offset: float, rank: float,
                     label_near: str | None) -> None:
        """Ends, bow and label end at once: one geometry update (building a scene)."""
        self._p1, self._p2 = QPointF(p1), QPointF(p2)
        self.offset, self.rank, self.label_near = offset, rank, label_near
        self._rebuild()

    def set_offset(self, offset: float, rank: float = 0.0) -> None:
        """Bow ``offset`` units sideways; ``rank`` (-1 .. 1) staggers parallel labels."""
        self.offset = offset
        self.rank = rank
        self._rebuild()

    def set_label_near(self, end: str | None, show: bool = True) -> None:
        """Print the bandwidth near node ``end`` (away from a busy hub), or mid-way
        (without ``show``, only once the scene next places the labels)."""
        if end != self.label_near:
            self.label_near = end
            self._mid_valid = False
            if show:
                self._place_label()

    def set_highlight(self, color: QColor | None, width: float | None = None,
                      marks: tuple[tuple[str, str], ...] = (),
                      outline: QColor | None = None) -> None:
        """Overlay colour and width (``None`` clears it); repaints only this item.

        ``marks`` are (receiving node, badge text) pairs: an arrowhead pointing at that
        end of the link, with the text beside it (empty for a bare arrow). ``outline``
        draws a wider line of another colour underneath (a second overlay's colour).
        """
        self.highlight = None if color is None else (QColor(color), width or self.width)
        self.marks = tuple(marks) if color is not None else ()
        self.outline = QColor(outline) if color is not None and outline is not None else None
        self._restyled()
        for towards, text in self.marks:     # now (restyling is sliced), not in a paint
            self._mark_geometry(towards, text)
        scene = cast("TopologyScene | None", self.scene())     # only a TopologyScene holds it
        if scene is not None:
            scene.overview.restyled(self)

    def ends(self) -> tuple[QPointF, QPointF]:
        """The centres of the two end nodes."""
        return self._p1, self._p2

    # ------------------------------------------------------------ geometry

    def _rebuild(self) -> None:
        self.prepareGeometryChange()
        p1, p2 = self._p1, self._p2
        line = QLineF(p1, p2)
        length = line.length()
        path = QPainterPath()
        self._straight = None
        self._length = length
        self._mid_valid = False
        self._mark_shapes = {}
        if length < 1e-6:
            self._path = path
            self._place_label()
            return
        ux, uy = (p2.x() - p1.x()) / length, (p2.y() - p1.y()) / length
        # offsets are measured on the canonical direction so u->v and v->u bow apart
        sign = 1.0 if self.source <= self.target else -1.0
        nx_, ny = -uy * sign, ux * sign
        trim = min(NODE_RADIUS, length / 3)
        a = QPointF(p1.x() + ux * trim, p1.y() + uy * trim)
        b = QPointF(p2.x() - ux * trim, p2.y() - uy * trim)
        offset = self.offset
        if BOW_FROM * 1.5 < length < BOW_FROM * 10 and min(abs(ux), abs(uy)) < 0.05:
            # a long link along a row or column would run under the nodes in between
            offset += BOW * length
        if offset:
            ctrl = QPointF((p1.x() + p2.x()) / 2 + nx_ * offset * 2,
                           (p1.y() + p2.y()) / 2 + ny * offset * 2)
            path.moveTo(a)
            path.quadTo(ctrl, b)
        else:
            path.moveTo(a)
            path.lineTo(b)
            self._straight = QLineF(a, b)
        self._path = path
        self._line_bounds = path.boundingRect()
        self._pad_bounds()
        self._place_label()

    def _restyled(self) -> None:
        """A new pen, outline or marks on the same line: its bounds and badges anew, not
        the line (a tree's restyle changes dozens of links in one turn)."""
        if self._path.isEmpty():
            self._rebuild()
            return
        self.prepareGeometryChange()
        self._mark_shapes = {}
        self._pad_bounds()
        self._border_label()    # (it stays where the scene placed it, clear of the others)

    def _pad_bounds(self) -> None:
        """The bounds: the line's, with room for the pen, arrowheads, badges, outline."""
        pad = self.pen_width() / 2 + ARROW + 2 + (MARK_PAD if self.marks else 0) \
            + (OUTLINE if self.outline is not None else 0)
        self._bounds = self._line_bounds.adjusted(-pad, -pad, pad, pad)

    def set_color(self, color: QColor) -> None:
        """Draw the link in ``color`` (its bandwidth's) while no overlay recolours it."""
        if color.rgba() != self.color.rgba():
            self.color = color
            self.update()
            self._border_label()

    def set_zoom(self, zoom: float) -> None:
        """Show the bandwidth where it fits at ``zoom`` (the scene calls this after zooms)."""
        if zoom != self._zoom:
            self._zoom = zoom
            self._mid_valid = False
            self._place_label()

    def _middle(self) -> QPointF:
        """The preferred spot of the bandwidth (computed when first needed after a
        change: far out, where no bandwidth fits, it never is)."""
        if not self._mid_valid:
            self._mid_valid = True
            if self._length < 1e-6:
                self._mid = QPointF(self._p1)
            elif self._straight is None:
                self._mid = self._path.pointAtPercent(self._label_fraction(self._length))
            else:
                self._mid = QLineF(self._p1, self._p2).pointAt(
                    self._label_fraction(self._length))
        return self._mid

    def length(self) -> float:
        """Distance between the two nodes' centres, in scene units."""
        return self._length

    def label_fits(self) -> bool:
        """Whether the link is long enough on screen for its bandwidth."""
        free = (self._length - 2 * NODE_RADIUS) * self._zoom
        wide = max(self._text_rect.width(), self._text_rect.height())
        return self._zoom >= LINK_LABEL_MIN_ZOOM and free >= wide + 4

    def label_spots(self) -> Iterator[QPointF]:
        """Where the bandwidth may go, best first: its preferred spot, then along the line
        nearest the middle first; then beside the line (the box touching it, on either
        side) at the same places. Made one at a time: the first free one ends the search."""
        if self._path.isEmpty():
            return
        yield QPointF(self._middle())
        on_line = [self._point_at(0.5)]
        yield on_line[0]
        for t in SPOTS:
            on_line.append(self._point_at(t))
            yield on_line[-1]
        if self._length < 1e-6:
            return
        ux = (self._p2.x() - self._p1.x()) / self._length
        uy = (self._p2.y() - self._p1.y()) / self._length
        px = 1.0 / self._zoom
        w, h = self._text_rect.width() * px, self._text_rect.height() * px
        # the box's half extent across the line, less a little so it still touches it
        off = (abs(uy) * w + abs(ux) * h) / 2 + (self.pen_width() / 2 - 1) * px
        for p in on_line[:BESIDE]:
            for side in (1.0, -1.0):
                yield QPointF(p.x() - uy * off * side, p.y() + ux * off * side)

    def _point_at(self, t: float) -> QPointF:
        """The point ``t`` of the way along the drawn line (by length)."""
        if self._straight is not None:
            return self._straight.pointAt(t)
        return self._path.pointAtPercent(t)

    def line_points(self, steps: int) -> list[tuple[float, float]]:
        """The drawn line as points (its two ends when straight, ``steps`` + 1 along a
        curve), in scene coordinates."""
        if self._path.isEmpty():
            return []
        if self._straight is not None:
            a, b = self._straight.p1(), self._straight.p2()
            return [(a.x(), a.y()), (b.x(), b.y())]
        points = [self._path.pointAtPercent(i / steps) for i in range(steps + 1)]
        return [(p.x(), p.y()) for p in points]

    def side_spots(self) -> list[QPointF]:
        """Where the bandwidth of a link too short to hold it along its line may go: beside
        the middle, on either side, just clear of the two node boxes (two neighbouring
        GPUs' link, e.g. an MI250's Infinity Fabric pair, is labelled above or below their
        gap rather than not at all)."""
        if self._path.isEmpty() or self._length < 1e-6 or self._zoom < LINK_LABEL_MIN_ZOOM:
            return []
        mid = self._path.pointAtPercent(0.5)
        ux = (self._p2.x() - self._p1.x()) / self._length
        uy = (self._p2.y() - self._p1.y()) / self._length
        px = 1.0 / self._zoom
        w, h = self._text_rect.width() * px, self._text_rect.height() * px
        off = (abs(uy) * (w + style.NODE_W) + abs(ux) * (h + style.NODE_H)) / 2 + 2 * px
        return [QPointF(mid.x() - uy * off, mid.y() + ux * off),
                QPointF(mid.x() + uy * off, mid.y() - ux * off)]

    def label_rect(self, at: QPointF) -> QRectF:
        """The bandwidth's box centred at ``at``, in scene units at the current zoom."""
        scale = 1.0 / self._zoom
        w, h = self._text_rect.width() * scale, self._text_rect.height() * scale
        return QRectF(at.x() - w / 2, at.y() - h / 2, w, h)

    def show_label_at(self, at: QPointF | None) -> None:
        """Show the bandwidth centred at ``at``, or hide it (the tooltip still has it)."""
        self.bandwidth_label.set_text(self.text if at is not None else "")
        if at is not None:
            self.bandwidth_label.setPos(at)

    def _place_label(self) -> None:
        """The preferred spot, while the scene has not placed the labels (after a move)."""
        fits = self.label_fits()
        self.show_label_at(self._middle() if fits else None)
        self._border_label()

    def _border_label(self) -> None:
        """The bandwidth's box in the highlight's colour, else the link's."""
        self.bandwidth_label.border = _border(self.highlight[0] if self.highlight
                                              else self.color)
        self.bandwidth_label.update()

    def _clear_of(self, near: QPointF, far: QPointF, extra_px: float) -> float:
        """Scene distance along the line from ``near`` at which it leaves ``near``'s box
        and the name under it, plus ``extra_px`` pixels."""
        length = self._length
        ux, uy = (far.x() - near.x()) / length, (far.y() - near.y()) / length
        px = 1.0 / max(self._zoom, 1e-3)  # scene units per pixel: names keep their size
        half_w = max(style.NODE_W / 2, NAME_HALF_WIDTH * px) + extra_px * px
        below = style.NODE_H / 2 + (NAME_HEIGHT + extra_px) * px
        above = style.NODE_H / 2 + extra_px * px
        return min(half_w / abs(ux) if abs(ux) > 1e-6 else float("inf"),
                   (below if uy > 0 else above) / abs(uy) if abs(uy) > 1e-6 else float("inf"))

    def _mark_fraction(self, forward: bool) -> float:
        """Where along the link (0 = source) a direction badge goes: :data:`MARK_AT` of
        the way from the sending node to the receiving one, counted over the stretch
        between their names, so the badge never covers a node's name (the middle if the
        link is too short for that)."""
        start = self._clear_of(self._p1, self._p2, MARK_CLEAR)
        end = self._length - self._clear_of(self._p2, self._p1, MARK_CLEAR)
        if end <= start:
            return 0.5
        t = (start + (end - start) * (MARK_AT if forward else 1.0 - MARK_AT)) / self._length
        return min(1.0, max(0.0, t))

    def _label_fraction(self, length: float) -> float:
        """Where along the link (0 = source) its bandwidth label goes.

        Mid-way, or, next to a busy hub, just outside the quieter end node and its name.
        """
        if self.label_near is None:
            return 0.5 + STAGGER * self.rank
        near, far = ((self._p1, self._p2) if self.label_near == self.source
                     else (self._p2, self._p1))
        ux, uy = (far.x() - near.x()) / length, (far.y() - near.y()) / length
        px = 1.0 / max(self._zoom, 1e-3)  # scene units per pixel: text keeps its pixel size
        half_w = max(style.NODE_W / 2, NAME_HALF_WIDTH * px) + self._text_rect.width() / 2 * px \
            + 3 * px
        below = style.NODE_H / 2 + (NAME_HEIGHT + self._text_rect.height() / 2 + 3) * px
        above = style.NODE_H / 2 + (self._text_rect.height() / 2 + 3) * px
        exits = [half_w / abs(ux) if abs(ux) > 1e-6 else float("inf"),
                 (below if uy > 0 else above) / abs(uy) if abs(uy) > 1e-6 else float("inf")]
        t = min(0.5, min(exits) / length) + abs(STAGGER * self.rank)
        return t if self.label_near == self.source else 1.0 - t

    def pen_width(self) -> float:
        return self.highlight[1] if self.highlight else self.width

    def boundingRect(self) -> QRectF:
        return self._bounds

    def shape(self) -> QPainterPath:
        stroker = QPainterPathStroker()
        stroker.setWidth(max(8.0, self.pen_width() + 4))
        return stroker.createStroke(self._path)

    def path(self) -> QPainterPath:
        return QPainterPath(self._path)

    # ------------------------------------------------------------ painting

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem,
              widget: QWidget | None = None) -> None:
        if self._path.isEmpty():
            return
        exposed = option.exposedRect
        if self._straight is not None and not _crosses(self._straight, exposed):
            return  # a long diagonal link whose box, but not line, meets the exposed area
        color = self.highlight[0] if self.highlight else self.color
        width = self.pen_width()
        painter.setBrush(_NO_BRUSH)
        if self.isSelected():
            painter.setPen(QPen(style.SELECTED, width + 4, _SOLID, _ROUND_CAP))
            self._draw_line(painter)
        if self.outline is not None:
            painter.setPen(QPen(self.outline, width + 2 * OUTLINE, _SOLID, _FLAT_CAP))
            self._draw_line(painter)
        painter.setPen(_pen(color, width))
        self._draw_line(painter)
        if not self.duplex:
            self._paint_arrow(painter, color)
        if self.marks:
            lod = option.levelOfDetailFromTransform(painter.worldTransform())
            ink = _mark_ink(color)
            for towards, text in self.marks:
                self._paint_mark(painter, ink, towards, text, lod)

    def _draw_line(self, painter: QPainter) -> None:
        if self._straight is not None:
            painter.drawLine(self._straight)
        else:
            painter.drawPath(self._path)

    def _paint_arrow(self, painter: QPainter, color: QColor) -> None:
        end = self._path.pointAtPercent(1.0)
        before = self._path.pointAtPercent(0.9)
        angle = math.atan2(end.y() - before.y(), end.x() - before.x())
        size = ARROW + self.pen_width()
        left = QPointF(end.x() - size * math.cos(angle - 0.45),
                       end.y() - size * math.sin(angle - 0.45))
        right = QPointF(end.x() - size * math.cos(angle + 0.45),
                        end.y() - size * math.sin(angle + 0.45))
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QBrush(color.darker(130)))
        painter.drawPolygon(QPolygonF([end, left, right]))


    def _mark_geometry(self, towards: str, text: str
                       ) -> tuple[QPolygonF, QRectF | None, QPointF]:
        """The arrowhead towards node ``towards`` part-way along the link, the rectangle
        of its badge (None without text) and the arrow's position."""
        key = (towards, text, self._zoom)
        known = self._mark_shapes.get(key)
        if known is None:
            known = self._mark_shapes[key] = self._new_mark_geometry(towards, text)
        return known

    def _new_mark_geometry(self, towards: str, text: str
                           ) -> tuple[QPolygonF, QRectF | None, QPointF]:
        forward = towards == self.target
        t = self._mark_fraction(forward)
        at = self._path.pointAtPercent(t)
        ahead = self._path.pointAtPercent(min(1.0, t + 0.02) if forward else max(0.0, t - 0.02))
        angle = math.atan2(ahead.y() - at.y(), ahead.x() - at.x())
        size = ARROW + self.pen_width()
        tip = QPointF(at.x() + size / 2 * math.cos(angle), at.y() + size / 2 * math.sin(angle))
        left = QPointF(tip.x() - size * math.cos(angle - 0.5),
                       tip.y() - size * math.sin(angle - 0.5))
        right = QPointF(tip.x() - size * math.cos(angle + 0.5),
                        tip.y() - size * math.sin(angle + 0.5))
        arrow = QPolygonF([tip, left, right])
        if not text:
            return arrow, None, at
        w = _mark_width(text) + 6
        h = _MARK_METRICS.height()
        # beside the arrow, on the left of the direction of travel
        side = angle - math.pi / 2
        centre = QPointF(at.x() + (h / 2 + size / 2 + 2) * math.cos(side),
                         at.y() + (h / 2 + size / 2 + 2) * math.sin(side))
        return arrow, QRectF(centre.x() - w / 2, centre.y() - h / 2, w, h), at

    def badge_rects(self) -> list[QRectF]:
        """Scene rectangles of the direction badges with text (for layout checks)."""
        rects = []
        for towards, text in self.marks:
            rect = self._mark_geometry(towards, text)[1]
            if rect is not None:
                rects.append(rect)
        return rects

    def _paint_mark(self, painter: QPainter, ink: tuple[QBrush, QPen, QColor], towards: str,
                    text: str, lod: float) -> None:
        """An arrowhead towards node ``towards`` part-way along the link, and its badge,
        in the link colour's ``ink`` (:func:`_mark_ink`)."""
        arrow, rect, _at = self._mark_geometry(towards, text)
        fill, edge, lettering = ink
        painter.setPen(_MARK_EDGE)
        painter.setBrush(fill)
        painter.drawPolygon(arrow)
        if rect is None or lod < style.LINK_LABEL_LOD:
            return
        h = rect.height()
        painter.setPen(edge)
        painter.setBrush(_WHITE_BRUSH)
        painter.drawRoundedRect(rect, h / 2, h / 2)
        painter.setFont(MARK_FONT)
        painter.setPen(lettering)
        painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, text)


STYLE_CACHE = 1024
_PENS: dict[tuple[int, float], QPen] = {}
_INKS: dict[int, tuple[QBrush, QPen, QColor]] = {}
_WHITE_BRUSH = QBrush(QColor("white"))


def _pen(color: QColor, width: float) -> QPen:
    """A link's line pen (one object per colour and width: a repaint of the canvas
    paints every link)."""
    key = (color.rgba(), width)
    pen = _PENS.get(key)
    if pen is None:
        if len(_PENS) > STYLE_CACHE:      # (load colours are many: keep the cache small)
            _PENS.clear()
        pen = _PENS[key] = QPen(color, width, _SOLID, _FLAT_CAP)
    return pen


def _mark_ink(color: QColor) -> tuple[QBrush, QPen, QColor]:
    """Arrowhead fill, badge border and badge text of direction marks on a link of
    ``color``."""
    key = color.rgba()
    ink = _INKS.get(key)
    if ink is None:
        if len(_INKS) > STYLE_CACHE:
            _INKS.clear()
        ink = _INKS[key] = (QBrush(color.darker(140)), QPen(color.darker(140), 1.0),
                            color.darker(160))
    return ink


_MARK_WIDTHS: dict[str, float] = {}


def _mark_width(text: str) -> float:
    """Pixel width of a badge's text (a hop number: few distinct ones, each measured once)."""
    width = _MARK_WIDTHS.get(text)
    if width is None:
        if len(_MARK_WIDTHS) > STYLE_CACHE:
            _MARK_WIDTHS.clear()
        width = _MARK_WIDTHS[text] = _MARK_METRICS.horizontalAdvance(text)
    return width


_BORDERS: dict[int, QColor] = {}


def _border(color: QColor) -> QColor:
    """The border of a bandwidth on a link of ``color`` (one shared colour object each)."""
    key = color.rgba()
    if key not in _BORDERS:
        _BORDERS[key] = color.darker(115)
    return _BORDERS[key]


def _crosses(line: QLineF, rect: QRectF) -> bool:
    """Whether the segment passes through ``rect`` (padded by the widest pen)."""
    rect = rect.adjusted(-12, -12, 12, 12)
    if rect.contains(line.p1()) or rect.contains(line.p2()):
        return True
    corners = [rect.topLeft(), rect.topRight(), rect.bottomRight(), rect.bottomLeft()]
    bounded = QLineF.IntersectionType.BoundedIntersection
    return any(line.intersects(QLineF(corners[i], corners[(i + 1) % 4]))[0] == bounded
               for i in range(4))
