"""Which names and bandwidths the canvas shows at a zoom, without any two overlapping.

A greedy pass after each zoom (and after edits settle): node bodies are obstacles; each
node takes the longest of its names that fits beside its row neighbours and covers
nothing; then each link puts its bandwidth at the first free spot along it (beside its
middle when the link is too short to hold it along its line). Whatever does not fit is left out, and
stays in the item's tooltip.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from PySide6.QtCore import QRectF

from canopy.app.canvas.link_item import LINK_LABEL_MIN_ZOOM, LinkItem
from canopy.app.canvas.node_item import NAME_MIN_ZOOM, NodeItem

CELL_PX = 120.0
"""Cell size of the obstacle grid, in pixels."""


class Obstacles:
    """Rectangles already taken, in a uniform grid for quick overlap tests."""

    def __init__(self, cell: float):
        self.cell = cell
        self.cells: dict[tuple[int, int], list[QRectF]] = defaultdict(list)

    def _keys(self, rect: QRectF) -> Iterable[tuple[int, int]]:
        c = self.cell
        for i in range(int(rect.left() // c), int(rect.right() // c) + 1):
            for j in range(int(rect.top() // c), int(rect.bottom() // c) + 1):
                yield i, j

    def add(self, rect: QRectF) -> None:
        for key in self._keys(rect):
            self.cells[key].append(rect)

    def hits(self, rect: QRectF) -> bool:
        return any(other.intersects(rect) for key in self._keys(rect)
                   for other in self.cells.get(key, ()))


def place_labels(nodes: list[NodeItem], links: list[LinkItem], zoom: float,
                 rooms: dict[str, float], default_room: float,
                 hidden: dict[str, str | None], blocks: list[QRectF]) -> None:
    """Choose and place every name and bandwidth for ``zoom`` (see module docstring).

    ``hidden`` maps the nodes inside collapsed servers to their server; their names and
    the bandwidths of their links are not shown (the block gives the bandwidth leaving
    the server), and the servers' ``blocks`` are obstacles like node bodies.
    """
    if zoom < NAME_MIN_ZOOM and zoom < LINK_LABEL_MIN_ZOOM:  # too far out for any text
        for node in nodes:
            node.name_label.set_text("")
        for link in links:
            link.set_zoom(zoom)
        return
    taken = Obstacles(CELL_PX / zoom)
    for block in blocks:
        taken.add(block)
    for node in nodes:
        if node.node_id not in hidden:
            taken.add(node.body().translated(node.pos()))
    for node in nodes:
        chosen = ""
        if zoom >= NAME_MIN_ZOOM and node.node_id not in hidden:
            room = rooms.get(node.node_id, default_room) * zoom - 4
            for text in node.names:
                if node.name_label.width_of(text) > room:
                    continue
                rect = node.name_rect(text, zoom)
                if not taken.hits(rect):
                    chosen = text
                    taken.add(rect)
                    break
        node.name_label.set_text(chosen)
    for link in links:
        link.set_zoom(zoom)
        for badge in link.badge_rects():      # a tree's hop numbers stay readable
            taken.add(badge)
    fits = {id(link): link.label_fits() for link in links}
    # links too short for their bandwidth first: they have two spots, the others eight
    for link in sorted(links, key=lambda item: fits[id(item)]):
        spot = None
        folded = link.source in hidden or link.target in hidden
        if not folded:
            spots = link.label_spots() if fits[id(link)] else link.side_spots()
            for at in spots:
                rect = link.label_rect(at)
                if not taken.hits(rect):
                    spot = at
                    taken.add(rect)
                    break
        link.show_label_at(spot)
