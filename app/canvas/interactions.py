"""Mouse modes of the canvas: one small state machine per tool.

The scene hands every mouse press, move and release to its current :class:`Interaction`
first; a tool returns True when it consumed the event. Select/Move leaves dragging to Qt
and records the result as one undoable move when the button is released.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QLineF, QPointF, Qt
from PySide6.QtGui import QPen
from PySide6.QtWidgets import QGraphicsLineItem, QGraphicsSceneMouseEvent

from canopy.app.canvas import style
from canopy.app.canvas.node_item import NodeItem
from canopy.app.commands import InsertItems, delete
from canopy.app.naming import fresh_id
from canopy.engine.model.topology import COMPUTE, Link, Node

if TYPE_CHECKING:
    from canopy.app.canvas.scene import TopologyScene


class Interaction:
    """The base tool consumes nothing."""

    rubber_band = False
    """Whether the view should draw a selection rectangle on empty-space drags."""

    def __init__(self, scene: TopologyScene):
        self.scene = scene

    def press(self, event: QGraphicsSceneMouseEvent) -> bool:
        return False

    def move(self, event: QGraphicsSceneMouseEvent) -> bool:
        return False

    def release(self, event: QGraphicsSceneMouseEvent) -> bool:
        return False

    def cancel(self) -> None:
        """Drop any half-done gesture (Escape, tool change, document reset)."""


class SelectMove(Interaction):
    """Click to select, drag to move (undoably), drag on empty space for a rubber band."""

    rubber_band = True

    def __init__(self, scene: TopologyScene):
        super().__init__(scene)
        self._start: dict[str, QPointF] = {}

    def press(self, event: QGraphicsSceneMouseEvent) -> bool:
        self.scene.default_press(event)
        self._start = {}
        if event.button() == Qt.MouseButton.LeftButton \
                and isinstance(self.scene.mouseGrabberItem(), NodeItem):
            self._start = {n: self.scene.node_item(n).pos()
                           for n in self.scene.selected_node_ids()}
        return True

    def release(self, event: QGraphicsSceneMouseEvent) -> bool:
        self.scene.default_release(event)
        if event.button() == Qt.MouseButton.LeftButton and self._start:
            start, self._start = self._start, {}
            self.scene.commit_moves(start)
        return True

    def cancel(self) -> None:
        self._start = {}


def _snapped(scene: TopologyScene, pos: QPointF) -> QPointF:
    if not scene.snap_to_grid:
        return pos
    return QPointF(round(pos.x() / style.GRID) * style.GRID,
                   round(pos.y() / style.GRID) * style.GRID)


class AddNode(Interaction):
    """Click to place a compute or switch node; inside a group box it joins that group."""

    def __init__(self, scene: TopologyScene, kind: str = COMPUTE):
        super().__init__(scene)
        self.kind = kind

    def press(self, event: QGraphicsSceneMouseEvent) -> bool:
        if event.button() != Qt.MouseButton.LeftButton:
            return False
        node = new_node(self.scene, self.kind, _snapped(self.scene, event.scenePos()))
        doc = self.scene.doc
        doc.undo_stack.push(InsertItems(doc, [node], [], f"Add {node.id}"))
        self.scene.select([node.id])
        return True

    def release(self, event: QGraphicsSceneMouseEvent) -> bool:
        return event.button() == Qt.MouseButton.LeftButton


def new_node(scene: TopologyScene, kind: str, pos: QPointF) -> Node:
    """A node of ``kind`` at ``pos`` with a fresh id (``n0.gpu3`` inside group ``n0``)."""
    group = scene.group_at(pos)
    stem = "gpu" if kind == COMPUTE else "sw"
    if group:
        stem = f"{group}.{stem}"
    node_id = fresh_id(stem, set(scene.doc.node_ids()))
    return Node(node_id, kind, node_id, group, round(pos.x(), 1), round(pos.y(), 1))


class AddLink(Interaction):
    """Press on a node, drag to another node and release: a new link between them."""

    def __init__(self, scene: TopologyScene):
        super().__init__(scene)
        self._source: str | None = None
        self._line: QGraphicsLineItem | None = None

    def press(self, event: QGraphicsSceneMouseEvent) -> bool:
        if event.button() != Qt.MouseButton.LeftButton:
            return False
        item = self.scene.node_at(event.scenePos())
        if item is not None:
            self._source = item.node_id
            self._line = QGraphicsLineItem(QLineF(item.pos(), event.scenePos()))
            self._line.setPen(QPen(style.SELECTED, 2, Qt.PenStyle.DashLine))
            self._line.setZValue(20)
            self.scene.addItem(self._line)
        return True

    def move(self, event: QGraphicsSceneMouseEvent) -> bool:
        if self._line is not None:
            line = self._line.line()
            self._line.setLine(QLineF(line.p1(), event.scenePos()))
        return True

    def release(self, event: QGraphicsSceneMouseEvent) -> bool:
        if event.button() != Qt.MouseButton.LeftButton:
            return False
        source = self._source
        self.cancel()
        target = self.scene.node_at(event.scenePos())
        if source is not None and target is not None and target.node_id != source:
            doc = self.scene.doc
            link = Link(source, target.node_id, self.scene.new_link_bandwidth,
                        self.scene.new_link_duplex)
            command = InsertItems(doc, [], [link], f"Add link {link.describe()}")
            doc.undo_stack.push(command)
            self.scene.select(link_keys=command.keys)
        return True

    def cancel(self) -> None:
        if self._line is not None:
            self.scene.removeItem(self._line)
        self._line = None
        self._source = None


class DeleteTool(Interaction):
    """Click a node or a link to delete it (a node takes its links with it)."""

    def press(self, event: QGraphicsSceneMouseEvent) -> bool:
        if event.button() != Qt.MouseButton.LeftButton:
            return False
        for item in self.scene.items(event.scenePos()):
            node_id = getattr(item, "node_id", None)
            key = getattr(item, "key", None)
            if node_id is not None:
                delete(self.scene.doc, [node_id], [])
                break
            if key is not None:
                delete(self.scene.doc, [], [key])
                break
        return True

    def release(self, event: QGraphicsSceneMouseEvent) -> bool:
        return event.button() == Qt.MouseButton.LeftButton

