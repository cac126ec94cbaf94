"""The scene: graphics items that mirror a :class:`~canopy.app.document.Document`, kept in step
incrementally from the document's signals (editing one link touches one item).

Other parts of the editor (overlays, results) reach items by id through
:meth:`TopologyScene.node_item`, :meth:`TopologyScene.link_item` and
:meth:`TopologyScene.link_items_between`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable
from fractions import Fraction

import shiboken6
from PySide6.QtCore import QPointF, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QKeyEvent, QPainter, QPen
from PySide6.QtWidgets import QGraphicsItem, QGraphicsScene, QGraphicsSceneMouseEvent

from canopy.app.canvas import style
from canopy.app.canvas.group_item import GroupItem
from canopy.app.canvas.interactions import Interaction, SelectMove
from canopy.app.canvas.labels import fitting
from canopy.app.canvas.link_item import LinkItem
from canopy.app.canvas.lod import place_labels
from canopy.app.canvas.node_item import NAME_MIN_ZOOM, NodeItem
from canopy.app.canvas.overview import OverviewItem
from canopy.app.commands import MoveNodes
from canopy.app.document import Document
from canopy.engine.topology import COMPUTE, format_gbps

PARALLEL_GAP = 16.0
NO_CONTENTS = QGraphicsItem.GraphicsItemFlag.ItemHasNoContents
MARGIN = 1500.0
"""Free scene space around the drawing, so there is room to pan and to add nodes."""
COLLAPSE_BELOW = 0.45
"""A server whose members show no names at a zoom below this collapses into a block."""
ROOM_CAP = 400.0
LARGE_LOD = 1000
"""Above this many nodes the level-of-detail pass only handles the visible part (and
runs again when the view scrolls)."""
ROW_BAND = 25.0
"""Nodes whose y differ by less than this share a row (their names compete for width)."""


class TopologyScene(QGraphicsScene):
    """Node, link and group items for one document, plus the active tool."""

    tool_finished = Signal()
    """The active tool gave up (Escape): the window switches back to Select."""

    def __init__(self, doc: Document, parent: object = None):
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
        self._rooms: dict[str, float] | None = None
        self._summaries: dict[str, str] = {}
        self._lod_timer = QTimer(self)
        self._lod_timer.setSingleShot(True)
        self._lod_timer.setInterval(60)
        self._lod_timer.timeout.connect(self.apply_zoom)
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
        return self._nodes[node_id]

    def has_node_item(self, node_id: str) -> bool:
        return node_id in self._nodes

    def link_item(self, key: int) -> LinkItem:
        return self._links[key]

    def group_item(self, name: str) -> GroupItem:
        return self._groups[name]

    def node_items(self) -> list[NodeItem]:
        return list(self._nodes.values())

    def link_items(self) -> list[LinkItem]:
        return list(self._links.values())

    def group_items(self) -> list[GroupItem]:
        return list(self._groups.values())

    def link_items_between(self, u: str, v: str, directed: bool = False) -> list[LinkItem]:
        """Items of the links joining ``u`` and ``v`` (only those usable u -> v if directed)."""
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
        rect = QRectF()
        for n in node_ids:
            rect = rect.united(self._nodes[n].sceneBoundingRect())
        for k in link_keys:
            rect = rect.united(self._links[k].sceneBoundingRect())
        return rect

    # ------------------------------------------------------------ building

    def rebuild(self) -> None:
        """Recreate every item (after New/Open only; edits are incremental)."""
        self.interaction.cancel()
        if self.overview.scene() is self:
            self.removeItem(self.overview)
        self.clear()
        self.addItem(self.overview)
        self.overview.setVisible(self.overview_on)
        self._nodes.clear()
        self._links.clear()
        self._groups.clear()
        self._adjacent.clear()
        self._pairs.clear()
        for node in self.doc.topology.nodes:
            item = NodeItem(node)
            self._nodes[node.id] = item
            self._add(item)
        for key in self.doc.link_keys():
            self._add_link_item(key, relayout_pair=False)
        for pair in self._pairs:
            self._layout_pair(pair)
        self._place_labels(self._nodes)
        for group in self.doc.groups():
            self._dirty_groups.add(group)
        self._update_dirty_groups()
        self.setSceneRect(self.drawing_rect().adjusted(-MARGIN, -MARGIN, MARGIN, MARGIN))
        self._layout_changed()
        self.apply_zoom()

    def drawing_rect(self) -> QRectF:
        """The part of the scene the topology occupies (groups, nodes and links)."""
        rect = QRectF()
        for item in [*self._groups.values(), *self._nodes.values(), *self._links.values()]:
            rect = rect.united(item.sceneBoundingRect())
        return rect

    def _keep_in_rect(self, item: NodeItem) -> None:
        """Grow the scene rectangle so a node moved or added near its edge stays reachable."""
        rect = self.sceneRect()
        pos = item.pos()
        if not rect.adjusted(MARGIN / 2, MARGIN / 2, -MARGIN / 2, -MARGIN / 2).contains(pos):
            self.setSceneRect(rect.united(QRectF(pos.x() - MARGIN, pos.y() - MARGIN,
                                                 2 * MARGIN, 2 * MARGIN)))

    def _add_link_item(self, key: int, relayout_pair: bool = True) -> None:
        link = self.doc.link(key)
        item = LinkItem(key, link, self.doc.topology.bandwidth_unit)
        self._links[key] = item
        self._adjacent[link.source].add(key)
        self._adjacent[link.target].add(key)
        pair = frozenset((link.source, link.target))
        self._pairs[pair].append(key)
        self._place_link(item)
        self._add(item)
        if relayout_pair:
            self._layout_pair(pair)
            self._place_labels((link.source, link.target))

    def _place_labels(self, node_ids: Iterable[str]) -> None:
        """Put the labels of the links at these nodes near their less busy end."""
        keys = set()
        for node_id in node_ids:
            keys.update(self._adjacent.get(node_id, ()))
        for key in keys:
            item = self._links[key]
            ds = len(self._adjacent.get(item.source, ()))
            dt = len(self._adjacent.get(item.target, ()))
            item.set_label_near(None if ds == dt else (item.source if ds < dt else item.target))

    def _place_link(self, item: LinkItem) -> None:
        a = self._nodes.get(item.source)
        b = self._nodes.get(item.target)
        if a is not None and b is not None:
            item.set_ends(a.pos(), b.pos())

    def _layout_pair(self, pair: frozenset[str]) -> None:
        keys = self._pairs.get(pair, [])
        middle = (len(keys) - 1) / 2
        for i, key in enumerate(keys):
            self._links[key].set_offset((i - middle) * PARALLEL_GAP,
                                        (i - middle) / middle if middle else 0.0)

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

    def set_zoom(self, zoom: float, area: QRectF | None = None) -> None:
        """The view's zoom changed: choose which names and bandwidths fit (in ``area``,
        the part of the scene on screen, for large drawings)."""
        self.zoom = zoom
        if area is not None:
            self.label_area = QRectF(area)
        self.apply_zoom()

    def set_label_area(self, area: QRectF) -> None:
        """The view scrolled: large drawings label the part now on screen."""
        self.label_area = QRectF(area)
        if len(self._nodes) > LARGE_LOD:
            self._lod_timer.start()

    def _layout_changed(self) -> None:
        self._rooms = None
        self._summaries = {}
        self._lod_timer.start()

    def apply_zoom(self) -> None:
        """Names where they fit, bandwidths on links long enough on screen, and servers
        whose members show no name collapsed into labelled blocks."""
        self._lod_timer.stop()
        zoom = self.zoom
        if self._rooms is None:
            self._rooms = self._free_rooms()
        collapsed = self._collapsed_groups(zoom)
        hidden = {node.id: node.group for node in self.doc.topology.nodes
                  if node.group in collapsed}
        nodes, links = list(self._nodes.values()), list(self._links.values())
        area = self.label_area
        if len(nodes) > LARGE_LOD and area is not None:
            nodes = [n for n in nodes if area.contains(n.pos())]
            links = [k for k in links if area.intersects(k.boundingRect())]
        place_labels(nodes, links, zoom, self._rooms, ROOM_CAP, hidden,
                     [self._groups[g].box() for g in collapsed if g in self._groups])
        for name, box in self._groups.items():
            text = name
            if name in collapsed:
                summary = self.group_summary(name)
                box.details = summary.split(" · ", 1)[-1].replace("\n", ", ")
                text = fitting(box.block_label, (summary, name), box.box().width() * zoom - 8)
            box.set_collapsed(name in collapsed, text)

    def _collapsed_groups(self, zoom: float) -> set[str]:
        """Groups of two or more nodes none of whose compute nodes has room for a name."""
        if zoom >= COLLAPSE_BELOW or not self._groups:
            return set()
        rooms = self._rooms or {}
        named: dict[str, bool] = defaultdict(bool)
        members: dict[str, int] = defaultdict(int)
        for node in self.doc.topology.nodes:
            if not node.group:
                continue
            members[node.group] += 1
            if node.kind == COMPUTE and zoom >= NAME_MIN_ZOOM and not named[node.group]:
                item = self._nodes[node.id]
                shortest = min(item.name_label.width_of(t) for t in item.names)
                named[node.group] = shortest <= rooms.get(node.id, ROOM_CAP) * zoom - 4
        return {g for g, count in members.items() if count > 1 and not named[g]}

    def group_summary(self, group: str) -> str:
        """``n0 · 8 GPUs`` and the bandwidth leaving the group, for its collapsed block."""
        text = self._summaries.get(group)
        if text is None:
            members = set(self.doc.group_members(group))
            gpus = sum(1 for n in members if self.doc.node(n).kind == COMPUTE)
            out = sum((link.bandwidth for link in self.doc.topology.links
                       if (link.source in members) != (link.target in members)
                       and (link.duplex or link.source in members)), start=Fraction(0))
            what = f"{gpus} GPU{'s' if gpus != 1 else ''}" if gpus else \
                f"{len(members)} switches"
            text = f"{group} · {what}\n{format_gbps(out)} GB/s out"
            self._summaries[group] = text
        return text

    def _free_rooms(self) -> dict[str, float]:
        """For each node, the distance to the nearest node beside it in its row (the width
        its name may take), at most ROOM_CAP."""
        rows: dict[int, list[tuple[float, str]]] = defaultdict(list)
        for node_id, item in self._nodes.items():
            rows[round(item.pos().y() / ROW_BAND)].append((item.pos().x(), node_id))
        for row in rows.values():
            row.sort()
        rooms: dict[str, float] = {}
        for band, row in rows.items():
            near = sorted(row + rows.get(band - 1, []) + rows.get(band + 1, []))
            xs = [x for x, _ in near]
            for x, node_id in row:
                i = bisect_left(xs, x)
                gaps = [abs(xs[j] - x) for j in range(max(0, i - 2), min(len(near), i + 3))
                        if near[j][1] != node_id]
                rooms[node_id] = min([ROOM_CAP, *gaps])
        return rooms

    # ------------------------------------------------------------ document signals

    def _on_node_added(self, node_id: str) -> None:
        node = self.doc.node(node_id)
        item = NodeItem(node)
        self._nodes[node_id] = item
        self._add(item)
        self._keep_in_rect(item)
        self._mark_group(node.group)

    def _on_node_removed(self, node_id: str) -> None:
        item = self._nodes.pop(node_id)
        self._adjacent.pop(node_id, None)
        self.removeItem(item)
        for group in list(self._groups):
            self._mark_group(group)

    def _on_node_changed(self, node_id: str) -> None:
        node = self.doc.node(node_id)
        self._nodes[node_id].refresh(node)
        for group in set(self._groups) | ({node.group} if node.group else set()):
            self._mark_group(group)

    def _on_node_moved(self, node_id: str) -> None:
        self._nodes[node_id].sync_position(self.doc.node(node_id))

    def _on_node_renamed(self, old: str, new: str) -> None:
        item = self._nodes.pop(old)
        self._nodes[new] = item
        item.refresh(self.doc.node(new))
        # the links were moved to the new id already (link_changed comes first)
        self._adjacent[new] |= self._adjacent.pop(old, set())
        self._place_labels([new])

    def _on_link_added(self, key: int) -> None:
        self._add_link_item(key)

    def _on_link_removed(self, key: int) -> None:
        self.removeItem(self._forget_link(key))

    def _on_link_changed(self, key: int) -> None:
        item = self._links[key]
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
        members: dict[str, list[NodeItem]] = defaultdict(list)
        for node in self.doc.topology.nodes:
            if node.group in dirty:
                members[node.group].append(self._nodes[node.id])
        for group in dirty:
            items = members.get(group)
            if not items:
                if group in self._groups:
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
        """Bring group boxes up to date now (tests and screenshots call this)."""
        self._group_timer.stop()
        self._update_dirty_groups()

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

    def drawBackground(self, painter: QPainter, rect: QRectF) -> None:
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
