"""Zoomed-out drawing of the whole topology in a handful of paint calls.

Far out (thousands of nodes on screen) painting each item from Python costs a Python call
per item, which makes panning a 2,048-GPU cluster stutter. Below :func:`overview_zoom` the
scene switches the node, link and group items to ``ItemHasNoContents`` (they still take
clicks, drags and rubber bands) and this one item draws everything from a few cached painter
paths, rebuilt only after a change. Links an overlay recolours (a cut, a tree, link load)
are a layer of their own, on top of every link in its plain style: recolouring them rebuilds
that layer only, from the recoloured links alone, instead of walking the 3,000 links of a
1024-GPU drawing. The first paths of a newly opened large drawing are built in a turn of the
event loop of their own, not inside the paint that needs them, and painted in another:
building and the first paint of the window are then two short stalls, not one long one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import shiboken6
from PySide6.QtCore import QRectF, Qt, QTimer
from PySide6.QtGui import QBrush, QColor, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem, QWidget

from canopy.app.canvas import style
from canopy.engine.model.topology import COMPUTE

if TYPE_CHECKING:
    from canopy.app.canvas.link_item import LinkItem
    from canopy.app.canvas.scene import TopologyScene

Layer = tuple[QPainterPath, QPen, "QBrush | None", bool]

OVERVIEW_ZOOM = 0.12
"""Zoom factor below which the scene is drawn by the overview item (above it, names,
bandwidths and collapsed servers are drawn item by item where they fit)."""
LARGE_OVERVIEW_ZOOM = 0.8
"""The same for drawings of more than :data:`LARGE` nodes (names are hidden sooner)."""
LARGE = 1000


def overview_zoom(node_count: int) -> float:
    """The zoom below which a drawing of ``node_count`` nodes is drawn as an overview."""
    return LARGE_OVERVIEW_ZOOM if node_count > LARGE else OVERVIEW_ZOOM
SMOOTH_ZOOM = 0.15
"""Below this zoom links are drawn without antialiasing (they are a pixel wide anyway)."""


class OverviewItem(QGraphicsItem):
    """Paints groups, links and nodes of the scene in bulk (see module docstring)."""

    def __init__(self, scene: TopologyScene):
        super().__init__()
        self._topology_scene = scene
        self._rect = QRectF()
        self._layers: tuple[list[Layer], list[Layer]] | None = None
        """Layers under and over the recoloured links (None: rebuild at the next paint)."""
        self._styled_layers: list[Layer] | None = None
        self._styled: dict[int, LinkItem] = {}
        """Links with an overlay colour, by key (kept by :meth:`restyled`)."""
        self._held = False
        self._pending = ""
        """What changed while held: "all", "styled" (recoloured links only) or nothing."""
        self._fresh = False
        """A new drawing whose paths were never built (see :meth:`forget`)."""
        self.setZValue(1)
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        # panning then blits the cached picture; Qt caches only the visible part
        self.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)

    def invalidate(self) -> None:
        """Rebuild the cached paths before the next paint (once released, if held)."""
        if self._held:
            self._pending = "all"
            return
        self._layers = None
        self._styled_layers = None
        self.update()

    def forget(self) -> None:
        """A new drawing replaces the old: drop its paths; a large one gets its first
        paths in a turn of the event loop of their own (the paint before draws nothing)."""
        self._fresh = True
        self.invalidate()

    def build_now(self) -> None:
        """Build the paths now if they are due (screenshots and image exports)."""
        if self._layers is None:
            self._layers = self._build()
            self._fresh = False
            self.update()

    def _build_later(self) -> None:
        if shiboken6.isValid(self) and self.scene() is not None and self._layers is None:
            self._layers = self._build()
            # the paint that shows them comes after timers and input due meanwhile
            QTimer.singleShot(0, self._update_later)

    def _update_later(self) -> None:
        if shiboken6.isValid(self):
            self.update()

    def restyled(self, item: LinkItem) -> None:
        """``item``'s overlay colour changed: rebuild the recoloured links' layer only."""
        if item.highlight is None:
            self._styled.pop(item.key, None)
        else:
            self._styled[item.key] = item
        if self._held:
            self._pending = self._pending or "styled"
            return
        self._styled_layers = None
        self.update()

    def hold(self) -> None:
        """Many changes follow, a slice per turn (recolouring a large tree's links):
        rebuild the paths once, at :meth:`release`, rather than after every slice."""
        self._held = True

    def release(self) -> None:
        """Rebuild what changed while held: the recoloured links' layer only, unless
        something else changed too (a full rebuild walks every link)."""
        self._held = False
        pending, self._pending = self._pending, ""
        if pending == "all":
            self.invalidate()
        elif pending:
            self._styled_layers = None
            self.update()

    def boundingRect(self) -> QRectF:
        return self._rect

    def refresh_bounds(self, rect: QRectF) -> None:
        if rect != self._rect:
            self.prepareGeometryChange()
            self._rect = QRectF(rect)
        self.invalidate()

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem,
              widget: QWidget | None = None) -> None:
        if self._layers is None:
            if self._fresh and self._topology_scene.node_count() > LARGE:
                self._fresh = False
                QTimer.singleShot(0, self._build_later)
                return
            self._layers = self._build()
            self._fresh = False
        if self._styled_layers is None:
            self._styled_layers = self._build_styled()
        under, over = self._layers
        lod = option.levelOfDetailFromTransform(painter.worldTransform())
        antialiased = painter.testRenderHint(QPainter.RenderHint.Antialiasing)
        for path, pen, brush, smooth in [*under, *self._styled_layers, *over]:
            painter.setRenderHint(QPainter.RenderHint.Antialiasing, smooth and lod >= SMOOTH_ZOOM)
            # cosmetic pens (device pixels) stroke thousands of segments far faster
            device_pen = QPen(pen)
            device_pen.setCosmetic(True)
            device_pen.setWidthF(max(0.8, pen.widthF() * lod))
            painter.setPen(device_pen)
            painter.setBrush(brush if brush is not None else Qt.BrushStyle.NoBrush)
            painter.drawPath(path)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, antialiased)

    def _build(self) -> tuple[list[Layer], list[Layer]]:
        """Layers of (path, pen, brush, antialiased) under the recoloured links (groups,
        every link in its plain or selected style) and over them (nodes, selection)."""
        nodes, link_items, boxes = self._topology_scene.items_so_far()
        under: list[Layer] = []
        groups = QPainterPath()
        for box in boxes:
            groups.addRoundedRect(box.box(), 12, 12)
        under.append((groups, QPen(style.GROUP_BORDER, 1.2), QBrush(style.GROUP_FILL), False))

        links: dict[tuple[str, float], QPainterPath] = {}
        for item in link_items:
            if item.isSelected():
                colour, width = style.SELECTED.name(), item.pen_width() + 4
            else:
                colour, width = item.color.name(), round(item.width)
            path = links.setdefault((colour, width), QPainterPath())
            ends = item.ends()
            path.moveTo(ends[0])
            path.lineTo(ends[1])
        for (colour, width), path in sorted(links.items(), key=lambda kv: kv[0][1]):
            under.append((path, QPen(QColor(colour), width), None, True))

        shapes = {COMPUTE: QPainterPath(), "switch": QPainterPath()}
        selected = QPainterPath()
        for node in nodes:
            kind = COMPUTE if node.kind == COMPUTE else "switch"
            # plain boxes: at this zoom a node is a few pixels wide
            body = node.body().translated(node.pos())
            shapes[kind].addRect(body)
            if node.isSelected():
                selected.addRect(body)
        over: list[Layer] = [
            (shapes[COMPUTE], QPen(style.COMPUTE_BORDER, 1.2), QBrush(style.COMPUTE_FILL),
             False),
            (shapes["switch"], QPen(style.SWITCH_BORDER, 1.2), QBrush(style.SWITCH_FILL),
             False),
            (selected, QPen(style.SELECTED, 6.0), None, False)]
        return under, over

    def _build_styled(self) -> list[Layer]:
        """The recoloured links (a selected link keeps its selection colour)."""
        links: dict[tuple[str, float], QPainterPath] = {}
        for key, item in list(self._styled.items()):
            if not shiboken6.isValid(item) or item.scene() is None or item.highlight is None:
                del self._styled[key]   # removed since (a rebuilt scene, a deleted link)
                continue
            if item.isSelected():
                continue
            colour = item.highlight[0].name(QColor.NameFormat.HexArgb)
            path = links.setdefault((colour, item.pen_width()), QPainterPath())
            ends = item.ends()
            path.moveTo(ends[0])
            path.lineTo(ends[1])
        return [(path, QPen(QColor(colour), width), None, True)
                for (colour, width), path in sorted(links.items(), key=lambda kv: kv[0][1])]
