"""The scene: graphics items that mirror a :class:`~canopy.app.document.Document`, kept in step
incrementally from the document's signals (editing one link touches one item).

Other parts of the editor (overlays, results) reach items by id through
:meth:`TopologyScene.node_item`, :meth:`TopologyScene.link_item` and
:meth:`TopologyScene.link_items_between`.
"""

from __future__ import annotations

import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator
from fractions import Fraction

import shiboken6
from PySide6.QtCore import QObject, QPointF, QRect, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QKeyEvent, QPainter, QPen
from PySide6.QtWidgets import QGraphicsItem, QGraphicsScene, QGraphicsSceneMouseEvent

from canopy.app.canvas import style
from canopy.app.canvas.detail import LARGE_LOD, detail_steps, group_summaries
from canopy.app.canvas.group_item import MARGIN as GROUP_MARGIN
from canopy.app.canvas.group_item import TITLE as GROUP_TITLE
from canopy.app.canvas.group_item import GroupItem
from canopy.app.canvas.interactions import Interaction, SelectMove
from canopy.app.canvas.link_item import LinkItem
from canopy.app.canvas.node_item import NodeItem
from canopy.app.canvas.overview import OverviewItem
from canopy.app.commands import MoveNodes
from canopy.app.document import Document

PARALLEL_GAP = 16.0
NO_CONTENTS = QGraphicsItem.GraphicsItemFlag.ItemHasNoContents
MARGIN = 1500.0
"""Free scene space around the drawing, so there is room to pan and to add nodes."""
DETAIL_SLICE_S = 0.003
"""Wall-clock seconds of label placing per turn of the event loop, when in turns (a
slice is the longest turn left while a solve's results are shown if it is much more)."""
END = object()
BUILD_AT_ONCE = 600
"""Drawings of fewer nodes plus links are built in one go after New/Open; larger ones a
slice at a time, one slice per turn of the event loop, so that opening 1,024 GPUs
(5,250 nodes and links) never holds the window up."""
BUILD_SLICE_S = 0.008
"""Wall-clock seconds of item building per turn of the event loop."""
STAGES_ALONE = ("_build_groups", "_build_rect", "_build_index")
"""Building stages too long for a shared turn at 1024 GPUs: each takes a turn of its own
(named, not held as bound methods: those would keep the scene alive in a reference
cycle)."""
BUILD_CHUNK = 16
"""Nodes, pairs of nodes (their links) or labels built between two looks at the clock."""


