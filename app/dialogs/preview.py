"""Live preview of a generated topology: built off the GUI thread, drawn in a few paths.

:func:`build_preview` generates the topology, checks it, computes the exact optimum
(canopy.engine.forestcoll.optimum.find_optimum, ForestColl (arXiv:2402.06787) §4.2) when
it has fewer than
:data:`OPTIMUM_LIMIT` nodes, and turns the drawing into a handful of painter paths
(:class:`Picture`). :class:`PreviewWorker` runs the engine part as an engine job (a child
process), always on the newest request, so typing in the dialog never waits for it.
:class:`PreviewView` paints the picture in the editor's colours, fitted to the view.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import (
    QBrush,
    QColor,
    QMouseEvent,
    QPainter,
    QPainterPath,
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
from canopy.app.job_runner import EngineJob
from canopy.engine.forestcoll.optimum import Optimum, find_optimum
from canopy.engine.generators import generate
from canopy.engine.model.errors import CanopyError
from canopy.engine.model.progress import Progress, report
from canopy.engine.model.topology import COMPUTE, Topology, find_problems
from canopy.engine.network.indexed import Network

OPTIMUM_LIMIT = 300
OPTIMUM_LINKS = 10_000
"""The optimum is computed for topologies with fewer nodes than this and at most this
many links (a clique of 300 nodes takes seconds)."""
CHECK_LINKS = 20_000
"""Larger topologies are not checked here (the editor's Validation dock does it)."""
PREVIEW_NODES = 20_000
PREVIEW_LINKS = 80_000
"""Larger topologies are counted but not drawn."""
GROUP_MARGIN = 14.0
GROUP_TITLE = 20.0
ARROW = 12.0
MAX_ZOOM = 1.0
"""Fitting never magnifies beyond this (small topologies stay at the editor's size)."""
MIN_ZOOM = 0.001
MAX_WHEEL_ZOOM = 4.0
WHEEL_STEP = 1.2
LABEL_NODES = 200
"""Node names are drawn (when the zoom allows) for topologies up to this size."""
LABEL_FONT = style.label_font(8.0)
LABEL_H = 14.0


@dataclass
class Picture:
    """A topology as painter paths in scene units (built once, painted often)."""

    bounds: QRectF
    groups: QPainterPath
    links: list[tuple[float, QPainterPath]]       # (pen width, path), thin to thick
    arrows: QPainterPath
    compute: QPainterPath
    switches: QPainterPath
    labels: list[tuple[QPointF, str]] = field(default_factory=list)   # small topologies


@dataclass
class Preview:
    """What the dialog shows for one set of parameters."""

    kind: str
    texts: dict[str, str]
    topology: Topology | None = None
    error: str | None = None                 # the generator's ParameterError sentence
    problems: list[str] = field(default_factory=list)
    optimum: Optimum | None = None
    picture: Picture | None = None

    @property
    def too_large(self) -> bool:
        topo = self.topology
        return topo is not None and (len(topo.nodes) > PREVIEW_NODES
                                     or len(topo.links) > PREVIEW_LINKS)


def build_preview(kind: str, texts: Mapping[str, str], optimum_limit: int = OPTIMUM_LIMIT,
                  progress: Progress | None = None) -> Preview:
    """Generate ``kind`` from ``texts``, check it and find its optimum (no drawing).

    Runs as an engine job in a child process (:class:`PreviewWorker`); a newer request
    cancels it outright, so it needs no checks of its own for staleness.
    """
    preview = Preview(kind, dict(texts))
    try:
        topo = generate(kind, texts)
    except CanopyError as exc:
        preview.error = str(exc)
        return preview
    preview.topology = topo
    if len(topo.links) <= CHECK_LINKS:
        report(progress, "checking", 0.0)
        preview.problems = [p.message for p in find_problems(topo)]
        if not preview.problems and len(topo.nodes) < optimum_limit \
                and len(topo.links) <= OPTIMUM_LINKS:
            report(progress, "optimum", 0.0)
            preview.optimum = find_optimum(Network.from_topology(topo))
    return preview


def _body(x: float, y: float) -> QRectF:
    return QRectF(x - style.NODE_W / 2, y - style.NODE_H / 2, style.NODE_W, style.NODE_H)


def _hexagon(r: QRectF) -> QPolygonF:
    """The editor's switch outline (canopy.app.canvas.node_item.NodeItem.outline)."""
    d = r.height() / 2 * 0.6
    cy = r.center().y()
    return QPolygonF([QPointF(r.left(), cy), QPointF(r.left() + d, r.top()),
                      QPointF(r.right() - d, r.top()), QPointF(r.right(), cy),
                      QPointF(r.right() - d, r.bottom()), QPointF(r.left() + d, r.bottom()),
                      QPointF(r.left(), cy)])


def draw(topo: Topology) -> Picture:
    """The topology's picture: group boxes, links by bandwidth, arrows, node shapes."""
    pos = {n.id: (n.x or 0.0, n.y or 0.0) for n in topo.nodes}
    compute, switches = QPainterPath(), QPainterPath()
    members: dict[str, QRectF] = {}
    bounds = QRectF()
    for n in topo.nodes:
        body = _body(*pos[n.id])
        if n.kind == COMPUTE:
            compute.addRoundedRect(body, 6, 6)
        else:
            switches.addPolygon(_hexagon(body))
        if n.group:
            members[n.group] = members[n.group].united(body) if n.group in members else body
        bounds = bounds.united(body)
    groups = QPainterPath()
    for box in members.values():
        box = box.adjusted(-GROUP_MARGIN, -GROUP_MARGIN - GROUP_TITLE, GROUP_MARGIN,
                           GROUP_MARGIN)
        groups.addRoundedRect(box, 12, 12)
        bounds = bounds.united(box)
    by_width: dict[float, QPainterPath] = defaultdict(QPainterPath)
    arrows = QPainterPath()
    for link in topo.links:
        if link.source not in pos or link.target not in pos:
            continue
        (x1, y1), (x2, y2) = pos[link.source], pos[link.target]
        path = by_width[round(style.link_width(link.bandwidth), 1)]
        path.moveTo(x1, y1)
        path.lineTo(x2, y2)
        if not link.duplex:
            arrows.addPolygon(_arrow(x1, y1, x2, y2))
    labels = ([(QPointF(*pos[n.id]), n.label or n.id) for n in topo.nodes]
              if len(topo.nodes) <= LABEL_NODES else [])
    if labels:
        bounds = bounds.adjusted(0, 0, 0, LABEL_H)
    return Picture(bounds, groups, sorted(by_width.items()), arrows, compute, switches,
                   labels)


def _arrow(x1: float, y1: float, x2: float, y2: float) -> QPolygonF:
    """A head just outside the target node, pointing at it."""
    length = math.hypot(x2 - x1, y2 - y1) or 1.0
    ux, uy = (x2 - x1) / length, (y2 - y1) / length
    tip = QPointF(x2 - ux * style.NODE_H * 0.6, y2 - uy * style.NODE_H * 0.6)
    back = QPointF(tip.x() - ux * ARROW, tip.y() - uy * ARROW)
    side = QPointF(-uy * ARROW * 0.45, ux * ARROW * 0.45)
    return QPolygonF([tip, back + side, back - side, tip])


class PreviewWorker(QObject):
    """Builds previews as engine jobs, always the newest request: a new request cancels
    the job still running. The picture is drawn here, in the GUI thread."""

    ready = Signal(int, object)         # request serial, Preview

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._job: EngineJob | None = None

    def request(self, serial: int, kind: str, texts: Mapping[str, str]) -> None:
        """Build a preview of ``kind`` with ``texts``; an older one still running stops."""
        self.stop()
        job = self._job = EngineJob(build_preview, kind, dict(texts), OPTIMUM_LIMIT,
                                    parent=self, background=True)
        job.finished.connect(lambda preview: self._done(job, serial, preview))
        job.failed.connect(lambda message: self._done(job, serial,
                                                      Preview(kind, dict(texts), error=message)))
        job.start()

    @property
    def busy(self) -> bool:
        return self._job is not None

    def stop(self) -> None:
        """Drop the preview being built (if any)."""
        if self._job is not None:
            self._job.cancel()
            self._job.deleteLater()
            self._job = None

    def _done(self, job: EngineJob, serial: int, preview: Preview) -> None:
        if job is not self._job:
            return
        self._job = None
        job.deleteLater()
        if preview.topology is not None and not preview.too_large:
            preview.picture = draw(preview.topology)
        self.ready.emit(serial, preview)


class _PictureItem(QGraphicsItem):
    """Paints a :class:`Picture` with cosmetic pens (thin lines stay visible far out)."""

    def __init__(self, picture: Picture):
        super().__init__()
        self.picture = picture

    def boundingRect(self) -> QRectF:
        return self.picture.bounds.adjusted(-10, -10, 10, 10)

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem,
              widget: QWidget | None = None) -> None:
        lod = option.levelOfDetailFromTransform(painter.worldTransform())
        pic = self.picture

        def pen(colour: QColor, width: float) -> QPen:
            p = QPen(colour, max(0.7, width * lod))
            p.setCosmetic(True)
            return p

        painter.setPen(pen(style.GROUP_BORDER, 1.2))
        painter.setBrush(QBrush(style.GROUP_FILL))
        painter.drawPath(pic.groups)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        for width, path in pic.links:
            painter.setPen(pen(style.LINK, width))
            painter.drawPath(path)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QBrush(style.LINK))
        painter.drawPath(pic.arrows)
        painter.setPen(pen(style.COMPUTE_BORDER, 1.2))
        painter.setBrush(QBrush(style.COMPUTE_FILL))
        painter.drawPath(pic.compute)
        painter.setPen(pen(style.SWITCH_BORDER, 1.2))
        painter.setBrush(QBrush(style.SWITCH_FILL))
        painter.drawPath(pic.switches)
        if pic.labels and lod >= style.LABEL_LOD:
            painter.setFont(LABEL_FONT)
            painter.setPen(style.LINK_TEXT)
            width = style.NODE_W * 2
            for point, text in pic.labels:
                painter.drawText(QRectF(point.x() - width / 2, point.y() + style.NODE_H / 2 + 1,
                                        width, LABEL_H), Qt.AlignmentFlag.AlignCenter, text)


