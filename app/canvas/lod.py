"""Which names and bandwidths the canvas shows at a zoom, without any two overlapping.

A greedy pass after each zoom (and after edits settle): node bodies are obstacles; each
node takes the longest of its names that fits beside its row neighbours and covers
nothing; then each link puts its bandwidth at the first free spot along it (beside its
middle when the link is too short to hold it along its line). A spot is free when the
label's box covers no node, name, other label or **other link** (a bandwidth sitting on
another line would be read as that line's). Links with the fewest free spots choose
first. Whatever does not fit is left out, and stays in the item's tooltip.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping

from PySide6.QtCore import QPointF, QRectF

from canopy.app.canvas import style
from canopy.app.canvas.link_item import LINK_LABEL_MIN_ZOOM, LinkItem
from canopy.app.canvas.node_item import NAME_MIN_ZOOM, NodeItem

CELL_PX = 120.0
"""Cell size of the obstacle grid, in pixels."""


class LinkLines:
    """The links' drawn lines as short segments in a uniform grid: which links a label's
    box would cover."""

    STEPS = 10
    """Segments a curved link is cut into."""

    def __init__(self, cell: float):
        self.cell = cell
        self.cells: dict[tuple[int, int], list[tuple]] = defaultdict(list)

    def add(self, link: LinkItem, area: QRectF | None = None) -> None:
        """File the link's line, cut into pieces of at most a cell (a long diagonal filed
        whole would sit in every cell of its bounding box); pieces outside ``area`` (the
        part of the drawing being labelled) are left out."""
        points = link.line_points(self.STEPS)
        pad = link.pen_width() / 2
        owner = id(link)
        c = self.cell
        for (x1, y1), (x2, y2) in zip(points, points[1:], strict=False):
            if area is not None:
                clipped = _clip(x1, y1, x2, y2, (area.left() - pad, area.top() - pad,
                                                 area.right() + pad, area.bottom() + pad))
                if clipped is None:
                    continue
                x1, y1, x2, y2 = clipped
            pieces = max(1, math.ceil(max(abs(x2 - x1), abs(y2 - y1)) / c))
            for k in range(pieces):
                ax, ay = x1 + (x2 - x1) * k / pieces, y1 + (y2 - y1) * k / pieces
                bx, by = x1 + (x2 - x1) * (k + 1) / pieces, y1 + (y2 - y1) * (k + 1) / pieces
                entry = (owner, ax, ay, bx, by, pad, min(ax, bx) - pad, min(ay, by) - pad,
                         max(ax, bx) + pad, max(ay, by) + pad)
                for i in range(int((min(ax, bx) - pad) // c), int((max(ax, bx) + pad) // c) + 1):
                    for j in range(int((min(ay, by) - pad) // c),
                                   int((max(ay, by) + pad) // c) + 1):
                        self.cells[(i, j)].append(entry)

    def hits(self, rect: QRectF, owner: int) -> bool:
        """Whether ``rect`` covers a line of a link other than ``owner``."""
        c = self.cell
        left, top, right, bottom = rect.left(), rect.top(), rect.right(), rect.bottom()
        for i in range(int(left // c), int(right // c) + 1):
            for j in range(int(top // c), int(bottom // c) + 1):
                for entry in self.cells.get((i, j), ()):
                    if (entry[0] != owner and entry[6] <= right and entry[8] >= left
                            and entry[7] <= bottom and entry[9] >= top
                            and _segment_meets(entry, left, top, right, bottom)):
                        return True
        return False


def _segment_meets(entry: tuple, left: float, top: float, right: float, bottom: float
                   ) -> bool:
    """Whether a segment (of half-width ``pad``) meets the rectangle."""
    _, x1, y1, x2, y2, pad = entry[:6]
    return _clip(x1, y1, x2, y2, (left - pad, top - pad, right + pad, bottom + pad)) \
        is not None


def _clip(x1: float, y1: float, x2: float, y2: float,
          box: tuple[float, float, float, float]) -> tuple[float, float, float, float] | None:
    """The part of the segment inside ``box`` (left, top, right, bottom; Liang-Barsky),
    or None."""
    left, top, right, bottom = box
    dx, dy = x2 - x1, y2 - y1
    t0, t1 = 0.0, 1.0
    for p, q in ((-dx, x1 - left), (dx, right - x1), (-dy, y1 - top), (dy, bottom - y1)):
        if p == 0:
            if q < 0:
                return None
            continue
        t = q / p
        if p < 0:
            if t > t1:
                return None
            t0 = max(t0, t)
        else:
            if t < t0:
                return None
            t1 = min(t1, t)
    if t0 > t1:
        return None
    return x1 + dx * t0, y1 + dy * t0, x1 + dx * t1, y1 + dy * t1


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
        c, cells = self.cell, self.cells
        left, top = int(rect.left() // c), int(rect.top() // c)
        right, bottom = int(rect.right() // c), int(rect.bottom() // c)
        for i in range(left, right + 1):
            for j in range(top, bottom + 1):
                for other in cells.get((i, j), ()):
                    if other.intersects(rect):
                        return True
        return False


def place_labels(nodes: list[NodeItem], links: list[LinkItem], zoom: float,
                 rooms: dict[str, float], default_room: float,
                 hidden: Mapping[str, str | None], blocks: list[QRectF],
                 area: QRectF | None = None) -> None:
    """Choose and place every name and bandwidth for ``zoom`` (see module docstring).

    ``hidden`` maps the nodes inside collapsed servers to their server; their names and
    the bandwidths of their links are not shown (the block gives the bandwidth leaving
    the server), and the servers' ``blocks`` are obstacles like node bodies. ``area``:
    only bandwidths inside it are placed (a large drawing labels the part on screen).
    """
    for _ in placing_labels(nodes, links, zoom, rooms, default_room, hidden, blocks, area):
        pass


def placing_labels(nodes: list[NodeItem], links: list[LinkItem], zoom: float,
                   rooms: dict[str, float], default_room: float,
                   hidden: Mapping[str, str | None], blocks: list[QRectF],
                   area: QRectF | None = None) -> Iterator[None]:
    """:func:`place_labels` a step at a time: it yields after each node's name and each
    link's bandwidth, so a caller can spread the work over turns of the event loop
    (each label is shown as it is chosen; the items must stay in the scene meanwhile)."""
    if zoom < NAME_MIN_ZOOM and zoom < LINK_LABEL_MIN_ZOOM:  # too far out for any text
        for node in nodes:
            node.name_label.set_text("")
            node.show_fan_at(None)
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
        yield
    for link in links:
        link.set_zoom(zoom)
        for badge in link.badge_rects():      # a tree's hop numbers stay readable
            taken.add(badge)
        yield
    fits = {id(link): link.label_fits() for link in links}
    lines = LinkLines(CELL_PX / zoom)
    shown = [link for link in links
             if zoom >= LINK_LABEL_MIN_ZOOM and link.source not in hidden
             and link.target not in hidden]
    margin = CELL_PX / zoom
    near = area.adjusted(-margin, -margin, margin, margin) if area is not None else None
    for link in shown:
        lines.add(link, near)
        yield
    # each link takes the first of its spots that covers no node, name, badge, other
    # link or label chosen before; links with least room choose first (too short to
    # hold their number along them, then the shortest)
    order = sorted(shown, key=lambda item: (fits[id(item)], item.length()))
    labels = Obstacles(CELL_PX / zoom)
    boxes: dict[int, QRectF] = {}
    yield from _choose_spots(order, fits, taken, lines, labels, area, boxes)
    fans = _fans(nodes, shown, {id(link) for link in shown if id(link) not in boxes})
    if fans:
        # a hub's label speaks for its links, freeing their spots: the others keep theirs
        # where the hub labels leave them room, and those without one try again
        hubs = Obstacles(CELL_PX / zoom)
        fanned: set[int] = set()
        yield from _place_fans(nodes, fans, zoom, taken, hubs, lines, fanned)
        labels = Obstacles(CELL_PX / zoom)
        for rect in _hub_rects(nodes, zoom):
            labels.add(rect)
        again = []
        for link in order:
            box = boxes.get(id(link))
            if id(link) in fanned:
                link.show_label_at(None)
            elif box is not None and not hubs.hits(box):
                labels.add(box)
            else:
                again.append(link)
        yield from _choose_spots(again, fits, taken, lines, labels, area, boxes)
    else:
        for node in nodes:
            node.show_fan_at(None)
    placed = {id(link) for link in shown}
    for link in links:
        if id(link) not in placed:
            link.show_label_at(None)


def _choose_spots(links: list[LinkItem], fits: dict[int, bool], taken: Obstacles,
                  lines: LinkLines, labels: Obstacles, area: QRectF | None,
                  boxes: dict[int, QRectF]) -> Iterator[None]:
    """Give each link, in order, the first of its spots whose box covers nothing (see
    :func:`place_labels`), recorded in ``boxes``; a link with none shows no number.
    Yields after each link."""
    for link in links:
        boxes.pop(id(link), None)
        spot = None
        if area is not None and not _reaches_into(link, area):
            link.show_label_at(None)
            yield
            continue
        candidates = link.label_spots() if fits[id(link)] else iter(link.side_spots())
        for at in candidates:
            if area is not None and not area.contains(at):
                continue
            rect = link.label_rect(at)
            if ((area is None or area.contains(rect)) and not labels.hits(rect)
                    and not taken.hits(rect) and not lines.hits(rect, id(link))):
                spot = at
                labels.add(rect)
                boxes[id(link)] = rect
                break
        link.show_label_at(spot)
        yield


def _reaches_into(link: LinkItem, area: QRectF) -> bool:
    """Whether some of the link's line lies inside ``area`` (a large drawing labels only
    the part on screen; most of its long links merely pass by)."""
    points = link.line_points(LinkLines.STEPS)
    box = (area.left(), area.top(), area.right(), area.bottom())
    return any(_clip(x1, y1, x2, y2, box) is not None
               for (x1, y1), (x2, y2) in zip(points, points[1:], strict=False))


FAN_MIN = 4
"""Links of one bandwidth at a node from which one label at the node may speak for them."""
FAN_ANGLES = 24
"""Directions around a hub tried for its label."""


def _fans(nodes: list[NodeItem], links: list[LinkItem], failed: set[int]
          ) -> list[tuple[NodeItem, str, list[LinkItem]]]:
    """Hubs whose links of one bandwidth (at least :data:`FAN_MIN` of them, some without
    a spot of their own) one label beside the hub speaks for: (hub, text, links), the
    hub with most links left without a spot first; a link belongs to one hub at most."""
    by_node = {node.node_id: node for node in nodes}
    groups: dict[tuple[str, str], list[LinkItem]] = defaultdict(list)
    for link in links:
        for end in (link.source, link.target):
            if end in by_node:
                groups[(end, link.text)].append(link)
    ranked = sorted(((sum(id(k) in failed for k in members), end, text, members)
                     for (end, text), members in groups.items()
                     if len(members) >= FAN_MIN), key=lambda row: -row[0])
    out: list[tuple[NodeItem, str, list[LinkItem]]] = []
    used: set[int] = set()
    hubs: set[str] = set()
    for missing, end, text, members in ranked:
        if missing == 0 or end in hubs or any(id(k) in used for k in members):
            continue
        out.append((by_node[end], text, members))
        used.update(id(k) for k in members)
        hubs.add(end)
    return out


def _place_fans(nodes: list[NodeItem], fans: list[tuple[NodeItem, str, list[LinkItem]]],
                zoom: float, taken: Obstacles, labels: Obstacles, lines: LinkLines,
                fanned: set[int]) -> Iterator[None]:
    """Put each hub's label (``32 × 16``: its 32 links of 16 GB/s each) right beside the
    hub, away from its links, where it covers no node, name, label or link; the links
    of the hubs so labelled are added to ``fanned``. Yields after each hub."""
    shown: dict[str, tuple[QPointF, str, tuple[int, ...]]] = {}
    px = 1.0 / zoom
    for node, text, members in fans:
        label = f"{len(members)} × {text}"
        centre = node.pos()
        w = node.fan_label.width_of(label) * px
        h = node.fan_label.height_of(label) * px
        # opposite the mean direction its links leave it in, then turning either way
        dx = sum(_other_end(link, node.node_id).x() - centre.x() for link in members)
        dy = sum(_other_end(link, node.node_id).y() - centre.y() for link in members)
        away = math.atan2(-dy, -dx) if (dx or dy) else -math.pi / 2
        spot = None
        for gap in (3 * px, 9 * px):
            for k in range(FAN_ANGLES):
                angle = away + (1 if k % 2 else -1) * ((k + 1) // 2) * 2 * math.pi / FAN_ANGLES
                cos, sin = math.cos(angle), math.sin(angle)
                # just clear of the node's box, along the direction
                reach = min((style.NODE_W + w) / 2 / abs(cos) if abs(cos) > 1e-9 else math.inf,
                            (style.NODE_H + h) / 2 / abs(sin) if abs(sin) > 1e-9 else math.inf)
                at = QPointF(centre.x() + (reach + gap) * cos, centre.y() + (reach + gap) * sin)
                rect = node.fan_rect(at, label, zoom)
                if not taken.hits(rect) and not labels.hits(rect) and not lines.hits(rect, 0):
                    spot = at
                    labels.add(rect)
                    break
            if spot is not None:
                break
        if spot is not None:
            shown[node.node_id] = (spot, label, tuple(link.key for link in members))
            fanned.update(id(link) for link in members)
        yield
    for node in nodes:
        if node.node_id in shown:
            node.show_fan_at(*shown[node.node_id])
        else:
            node.show_fan_at(None)


def _hub_rects(nodes: list[NodeItem], zoom: float) -> list[QRectF]:
    """The boxes of the hub labels shown."""
    return [node.fan_rect(node.fan_label.pos() + node.pos(), node.fan_label.text, zoom)
            for node in nodes if node.fan_label.text]


def _other_end(link: LinkItem, end: str) -> QPointF:
    p1, p2 = link.ends()
    return p2 if link.source == end else p1
