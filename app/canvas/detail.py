"""The scene's level of detail at a zoom: which names and bandwidths show
(:mod:`canopy.app.canvas.lod` places them), each link's bandwidth colour, and which
servers collapse into labelled blocks.

:func:`detail_steps` does it a step at a time, so the scene can either run it at once
(:meth:`~canopy.app.canvas.scene.TopologyScene.apply_zoom`) or spread it over turns of
the event loop (:meth:`~canopy.app.canvas.scene.TopologyScene.apply_zoom_in_turns`),
letting the window paint and take input between labels.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterator
from fractions import Fraction
from typing import TYPE_CHECKING

from canopy.app.canvas.bandwidth_colours import bandwidth_classes, colour_of
from canopy.app.canvas.labels import fitting
from canopy.app.canvas.link_item import LinkItem
from canopy.app.canvas.lod import placing_labels
from canopy.app.canvas.node_item import NAME_MIN_ZOOM, NodeItem
from canopy.engine.model.topology import COMPUTE, Topology, format_gbps

if TYPE_CHECKING:
    from canopy.app.canvas.scene import TopologyScene

COLLAPSE_BELOW = 0.45
"""A server whose members show no names at a zoom below this collapses into a block."""
ROOM_CAP = 400.0
LARGE_LOD = 1000
"""Above this many nodes the level-of-detail pass only handles the visible part (and
runs again when the view scrolls)."""
ROW_BAND = 25.0
"""Nodes whose y differ by less than this share a row (their names compete for width)."""


def detail_steps(scene: TopologyScene) -> Iterator[None]:
    """Names where they fit, bandwidths on links long enough on screen, and servers whose
    members show no name collapsed into labelled blocks, for the scene's zoom; yields
    between steps (a label each, mostly). Every item must exist and stay meanwhile."""
    zoom = scene.zoom
    if scene.rooms is None and zoom >= NAME_MIN_ZOOM:  # (only names need room)
        scene.rooms = free_rooms(scene.node_items())
    collapsed = collapsed_groups(scene, zoom)
    hidden = {node.id: node.group for node in scene.doc.topology.nodes
              if node.group in collapsed}
    nodes, links = scene.node_items(), scene.link_items()
    colour_links(scene, links)
    yield
    area = scene.label_area
    large = len(nodes) > LARGE_LOD and area is not None
    if large:
        assert area is not None
        nodes = [n for n in nodes if area.contains(n.pos())]
        links = [k for k in links if area.intersects(k.boundingRect())]
    groups = {item.name: item for item in scene.group_items()}
    yield from placing_labels(nodes, links, zoom, scene.rooms or {}, ROOM_CAP, hidden,
                              [groups[g].box() for g in collapsed if g in groups],
                              area if large else None)
    for name, box in groups.items():
        text = name
        if name in collapsed:
            summary = scene.group_summary(name)
            box.details = summary.split(" · ", 1)[-1].replace("\n", ", ")
            text = fitting(box.block_label, (summary, name), box.box().width() * zoom - 8)
        box.set_collapsed(name in collapsed, text)


def colour_links(scene: TopologyScene, links: list[LinkItem]) -> None:
    """Each link in its bandwidth's colour, and the legend told (the scene's
    ``bandwidths_changed``) when the classes change."""
    classes = bandwidth_classes((link.bandwidth, link.text) for link in links)
    for link in links:
        link.set_color(colour_of(link.text, classes))
    if [(t, c.rgba()) for t, c in classes] != [(t, c.rgba())
                                               for t, c in scene.bandwidth_classes]:
        scene.bandwidth_classes = classes
        scene.bandwidths_changed.emit(classes)


def collapsed_groups(scene: TopologyScene, zoom: float) -> set[str]:
    """Groups of two or more nodes none of whose compute nodes has room for a name."""
    groups = scene.group_items()
    if zoom >= COLLAPSE_BELOW or not groups:
        return set()
    rooms = scene.rooms or {}
    named: dict[str, bool] = defaultdict(bool)
    members: dict[str, int] = defaultdict(int)
    for node in scene.doc.topology.nodes:
        if not node.group:
            continue
        members[node.group] += 1
        if node.kind == COMPUTE and zoom >= NAME_MIN_ZOOM and not named[node.group]:
            item = scene.node_item(node.id)
            shortest = min(item.name_label.width_of(t) for t in item.names)
            named[node.group] = shortest <= rooms.get(node.id, ROOM_CAP) * zoom - 4
    return {g for g, count in members.items() if count > 1 and not named[g]}


def group_summaries(topology: Topology) -> dict[str, str]:
    """Every group's summary (``n0 · 8 GPUs`` and the bandwidth leaving it), in one pass
    over the nodes and one over the links."""
    group_of = {node.id: node.group for node in topology.nodes if node.group}
    members: dict[str, int] = defaultdict(int)
    gpus: dict[str, int] = defaultdict(int)
    for node in topology.nodes:
        if node.group:
            members[node.group] += 1
            gpus[node.group] += node.kind == COMPUTE
    out: dict[str, Fraction] = defaultdict(Fraction)
    for link in topology.links:
        source, target = group_of.get(link.source), group_of.get(link.target)
        if source == target:
            continue
        if source:
            out[source] += link.bandwidth
        if target and link.duplex:
            out[target] += link.bandwidth
    summaries = {}
    for group, count in members.items():
        n = gpus[group]
        what = f"{n} GPU{'s' if n != 1 else ''}" if n else f"{count} switches"
        summaries[group] = f"{group} · {what}\n{format_gbps(out[group])} GB/s out"
    return summaries


def free_rooms(items: list[NodeItem]) -> dict[str, float]:
    """For each node, the distance to the nearest node beside it in its row (the width
    its name may take), at most ROOM_CAP."""
    rows: dict[int, list[tuple[float, str]]] = defaultdict(list)
    for item in items:
        rows[round(item.pos().y() / ROW_BAND)].append((item.pos().x(), item.node_id))
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
