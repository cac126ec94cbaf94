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

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.arcs import ArcTable
from engine.errors import ScheduleError

Progress = Callable[[str, float], None]


@dataclass
class Batch:
    """m identical partial out-trees rooted at ``root`` (edges parents first)."""

    root: int
    m: int
    vertices: set[int]
    depth: dict[int, int]
    edges: list[tuple[int, int]] = field(default_factory=list)

    def copy(self, m: int) -> Batch:
        return Batch(self.root, m, set(self.vertices), dict(self.depth), list(self.edges))

    def grow(self, x: int, y: int) -> None:
        self.edges.append((x, y))
        self.vertices.add(y)
        self.depth[y] = self.depth[x] + 1


@dataclass
class Packing:
    batches: list[Batch]
    mu_flows: int


class _Packer:
    def __init__(self, num_nodes: int, compute: list[int],
                 capacity: dict[tuple[int, int], int], k: int) -> None:
        self.compute = compute
        self.num_nodes = num_nodes
        self.g = ArcTable(num_nodes)
        for (a, b), c in capacity.items():
            self.g.add(a, b, c)
        self.inf = self.g.total() + len(compute) * k + 1
        self.flows = 0

    def mu(self, batch: Batch, others: list[Batch], x: int, y: int) -> int:
        """Thm 12 with the reductions of the module docstring."""
        bound = min(self.g.get(x, y), batch.m)
        groups: dict[frozenset[int], int] = defaultdict(int)
        for other in others:
            if y not in other.vertices:
                groups[frozenset(other.vertices)] += other.m
        if not groups:
            return bound
        extra = []
        aux = self.num_nodes
        for verts, m in groups.items():
            if len(verts) == 1:
                (v,) = verts
                if v != x:
                    extra.append((x, v, m))
            else:
                extra.append((x, aux, m))
                extra.extend((aux, v, self.inf) for v in verts)
                aux += 1
        flow = self.g.network(extra, num_nodes=aux).max_flow(x, y)
        self.flows += 1
        return max(0, min(bound, flow - sum(groups.values())))

    def candidates(self, batch: Batch) -> list[tuple[int, int]]:
        """Edges leaving the batch, shallowest tail first, then widest, then by index."""
        out = []
        for x in batch.vertices:
            for y in self.g.out[x]:
                if y not in batch.vertices:
                    out.append((batch.depth[x], -self.g.get(x, y), x, y))
        out.sort()
        return [(x, y) for _, _, x, y in out]


def pack_trees(num_nodes: int, compute: list[int], capacity: dict[tuple[int, int], int],
               k: int, progress: Progress | None = None) -> Packing:
    """Alg. 5: batches of out-trees, k per compute node, within ``capacity``.

    ``capacity`` maps logical edges between compute nodes (indices < num_nodes) to
    integer capacities in trees.
    """
    packer = _Packer(num_nodes, compute, capacity, k)
    pending = [Batch(r, k, {r}, {r: 0}) for r in compute]
    done: list[Batch] = []
    target = len(compute)
    while pending:
        batch = pending.pop(0)
        while len(batch.vertices) < target:
            others = pending + done
            for x, y in packer.candidates(batch):
                mu = packer.mu(batch, others, x, y)
                if mu:
                    break
            else:
                raise ScheduleError(
                    "internal error: no edge can extend the out-tree rooted at node "
                    f"{batch.root}; the capacities do not admit {k} trees per node.")
            if mu < batch.m:
                # Keep the split-off copy next, so one root's trees finish together.
                pending.insert(0, batch.copy(batch.m - mu))
                batch.m = mu
            batch.grow(x, y)
            packer.g.add(x, y, -mu)
        done.append(batch)
        if progress:
            progress("tree packing", len(done) / (len(done) + len(pending)))
    return Packing(done, packer.flows)
