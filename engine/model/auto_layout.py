"""Group-aware automatic layout for topologies without coordinates (imports, generators).

Servers (node groups) become compact blocks laid out in a grid: the switches that reach
outside the server (NICs, uplinks) on top, the compute nodes in rows of at most eight
below them, and switches private to the server (NVSwitch, PCIe switches) at the bottom.
Ungrouped nodes are scale-out switches: they go in tiers above the servers, the tier
being the breadth-first distance from the servers (leaf, spine, core), each tier ordered
by the mean position of its neighbours below so links cross as little as possible.
A topology without any groups is drawn with a force-directed (Kamada-Kawai) layout, or
on a circle when it is a plain ring.

Coordinates are scene units (the editor draws a node about 44 units wide); y grows down.
This module is pure networkx and never imports Qt.
"""

from __future__ import annotations

import math
from collections import defaultdict

import networkx as nx

from canopy.engine.model.topology import SWITCH, Node, Topology

SPACING = 80.0
"""Horizontal distance between neighbouring nodes in a row."""
ROW_GAP = 90.0
"""Vertical distance between the rows of a server block."""
BLOCK_GAP = 70.0
"""Free space between neighbouring server blocks."""
TIER_GAP = 150.0
"""Vertical distance between tiers of scale-out switches."""
MAX_ROW = 8
"""Compute nodes per row inside a server block."""

Position = tuple[float, float]


def auto_layout(topology: Topology, only_missing: bool = True) -> None:
    """Fill ``x``/``y`` of the nodes that have no coordinates (all nodes if not ``only_missing``).

    When some nodes already have coordinates, the new ones are laid out among themselves
    and placed below the existing drawing, so nothing that was placed by hand moves.
    Placeholder coordinates (see :func:`has_placeholder_layout`) count as missing.
    """
    if only_missing and has_placeholder_layout(topology):
        only_missing = False
    todo = [n for n in topology.nodes if not only_missing or n.x is None or n.y is None]
    if not todo:
        return
    ids = {n.id for n in todo}
    graph = _undirected(topology, ids)
    positions = layout_positions(todo, graph)
    placed = [n for n in topology.nodes if n.id not in ids]
    dx = dy = 0.0
    if placed and positions:
        left = min(x for x, _ in positions.values())
        top = min(y for _, y in positions.values())
        dx = min(float(n.x or 0.0) for n in placed) - left
        dy = max(float(n.y or 0.0) for n in placed) + TIER_GAP - top
    for n in todo:
        x, y = positions[n.id]
        n.x, n.y = round(x + dx, 1), round(y + dy, 1)


def has_placeholder_layout(topology: Topology) -> bool:
    """Whether the coordinates are a stand-in: every node on one line, links across others.

    Files written without a drawing often place node ``i`` at ``(40 i, 0)``. A chain of
    nodes drawn on a line is a real drawing (each link joins neighbours on the line);
    a line with links that jump over other nodes hides the structure.
    """
    nodes = topology.nodes
    if len(nodes) < 3 or any(n.x is None or n.y is None for n in nodes):
        return False
    for along, across in (("x", "y"), ("y", "x")):
        if len({getattr(n, across) for n in nodes}) != 1:
            continue
        order = {n.id: i for i, n in enumerate(sorted(nodes, key=lambda n: getattr(n, along)))}
        return any(abs(order[link.source] - order[link.target]) > 1
                   for link in topology.links
                   if link.source in order and link.target in order)
    return False


def layout_positions(nodes: list[Node], graph: nx.Graph) -> dict[str, Position]:
    """Positions for ``nodes`` (all of ``graph``'s nodes), top-left near the origin."""
    groups: dict[str, list[Node]] = defaultdict(list)
    for n in nodes:
        if n.group:
            groups[n.group].append(n)
    if not groups:
        return _free_layout(nodes, graph)
    positions: dict[str, Position] = {}
    width = _place_blocks(list(groups.values()), graph, positions)
    ungrouped = [n.id for n in nodes if not n.group]
    _place_tiers(ungrouped, graph, positions, width)
    return _normalised(positions)


def _undirected(topology: Topology, ids: set[str]) -> nx.Graph:
    g = nx.Graph()
    g.add_nodes_from(n.id for n in topology.nodes if n.id in ids)
    g.add_edges_from((link.source, link.target) for link in topology.links
                     if link.source in ids and link.target in ids
                     and link.source != link.target)
    return g