class PreviewView(QGraphicsView):
    """A small read-only view of one picture, fitted to the widget.

    The wheel zooms around the cursor, dragging pans, a double click fits again.
    """

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setScene(QGraphicsScene(self))
        self.setRenderHints(QPainter.RenderHint.Antialiasing)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setInteractive(False)
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setBackgroundBrush(QBrush(Qt.GlobalColor.white))
        self.setToolTip("Wheel: zoom · drag: pan · double click: fit")
        self._item: _PictureItem | None = None
        self._fitted = True

    def show_picture(self, picture: Picture | None) -> None:
        self.scene().clear()
        self._item = None
        if picture is not None:
            self._item = _PictureItem(picture)
            self.scene().addItem(self._item)
            self.scene().setSceneRect(self._item.boundingRect())
        self._fit()

    def has_picture(self) -> bool:
        return self._item is not None

    def _fit(self) -> None:
        self._fitted = True
        if self._item is None:
            return
        self.fitInView(self._item.boundingRect(), Qt.AspectRatioMode.KeepAspectRatio)
        zoom = self.transform().m11()
        if zoom > MAX_ZOOM:
            self.scale(MAX_ZOOM / zoom, MAX_ZOOM / zoom)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self._fitted:
            self._fit()

    def wheelEvent(self, event: QWheelEvent) -> None:
        factor = WHEEL_STEP ** (event.angleDelta().y() / 120.0)
        zoom = self.transform().m11() * factor
        if self._item is not None and MIN_ZOOM <= zoom <= MAX_WHEEL_ZOOM:
            self.scale(factor, factor)
            self._fitted = False
        event.accept()

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        self._fit()
        event.accept()
