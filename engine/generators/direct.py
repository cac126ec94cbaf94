"""Direct-connect fabrics: ring, fully connected, hypercube, torus, mesh, generalised
Kautz, and dragonfly (which may have terminals behind its routers).

Conventions: a "bandwidth" is per direction. Rings and torus dimensions of size 2 have a
single link between the two nodes (a two-node ring has one neighbour, not two links), and
dimensions of size 1 have none. Every fabric here is balanced by construction: duplex
links give each node equal ingress and egress; the Kautz digraph is d-regular in and out.
"""

from __future__ import annotations

import math
from collections import defaultdict
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
from canopy.engine.generators.params import (
    BANDWIDTH,
    BANDWIDTHS,
    BOOL,
    DIMS,
    INT,
    ParameterError,
    ParamSpec,
)
from canopy.engine.model.topology import Topology, format_gbps

# ------------------------------------------------------------------ ring


def ring(n: int, bandwidth: Fraction, bidirectional: bool) -> Topology:
    """A ring of ``n`` compute nodes; each link carries ``bandwidth`` in each direction
    it runs (both when ``bidirectional``, else only i -> i+1).

    Its allgather optimum is x* = 2b/(N-1) bidirectional and b/(N-1) one-way for N >= 3
    (the cut of all nodes but one, ForestColl (arXiv:2402.06787) §3.1).
    """
    b = Builder(f"{'bidirectional' if bidirectional else 'one-way'} ring of {n} "
                f"({format_gbps(bandwidth)} GB/s)")
    for i, (x, y) in enumerate(circle(n)):
        b.compute(f"n{i}", x, y)
    pairs = [(i, (i + 1) % n) for i in range(n)] if n > 2 else [(0, 1)]
    for i, j in pairs:
        b.link(f"n{i}", f"n{j}", bandwidth, duplex=bidirectional)
    if n == 2 and not bidirectional:
        b.link("n1", "n0", bandwidth, duplex=False)
    return b.topology


RING_PARAMS = (
    ParamSpec("n", INT, 8, "number of compute nodes", minimum=2),
    ParamSpec("bandwidth", BANDWIDTH, Fraction(50), "link bandwidth per direction, GB/s"),
    ParamSpec("bidirectional", BOOL, True, "links carry data both ways (else one-way ring)"),
)

# ------------------------------------------------------------------ fully connected


