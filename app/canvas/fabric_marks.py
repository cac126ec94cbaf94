"""Canvas marks for shared fabrics: a coloured ring per job around its nodes, a red cross
on failed switches and links, and the link-load heat map of a contention analysis.

The marks are items of their own above the nodes and links (they never change how a
node or link paints itself); the heat map colours links through
:meth:`~canopy.app.canvas.link_item.LinkItem.set_highlight`.
"""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsPathItem
from shiboken6 import isValid

from canopy.app.canvas.overlays import utilisation_color
from canopy.app.canvas.scene import TopologyScene
from canopy.app.document import Document

JOB_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
              "#17becf", "#bcbd22", "#7f7f7f"]
FAILED = QColor("#c62828")
RING_GAP = 4.0
CROSS = 16.0
HEAT_WIDTH = 4.0


def job_color(index: int) -> QColor:
    return QColor(JOB_COLORS[index % len(JOB_COLORS)])


class FabricMarks:
    """Keeps the job rings and failure crosses of one scene in step with the document."""

    def __init__(self, scene: TopologyScene, doc: Document):
        self.scene = scene
        self.doc = doc
        self._items: list[QGraphicsPathItem] = []
        self.heat: dict[tuple[str, str], float] = {}
        self.heat_on = False
        for signal in (doc.edited, doc.reset):
            signal.connect(self.refresh)
        self.refresh()

    def _item(self, index: int, pen: QPen, z: float) -> QGraphicsPathItem:
        """The ``index``-th path item, created (or re-created after a rebuild) as needed."""
        while len(self._items) <= index:
            self._items.append(QGraphicsPathItem())
        item = self._items[index]
        if not isValid(item) or item.scene() is not self.scene:
            item = self._items[index] = QGraphicsPathItem()
            item.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
            self.scene.addItem(item)
        pen.setCosmetic(True)               # as thick at any zoom
        item.setPen(pen)
        item.setZValue(z)
        return item

    def refresh(self) -> None:
        """Redraw the crosses and one ring path per job, reusing the items."""
        crosses = QPainterPath()
        for node in self.doc.topology.nodes:
            if node.failed and self.doc.has_node(node.id):
                node_item = self.scene.node_item(node.id)
                _cross(crosses, node_item.mapToScene(QPointF(0, 0)), CROSS * 2)
        for link in self.doc.topology.links:   # every edit: no list of keys made
            if link.failed:
                p1, p2 = self.scene.link_item(self.doc.link_key(link)).ends()
                _cross(crosses, (p1 + p2) / 2, CROSS)
        self._item(0, QPen(FAILED, 3.0), 6).setPath(crosses)
        rings_at: dict[str, int] = {}
        jobs = self.doc.topology.jobs
        for index, job in enumerate(jobs):
            path = QPainterPath()
            for node_id in job.nodes:
                if not self.doc.has_node(node_id):
                    continue
                node_item = self.scene.node_item(node_id)
                depth = rings_at.get(node_id, 0)
                rings_at[node_id] = depth + 1
                grow = RING_GAP * (depth + 1)
                body = node_item.mapRectToScene(node_item.body()).adjusted(-grow, -grow, grow,
                                                                           grow)
                path.addRoundedRect(body, 8, 8)
            self._item(index + 1, QPen(job_color(index), 2.5), 5).setPath(path)
        for item in self._items[len(jobs) + 1:]:
            if isValid(item) and item.scene() is self.scene:
                self.scene.removeItem(item)
        del self._items[len(jobs) + 1:]

    def set_heat(self, loads: dict[tuple[str, str], float] | None) -> None:
        """Colour every link by the larger offered load of its two directions (1 = the
        link is just full, 2 = twice oversubscribed); None clears the heat map."""
        if loads is None and not self.heat_on:
            return                      # leave other overlays' colours alone
        self.heat_on = loads is not None
        self.heat = dict(loads or {})
        scale = max(max(self.heat.values(), default=1.0), 1.0)
        for key in self.doc.link_keys():
            link = self.doc.link(key)
            item = self.scene.link_item(key)
            if loads is None:
                item.set_highlight(None)
                item.setToolTip("")
                continue
            load = max(self.heat.get((link.source, link.target), 0.0),
                       self.heat.get((link.target, link.source), 0.0))
            item.set_highlight(utilisation_color(load / scale), HEAT_WIDTH)
            item.setToolTip(f"offered load {load:.2f} of capacity (contention analysis)")


def _cross(path: QPainterPath, centre: QPointF, size: float) -> None:
    box = QRectF(centre.x() - size / 2, centre.y() - size / 2, size, size)
    path.moveTo(box.topLeft())
    path.lineTo(box.bottomRight())
    path.moveTo(box.topRight())
    path.lineTo(box.bottomLeft())
