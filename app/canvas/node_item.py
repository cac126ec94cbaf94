"""A node on the canvas: compute nodes are green rounded boxes, switches blue hexagons."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QPainter, QPainterPath, QPen, QPolygonF
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem, QWidget

from canopy.app.canvas import style
from canopy.app.canvas.labels import BANDWIDTH_FONT, NAME_FONT, ScreenLabel
from canopy.engine.model.topology import COMPUTE, Node

if TYPE_CHECKING:
    from canopy.app.canvas.scene import TopologyScene

BADGE_FONT = style.label_font(7.0, bold=True)
NAME_MIN_ZOOM = 0.22
"""Below this zoom no node names are drawn (rows of nodes are too close for them)."""


def _outline(compute: bool) -> QPainterPath:
    path = QPainterPath()
    r = _BODY
    if compute:
        path.addRoundedRect(r, 6, 6)
    else:
        d = r.height() / 2
        path.addPolygon(QPolygonF([
            QPointF(r.left(), 0), QPointF(r.left() + d * 0.6, r.top()),
            QPointF(r.right() - d * 0.6, r.top()), QPointF(r.right(), 0),
            QPointF(r.right() - d * 0.6, r.bottom()), QPointF(r.left() + d * 0.6, r.bottom()),
            QPointF(r.left(), 0)]))
    return path


_BODY = QRectF(-style.NODE_W / 2, -style.NODE_H / 2, style.NODE_W, style.NODE_H)
_BOUNDS = _BODY.adjusted(-3, -3, 3, 3)
_OUTLINES = {True: _outline(True), False: _outline(False)}
_PENS = {True: QPen(style.COMPUTE_BORDER, 1.2), False: QPen(style.SWITCH_BORDER, 1.2)}
_SELECTED_PEN = QPen(style.SELECTED, 3.0)
_FILLS = {True: QBrush(style.COMPUTE_FILL), False: QBrush(style.SWITCH_FILL)}
_WHITE = QColor(Qt.GlobalColor.white)
_CENTRE = Qt.AlignmentFlag.AlignCenter


class NodeItem(QGraphicsItem):
    """Mirrors one :class:`~canopy.engine.model.topology.Node`; its position is the node's
    (x, y)."""

    def __init__(self, node: Node):
        super().__init__()
        self.node_id = node.id
        self.kind = node.kind
        self.label = node.label or node.id
        self.syncing = False
        self.names: tuple[str, ...] = ()
        self.name_label = ScreenLabel(self, NAME_FONT, anchor="top", halo=True)
        self.name_label.setPos(0, style.NODE_H / 2 + 1)
        self.fan_label = ScreenLabel(self, BANDWIDTH_FONT, boxed=True)
        """The bandwidth its links share (``16 GB/s × 32``) where none of those links has
        room for its own label, placed by :mod:`canopy.app.canvas.lod`."""
        self.fan_links: tuple[int, ...] = ()
        """Keys of the links :attr:`fan_label` speaks for."""
        self.setFlags(QGraphicsItem.GraphicsItemFlag.ItemIsMovable
                      | QGraphicsItem.GraphicsItemFlag.ItemIsSelectable
                      | QGraphicsItem.GraphicsItemFlag.ItemSendsGeometryChanges)
        self.setZValue(10)
        self.setAcceptHoverEvents(False)
        self.refresh(node)
        self.sync_position(node)

    def refresh(self, node: Node) -> None:
        """Take kind, label and id from the model."""
        self.prepareGeometryChange()
        self.node_id = node.id
        self.kind = node.kind
        self.label = node.label or node.id
        self.names = short_names(node)
        kind = "compute node" if node.kind == COMPUTE else "switch"
        group = f", group {node.group}" if node.group else ""
        label = f" “{node.label}”" if node.label and node.label != node.id else ""
        self.setToolTip(f"{node.id}{label} ({kind}{group})")
        if self.name_label.text:
            self.name_label.set_text(self.names[0])
        self.update()

    def fan_rect(self, at: QPointF, text: str, zoom: float) -> QRectF:
        """The fan label's box centred at scene point ``at``, in scene units at ``zoom``."""
        w = self.fan_label.width_of(text) / zoom
        h = self.fan_label.height_of(text) / zoom
        return QRectF(at.x() - w / 2, at.y() - h / 2, w, h)

    def show_fan_at(self, at: QPointF | None, text: str = "", keys: tuple[int, ...] = ()
                    ) -> None:
        """Show ``text`` centred at scene point ``at`` for links ``keys``, or hide it."""
        self.fan_links = keys if at is not None else ()
        self.fan_label.set_text(text if at is not None else "")
        if at is not None:
            self.fan_label.setPos(at - self.pos())

    def name_rect(self, text: str, zoom: float) -> QRectF:
        """Where ``text`` would sit under the node, in scene units at ``zoom``."""
        w = self.name_label.width_of(text) / zoom
        h = self.name_label.height_of(text) / zoom
        return QRectF(self.pos().x() - w / 2, self.pos().y() + style.NODE_H / 2 + 1, w, h)

    def sync_position(self, node: Node) -> None:
        """Move to the model's coordinates without snapping or reporting a user move."""
        self.syncing = True
        self.setPos(node.x or 0.0, node.y or 0.0)
        self.syncing = False

    # ------------------------------------------------------------ geometry

    def body(self) -> QRectF:
        return QRectF(_BODY)

    def boundingRect(self) -> QRectF:
        return QRectF(_BOUNDS)

    def shape(self) -> QPainterPath:
        path = QPainterPath()
        path.addRect(self.body().adjusted(-2, -2, 2, 2))
        return path

    def outline(self) -> QPainterPath:
        return QPainterPath(_OUTLINES[self.kind == COMPUTE])

    # ------------------------------------------------------------ painting

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem,
              widget: QWidget | None = None) -> None:
        # shapes, pens and brushes are made once (module constants): a canvas repaint
        # paints every node, and building them per paint was a third of its cost
        lod = option.levelOfDetailFromTransform(painter.worldTransform())
        compute = self.kind == COMPUTE
        painter.setPen(_SELECTED_PEN if self.isSelected() else _PENS[compute])
        painter.setBrush(_FILLS[compute])
        if lod < 0.2:
            painter.drawRect(_BODY)
            return
        painter.drawPath(_OUTLINES[compute])
        if lod < style.LABEL_LOD:
            return
        painter.setFont(BADGE_FONT)
        painter.setPen(_WHITE)
        painter.drawText(_BODY, _CENTRE, "GPU" if compute else "SW")

    # ------------------------------------------------------------ moves

    def itemChange(self, change: QGraphicsItem.GraphicsItemChange, value: object) -> object:
        scene = cast("TopologyScene | None", self.scene())     # only a TopologyScene holds it
        if change == QGraphicsItem.GraphicsItemChange.ItemPositionChange and scene is not None \
                and not self.syncing and scene.snap_to_grid and isinstance(value, QPointF):
            return QPointF(round(value.x() / style.GRID) * style.GRID,
                           round(value.y() / style.GRID) * style.GRID)
        if change == QGraphicsItem.GraphicsItemChange.ItemPositionHasChanged and scene is not None:
            scene.node_item_moved(self)
        return super().itemChange(change, value)


def short_names(node: Node) -> tuple[str, ...]:
    """Names to show, longest first: the label, then without the server's prefix (the
    group box names the server), e.g. ``n0.gpu3`` then ``gpu3``."""
    names = [node.label or node.id]
    if node.group:
        for text in (node.label or "", node.id):
            for sep in (".", " ", "-", "_", "/", ":"):
                if text.startswith(node.group + sep) and len(text) > len(node.group) + 1:
                    names.append(text[len(node.group) + 1:])
    names.append(node.id)
    unique = []
    for name in names:
        if name not in unique:
            unique.append(name)
    return tuple(sorted(unique, key=len, reverse=True)) if len(unique) > 1 else tuple(unique)
