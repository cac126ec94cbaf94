"""A node on the canvas: compute nodes are green rounded boxes, switches blue hexagons."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QPainter, QPainterPath, QPen, QPolygonF
from PySide6.QtWidgets import QGraphicsItem, QStyle, QStyleOptionGraphicsItem, QWidget

from canopy.app.canvas import style
from canopy.engine.topology import COMPUTE, Node

if TYPE_CHECKING:
    from canopy.app.canvas.scene import TopologyScene

LABEL_H = 14.0
BADGE_FONT = style.label_font(7.0, bold=True)
LABEL_FONT = style.label_font(8.0)


class NodeItem(QGraphicsItem):
    """Mirrors one :class:`~canopy.engine.topology.Node`; its position is the node's (x, y)."""

    def __init__(self, node: Node):
        super().__init__()
        self.node_id = node.id
        self.kind = node.kind
        self.label = node.label or node.id
        self.syncing = False
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
        kind = "compute node" if node.kind == COMPUTE else "switch"
        group = f", group {node.group}" if node.group else ""
        self.setToolTip(f"{node.id} ({kind}{group})")
        self.update()

    def sync_position(self, node: Node) -> None:
        """Move to the model's coordinates without snapping or reporting a user move."""
        self.syncing = True
        self.setPos(node.x or 0.0, node.y or 0.0)
        self.syncing = False

    # ------------------------------------------------------------ geometry

    def body(self) -> QRectF:
        return QRectF(-style.NODE_W / 2, -style.NODE_H / 2, style.NODE_W, style.NODE_H)

    def boundingRect(self) -> QRectF:
        width = max(style.NODE_W, 7.0 * len(self.label)) + 6
        return QRectF(-width / 2, -style.NODE_H / 2 - 3, width, style.NODE_H + LABEL_H + 8)

    def shape(self) -> QPainterPath:
        path = QPainterPath()
        path.addRect(self.body().adjusted(-2, -2, 2, 2))
        return path

    def outline(self) -> QPainterPath:
        path = QPainterPath()
        r = self.body()
        if self.kind == COMPUTE:
            path.addRoundedRect(r, 6, 6)
        else:
            d = r.height() / 2
            path.addPolygon(QPolygonF([
                QPointF(r.left(), 0), QPointF(r.left() + d * 0.6, r.top()),
                QPointF(r.right() - d * 0.6, r.top()), QPointF(r.right(), 0),
                QPointF(r.right() - d * 0.6, r.bottom()), QPointF(r.left() + d * 0.6, r.bottom()),
                QPointF(r.left(), 0)]))
        return path

    # ------------------------------------------------------------ painting

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem,
              widget: QWidget | None = None) -> None:
        lod = option.levelOfDetailFromTransform(painter.worldTransform())
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        compute = self.kind == COMPUTE
        fill = style.COMPUTE_FILL if compute else style.SWITCH_FILL
        border = style.SELECTED if selected else (
            style.COMPUTE_BORDER if compute else style.SWITCH_BORDER)
        painter.setPen(QPen(border, 3.0 if selected else 1.2))
        painter.setBrush(QBrush(fill))
        if lod < 0.2:
            painter.drawRect(self.body())
            return
        painter.drawPath(self.outline())
        if lod < style.LABEL_LOD:
            return
        painter.setFont(BADGE_FONT)
        painter.setPen(Qt.GlobalColor.white)
        painter.drawText(self.body(), Qt.AlignmentFlag.AlignCenter, "GPU" if compute else "SW")
        painter.setFont(LABEL_FONT)
        painter.setPen(style.LINK_TEXT)
        rect = self.boundingRect()
        painter.drawText(QRectF(rect.left(), style.NODE_H / 2 + 2, rect.width(), LABEL_H),
                         Qt.AlignmentFlag.AlignCenter, self.label)

    # ------------------------------------------------------------ moves

    def itemChange(self, change: QGraphicsItem.GraphicsItemChange, value: object) -> object:
        scene: TopologyScene | None = self.scene()  # type: ignore[assignment]
        if change == QGraphicsItem.GraphicsItemChange.ItemPositionChange and scene is not None \
                and not self.syncing and scene.snap_to_grid:
            pos = value  # QPointF
            return QPointF(round(pos.x() / style.GRID) * style.GRID,
                           round(pos.y() / style.GRID) * style.GRID)
        if change == QGraphicsItem.GraphicsItemChange.ItemPositionHasChanged and scene is not None:
            scene.node_item_moved(self)
        return super().itemChange(change, value)
