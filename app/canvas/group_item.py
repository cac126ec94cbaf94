"""A group (a server, a cluster): a labelled rounded box behind its nodes.

Dragging the box by its title bar moves every member together as one undoable move;
clicking the title selects the members. Elsewhere the box lets clicks through, so a
rubber band can start inside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QPainter, QPen
from PySide6.QtWidgets import (
    QGraphicsItem,
    QGraphicsSceneMouseEvent,
    QStyleOptionGraphicsItem,
    QWidget,
)

from canopy.app.canvas import style
from canopy.app.canvas.labels import BLOCK_FONT, ScreenLabel

if TYPE_CHECKING:
    from canopy.app.canvas.scene import TopologyScene

MARGIN = 14.0
TITLE_FONT = style.label_font(9.0, bold=True)
TITLE = 20.0
COLLAPSED_FILL = QColor("#e2e7ef")
COLLAPSED_Z = 11.0
"""A collapsed server is drawn over its members (nodes are at 10)."""


class GroupItem(QGraphicsItem):
    """The box of one group; its rectangle follows the members' bounding rectangles."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name
        self._rect = QRectF()
        self._press: QPointF | None = None
        self._start: dict[str, QPointF] = {}
        self.collapsed = False
        self.summary = name
        self.details = ""
        """What a collapsed block holds, in full (its label may show less)."""
        self.block_label = ScreenLabel(self, BLOCK_FONT, color=style.GROUP_TEXT)
        self.setZValue(-10)
        self._tip = (f"group {name}: drag its title bar to move it, click the title "
                     "to select its nodes")
        self.setToolTip(self._tip)

    def set_collapsed(self, collapsed: bool, summary: str) -> None:
        """Far out: one labelled block over the members (``summary``: what it holds and
        the bandwidth leaving it, as much as fits); near: the box behind the nodes."""
        self.summary = summary
        self.setToolTip(self._tip if not collapsed else f"{self.name}: {self.details}\n"
                        f"{self._tip}")
        if collapsed != self.collapsed:
            self.collapsed = collapsed
            self.setZValue(COLLAPSED_Z if collapsed else -10)
            self.update()
        self.block_label.set_text(summary if collapsed else "")
        self.block_label.setPos(self._rect.center())

    def set_rect(self, members: QRectF) -> None:
        self.prepareGeometryChange()
        self._rect = members.adjusted(-MARGIN, -MARGIN - TITLE, MARGIN, MARGIN)
        self.block_label.setPos(self._rect.center())

    def box(self) -> QRectF:
        return QRectF(self._rect)

    def itemChange(self, change: QGraphicsItem.GraphicsItemChange, value: object) -> object:
        if change == QGraphicsItem.GraphicsItemChange.ItemFlagsHaveChanged:
            # far out the overview draws the box with every member and link through it:
            # the label gets a halo so it stays readable over them
            halo = bool(self.flags() & QGraphicsItem.GraphicsItemFlag.ItemHasNoContents)
            if halo != self.block_label.halo:
                self.block_label.halo = halo
                self.block_label.update()
        return super().itemChange(change, value)

    def boundingRect(self) -> QRectF:
        return self._rect.adjusted(-1, -1, 1, 1)

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem,
              widget: QWidget | None = None) -> None:
        painter.setPen(QPen(style.GROUP_BORDER, 1.2))
        painter.setBrush(QBrush(COLLAPSED_FILL if self.collapsed else style.GROUP_FILL))
        painter.drawRoundedRect(self._rect, 12, 12)
        if self.collapsed:
            return
        lod = option.levelOfDetailFromTransform(painter.worldTransform())
        if lod * 9 >= 3:
            painter.setFont(TITLE_FONT)
            painter.setPen(style.GROUP_TEXT)
            painter.drawText(self._rect.adjusted(10, 4, -10, 0),
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop, self.name)

    # ------------------------------------------------------------ moving the group

    def _scene(self) -> TopologyScene:
        return cast("TopologyScene", self.scene())     # only a TopologyScene holds it

    def mousePressEvent(self, event: QGraphicsSceneMouseEvent) -> None:
        if event.button() != Qt.MouseButton.LeftButton or (
                not self.collapsed and event.pos().y() > self._rect.top() + TITLE + MARGIN / 2):
            event.ignore()  # below the title bar: rubber-band selection as usual
            return
        scene = self._scene()
        members = [scene.node_item(n) for n in scene.doc.group_members(self.name)]
        if not event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            scene.clearSelection()
        for item in members:
            item.setSelected(True)
        self._press = event.scenePos()
        self._start = {item.node_id: item.pos() for item in members}
        event.accept()

    def mouseMoveEvent(self, event: QGraphicsSceneMouseEvent) -> None:
        if self._press is None:
            return
        delta = event.scenePos() - self._press
        scene = self._scene()
        if scene.snap_to_grid:
            delta = QPointF(round(delta.x() / style.GRID) * style.GRID,
                            round(delta.y() / style.GRID) * style.GRID)
        for node_id, start in self._start.items():
            item = scene.node_item(node_id)
            item.syncing = True
            item.setPos(start + delta)
            item.syncing = False

    def mouseReleaseEvent(self, event: QGraphicsSceneMouseEvent) -> None:
        if self._press is None:
            return
        self._press = None
        self._scene().commit_moves(self._start, f"Move group {self.name}")
        self._start = {}
