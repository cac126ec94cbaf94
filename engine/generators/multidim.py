"""Multi-dimensional fabrics in the style of ASTRA-sim and TACOS (tacos.txt §V, Table IV):
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

from engine.generators.builder import SPACING, Builder, check_size, flat_index, grid_indices
from engine.generators.builder import nested_grid
from engine.generators.params import BANDWIDTHS, CHOICES, DIMS, ParameterError, ParamSpec
from engine.topology import Topology, format_gbps

RING, FC, SWITCH = "ring", "fc", "switch"
SHAPES = (RING, FC, SWITCH)


def multi_dim(dims: Sequence[int], shapes: Sequence[str],
              bandwidth: Sequence[Fraction]) -> Topology:
    """NPU ``n<i>`` at grid index i0 + d0·(i1 + ...); dimension k joined as ``shapes[k]``
    with ``bandwidth[k]`` per link and direction (for a switch: NPU <-> switch)."""
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
    points = nested_grid(dims, 1.25 * SPACING)
    for i, (idx, (x, y)) in enumerate(zip(indices, points, strict=True)):
        b.compute(f"n{i}", x, y, label=f"n{i} ({','.join(map(str, idx))})",
                  group=f"node{idx[-1]}" if len(dims) > 1 else None)
    for d, (size, shape, bw) in enumerate(zip(dims, shapes, bandwidth, strict=True)):
        if size == 1:
            continue
        for i, idx in enumerate(indices):
            if idx[d] != 0:
                continue            # handle each line along dimension d once, from its start
            line = [flat_index(idx[:d] + (k,) + idx[d + 1:], dims) for k in range(size)]
            _join_line(b, d, i, line, shape, bw, [points[j] for j in line],
                       group=f"node{idx[-1]}" if d < len(dims) - 1 else None)
    return b.topology


def _join_line(b: Builder, d: int, first: int, line: list[int], shape: str, bw: Fraction,
               points: list[tuple[float, float]], group: str | None) -> None:
    names = [f"n{j}" for j in line]
    if shape == RING:
        pairs = list(zip(names, names[1:] + names[:1])) if len(names) > 2 else [tuple(names)]
        for u, v in pairs:
            b.link(u, v, bw)
    elif shape == FC:
        for a in range(len(names)):
            for c in range(a + 1, len(names)):
                b.link(names[a], names[c], bw)
    else:
        cx = sum(p[0] for p in points) / len(points)
        cy = sum(p[1] for p in points) / len(points)
        offset = 0.45 * SPACING * (1 + 0.4 * d)
        sw = b.switch(f"dim{d}.sw{first}", cx + offset, cy - offset,
                      label=f"dim {d} switch of n{first}", group=group)
        for u in names:
            b.link(u, sw, bw)


MULTI_DIM_PARAMS = (
    ParamSpec("dims", DIMS, (2, 4, 8), "NPUs along each dimension, e.g. 2x4x8", minimum=1),
    ParamSpec("shapes", CHOICES, (RING, FC, SWITCH),
              "how each dimension is joined: ring, fc (fully connected) or switch",
              choices=SHAPES),
    ParamSpec("bandwidth", BANDWIDTHS, (Fraction(200), Fraction(100), Fraction(50)),
              "link bandwidth per direction for each dimension, GB/s"),
)
