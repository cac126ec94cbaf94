"""One tree drawn as a tree: root on top, compute nodes as boxes, switch hops on the edges.

Leaves take consecutive columns and every parent sits above the middle of its children,
so any out-tree (ForestColl (arXiv:2402.06787) §3.2: a spanning out-tree over the compute nodes)
draws
without crossings. The whole drawing is one graphics item that paints only what is
exposed, so even a 512-node tree is drawn at once.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QCoreApplication, QEvent, QLineF, QPointF, QRectF, Qt, QTimer
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFontMetricsF,
    QPainter,
    QPen,
    QPolygonF,
    QResizeEvent,
    QWheelEvent,
)
from PySide6.QtWidgets import (
    QGraphicsItem,
    QGraphicsScene,
    QGraphicsView,
    QStyleOptionGraphicsItem,
    QWidget,
)

from canopy.app.canvas import style
from canopy.app.canvas.overlays import TREE_LINK
from canopy.app.solution import ShownTree

COLUMN = 112.0
LEVEL = 120.0
BOX_W = 86.0
BOX_H = 26.0
NODE_FONT = style.label_font(8.0)
HOP_FONT = style.label_font(7.5)
ROOT_FILL = QColor("#7b2cbf")
MIN_FIT = 0.6
"""Smallest zoom a tree is fitted at (labels stay legible); scroll for the rest."""
HOP_AT = 0.62
"""Where along an edge (from the parent) its switch hops are written."""


def tree_positions(shown: ShownTree) -> dict[str, QPointF]:
    """Centre of every compute node's box: depth down, leaves in consecutive columns."""
    tree = shown.tree
    children = {node: [e.dst for e in edges] for node, edges in tree.children().items()}
    depth = tree.depth()
    x: dict[str, float] = {}
    next_column = 0
    stack: list[tuple[str, bool]] = [(tree.root, False)]
    while stack:  # iterative post-order: children are placed before their parent
        node, done = stack.pop()
        kids = children.get(node, [])
        if done or not kids:
            if kids:
                x[node] = (x[kids[0]] + x[kids[-1]]) / 2
            else:
                x[node] = next_column * COLUMN
                next_column += 1
            continue
        stack.append((node, True))
        stack.extend((kid, False) for kid in reversed(kids))
    return {node: QPointF(x[node], depth[node] * LEVEL) for node in x}


class TreeDrawing(QGraphicsItem):
    """Paints the boxes, edges, arrows and hop labels of one tree."""

    def __init__(self, shown: ShownTree):
        super().__init__()
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemUsesExtendedStyleOption)
        self.shown = shown
        self.positions = tree_positions(shown)
        metrics = QFontMetricsF(HOP_FONT)
        widths: dict[str, float] = {}     # switch names recur across a tree's edges
        self.edges: list[tuple[QLineF, list[str], QRectF]] = []
        for edge in shown.tree.edges:
            a, b = self.positions[edge.src], self.positions[edge.dst]
            line = QLineF(a + QPointF(0, BOX_H / 2), b - QPointF(0, BOX_H / 2))
            hops = list(edge.path[1:-1])
            for hop in hops:
                if hop not in widths:
                    widths[hop] = metrics.horizontalAdvance(hop)
            width = max((widths[h] for h in hops), default=0) + 8
            height = metrics.height() * len(hops) + 2
            at = line.pointAt(HOP_AT)
            rect = QRectF(at.x() - width / 2, at.y() - height / 2, width, height)
            self.edges.append((line, hops, rect))
        rect = QRectF()
        for p in self.positions.values():
            rect = rect.united(QRectF(p.x() - BOX_W / 2, p.y() - BOX_H / 2, BOX_W, BOX_H))
        for _line, _hops, label in self.edges:
            rect = rect.united(label)
        self._bounds = rect.adjusted(-20, -20, 20, 20)

    def boundingRect(self) -> QRectF:
        return self._bounds

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem,
              widget: QWidget | None = None) -> None:
        exposed = option.exposedRect.adjusted(-BOX_W, -LEVEL, BOX_W, LEVEL)
        edge_pen = QPen(TREE_LINK, 1.6)
        painter.setFont(HOP_FONT)
        for line, hops, label in self.edges:
            if not exposed.intersects(QRectF(line.p1(), line.p2()).normalized()
                                      .adjusted(-1, -1, 1, 1)):
                continue
            painter.setPen(edge_pen)
            painter.drawLine(line)
            self._arrow(painter, line)
            if hops:
                painter.setPen(QPen(QColor("#c8b6e2"), 0.8))
                painter.setBrush(QBrush(QColor(255, 255, 255, 235)))
                painter.drawRoundedRect(label, 3, 3)
                painter.setPen(style.LINK_TEXT)
                painter.drawText(label, Qt.AlignmentFlag.AlignCenter, "\n".join(hops))
        painter.setFont(NODE_FONT)
        root = self.shown.tree.root
        for node, p in self.positions.items():
            box = QRectF(p.x() - BOX_W / 2, p.y() - BOX_H / 2, BOX_W, BOX_H)
            if not exposed.intersects(box):
                continue
            painter.setPen(QPen(style.COMPUTE_BORDER, 1.2))
            painter.setBrush(QBrush(ROOT_FILL if node == root else style.COMPUTE_FILL))
            painter.drawRoundedRect(box, 6, 6)
            painter.setPen(Qt.GlobalColor.white)
            painter.drawText(box, Qt.AlignmentFlag.AlignCenter, node)

    def _arrow(self, painter: QPainter, line: QLineF) -> None:
        """Arrowhead where data arrives: at the child, or at the parent in a reduce."""
        tip, back = (line.p1(), line.p2()) if self.shown.reverse else (line.p2(), line.p1())
        angle = math.atan2(tip.y() - back.y(), tip.x() - back.x())
        size = 9.0
        left = QPointF(tip.x() - size * math.cos(angle - 0.45),
                       tip.y() - size * math.sin(angle - 0.45))
        right = QPointF(tip.x() - size * math.cos(angle + 0.45),
                        tip.y() - size * math.sin(angle + 0.45))
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QBrush(TREE_LINK))
        painter.drawPolygon(QPolygonF([tip, left, right]))


