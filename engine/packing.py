"""Spanning out-tree packing in batches (forestcoll.txt §4.4, App. C.3, Alg. 5, Thm 12).

On the switch-free logical topology D* with integer capacities g, we grow k out-trees
per compute node. Trees travel in batches: a batch R of multiplicity m(R) is m identical
trees with vertex set R. Growing R by an edge (x, y) is allowed for μ of its trees, with

    μ = min{ g(x,y), m(R), F(x, y; D̄) - Σ_{i≠R} m(R_i) }                       (Thm 12)

where D̄ adds, for every other batch R_i, a node s_i, an arc x -> s_i of capacity
m(R_i) and arcs s_i -> R_i of infinite capacity. When μ < m(R) the batch splits in two.
The work depends on the number of distinct batches, not on k.

Two exact reductions keep D̄ small: a batch containing y sends its m(R_i) straight to y
through s_i, so it adds m(R_i) to F and to the sum alike and is left out; and batches
with equal vertex sets share one s_i (a single vertex needs no s_i at all: its arc goes
straight to that vertex).

Edges are tried shallowest tail first, so trees come out low (their height matters for
latency at small message sizes, App. C.3's closing remark).
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from canopy.engine.arcs import INT64_MAX, ArcTable, cap_array
from canopy.engine.errors import ScheduleError
from canopy.engine.progress import Progress


@dataclass
class Batch:
    """m identical partial out-trees rooted at ``root`` (edges parents first).

    ``frontier`` is a heap of candidate edges (depth of tail, -capacity when found,
    tail, head); entries whose head joined the tree or whose capacity ran out are
    skipped when popped.
    """

    root: int
    m: int
    vertices: set[int]
    depth: dict[int, int]
    edges: list[tuple[int, int]] = field(default_factory=list)
    frontier: list[tuple[int, int, int, int]] = field(default_factory=list)

    def copy(self, m: int) -> Batch:
        return Batch(self.root, m, set(self.vertices), dict(self.depth), list(self.edges),
                     list(self.frontier))

    def grow(self, x: int, y: int, g: ArcTable) -> None:
        self.edges.append((x, y))
        self.vertices.add(y)
        self.depth[y] = self.depth[x] + 1
        self.reach_from(y, g)

    def reach_from(self, x: int, g: ArcTable) -> None:
        for y in g.out[x]:
            if y not in self.vertices:
                heapq.heappush(self.frontier, (self.depth[x], -g.get(x, y), x, y))


@dataclass
class Packing:
    batches: list[Batch]
    mu_flows: int


class _OtherBatches:
    """m(R_i) summed by vertex set over every batch but the one being grown.

    Single-vertex sets (trees not started yet) are kept apart in numpy arrays: in D̄
    each is just an arc x -> r of capacity m.
    """

    def __init__(self, num_nodes: int) -> None:
        self.single = np.zeros(num_nodes, dtype=np.int64)
        self.sets: dict[frozenset[int], int] = defaultdict(int)

    def add(self, batch: Batch, sign: int = 1) -> None:
        if len(batch.vertices) == 1:
            value = int(self.single[batch.root]) + sign * batch.m
            if value > INT64_MAX and self.single.dtype != object:
                self.single = self.single.astype(object)
            self.single[batch.root] = value
        else:
            key = frozenset(batch.vertices)
            self.sets[key] += sign * batch.m
            if not self.sets[key]:
                del self.sets[key]


class _Packer:
    def __init__(self, num_nodes: int, capacity: dict[tuple[int, int], int],
                 total_trees: int) -> None:
        self.num_nodes = num_nodes
        self.g = ArcTable(num_nodes)
        for (a, b), c in capacity.items():
            self.g.add(a, b, c)
        self.inf = self.g.total() + total_trees + 1
        self.flows = 0
        self.others = _OtherBatches(num_nodes)

    def mu(self, batch: Batch, x: int, y: int) -> int:
        """Thm 12 with the reductions of the module docstring."""
        bound = min(self.g.get(x, y), batch.m)
        single = self.others.single
        roots = np.flatnonzero(single)
        roots = roots[roots != y]
        excluded = int(single[roots].sum())
        roots = roots[roots != x]
        extra_t = [np.full(len(roots), x, dtype=np.int32)]
        extra_h = [roots.astype(np.int32)]
        extra_c = [single[roots]]
        aux = self.num_nodes
        for verts, m in self.others.sets.items():
            if y in verts:
                continue
            excluded += m
            members = np.fromiter(verts, dtype=np.int32, count=len(verts))
            extra_t += [np.array([x], dtype=np.int32), np.full(len(members), aux, np.int32)]
            extra_h += [np.array([aux], dtype=np.int32), members]
            extra_c += [cap_array([m]), cap_array([self.inf] * len(members))]
            aux += 1
        if not excluded:
            return bound
        network = self.g.network_with(np.concatenate(extra_t), np.concatenate(extra_h),
                                      np.concatenate(extra_c), num_nodes=aux)
        self.flows += 1
        return max(0, min(bound, network.max_flow(x, y) - excluded))

    def extend(self, batch: Batch) -> tuple[int, int, int]:
        """The first frontier edge (x, y) with μ > 0, and μ."""
        tried = []
        try:
            while batch.frontier:
                entry = heapq.heappop(batch.frontier)
                _, _, x, y = entry
                if y in batch.vertices or not self.g.get(x, y):
                    continue
                tried.append(entry)
                mu = self.mu(batch, x, y)
                if mu:
                    tried.pop()
                    return x, y, mu
        finally:
            for entry in tried:
                heapq.heappush(batch.frontier, entry)
        raise ScheduleError(
            "internal error: no edge can extend the out-tree rooted at node "
            f"{batch.root}; the capacities do not admit the requested trees.")


def pack_trees(num_nodes: int, compute: list[int], capacity: dict[tuple[int, int], int],
               demands: dict[int, int], progress: Progress | None = None) -> Packing:
    """Alg. 5: ``demands[r]`` out-trees rooted at each r, spanning ``compute``, within
    ``capacity`` (ForestColl asks k per compute node; Blink asks K at one root).

    ``capacity`` maps logical edges between compute nodes (indices < num_nodes) to
    integer capacities in trees.
    """
    packer = _Packer(num_nodes, capacity, sum(demands.values()))
    pending = [Batch(r, m, {r}, {r: 0}) for r, m in demands.items() if m]
    for batch in pending:
        packer.others.add(batch)
    done: list[Batch] = []
    target = len(compute)
    while pending:
        batch = pending.pop(0)
        packer.others.add(batch, -1)
        if not batch.edges:
            batch.reach_from(batch.root, packer.g)
        while len(batch.vertices) < target:
            x, y, mu = packer.extend(batch)
            if mu < batch.m:
                # Keep the split-off copy next, so one root's trees finish together.
                copy = batch.copy(batch.m - mu)
                pending.insert(0, copy)
                packer.others.add(copy)
                batch.m = mu
            batch.grow(x, y, packer.g)
            packer.g.add(x, y, -mu)
        done.append(batch)
        packer.others.add(batch)
        if progress:
            progress("tree packing", len(done) / (len(done) + len(pending)))
    return Packing(done, packer.flows)