class TopologyScene(QGraphicsScene):
    """Node, link and group items for one document, plus the active tool."""

    tool_finished = Signal()
    """The active tool gave up (Escape): the window switches back to Select."""
    building = Signal(bool)
    """A large drawing's items are being built slice by slice (True), or all exist."""
    built = Signal()
    labelling = Signal(bool)
    """Labels are being placed over turns of the event loop (True), or that pass ended:
    the view paints the drawing once they are all placed, not half done each turn."""
    """Every item of the document exists (after a rebuild, at once or slice by slice)."""
    bandwidths_changed = Signal(list)
    """The links' bandwidth classes, [(text, colour)], fastest first (empty: one colour)."""

    def __init__(self, doc: Document, parent: QObject | None = None):
        super().__init__(parent)
        self.doc = doc
        self.snap_to_grid = False
        self.new_link_bandwidth = Fraction(25)
        self.new_link_duplex = True
        self._nodes: dict[str, NodeItem] = {}
        self._links: dict[int, LinkItem] = {}
        self._groups: dict[str, GroupItem] = {}
        self._adjacent: dict[str, set[int]] = defaultdict(set)
        self._pairs: dict[frozenset[str], list[int]] = defaultdict(list)
        self._dirty_groups: set[str] = set()
        self._group_timer = QTimer(self)
        self._group_timer.setSingleShot(True)
        self._group_timer.setInterval(0)
        self._group_timer.timeout.connect(self._update_dirty_groups)
        self.interaction: Interaction = SelectMove(self)
        self.overview = OverviewItem(self)
        self.overview_on = False
        self.zoom = 1.0
        self.label_area: QRectF | None = None
        self.rooms: dict[str, float] | None = None  # names' widths (detail.free_rooms)
        self._summaries: dict[str, str] = {}
        self.bandwidth_classes: list[tuple[str, QColor]] = []
        self._lod_timer = QTimer(self)
        self._lod_timer.setSingleShot(True)
        self._lod_timer.setInterval(60)
        self._lod_timer.timeout.connect(self.apply_zoom)
        self._detail: Iterator[None] | None = None
        self._detail_timer = QTimer(self)
        self._detail_timer.setSingleShot(True)
        self._detail_timer.setInterval(0)
        self._detail_timer.timeout.connect(self._detail_turn)
        self._building = False
        self._finishing = False
        self._in_build = False
        self._stages: deque[Callable[[], bool]] = deque()
        self._todo_nodes: deque[str] = deque()
        self._todo_links: deque[list[int]] = deque()
        self._todo_labels: deque[str] = deque()
        self._when_built: list[Callable[[], object]] = []
        self._rect_cache: QRectF | None = None
        self._build_timer = QTimer(self)
        self._build_timer.setSingleShot(True)
        self._build_timer.setInterval(0)
        self._build_timer.timeout.connect(self._build_some)
        doc.edited.connect(self._layout_changed)
        doc.edited.connect(self._unit_changed)
        doc.node_moved.connect(self._layout_changed)
        self.setItemIndexMethod(QGraphicsScene.ItemIndexMethod.BspTreeIndex)
        doc.reset.connect(self.rebuild)
        doc.edited.connect(self._overview_changed)
        self.selectionChanged.connect(self._overview_changed)
        self.sceneRectChanged.connect(self._scene_rect_changed)
        doc.node_added.connect(self._on_node_added)
        doc.node_removed.connect(self._on_node_removed)
        doc.node_changed.connect(self._on_node_changed)
        doc.node_moved.connect(self._on_node_moved)
        doc.node_renamed.connect(self._on_node_renamed)
        doc.link_added.connect(self._on_link_added)
        doc.link_removed.connect(self._on_link_removed)
        doc.link_changed.connect(self._on_link_changed)
        self.rebuild()

    # ------------------------------------------------------------ lookups

    def node_item(self, node_id: str) -> NodeItem:
        self._ensure_built()
        return self._nodes[node_id]

    def has_node_item(self, node_id: str) -> bool:
        return node_id in self._nodes

    def link_item(self, key: int) -> LinkItem:
        self._ensure_built()
        return self._links[key]

    def group_item(self, name: str) -> GroupItem:
        self._ensure_built()
        return self._groups[name]

    def node_items(self) -> list[NodeItem]:
        self._ensure_built()
        return list(self._nodes.values())

    def link_items(self) -> list[LinkItem]:
        self._ensure_built()
        return list(self._links.values())

    def group_items(self) -> list[GroupItem]:
        self._ensure_built()
        return list(self._groups.values())

    def items_so_far(self) -> tuple[list[NodeItem], list[LinkItem], list[GroupItem]]:
        """The node, link and group items built so far (painting must not wait for the
        rest of a large drawing)."""
        return list(self._nodes.values()), list(self._links.values()), \
            list(self._groups.values())

    def node_count(self) -> int:
        """Nodes in the document (their items may still be being built)."""
        return len(self.doc.topology.nodes)

    def link_items_between(self, u: str, v: str, directed: bool = False) -> list[LinkItem]:
        """Items of the links joining ``u`` and ``v`` (only those usable u -> v if directed)."""
        self._ensure_built()
        items = [self._links[k] for k in self._pairs.get(frozenset((u, v)), [])]
        if directed:
            items = [i for i in items if i.duplex or (i.source, i.target) == (u, v)]
        return items

    def selected_node_ids(self) -> list[str]:
        return [i.node_id for i in self.selectedItems() if isinstance(i, NodeItem)]

    def selected_link_keys(self) -> list[int]:
        return [i.key for i in self.selectedItems() if isinstance(i, LinkItem)]

    def select(self, node_ids: Iterable[str] = (), link_keys: Iterable[int] = ()) -> None:
        """Replace the selection (one selectionChanged signal)."""
        self._ensure_built()
        self.blockSignals(True)
        self.clearSelection()
        for n in node_ids:
            if n in self._nodes:
                self._nodes[n].setSelected(True)
        for k in link_keys:
            if k in self._links:
                self._links[k].setSelected(True)
        self.blockSignals(False)
        self.selectionChanged.emit()

    def items_rect(self, node_ids: Iterable[str] = (), link_keys: Iterable[int] = ()) -> QRectF:
        self._ensure_built()
        rect = QRectF()
        for n in node_ids:
            rect = rect.united(self._nodes[n].sceneBoundingRect())
        for k in link_keys:
            rect = rect.united(self._links[k].sceneBoundingRect())
        return rect

    # ------------------------------------------------------------ building

    def rebuild(self) -> None:
        """Recreate every item (after New/Open only; edits are incremental).

        Small drawings are built at once. Larger ones are built in stages (nodes, then
        the links of each pair of nodes, then where bandwidths sit, then group boxes, the
        drawing's rectangle and Qt's index of the items, each of the last three in a turn
        of its own), :data:`BUILD_SLICE_S` per turn of the event loop, and ``built``
        follows. Edits meanwhile are not lost: an item not built yet is made from the
        document as it is when its turn comes, and asking for items (:meth:`node_item`
        and the other lookups) finishes the building first.
        """
        self.interaction.cancel()
        self._build_timer.stop()
        self._stop_detail()
        if self.overview.scene() is self:
            self.removeItem(self.overview)
        self.clear()
        self.addItem(self.overview)
        self.overview.setVisible(self.overview_on)
        self.overview.forget()
        self._nodes.clear()
        self._links.clear()
        self._groups.clear()
        self._adjacent.clear()
        self._pairs.clear()
        topology = self.doc.topology
        pairs: dict[frozenset[str], list[int]] = defaultdict(list)
        for key, link in zip(self.doc.link_keys(), topology.links, strict=True):
            pairs[frozenset((link.source, link.target))].append(key)
        self._todo_nodes = deque(node.id for node in topology.nodes)
        self._todo_links = deque(pairs.values())
        self._todo_labels = deque(node.id for node in topology.nodes)
        self._stages = deque([self._build_nodes, self._build_links, self._build_labels,
                              self._build_groups, self._build_rect, self._build_index])
        self._building = True
        self._finishing = False
        if len(topology.nodes) + len(topology.links) < BUILD_AT_ONCE:
            self.finish_building()
        else:
            self.setSceneRect(self._planned_rect().adjusted(-MARGIN, -MARGIN, MARGIN, MARGIN))
            self.building.emit(True)
            self._build_timer.start()

    def is_building(self) -> bool:
        """Whether items of the document are still being built (see :meth:`rebuild`)."""
        return self._building

    def when_built(self, then: Callable[[], object]) -> None:
        """Call ``then`` now if every item exists, else once they all do."""
        if not self._building:
            then()
        elif then not in self._when_built:
            self._when_built.append(then)

    def finish_building(self) -> None:
        """Build whatever is left now (a lookup needs the items, or a small drawing)."""
        self._build_timer.stop()
        self._in_build = True
        try:
            while self._stages:
                if self._stages[0]():
                    self._stages.popleft()
        finally:
            self._in_build = False
        if self._building:
            self._built()

    def _ensure_built(self) -> None:
        if self._building and not self._in_build:
            self.finish_building()

    def _build_some(self) -> None:
        """One slice of building (a turn of the event loop), then the next turn."""
        deadline = time.perf_counter() + BUILD_SLICE_S
        self._in_build = True
        started = False
        try:
            while self._stages and time.perf_counter() < deadline:
                stage = self._stages[0]
                alone = stage.__name__ in STAGES_ALONE
                if alone and started:
                    break
                if stage():
                    self._stages.popleft()
                started = True
                if alone:
                    break
        finally:
            self._in_build = False
        if self._stages or not self._finishing:
            self._finishing = not self._stages  # the end gets a turn of its own
            self._build_timer.start()
        elif self._building:
            self._finishing = False
            self._built()

    def _build_nodes(self) -> bool:
        for _ in range(min(BUILD_CHUNK, len(self._todo_nodes))):
            node_id = self._todo_nodes.popleft()
            if node_id not in self._nodes and self.doc.has_node(node_id):
                item = NodeItem(self.doc.node(node_id))
                self._nodes[node_id] = item
                self._add(item)
        return not self._todo_nodes

    def _build_links(self) -> bool:
        """The links of a few pairs of nodes, each given its ends and bow in one go."""
        for _ in range(min(BUILD_CHUNK, len(self._todo_links))):
            touched = set()
            for key in self._todo_links.popleft():
                if key in self._links or not self.doc.has_link(key):
                    continue  # removed, or added by an edit meanwhile
                item, pair = self._register_link(key, zoom=0.0)  # labels: once all are built
                touched.add(pair)
                self._add(item)
            for pair in touched:
                self._layout_pair(pair, place=True)
        return not self._todo_links

    def _build_labels(self) -> bool:
        chunk = [self._todo_labels.popleft()
                 for _ in range(min(4 * BUILD_CHUNK, len(self._todo_labels)))]
        self._place_labels(chunk, show=False)  # shown by apply_zoom, for the zoom then
        return not self._todo_labels

    def _build_groups(self) -> bool:
        self._dirty_groups.update(self.doc.groups())
        self._update_dirty_groups()
        return True

    def _build_rect(self) -> bool:
        self.setSceneRect(self._items_rect().adjusted(-MARGIN, -MARGIN, MARGIN, MARGIN))
        return True

    def _build_index(self) -> bool:
        """Have Qt index every item for painting and lookups now (any lookup does, and at
        1024 GPUs it takes a while), not in the first paint of the drawing."""
        self.items(QRectF(0.0, 0.0, 1.0, 1.0))
        return True

    def _built(self) -> None:
        """Every item exists: labels follow (the level-of-detail timer), then whoever
        waited for the items."""
        self._building = False
        self._labels_changed()   # (the drawing's rectangle was measured by the last stage)
        self._overview_changed()
        large = len(self._nodes) + len(self._links) >= BUILD_AT_ONCE
        if not large:
            self.apply_zoom()
        self.built.emit()
        waiting, self._when_built = self._when_built, []
        for then in waiting:  # e.g. zoom to fit: before the first paint of the drawing
            then()
        if large:
            self.building.emit(False)

    def drawing_rect(self) -> QRectF:
        """The part of the scene the topology occupies (groups, nodes and links); while
        a large drawing is being built, where it will be (from the nodes' positions)."""
        if self._building and not self._in_build:
            return self._planned_rect()
        return self._items_rect()

    def _planned_rect(self) -> QRectF:
        """Node bodies and the boxes of their groups, from the document alone."""
        xs = [node.x or 0.0 for node in self.doc.topology.nodes]
        ys = [node.y or 0.0 for node in self.doc.topology.nodes]
        if not xs:
            return QRectF()
        dx = style.NODE_W / 2 + GROUP_MARGIN
        dy = style.NODE_H / 2 + GROUP_MARGIN
        return QRectF(min(xs) - dx, min(ys) - dy - GROUP_TITLE,
                      max(xs) - min(xs) + 2 * dx, max(ys) - min(ys) + 2 * dy + GROUP_TITLE)

    def _items_rect(self) -> QRectF:
        """The union of the group, node and link items' bounds, kept until an item is added,
        moves or changes (a 1024-GPU drawing has 5,000 items to unite)."""
        if self._rect_cache is None:
            rect = QRectF()
            for item in [*self._groups.values(), *self._nodes.values(),
                         *self._links.values()]:
                rect = rect.united(item.sceneBoundingRect())
            self._rect_cache = rect
        return QRectF(self._rect_cache)

    def _keep_in_rect(self, item: NodeItem) -> None:
        """Grow the scene rectangle so a node moved or added near its edge stays reachable."""
        rect = self.sceneRect()
        pos = item.pos()
        if not rect.adjusted(MARGIN / 2, MARGIN / 2, -MARGIN / 2, -MARGIN / 2).contains(pos):
            self.setSceneRect(rect.united(QRectF(pos.x() - MARGIN, pos.y() - MARGIN,
                                                 2 * MARGIN, 2 * MARGIN)))

    def _register_link(self, key: int, zoom: float) -> tuple[LinkItem, frozenset[str]]:
        """A new item for link ``key``, filed under its ends and its pair of nodes."""
        link = self.doc.link(key)
        item = LinkItem(key, link, self.doc.topology.bandwidth_unit, zoom)
        self._links[key] = item
        self._adjacent[link.source].add(key)
        self._adjacent[link.target].add(key)
        pair = frozenset((link.source, link.target))
        self._pairs[pair].append(key)
        return item, pair

    def _add_link_item(self, key: int, relayout_pair: bool = True) -> None:
        item, pair = self._register_link(key, self.zoom)
        self._place_link(item)
        self._add(item)
        if relayout_pair:
            self._layout_pair(pair)
            self._place_labels(pair)

    def _place_labels(self, node_ids: Iterable[str], show: bool = True) -> None:
        """Put the labels of the links at these nodes near their less busy end (without
        ``show``: once the labels are next placed for the zoom)."""
        keys: set[int] = set()
        for node_id in node_ids:
            keys.update(self._adjacent.get(node_id, ()))
        for key in keys:
            item = self._links[key]
            ds = len(self._adjacent.get(item.source, ()))
            dt = len(self._adjacent.get(item.target, ()))
            item.set_label_near(None if ds == dt else (item.source if ds < dt else item.target),
                                show)

    def _place_link(self, item: LinkItem) -> None:
        a = self._nodes.get(item.source)
        b = self._nodes.get(item.target)
        if a is not None and b is not None:
            item.set_ends(a.pos(), b.pos())

    def _layout_pair(self, pair: frozenset[str], place: bool = False) -> None:
        """Bow the parallel links of ``pair`` apart (and with ``place``, give them their
        ends too: one geometry update per new link)."""
        keys = self._pairs.get(pair, [])
        middle = (len(keys) - 1) / 2
        for i, key in enumerate(keys):
            item = self._links[key]
            offset, rank = (i - middle) * PARALLEL_GAP, (i - middle) / middle if middle else 0.0
            a, b = self._nodes.get(item.source), self._nodes.get(item.target)
            if place and a is not None and b is not None:
                item.set_geometry(a.pos(), b.pos(), offset, rank, item.label_near)
            else:
                item.set_offset(offset, rank)

    def _forget_link(self, key: int) -> LinkItem:
        item = self._links.pop(key)
        self._adjacent[item.source].discard(key)
        self._adjacent[item.target].discard(key)
        pair = frozenset((item.source, item.target))
        self._pairs[pair].remove(key)
        if not self._pairs[pair]:
            del self._pairs[pair]
        else:
            self._layout_pair(pair)
        self._place_labels(pair)
        return item

    def _add(self, item: QGraphicsItem) -> None:
        item.setFlag(NO_CONTENTS, self.overview_on)
        self._rect_cache = None
        self.addItem(item)

    def _unit_changed(self) -> None:
        """Relabel every link when the topology's bandwidth unit changes."""
        unit = self.doc.topology.bandwidth_unit
        for item in self._links.values():
            if item.unit != unit:
                item.refresh(self.doc.link(item.key), unit)
                item.update()

    def _overview_changed(self) -> None:
        # selectionChanged also fires while the scene is being destroyed
        if shiboken6.isValid(self.overview):
            self.overview.invalidate()

    def _scene_rect_changed(self, rect: QRectF) -> None:
        if shiboken6.isValid(self.overview):
            self.overview.refresh_bounds(rect)

    def set_overview(self, on: bool) -> None:
        """Draw everything through the overview item (far zoomed out) or item by item."""
        if on == self.overview_on:
            return
        self.overview_on = on
        for item in [*self._nodes.values(), *self._links.values(), *self._groups.values()]:
            item.setFlag(NO_CONTENTS, on)
        self.overview.setVisible(on)
        self.overview.invalidate()
        self.update()

    # ------------------------------------------------------------ level of detail

    def set_zoom(self, zoom: float, area: QRectF | None = None, later: bool = False,
                 in_turns: bool = False) -> None:
        """The view's zoom changed: choose which names and bandwidths fit (in ``area``,
        the part of the scene on screen, for large drawings); ``later``: a moment
        after the last of several zoom steps, in a turn of the event loop of its own;
        ``in_turns``: over the next turns (:meth:`apply_zoom_in_turns`)."""
        self.zoom = zoom
        if area is not None:
            self.label_area = QRectF(area)
        if later:
            self._stop_detail()
            self._lod_timer.start()
        elif in_turns:
            self.apply_zoom_in_turns()
        else:
            self.apply_zoom()

    def set_label_area(self, area: QRectF) -> None:
        """The view scrolled: large drawings label the part now on screen."""
        self.label_area = QRectF(area)
        if len(self._nodes) > LARGE_LOD:
            self._lod_timer.start()

    def _layout_changed(self) -> None:
        self._rect_cache = None
        self._labels_changed()

    def _labels_changed(self) -> None:
        """Where names fit is to be worked out again (after edits, and once built)."""
        self.rooms = None
        self._summaries = {}
        self._stop_detail()
        self._lod_timer.start()

    def apply_zoom(self) -> None:
        """Names where they fit, bandwidths on links long enough on screen, and servers
        whose members show no name collapsed into labelled blocks, now
        (:func:`~canopy.app.canvas.detail.detail_steps`); a pass under way in turns is
        replaced."""
        self._lod_timer.stop()
        self._stop_detail()
        if self._building:
            return  # once every item exists
        for _ in detail_steps(self):
            pass

    def apply_zoom_in_turns(self) -> None:
        """:meth:`apply_zoom` spread over turns of the event loop, :data:`DETAIL_SLICE_S`
        a turn, so the window takes input and paints the rest meanwhile (the drawing once
        all are placed: ``labelling``); an edit meanwhile stops it and places the labels
        again a moment later. :meth:`finish_labels` completes it at once."""
        self._lod_timer.stop()
        self._stop_detail()
        if self._building:
            return
        self._detail = detail_steps(self)
        self._detail_timer.start()
        self.labelling.emit(True)

    def placing_labels(self) -> bool:  # (a pass of apply_zoom_in_turns under way)
        return self._detail is not None

    def finish_labels(self) -> None:
        """Complete a level-of-detail pass under way in turns now (screenshots, exports)."""
        run = self._detail
        if run is not None:
            for _ in run:
                pass
        self._stop_detail()

    def _detail_turn(self) -> None:
        run = self._detail
        if run is None:
            return
        deadline = time.perf_counter() + DETAIL_SLICE_S
        while time.perf_counter() < deadline:
            if next(run, END) is END:
                self._stop_detail()
                return
        self._detail_timer.start()

    def _stop_detail(self, again: bool = False) -> None:
        """Drop a pass under way in turns (an item it holds may be about to go); with
        ``again``, place the labels again a moment later."""
        if self._detail is not None:
            self._detail = None
            self._detail_timer.stop()
            self.labelling.emit(False)
            if again:
                self._lod_timer.start()

    def group_summary(self, group: str) -> str:
        """``n0 · 8 GPUs`` and the bandwidth leaving the group, for its collapsed block."""
        if not self._summaries:
            self._summaries = group_summaries(self.doc.topology)
        return self._summaries.get(group, group)

    # ------------------------------------------------------------ document signals

    def _on_node_added(self, node_id: str) -> None:
        node = self.doc.node(node_id)
        item = NodeItem(node)
        self._nodes[node_id] = item
        self._add(item)
        self._keep_in_rect(item)
        self._mark_group(node.group)

    def _on_node_removed(self, node_id: str) -> None:
        self._stop_detail(again=True)
        item = self._nodes.pop(node_id, None)
        self._adjacent.pop(node_id, None)
        if item is not None:  # (not built yet: then it never will be)
            self.removeItem(item)
        for group in list(self._groups):
            self._mark_group(group)

    def _on_node_changed(self, node_id: str) -> None:
        node = self.doc.node(node_id)
        if node_id in self._nodes:
            self._nodes[node_id].refresh(node)
        for group in set(self._groups) | ({node.group} if node.group else set()):
            self._mark_group(group)

    def _on_node_moved(self, node_id: str) -> None:
        if node_id in self._nodes:
            self._nodes[node_id].sync_position(self.doc.node(node_id))

    def _on_node_renamed(self, old: str, new: str) -> None:
        item = self._nodes.pop(old, None)
        if item is None:  # not built yet: build it under its new name
            self._todo_nodes.append(new)
            return
        self._nodes[new] = item
        item.refresh(self.doc.node(new))
        # the links were moved to the new id already (link_changed comes first)
        self._adjacent[new] |= self._adjacent.pop(old, set())
        self._place_labels([new])

    def _on_link_added(self, key: int) -> None:
        if self._todo_nodes:  # its ends may not exist yet
            self._todo_links.append([key])
        else:
            self._add_link_item(key)

    def _on_link_removed(self, key: int) -> None:
        if key in self._links:  # (not built yet: then it never will be)
            self._stop_detail(again=True)
            self.removeItem(self._forget_link(key))

    def _on_link_changed(self, key: int) -> None:
        item = self._links.get(key)
        if item is None:
            return  # not built yet: it will be built as it is now
        link = self.doc.link(key)
        if (item.source, item.target) != (link.source, link.target):
            self._forget_link(key)
            item.refresh(link)
            self._links[key] = item
            self._adjacent[link.source].add(key)
            self._adjacent[link.target].add(key)
            pair = frozenset((link.source, link.target))
            self._pairs[pair].append(key)
            self._layout_pair(pair)
            self._place_labels(pair)
        else:
            item.refresh(link)
        self._place_link(item)
        item.update()

    # ------------------------------------------------------------ moves and groups

    def node_item_moved(self, item: NodeItem) -> None:
        """Called by a node item whenever it moves: drag its links and its group box."""
        self._rect_cache = None
        for key in self._adjacent.get(item.node_id, ()):
            self._place_link(self._links[key])
        if self.overview_on:
            self._overview_changed()
        self._keep_in_rect(item)
        if self.doc.has_node(item.node_id):
            self._mark_group(self.doc.node(item.node_id).group)

    def _mark_group(self, group: str | None) -> None:
        if group:
            self._dirty_groups.add(group)
            self._group_timer.start()

    def _update_dirty_groups(self) -> None:
        dirty, self._dirty_groups = self._dirty_groups, set()
        if dirty:
            self._rect_cache = None
        members: dict[str, list[NodeItem]] = defaultdict(list)
        for node in self.doc.topology.nodes:
            if node.group in dirty and node.id in self._nodes:
                members[node.group].append(self._nodes[node.id])
        for group in dirty:
            items = members.get(group)
            if not items:
                if group in self._groups:
                    self._stop_detail(again=True)
                    self.removeItem(self._groups.pop(group))
                continue
            box = self._groups.get(group)
            if box is None:
                box = self._groups[group] = GroupItem(group)
                self._add(box)
            rect = QRectF()
            for item in items:
                rect = rect.united(item.sceneBoundingRect())
            box.set_rect(rect)
        if dirty and self.overview_on:
            self._overview_changed()

    def flush_groups(self) -> None:
        """Bring group boxes (and, zoomed far out, the overview's paths) up to date now,
        every item built (tests, screenshots and image exports call this)."""
        self._ensure_built()
        self._group_timer.stop()
        self._update_dirty_groups()
        if self.overview_on:
            self.overview.build_now()

    def commit_moves(self, start: dict[str, QPointF], text: str = "Move") -> None:
        """Record the items' moves since ``start`` as one undoable command."""
        old, new = {}, {}
        for node_id, pos in start.items():
            item = self._nodes.get(node_id)
            if item is None or item.pos() == pos:
                continue
            old[node_id] = (pos.x(), pos.y())
            new[node_id] = (round(item.pos().x(), 1), round(item.pos().y(), 1))
        if new:
            if text == "Move":
                text = f"Move {next(iter(new))}" if len(new) == 1 else f"Move {len(new)} nodes"
            self.doc.undo_stack.push(MoveNodes(self.doc, old, new, text))

    # ------------------------------------------------------------ tools

    def set_interaction(self, interaction: Interaction) -> None:
        self.interaction.cancel()
        self.interaction = interaction

    def mousePressEvent(self, event: QGraphicsSceneMouseEvent) -> None:
        if not self.interaction.press(event):
            super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QGraphicsSceneMouseEvent) -> None:
        if not self.interaction.move(event):
            super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event: QGraphicsSceneMouseEvent) -> None:
        if not self.interaction.release(event):
            super().mouseReleaseEvent(event)

    def default_press(self, event: QGraphicsSceneMouseEvent) -> None:
        super().mousePressEvent(event)

    def default_release(self, event: QGraphicsSceneMouseEvent) -> None:
        super().mouseReleaseEvent(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Escape:
            self.interaction.cancel()
            self.tool_finished.emit()
            event.accept()
            return
        super().keyPressEvent(event)

    def node_at(self, pos: QPointF) -> NodeItem | None:
        for item in self.items(pos):
            if isinstance(item, NodeItem):
                return item
        return None

    def group_at(self, pos: QPointF) -> str | None:
        for item in self.items(pos):
            if isinstance(item, GroupItem):
                return item.name
        return None

    def drawBackground(self, painter: QPainter, rect: QRectF | QRect) -> None:
        painter.fillRect(rect, QColor("#fbfcfd"))
        scale = painter.worldTransform().m11()
        if not self.snap_to_grid or scale * style.GRID < 6:
            return
        painter.setPen(QPen(QColor("#e3e7ee"), 0))
        g = style.GRID
        left = int(rect.left() // g) * g
        top = int(rect.top() // g) * g
        x = left
        while x < rect.right():
            painter.drawLine(QPointF(x, rect.top()), QPointF(x, rect.bottom()))
            x += g
        y = top
        while y < rect.bottom():
            painter.drawLine(QPointF(rect.left(), y), QPointF(rect.right(), y))
            y += g
