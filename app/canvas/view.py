"""The canvas view: wheel zoom around the cursor, panning, zoom to fit.

Pan with the middle mouse button, or hold Space and drag with the left button.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QPoint, QPointF, QRect, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import (
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QRegion,
    QTransform,
    QWheelEvent,
)
from PySide6.QtWidgets import QGraphicsView, QWidget

from canopy.app.canvas.overview import overview_zoom
from canopy.app.canvas.scene import LARGE_LOD, TopologyScene

MIN_ZOOM = 0.02
MAX_ZOOM = 8.0
WHEEL_STEP = 1.15
PAINT_PARTS = 2
"""Side-by-side parts the first paint after a hold is split into, one per turn of the
event loop: that paint draws every node, link and label anew (new zoom, new colours)."""


class TopologyView(QGraphicsView):
    """A QGraphicsView with editor-style navigation."""

    zoom_changed = Signal(float)

    def __init__(self, scene: TopologyScene, parent: QWidget | None = None):
        super().__init__(scene, parent)
        self._topology_scene = scene
        self.setRenderHints(QPainter.RenderHint.Antialiasing
                            | QPainter.RenderHint.TextAntialiasing)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setResizeAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.MinimalViewportUpdate)
        self.setCacheMode(QGraphicsView.CacheModeFlag.CacheBackground)
        # every item sets the pen, brush and font it paints with
        self.setOptimizationFlags(QGraphicsView.OptimizationFlag.DontSavePainterState)
        self.setDragMode(QGraphicsView.DragMode.RubberBandDrag)
        self.setRubberBandSelectionMode(Qt.ItemSelectionMode.IntersectsItemShape)
        self.setMouseTracking(True)
        self._pan_from: QPoint | None = None
        self._space = False
        self._rubber_band = True
        self._overlays: list[QWidget] = []
        self._fitted: QRectF | None = None   # the rect last fitted, until the user moves
        self._labels_in_turns = False       # zoom_to_fit(labels_in_turns=True) under way
        self.zoom_changed.connect(self._choose_overview)
        self._area_timer = QTimer(self)
        self._area_timer.setSingleShot(True)
        self._area_timer.setInterval(80)
        self._area_timer.timeout.connect(
            lambda: self.topology_scene().set_label_area(self.label_area()))
        for bar in (self.horizontalScrollBar(), self.verticalScrollBar()):
            bar.valueChanged.connect(lambda _value: self._area_timer.start())
            bar.sliderMoved.connect(lambda _value: setattr(self, "_fitted", None))
        # a drawing half built is not painted (each slice would cost a repaint)
        self._holds: set[str] = set()
        self._in_parts = 0     # the next paint split into parts (after a hold)
        scene.building.connect(lambda busy: self.hold_painting("building", busy))
        # nor are labels half placed (each turn of placing them would cost a repaint)
        scene.labelling.connect(lambda busy: self.hold_painting("labelling", busy))

    def hold_painting(self, why: str, hold: bool = True) -> None:
        """Leave the drawing unpainted while ``why`` holds it (a large drawing half built,
        labels half placed, the window's docks being rearranged around the canvas); it
        is painted once, as the last hold ends."""
        held = bool(self._holds)
        if hold:
            self._holds.add(why)
        else:
            self._holds.discard(why)
        self.viewport().setUpdatesEnabled(not self._holds)
        # the paint that follows draws the whole drawing: in parts, a turn each
        self._in_parts = PAINT_PARTS if held and not self._holds else 0

    def paint_whole(self) -> None:
        """Paint the next time in one go (not in parts: scripts and screenshots)."""
        self._in_parts = 0

    def paintEvent(self, event: QPaintEvent) -> None:
        """Paint the viewport; the first paint after a hold only its leftmost part, the
        next parts in turns of their own (:data:`PAINT_PARTS`)."""
        parts, self._in_parts = self._in_parts, 0
        region = event.region()
        if parts > 1:
            room = self.viewport().rect()
            part = QRegion(QRect(room.left(), room.top(), room.width() // parts,
                                 room.height()))
            now, later = region.intersected(part), region.subtracted(part)
            if not now.isEmpty() and not later.isEmpty():
                # with the view as context: dropped if the view goes first
                QTimer.singleShot(0, self, lambda: self._paint_later(later, parts - 1))
                super().paintEvent(QPaintEvent(now))
                return
        super().paintEvent(event)

    def _paint_later(self, region: QRegion, parts: int) -> None:
        """Paint ``region``, left by the first paint after a hold, in ``parts`` parts."""
        if not self._holds:
            self._in_parts = parts
            self.viewport().update(region)

    def holds(self) -> set[str]:
        """What holds the drawing unpainted now (:meth:`hold_painting`)."""
        return set(self._holds)

    def _choose_overview(self, zoom: float) -> None:
        scene = self.topology_scene()
        count = scene.node_count()
        scene.set_overview(zoom < overview_zoom(count))
        # a large drawing shows the new zoom first, its labels a moment later
        scene.set_zoom(zoom, self.label_area(), later=count > LARGE_LOD,
                       in_turns=self._labels_in_turns)

    def label_area(self) -> QRectF:
        """The part of the scene on screen and a margin around it (labels of large
        drawings are placed there only)."""
        rect = self.mapToScene(self.viewport().rect()).boundingRect()
        dx, dy = rect.width() * 0.3, rect.height() * 0.3
        return rect.adjusted(-dx, -dy, dx, dy)

    def settle_labels(self) -> None:
        """Place the labels for the view as it is now, as the timers would a moment later
        on a large drawing (screenshots)."""
        self._area_timer.stop()
        self.topology_scene().set_zoom(self.zoom(), self.label_area())
        self.topology_scene().finish_labels()
        self.paint_whole()

    def topology_scene(self) -> TopologyScene:
        return self._topology_scene

    # ------------------------------------------------------------ zoom

    def zoom(self) -> float:
        return self.transform().m11()

    def set_zoom(self, factor: float) -> None:
        """Scale by ``factor``, keeping the point under the mouse (or the centre) still."""
        self._fitted = None
        target = max(MIN_ZOOM, min(MAX_ZOOM, self.zoom() * factor))
        factor = target / self.zoom()
        if abs(factor - 1.0) > 1e-9:
            self.scale(factor, factor)
            self.zoom_changed.emit(self.zoom())

    def zoom_in(self) -> None:
        self._zoom_at_centre(WHEEL_STEP ** 2)

    def zoom_out(self) -> None:
        self._zoom_at_centre(WHEEL_STEP ** -2)

    def reset_zoom(self) -> None:
        self._zoom_at_centre(1.0 / self.zoom())

    def _zoom_at_centre(self, factor: float) -> None:
        anchor = self.transformationAnchor()
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        self.set_zoom(factor)
        self.setTransformationAnchor(anchor)

    def add_overlay(self, widget: QWidget) -> None:
        """A legend floating over a corner of the canvas: fitting keeps the drawing out
        from under it, and re-fits when it appears or grows if the user has not zoomed or
        panned since the last fit."""
        self._overlays.append(widget)
        widget.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if (watched in self._overlays and self._fitted is not None
                and event.type() in (QEvent.Type.Show, QEvent.Type.Resize)):
            # with the view as context: dropped if the view goes first
            QTimer.singleShot(0, self, lambda rect=self._fitted: self._refit(rect))
        return super().eventFilter(watched, event)

    def _refit(self, rect: QRectF) -> None:
        if self._fitted is not None:      # still untouched by the user
            self.zoom_to_fit(rect, labels_in_turns=True)

    def _reserved(self) -> tuple[float, float]:
        """Viewport pixels at the top and at the bottom covered by visible overlays
        (nothing when they would leave less than half the height)."""
        height = self.viewport().height()
        top = bottom = 0.0
        for widget in self._overlays:
            if not widget.isVisible():
                continue
            box = widget.geometry().translated(-self.viewport().pos())
            if box.center().y() < height / 2:
                top = max(top, box.bottom() + 6.0)
            else:
                bottom = max(bottom, height - box.top() + 6.0)
        return (top, bottom) if top + bottom < height / 2 else (0.0, 0.0)

    def zoom_to_fit(self, rect: QRectF | None = None, labels_in_turns: bool = False) -> None:
        """Show ``rect`` (the whole drawing by default) clear of the floating legends,
        never magnified beyond 150 %; ``labels_in_turns``: the labels for the new zoom
        are placed over the next turns of the event loop
        (:meth:`~canopy.app.canvas.scene.TopologyScene.apply_zoom_in_turns`), not in
        this one."""
        scene = self.topology_scene()
        if rect is None:
            scene.flush_groups()
            rect = scene.drawing_rect()
        if rect.isEmpty():
            return
        top, bottom = self._reserved()
        room = self.viewport().rect()
        padded = rect.adjusted(-60, -30, 30, 30)
        zoom = min(room.width() / padded.width(),
                   max(1.0, room.height() - top - bottom) / padded.height(), 1.5)
        zoom = max(MIN_ZOOM, min(MAX_ZOOM, zoom))
        self.setTransform(QTransform.fromScale(zoom, zoom))
        # the drawing's centre goes to the middle of the free band, not of the viewport
        self.centerOn(rect.center() + QPointF(0.0, (bottom - top) / 2 / zoom))
        self._labels_in_turns = labels_in_turns
        try:
            self.zoom_changed.emit(self.zoom())
        finally:
            self._labels_in_turns = False
        self._fitted = QRectF(rect)

    def wheelEvent(self, event: QWheelEvent) -> None:
        steps = event.angleDelta().y() / 120.0
        if steps:
            self.set_zoom(WHEEL_STEP ** steps)
        event.accept()

    # ------------------------------------------------------------ panning

    def set_rubber_band(self, enabled: bool) -> None:
        """Rubber-band selection for the Select tool, plain clicks for the others."""
        self._rubber_band = enabled
        if not self._space:
            self.setDragMode(QGraphicsView.DragMode.RubberBandDrag if enabled
                             else QGraphicsView.DragMode.NoDrag)

    def pan_by(self, dx: int, dy: int) -> None:
        """Scroll the view by ``dx``, ``dy`` pixels."""
        self._fitted = None
        self.horizontalScrollBar().setValue(self.horizontalScrollBar().value() + dx)
        self.verticalScrollBar().setValue(self.verticalScrollBar().value() + dy)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.MiddleButton:
            self._pan_from = event.position().toPoint()
            self.viewport().setCursor(Qt.CursorShape.ClosedHandCursor)
            event.accept()
            return
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if self._pan_from is not None:
            now = event.position().toPoint()
            delta = now - self._pan_from
            self._pan_from = now
            self.pan_by(-delta.x(), -delta.y())
            event.accept()
            return
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.MiddleButton and self._pan_from is not None:
            self._pan_from = None
            self.viewport().unsetCursor()
            event.accept()
            return
        super().mouseReleaseEvent(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Space and not event.isAutoRepeat():
            self._space = True
            self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
            self.setInteractive(False)
            event.accept()
            return
        super().keyPressEvent(event)

    def keyReleaseEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Space and not event.isAutoRepeat():
            self._space = False
            self.setInteractive(True)
            self.set_rubber_band(self._rubber_band)
            event.accept()
            return
        super().keyReleaseEvent(event)
