"""Result overlays on the canvas: the bottleneck cut, one tree's routes, and link load.

Three layers recolour link items through :meth:`LinkItem.set_highlight`; when several
apply to a link, a selected tree wins over link load, and link load over the cut.

* **Cut** (ForestColl (arXiv:2402.06787) §3.1 eq. (1)): the nodes of the smaller side of the cut
(S*,
  or everything outside it) get a shaded halo (a legend names the side), and every
  link leaving S* (the links of B+(S*)) is drawn dark and wide with an arrow pointing out;
  no other link changes.
* **Tree**: every physical hop of the selected tree, through the switches, in the
  tree colour with an arrow in the direction data runs and the hop number beside it
  (:func:`canopy.app.solution.hop_orders`).
* **Load**: every link coloured by its utilisation, schedule load / bandwidth
  (:mod:`canopy.engine.model.link_load`); its tooltip gives the exact numbers and the trees using
  it.

Selecting another tree recolours only the links of the old and the new tree, so
highlighting stays fast on 512-GPU drawings.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

import shiboken6
from PySide6.QtCore import QRectF, Qt, QTimer
from PySide6.QtGui import QBrush, QColor, QLinearGradient, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem, QWidget

from canopy.app.canvas import style
from canopy.app.canvas.link_item import LinkItem
from canopy.app.canvas.scene import TopologyScene
from canopy.app.solution import Hop, Solution
from canopy.engine.model.link_load import LinkLoad
from canopy.engine.model.schedule import Tree
from canopy.engine.model.topology import format_gbps

CUT_LINK = QColor("#202124")
"""Links of B+(S*): near-black, so they never read as a load colour."""
CUT_HALO = QColor(255, 170, 40, 90)
CUT_HALO_BORDER = QColor("#e08a00")
TREE_LINK = QColor("#7b2cbf")
UNUSED = QColor("#c9d0da")
LOAD_STOPS = [(0.0, QColor("#2c7bb6")), (0.5, QColor("#a6d96a")), (0.75, QColor("#fdae61")),
              (1.0, QColor("#d7191c"))]
"""Utilisation colour scale: blue (lightly used) through green and orange to red (full)."""
TOOLTIP_TREES = 12
RESTYLE_SLICE = 100
"""Links recoloured per turn of the event loop when another tree is selected: a tree of
1024 GPUs crosses 1,500 links, too many to restyle in one turn (each link's line and
its badges are rebuilt)."""


def utilisation_color(utilisation: float) -> QColor:
    """Colour of a link used at ``utilisation`` (0..1); unused links are pale grey."""
    if utilisation <= 0:
        return QColor(UNUSED)
    u = min(1.0, utilisation)
    for (a, ca), (b, cb) in zip(LOAD_STOPS, LOAD_STOPS[1:], strict=False):
        if u <= b:
            t = (u - a) / (b - a)
            return QColor.fromRgbF(ca.redF() + (cb.redF() - ca.redF()) * t,
                                   ca.greenF() + (cb.greenF() - ca.greenF()) * t,
                                   ca.blueF() + (cb.blueF() - ca.blueF()) * t)
    return QColor(LOAD_STOPS[-1][1])


def load_gradient(rect: QRectF) -> QLinearGradient:
    """The utilisation scale as a left-to-right gradient over ``rect`` (for legends)."""
    gradient = QLinearGradient(rect.topLeft(), rect.topRight())
    for at, color in LOAD_STOPS:
        gradient.setColorAt(at, color)
    return gradient


class CutShade(QGraphicsItem):
    """Shaded halos behind the nodes of the bottleneck cut, all painted by one item.

    Positions are read from the node items at paint time, so halos follow dragged nodes;
    the item spans the scene like the overview item and takes no mouse input. One item
    instead of one per node keeps a cut of a thousand nodes cheap to draw.
    """

    def __init__(self, scene: TopologyScene, nodes: set[str]):
        super().__init__()
        self._topology_scene = scene
        self.nodes = nodes
        self._rect = QRectF(scene.sceneRect())
        self._halo = QRectF(-style.NODE_W / 2 - 9, -style.NODE_H / 2 - 8,
                            style.NODE_W + 18, style.NODE_H + 16)
        self.setZValue(2)
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemUsesExtendedStyleOption)

    def set_rect(self, rect: QRectF) -> None:
        """Follow the scene rectangle (nodes moved or added far out)."""
        self.prepareGeometryChange()
        self._rect = QRectF(rect)

    def boundingRect(self) -> QRectF:
        return self._rect

    def shape(self) -> QPainterPath:
        return QPainterPath()  # never hit by clicks or rubber bands

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem,
              widget: QWidget | None = None) -> None:
        exposed = option.exposedRect
        detailed = option.levelOfDetailFromTransform(painter.worldTransform()) >= style.LABEL_LOD
        path = QPainterPath()
        scene = self._topology_scene
        for node_id in self.nodes:
            try:
                halo = self._halo.translated(scene.node_item(node_id).pos())
            except KeyError:
                continue
            if exposed.intersects(halo):
                if detailed:
                    path.addRoundedRect(halo, 10, 10)
                else:  # far out a halo is a few pixels: plain boxes draw much faster
                    path.addRect(halo)
        painter.setPen(QPen(CUT_HALO_BORDER, 1.5, Qt.PenStyle.DashLine) if detailed
                       else Qt.PenStyle.NoPen)
        painter.setBrush(QBrush(CUT_HALO))
        painter.drawPath(path)


def _percent(value: Fraction) -> str:
    return f"{float(value) * 100:.1f} %"


class Overlays:
    """The three result layers on one scene; call :meth:`set_solution` to start."""

    def __init__(self, scene: TopologyScene):
        self.scene = scene
        self.solution: Solution | None = None
        self.cut_on = True
        self.load_on = False
        self.active = True
        self.tree_hops: dict[Hop, list[int]] = {}
        self._cut: set[str] = set()
        self._hop_keys: dict[Hop, list[int]] = {}
        self._key_hops: dict[int, list[Hop]] = {}
        self._cut_keys: dict[int, list[Hop]] = {}
        self._tree_keys: dict[int, list[Hop]] = {}
        self._styled: set[int] = set()
        self._shade: CutShade | None = None
        self._tooltips: dict[int, str] = {}
        self._restyle: set[int] = set()
        self._restyle_timer = QTimer()
        self._restyle_timer.setSingleShot(True)
        self._restyle_timer.setInterval(0)
        self._restyle_timer.timeout.connect(self._restyle_some)
        scene.doc.reset.connect(self._forget_items)
        scene.sceneRectChanged.connect(self._scene_rect_changed)

    # ------------------------------------------------------------ state

    def set_solution(self, solution: Solution | None) -> None:
        """New results: map their hops to link items and draw the enabled layers."""
        self.clear()
        self.solution = solution
        self.tree_hops = {}
        self._cut = set(solution.schedule.optimum.bottleneck_cut) if solution else set()
        self._index_links()
        self.refresh()

    def set_active(self, active: bool) -> None:
        """Draw the layers (fresh results) or take them all off (stale results)."""
        if active != self.active:
            self.active = active
            if active:
                self._index_links()
            self.refresh()

    def redraw(self) -> None:
        """Map hops to link items again and draw (after the scene was rebuilt)."""
        self._index_links()
        self.refresh()

    def set_cut_visible(self, on: bool) -> None:
        if on != self.cut_on:
            self.cut_on = on
            self.refresh()

    def set_load_visible(self, on: bool) -> None:
        if on != self.load_on:
            self.load_on = on
            self.refresh()

    def show_tree(self, hops: dict[Hop, list[int]] | None) -> None:
        """Highlight one tree (its hops with their numbers), or none; recolours only the
        links of the previous and the new tree, :data:`RESTYLE_SLICE` per event-loop turn."""
        self.tree_hops = hops or {}
        old = self._tree_keys
        self._tree_keys = self._keys_of(self.tree_hops) if self._drawing() else {}
        self._restyle |= old.keys() | self._tree_keys.keys()
        if len(self._restyle) > RESTYLE_SLICE:
            self._restyle_timer.start()  # after whatever selected the tree (its diagram)
        else:
            self._restyle_some()

    def _restyle_some(self) -> None:
        overview = self.scene.overview
        overview.hold()
        for _ in range(min(RESTYLE_SLICE, len(self._restyle))):
            self._style_link(self._restyle.pop())
        if self._restyle:
            self._restyle_timer.start()
        else:
            overview.release()

    def finish_restyling(self) -> None:
        """Recolour what is left now (scripts, screenshots)."""
        self._restyle_timer.stop()
        while self._restyle:
            self._restyle_some()

    def tree_link_keys(self) -> set[int]:
        """Keys of the link items highlighted for the selected tree."""
        return set(self._tree_keys)

    def cut_link_keys(self) -> set[int]:
        """Keys of the link items drawn as leaving the bottleneck cut."""
        return set(self._cut_keys) if self._drawing() and self.cut_on else set()

    def shaded_side(self) -> tuple[set[str], str]:
        """The smaller side of the cut (the one drawn shaded) and its name."""
        present = set(self.scene.doc.node_ids())
        rest = present - self._cut
        if len(self._cut) <= len(rest):
            return set(self._cut), "the smaller side, S* itself"
        return rest, "the smaller side, the nodes outside S*"

    def halo_nodes(self) -> set[str]:
        """Nodes shaded as members of the bottleneck cut."""
        if self._shade is None or not shiboken6.isValid(self._shade):
            return set()
        present = set(self.scene.doc.node_ids())
        return {n for n in self._shade.nodes if n in present}

    def _drawing(self) -> bool:
        return self.active and self.solution is not None

    # ------------------------------------------------------------ drawing

    def refresh(self) -> None:
        """Draw every layer again from the current state."""
        self._restyle.clear()
        self.scene.overview.release()
        self.clear()
        if not self._drawing():
            return
        if self.cut_on:
            shaded, _side = self.shaded_side()
            self._shade = CutShade(self.scene, shaded)
            self.scene.addItem(self._shade)
        self._tree_keys = self._keys_of(self.tree_hops)
        keys = set(self._tree_keys)
        if self.cut_on:
            keys |= set(self._cut_keys)
        if self.load_on:
            keys |= set(self._key_hops)
        for key in keys:
            self._style_link(key)

    def clear(self) -> None:
        """Take every overlay off the canvas (items recreated since are left alone)."""
        if self._shade is not None and shiboken6.isValid(self._shade) \
                and self._shade.scene() is not None:
            self.scene.removeItem(self._shade)
        self._shade = None
        for key in list(self._styled):
            item = self._item(key)
            if item is not None:
                item.set_highlight(None)
                if key in self._tooltips:
                    item.setToolTip(self._tooltips[key])
        self._styled.clear()
        self._tooltips.clear()
        self._tree_keys = {}

    def _scene_rect_changed(self, rect: QRectF) -> None:
        if self._shade is not None and shiboken6.isValid(self._shade):
            self._shade.set_rect(rect)

    def _forget_items(self) -> None:
        """The scene was rebuilt: the old items are gone, and so is their styling."""
        self._restyle.clear()
        self.scene.overview.release()
        self._shade = None
        self._styled.clear()
        self._tooltips.clear()
        self._tree_keys = {}
        self._hop_keys = {}
        self._key_hops = {}
        self._cut_keys = {}

    def _item(self, key: int) -> LinkItem | None:
        try:
            item = self.scene.link_item(key)
        except KeyError:
            return None
        return item if shiboken6.isValid(item) else None

    def _index_links(self) -> None:
        """Directed hop -> link item keys for the current scene (parallel links share)."""
        self._hop_keys, self._key_hops, self._cut_keys = {}, {}, {}
        if self.solution is None:
            return
        # one pass over the items, then a look-up per hop: asking the scene per hop is slow
        # for the 6,000 hops of 1024 GPUs, all in one turn of the event loop
        usable: dict[Hop, list[int]] = {}
        for item in self.scene.link_items():
            usable.setdefault((item.source, item.target), []).append(item.key)
            if item.duplex:
                usable.setdefault((item.target, item.source), []).append(item.key)
        for hop in self.solution.loads:
            keys = usable.get(hop, [])
            self._hop_keys[hop] = keys
            for key in keys:
                self._key_hops.setdefault(key, []).append(hop)
                if hop[0] in self._cut and hop[1] not in self._cut:
                    self._cut_keys.setdefault(key, []).append(hop)

    def _keys_of(self, hops: Iterable[Hop]) -> dict[int, list[Hop]]:
        """Link item keys carrying these hops, each with the hops it carries."""
        keys: dict[int, list[Hop]] = {}
        for hop in hops:
            for key in self._hop_keys.get(hop, ()):
                keys.setdefault(key, []).append(hop)
        return keys

    def _style_link(self, key: int) -> None:
        """Give one link the look of the highest layer that claims it."""
        item = self._item(key)
        if item is None:
            return
        color: QColor | None = None
        width = None
        marks: tuple[tuple[str, str], ...] = ()
        drawing = self._drawing()
        if key in self._tree_keys:
            color, width = TREE_LINK, max(4.0, item.width + 1.5)
            marks = tuple((b, _numbers(self.tree_hops[(a, b)]))
                          for a, b in self._tree_keys[key])
        elif drawing and self.load_on and key in self._key_hops:
            color, width = utilisation_color(float(self.utilisation(key))), max(3.0, item.width)
        outline = None
        if drawing and self.cut_on and key in self._cut_keys:
            if color is not None:  # a tree or load colour: the cut shows as an outline
                outline = CUT_LINK
            else:
                color, width = CUT_LINK, item.width + 3.0
            if key not in self._tree_keys:
                marks = tuple((b, "") for _a, b in self._cut_keys[key])
        if drawing and self.load_on and key in self._key_hops:
            if key not in self._tooltips:  # the load of a link does not change with the tree
                self._tooltips[key] = item.toolTip()
                item.setToolTip(self.load_tooltip(key))
        elif key in self._tooltips:
            item.setToolTip(self._tooltips.pop(key))
        item.set_highlight(color, width, marks, outline)
        if color is None and key not in self._tooltips:
            self._styled.discard(key)
        else:
            self._styled.add(key)

    # ------------------------------------------------------------ load

    def utilisation(self, key: int) -> Fraction:
        """The largest utilisation of the link's directions."""
        assert self.solution is not None
        loads = self.solution.loads
        return max((loads[hop].utilisation for hop in self._key_hops.get(key, ())),
                   default=Fraction(0))

    def load_tooltip(self, key: int) -> str:
        """Exact load, bandwidth and the trees using each direction of a link."""
        assert self.solution is not None
        lines = []
        for hop in self._key_hops.get(key, ()):
            load: LinkLoad = self.solution.loads[hop]
            parallel = len(self._hop_keys.get(hop, ()))
            shared = f" (shared by {parallel} parallel links)" if parallel > 1 else ""
            lines.append(f"{hop[0]} → {hop[1]}: {format_gbps(load.used)} of "
                         f"{format_gbps(load.bandwidth)} GB/s{shared}, "
                         f"{_percent(load.utilisation)} used, {load.unit_trees} unit trees")
            names = [f"{tree.root} #{tree.index}" for tree in self._phase_trees(hop, load)]
            if names:
                more = len(load.trees) - TOOLTIP_TREES
                lines.append("    trees: " + ", ".join(names)
                             + (f", … and {more} more" if more > 0 else ""))
        return "\n".join(lines)

    def _phase_trees(self, hop: Hop, load: LinkLoad) -> list[Tree]:
        """The first trees behind ``load.trees`` (positions in the list of the busier
        phase), as many as a tooltip names."""
        assert self.solution is not None
        schedule = self.solution.schedule
        trees = schedule.trees
        if schedule.reduce_trees is not None and load.trees:
            # allreduce on a one-way network: the busier phase may be the reduce phase,
            # whose trees cross the hop against their arrows
            first = trees[load.trees[0]] if load.trees[0] < len(trees) else None
            forward = first is not None and any(
                pair == hop for e in first.edges
                for pair in zip(e.path, e.path[1:], strict=False))
            if not forward:
                trees = schedule.reduce_trees
        return [trees[pos] for pos in load.trees[:TOOLTIP_TREES]]


def _numbers(numbers: list[int]) -> str:
    """Hop numbers for a badge: at most three."""
    return ",".join(map(str, numbers[:3])) + ("…" if len(numbers) > 3 else "")