def fully_connected(n: int, bandwidth: Fraction) -> Topology:
    """Every pair of the ``n`` compute nodes joined by a duplex link (optimum x* = b)."""
    check_size(n * (n - 1) // 2, "links")
    b = Builder(f"fully connected, {n} nodes ({format_gbps(bandwidth)} GB/s)")
    for i, (x, y) in enumerate(circle(n)):
        b.compute(f"n{i}", x, y)
    for i in range(n):
        for j in range(i + 1, n):
            b.link(f"n{i}", f"n{j}", bandwidth)
    return b.topology


FULLY_CONNECTED_PARAMS = (
    ParamSpec("n", INT, 8, "number of compute nodes", minimum=2),
    ParamSpec("bandwidth", BANDWIDTH, Fraction(50), "bandwidth of each pair, per direction, GB/s"),
)

# ------------------------------------------------------------------ hypercube


def hypercube(dimension: int, bandwidth: Fraction) -> Topology:
    """2^d compute nodes; i and j linked when their binary labels differ in one bit."""
    check_size(2 ** dimension)
    dims = (2,) * dimension
    b = Builder(f"{dimension}-D hypercube ({format_gbps(bandwidth)} GB/s)")
    for i, (x, y) in enumerate(nested_grid(dims)):
        b.compute(f"n{i}", x, y, label=f"n{i} ({i:0{dimension}b})")
    for i in range(2 ** dimension):
        for bit in range(dimension):
            j = i ^ (1 << bit)
            if i < j:
                b.link(f"n{i}", f"n{j}", bandwidth)
    return b.topology


HYPERCUBE_PARAMS = (
    ParamSpec("dimension", INT, 3, "dimension d (2^d nodes)", minimum=1, maximum=15),
    ParamSpec("bandwidth", BANDWIDTH, Fraction(50), "link bandwidth per direction, GB/s"),
)

# ------------------------------------------------------------------ torus and mesh


def _per_dimension(values: Sequence[Fraction], dims: Sequence[int]) -> list[Fraction]:
    if len(values) == 1:
        return list(values) * len(dims)
    if len(values) != len(dims):
        raise ParameterError(f"--bandwidth has {len(values)} values for {len(dims)} "
                             "dimensions; give one value or one per dimension.")
    return list(values)


def grid(dims: Sequence[int], bandwidth: Sequence[Fraction], wrap: bool) -> Topology:
    """A torus (``wrap``) or mesh of any dimension; ``bandwidth`` per dimension or one
    value for all. Node ``n<i>`` has grid index i0 + d0·(i1 + d1·(...))."""
    check_size(math.prod(dims))
    bws = _per_dimension(bandwidth, dims)
    shape = "x".join(str(d) for d in dims)
    b = Builder(f"{len(dims)}-D {'torus' if wrap else 'mesh'} {shape} "
                f"({', '.join(format_gbps(v) for v in dict.fromkeys(bws))} GB/s)")
    indices = grid_indices(dims)
    points = nested_grid(dims, zigzag=[wrap and size > 2 and d < 2 for d, size in enumerate(dims)])
    for i, (idx, (x, y)) in enumerate(zip(indices, points, strict=True)):
        group = f"z{idx[-1]}" if len(dims) >= 3 else None
        b.compute(f"n{i}", x, y, label=f"n{i} ({','.join(map(str, idx))})", group=group)
    for i, idx in enumerate(indices):
        for d, size in enumerate(dims):
            last = size - 1 if (wrap and size > 2) else size - 2
            if idx[d] > last:
                continue
            nxt = list(idx)
            nxt[d] = (idx[d] + 1) % size
            b.link(f"n{i}", f"n{flat_index(nxt, dims)}", bws[d])
    return b.topology


def torus(dims: Sequence[int], bandwidth: Sequence[Fraction]) -> Topology:
    return grid(dims, bandwidth, wrap=True)


def mesh(dims: Sequence[int], bandwidth: Sequence[Fraction]) -> Topology:
    return grid(dims, bandwidth, wrap=False)


def _grid_params(default_dims: tuple[int, ...]) -> tuple[ParamSpec, ...]:
    return (
        ParamSpec("dims", DIMS, default_dims, "size of each dimension, e.g. 4x4x4", minimum=1),
        ParamSpec("bandwidth", BANDWIDTHS, (Fraction(50),),
                  "link bandwidth per direction, GB/s: one value, or one per dimension"),
    )


TORUS_PARAMS = _grid_params((4, 4, 4))
MESH_PARAMS = _grid_params((4, 4))

# ------------------------------------------------------------------ generalised Kautz


def kautz(degree: int, n: int, bandwidth: Fraction) -> Topology:
    """The generalised Kautz digraph GK(d, n) (Imase-Itoh): arcs i -> (-d·i - k) mod n for
    k = 1..d, each one-way with ``bandwidth``.

    The d·n values d·i + k cover 1..d·n once, so every node has in- and out-degree d;
    self-loops are dropped (a loop adds 1 to both) and parallel arcs merged, so the
    digraph stays balanced. Diameter is at most ceil(log_d n).
    """
    check_size(degree * n, "links")
    b = Builder(f"generalised Kautz GK({degree},{n}) ({format_gbps(bandwidth)} GB/s)")
    for i, (x, y) in enumerate(circle(n)):
        b.compute(f"n{i}", x, y)
    arcs: dict[tuple[int, int], int] = defaultdict(int)
    for i in range(n):
        for k in range(1, degree + 1):
            j = (-degree * i - k) % n
            if j != i:
                arcs[(i, j)] += 1
    for (i, j), count in arcs.items():
        b.link(f"n{i}", f"n{j}", bandwidth * count, duplex=False)
    return b.topology


KAUTZ_PARAMS = (
    ParamSpec("degree", INT, 2, "out-degree d of each node", minimum=2),
    ParamSpec("n", INT, 12, "number of compute nodes", minimum=3),
    ParamSpec("bandwidth", BANDWIDTH, Fraction(50), "bandwidth of each arc (one-way), GB/s"),
)

# ------------------------------------------------------------------ dragonfly


def dragonfly(groups: int, routers: int, global_links: int, terminals: int,
              local_bw: Fraction, global_bw: Fraction, terminal_bw: Fraction) -> Topology:
    """A dragonfly (Kim et al., ISCA 2008): ``groups`` groups of ``routers`` routers,
    routers of a group fully connected by ``local_bw`` links, and each router with
    ``global_links`` links of ``global_bw`` to other groups.

    Global ports are wired consecutively: port l of group i (router l // h) goes to group
    (i + 1 + l mod (g-1)) mod g, so every pair of groups gets a·h/(g-1) links, which must
    be whole. With ``terminals`` = 0 the routers are the compute nodes (TACOS's
    DragonFly); otherwise each router is a switch with that many compute nodes.
    """
    a, g, h, p = routers, groups, global_links, terminals
    ports = a * h
    if ports % (g - 1):
        raise ParameterError(
            f"--routers x --global-links = {ports} global ports per group cannot be shared "
            f"equally by the {g - 1} other groups; make it a multiple of {g - 1}.")
    check_size(g * a * (1 + p))
    b = Builder(f"dragonfly, {g} groups of {a} routers"
                + (f" x {p} terminals" if p else ""))
    router_kind = b.switch if p else b.compute
    big = max(2.5 * SPACING, SPACING * g * (a + 1) / (2 * math.pi))
    small = max(0.6 * SPACING, SPACING * a / (2 * math.pi)) * (1.8 if p else 1)
    for gi, (gx, gy) in enumerate(circle(g, big)):
        for r, (x, y) in enumerate(circle(a, small, gx, gy)):
            router = router_kind(f"g{gi}.r{r}", x, y, group=f"g{gi}")
            if p:
                dx, dy = x - gx, y - gy
                norm = math.hypot(dx, dy) or 1.0
                for t in range(p):
                    off = (t - (p - 1) / 2) * 0.45 * SPACING
                    tx = x + dx / norm * 0.7 * SPACING - dy / norm * off
                    ty = y + dy / norm * 0.7 * SPACING + dx / norm * off
                    b.link(b.compute(f"g{gi}.r{r}.t{t}", tx, ty, group=f"g{gi}"), router,
                           terminal_bw)
        for r in range(a):
            for s in range(r + 1, a):
                b.link(f"g{gi}.r{r}", f"g{gi}.r{s}", local_bw)
    for gi in range(g):
        for port in range(ports):
            gj = (gi + 1 + port % (g - 1)) % g
            if gj < gi:
                continue
            # The matching port on gj: same round (port // (g-1)), offset back to gi.
            back = (port // (g - 1)) * (g - 1) + (gi - gj - 1) % g
            b.link(f"g{gi}.r{port // h}", f"g{gj}.r{back // h}", global_bw)
    return b.topology


DRAGONFLY_PARAMS = (
    ParamSpec("groups", INT, 5, "number of groups g", minimum=2),
    ParamSpec("routers", INT, 4, "routers per group a (fully connected inside the group)",
              minimum=1),
    ParamSpec("global_links", INT, 1, "global links per router h", minimum=1),
    ParamSpec("terminals", INT, 0,
              "compute nodes per router; 0 makes the routers themselves compute nodes",
              minimum=0),
    ParamSpec("local_bw", BANDWIDTH, Fraction(400), "bandwidth of intra-group links, GB/s"),
    ParamSpec("global_bw", BANDWIDTH, Fraction(200), "bandwidth of inter-group links, GB/s"),
    ParamSpec("terminal_bw", BANDWIDTH, Fraction(100),
              "bandwidth between a terminal and its router, GB/s",
              relevant_when=lambda v: v.get("terminals", 0) > 0),
)