class TreeDiagramView(QGraphicsView):
    """Shows one :class:`TreeDrawing`, fitted to the view; the wheel zooms."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setScene(QGraphicsScene(self))
        self.setRenderHints(QPainter.RenderHint.Antialiasing
                            | QPainter.RenderHint.TextAntialiasing)
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setBackgroundBrush(QColor("#fbfcfd"))
        self._drawing: TreeDrawing | None = None
        self._pending: list[ShownTree | None] = []
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(0)
        self._timer.timeout.connect(self.draw_pending)

    @property
    def drawing(self) -> TreeDrawing | None:
        """The drawing of the tree shown (one asked for but not drawn yet is drawn now)."""
        self.draw_pending()
        return self._drawing

    def show_tree(self, shown: ShownTree | None) -> None:
        """Draw ``shown`` (None: nothing) in a turn of the event loop of its own: a
        1024-GPU tree takes a while to draw, and selecting a tree also recolours the
        canvas."""
        self._pending = [shown]
        self._timer.start()

    def draw_pending(self) -> None:
        """Draw now the tree :meth:`show_tree` asked for, if not drawn yet."""
        if not self._pending:
            return
        shown = self._pending.pop()
        self._timer.stop()
        self.scene().clear()
        self._drawing = None
        if shown is not None:
            self._drawing = TreeDrawing(shown)
            self.scene().addItem(self._drawing)
            self.scene().setSceneRect(self._drawing.boundingRect())
            # the scroll bars the new size needs are shown by a queued call: made now,
            # the view is fitted once at its final size and painted once, not again
            # in a later turn (beside whatever else then waits for a paint)
            QCoreApplication.sendPostedEvents(self, QEvent.Type.MetaCall)
            self.fit()

    def fit(self) -> None:
        """Whole tree in view if it stays readable (never beyond 100 %, never below
        :data:`MIN_FIT`); a larger tree is shown from its root down."""
        if self._drawing is None:
            return
        self.resetTransform()
        bounds = self._drawing.boundingRect()
        view = self.viewport().rect()
        scale = min(1.0, view.width() / bounds.width(), view.height() / bounds.height())
        scale = max(MIN_FIT, scale)
        self.scale(scale, scale)
        root = self._drawing.positions[self._drawing.shown.tree.root]
        visible_w, visible_h = view.width() / scale, view.height() / scale
        self.centerOn(root.x() if bounds.width() > visible_w else bounds.center().x(),
                      bounds.top() + visible_h / 2 if bounds.height() > visible_h
                      else bounds.center().y())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self.fit()

    def wheelEvent(self, event: QWheelEvent) -> None:
        steps = event.angleDelta().y() / 120.0
        if steps:
            factor = 1.15 ** steps
            self.scale(factor, factor)
        event.accept()
