"""Multi-dimensional fabrics in the style of ASTRA-sim and TACOS (TACOS (Won et al.,
arXiv:2304.05301) §V, Table IV):
NPUs on a d0 x d1 x ... grid, and along each dimension a Ring, a FullyConnected clique or
a Switch joining the NPUs that differ only in that coordinate.

TACOS's 3D-RFS (2x4x8) is ``ring,fc,switch`` with [200, 100, 50] GB/s; its 2D Switch
(8x4) is ``switch,switch`` with [300, 25] GB/s. The last dimension is taken to be the
server ("node") index, so NPUs are grouped by it, as in TACOS's scaling of 3D-RFS by its
last dimension.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

from canopy.engine.generators.builder import (
    SPACING,
    Builder,
    check_size,
    circle,
    flat_index,
    grid_indices,
    nested_grid,
)
from canopy.engine.generators.params import BANDWIDTHS, CHOICES, DIMS, ParameterError, ParamSpec
from canopy.engine.model.topology import Topology, format_gbps

RING, FC, SWITCH = "ring", "fc", "switch"
SHAPES = (RING, FC, SWITCH)


def multi_dim(dims: Sequence[int], shapes: Sequence[str],
              bandwidth: Sequence[Fraction]) -> Topology:
    """NPU ``n<i>`` at grid index i0 + d0·(i1 + ...); dimension k joined as ``shapes[k]``
    with ``bandwidth[k]`` per link and direction (for a switch: NPU <-> switch).

    Layout: one block per server (last index), blocks side by side; the inner dimensions
    as a grid inside each block; switches of the last dimension in a row above.
    """
    if not (len(dims) == len(shapes) == len(bandwidth)):
        raise ParameterError(f"--dims, --shapes and --bandwidth must list the same number of "
                             f"dimensions (they list {len(dims)}, {len(shapes)} and "
                             f"{len(bandwidth)}).")
    npus = math.prod(dims)
    switches = sum(npus // size for size, shape in zip(dims, shapes, strict=True)
                   if shape == SWITCH)
    check_size(npus + switches)
    name = "-".join(s.upper() for s in shapes) + " " + "x".join(map(str, dims))
    b = Builder(f"{name} ({', '.join(format_gbps(v) for v in bandwidth)} GB/s)")
    indices = grid_indices(dims)
    points = _positions(dims, shapes)
    for i, (idx, (x, y)) in enumerate(zip(indices, points, strict=True)):
        b.compute(f"n{i}", x, y, label=f"n{i} ({','.join(map(str, idx))})",
                  group=f"node{idx[-1]}" if len(dims) > 1 else None)
    top = min(y for _, y in points) - 1.6 * SPACING
    width = max(x for x, _ in points)
    for d, (size, shape, bw) in enumerate(zip(dims, shapes, bandwidth, strict=True)):
        if size == 1:
            continue
        lines = [[flat_index(idx[:d] + (k,) + idx[d + 1:], dims) for k in range(size)]
                 for idx in indices if idx[d] == 0]
        for number, line in enumerate(lines):
            names = [f"n{j}" for j in line]
            if shape == RING:
                pairs = list(zip(names, names[1:] + names[:1], strict=True)) if size > 2 \
                    else [names]
                for u, v in pairs:
                    b.link(u, v, bw)
            elif shape == FC:
                for a in range(size):
                    for c in range(a + 1, size):
                        b.link(names[a], names[c], bw)
            else:
                if d == len(dims) - 1:
                    x = width * (number + 0.5) / len(lines)
                    sw = b.switch(f"dim{d}.sw{line[0]}", x, top,
                                  label=f"dim {d} switch of n{line[0]}")
                else:
                    cx = sum(points[j][0] for j in line) / size
                    cy = sum(points[j][1] for j in line) / size
                    dx, dy = (0.0, 0.6 * SPACING) if d % 2 == 0 else (0.6 * SPACING, 0.0)
                    sw = b.switch(f"dim{d}.sw{line[0]}", cx + dx, cy + dy,
                                  label=f"dim {d} switch of n{line[0]}",
                                  group=f"node{indices[line[0]][-1]}")
                for u in names:
                    b.link(u, sw, bw)
    return b.topology


def _positions(dims: Sequence[int], shapes: Sequence[str]) -> list[tuple[float, float]]:
    """Server blocks (last index) side by side, inner dimensions as a grid in each."""
    crowded = [shape in (RING, FC) and size > 2 for size, shape in zip(dims, shapes, strict=True)]
    if len(dims) == 1:
        if crowded[0]:
            return circle(dims[0])
        return [(SPACING * i, 0.0) for i in range(dims[0])]
    inner = nested_grid(dims[:-1], SPACING, crowded[:-1])
    block = max(x for x, _ in inner) + 2 * SPACING
    points = []
    for idx in grid_indices(dims):
        x, y = inner[flat_index(idx[:-1], dims[:-1])]
        lift = 0.3 * SPACING * (idx[-1] % 2) if crowded[-1] else 0.0
        points.append((x + block * idx[-1], y + lift))
    return points


MULTI_DIM_PARAMS = (
    ParamSpec("dims", DIMS, (2, 4, 8), "NPUs along each dimension, e.g. 2x4x8", minimum=1),
    ParamSpec("shapes", CHOICES, (RING, FC, SWITCH),
              "how each dimension is joined: ring, fc (fully connected) or switch",
              choices=SHAPES),
    ParamSpec("bandwidth", BANDWIDTHS, (Fraction(200), Fraction(100), Fraction(50)),
              "link bandwidth per direction for each dimension, GB/s"),
)