def _block(members: list[Node], graph: nx.Graph) -> dict[str, Position]:
    """One server: uplink switches on top, compute rows, private switches at the bottom."""
    inside = {n.id for n in members}
    uplinks = [n.id for n in members if n.kind == SWITCH
               and any(v not in inside for v in graph.neighbors(n.id))]
    private = [n.id for n in members if n.kind == SWITCH and n.id not in uplinks]
    compute = [n.id for n in members if n.kind != SWITCH]
    rows = [compute[i:i + MAX_ROW] for i in range(0, len(compute), MAX_ROW)]
    width = max([len(r) for r in rows] + [min(len(uplinks), MAX_ROW),
                                          min(len(private), MAX_ROW), 1])
    pos: dict[str, Position] = {}
    y = len(_wrap(uplinks)) * ROW_GAP
    for row in rows:
        _centre_row(row, y, width, pos)
        y += ROW_GAP
    _rows_by_neighbours(uplinks, graph, pos, 0.0, width)
    # a hub (an NVSwitch under eight GPUs) sits further down, so its links fan out steeply
    # enough for their labels and hop badges to stand apart
    fan = max([sum(1 for v in graph.neighbors(p) if v in compute) for p in private] + [0])
    _rows_by_neighbours(private, graph, pos, y + ROW_GAP * max(0.0, min(fan, MAX_ROW) / 4 - 1),
                        width)
    return pos


def _wrap(ids: list[str]) -> list[list[str]]:
    return [ids[i:i + MAX_ROW] for i in range(0, len(ids), MAX_ROW)]


def _centre_row(row: list[str], y: float, width: int, pos: dict[str, Position]) -> None:
    offset = (width - len(row)) * SPACING / 2
    for i, node in enumerate(row):
        pos[node] = (offset + i * SPACING, y)


def _rows_by_neighbours(ids: list[str], graph: nx.Graph, pos: dict[str, Position],
                        y: float, width: int) -> None:
    """Place ``ids`` in rows starting at ``y``, each row ordered by its neighbours' mean x."""
    ordered = sorted(ids, key=lambda n: _barycentre(n, graph, pos))
    for r, row in enumerate(_wrap(ordered)):
        _centre_row(row, y + r * ROW_GAP, width, pos)


def _barycentre(node: str, graph: nx.Graph, pos: dict[str, Position]) -> float:
    xs = [pos[v][0] for v in graph.neighbors(node) if v in pos]
    return sum(xs) / len(xs) if xs else math.inf


def _place_blocks(blocks: list[list[Node]], graph: nx.Graph,
                  positions: dict[str, Position]) -> float:
    """Lay the server blocks out in a grid; return the grid's width."""
    drawn = [_block(members, graph) for members in blocks]
    cell_w = max(max(x for x, _ in d.values()) for d in drawn) + SPACING + BLOCK_GAP
    cell_h = max(max(y for _, y in d.values()) for d in drawn) + ROW_GAP + BLOCK_GAP
    columns = min(len(drawn), math.ceil(math.sqrt(2 * len(drawn))))
    for i, d in enumerate(drawn):
        ox, oy = (i % columns) * cell_w, (i // columns) * cell_h
        for node, (x, y) in d.items():
            positions[node] = (ox + x, oy + y)
    return columns * cell_w - BLOCK_GAP


def _place_tiers(ungrouped: list[str], graph: nx.Graph, positions: dict[str, Position],
                 width: float) -> None:
    """Scale-out switches in tiers above the servers, by distance from them."""
    if not ungrouped:
        return
    sources = [n for n in positions if n in graph]
    tiers: list[list[str]] = []
    seen: set[str] = set()
    for depth, layer in enumerate(nx.bfs_layers(graph, sources)):
        if depth == 0:
            continue
        tiers.append(list(layer))
        seen.update(layer)
    rest = [n for n in ungrouped if n not in seen]
    if rest:
        tiers.append(rest)
    order = {n: i for i, n in enumerate(ungrouped)}
    for depth, tier in enumerate(tiers, start=1):
        tier.sort(key=lambda n: (_barycentre(n, graph, positions), order[n]))
        span = max(width, len(tier) * SPACING)
        left = (width - span) / 2
        for i, node in enumerate(tier):
            positions[node] = (left + (i + 0.5) * span / len(tier) - SPACING / 2,
                               -depth * TIER_GAP)


def _free_layout(nodes: list[Node], graph: nx.Graph) -> dict[str, Position]:
    """No groups: a circle for a plain ring, otherwise Kamada-Kawai (spring when large)."""
    ids = [n.id for n in nodes]
    if len(ids) == 1:
        return {ids[0]: (0.0, 0.0)}
    scale = SPACING * max(1.5, math.sqrt(len(ids)) * 0.9)
    if _is_ring(graph) or graph.number_of_edges() == 0:
        raw = nx.circular_layout(ids, scale=scale)
    elif len(ids) <= 300:
        raw = nx.kamada_kawai_layout(graph, scale=scale)
    else:
        raw = nx.spring_layout(graph, seed=0, scale=scale * 2)
    return _normalised({n: (float(raw[n][0]), float(raw[n][1])) for n in ids})


def _is_ring(graph: nx.Graph) -> bool:
    return (graph.number_of_nodes() >= 3 and nx.is_connected(graph)
            and all(d == 2 for _, d in graph.degree()))


def _normalised(positions: dict[str, Position]) -> dict[str, Position]:
    left = min(x for x, _ in positions.values())
    top = min(y for _, y in positions.values())
    return {n: (x - left, y - top) for n, (x, y) in positions.items()}

