"""Small helpers the generators share: a topology builder with size limits, and layouts.

Layouts give every node readable x/y coordinates (scene units, y pointing down as in
Qt): rings and cliques on circles, tori and meshes as nested grids.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from fractions import Fraction

from canopy.engine.generators.params import ParameterError
from canopy.engine.model.limits import MAX_BUILT_LINKS, MAX_BUILT_NODES
from canopy.engine.model.topology import COMPUTE, SWITCH, Link, Node, Topology

SPACING = 80.0


class Builder:
    """Collects nodes and links, refusing to grow past MAX_BUILT_NODES / MAX_BUILT_LINKS."""

    def __init__(self, name: str) -> None:
        self.topology = Topology(name=name)

    def compute(self, node_id: str, x: float, y: float, label: str = "",
                group: str | None = None) -> str:
        return self._node(node_id, COMPUTE, x, y, label, group)

    def switch(self, node_id: str, x: float, y: float, label: str = "",
               group: str | None = None) -> str:
        return self._node(node_id, SWITCH, x, y, label, group)

    def _node(self, node_id: str, kind: str, x: float, y: float, label: str,
              group: str | None) -> str:
        if len(self.topology.nodes) >= MAX_BUILT_NODES:
            raise ParameterError(f"these parameters make more than {MAX_BUILT_NODES} nodes; "
                                 "choose a smaller topology.")
        self.topology.nodes.append(Node(node_id, kind, label or node_id, group,
                                        round(x, 3), round(y, 3)))
        return node_id

    def link(self, source: str, target: str, bandwidth: Fraction, duplex: bool = True) -> None:
        if len(self.topology.links) >= MAX_BUILT_LINKS:
            raise ParameterError(f"these parameters make more than {MAX_BUILT_LINKS} links; "
                                 "choose a smaller topology.")
        self.topology.links.append(Link(source, target, Fraction(bandwidth), duplex))


def check_size(count: int, what: str = "nodes") -> None:
    """Refuse early, before building, when a generator would make too many nodes."""
    limit = MAX_BUILT_NODES if what == "nodes" else MAX_BUILT_LINKS
    if count > limit:
        raise ParameterError(f"these parameters make {count} {what}; the limit is {limit}.")


def circle(count: int, radius: float | None = None, cx: float = 0.0,
           cy: float = 0.0) -> list[tuple[float, float]]:
    """``count`` points clockwise on a circle starting at the top."""
    if radius is None:
        radius = max(SPACING, SPACING * count / (2 * math.pi))
    return [(cx + radius * math.sin(2 * math.pi * i / count),
             cy - radius * math.cos(2 * math.pi * i / count)) for i in range(count)]


def nested_grid(dims: Sequence[int], spacing: float = SPACING,
                zigzag: Sequence[bool] | None = None) -> list[tuple[float, float]]:
    """Positions of the points of a ``dims`` grid, in :func:`grid_indices` order.

    Even-numbered dimensions go along x and odd ones along y; each further dimension on
    an axis repeats the block beside the previous one, with a gap, so a 4x4x4 torus
    shows as four 4x4 layers side by side. Where ``zigzag[d]`` is true, odd positions
    along dimension d step aside a little, so that links skipping along that line (a
    torus's wrap-around, a clique) do not hide behind the links in between.
    """
    strides = [0.0] * len(dims)
    for axis in (0, 1):
        extent = None
        for d in range(axis, len(dims), 2):
            if extent is None:
                strides[d] = spacing
                extent = spacing * (dims[d] - 1)
            else:
                strides[d] = extent + 1.5 * spacing
                extent = strides[d] * (dims[d] - 1) + extent
    zig = list(zigzag) if zigzag is not None else [False] * len(dims)
    points = []
    for index in grid_indices(dims):
        pos = [0.0, 0.0]
        for d, i in enumerate(index):
            pos[d % 2] += i * strides[d]
            if zig[d]:
                pos[1 - d % 2] += 0.3 * spacing * (i % 2)
        points.append((pos[0], pos[1]))
    return points


def grid_indices(dims: Sequence[int]) -> list[tuple[int, ...]]:
    """All index tuples of a ``dims`` grid, the first index fastest (ASTRA-sim's NPU order:
    NPU id = i0 + d0·(i1 + d1·(i2 + ...)))."""
    ranges = (range(d) for d in reversed(dims))
    return [tuple(reversed(t)) for t in itertools.product(*ranges)]


def flat_index(index: Sequence[int], dims: Sequence[int]) -> int:
    """Position of ``index`` in :func:`grid_indices` order (first index fastest)."""
    pos = 0
    for i, d in zip(reversed(index), reversed(dims), strict=True):
        pos = pos * d + i
    return pos
