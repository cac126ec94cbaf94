"""Spanning out-tree packing in batches (ForestColl (arXiv:2402.06787) §4.4, App. C.3, Alg. 5, Thm
12).

On the switch-free logical topology D* with integer capacities g, we grow k out-trees
per compute node. Trees travel in batches: a batch R of multiplicity m(R) is m identical
trees with vertex set R. Growing R by an edge (x, y) is allowed for μ of its trees, with

    μ = min{ g(x,y), m(R), F(x, y; D̄) - Σ_{i≠R} m(R_i) }                       (Thm 12)

where D̄ adds, for every other batch R_i, a node s_i, an arc x -> s_i of capacity
m(R_i) and arcs s_i -> R_i of infinite capacity. When μ < m(R) the batch splits in two.
The work depends on the number of distinct batches, not on k.

Exact reductions keep D̄ small and cheap: a batch containing y sends its m(R_i) straight
to y through s_i, so it adds m(R_i) to F and to the sum alike and is left out; batches
with equal vertex sets share one s_i (a single vertex needs no s_i at all: its arc goes
straight to that vertex); and when g(x, y) alone covers every batch that must still
enter y, μ is settled without a flow (see :meth:`_Packer.mu`).

Edges are tried shallowest tail first, so trees come out low (their height matters for
latency at small message sizes, App. C.3's closing remark).
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.progress import Progress
from canopy.engine.network.maxflow import FlowNetwork


@dataclass
class Batch:
    """m identical partial out-trees rooted at ``root`` (edges parents first).

    ``frontier`` is a heap of candidate edges (depth of tail, -capacity when found, tail,
    head); entries whose head joined the tree or whose capacity ran out are skipped when
    popped. ``depth`` and ``frontier`` serve growth only: a finished batch has both empty
    (the depths of all batches grow with the square of the GPUs).
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

    def grow(self, x: int, y: int, g: _Capacities) -> None:
        self.edges.append((x, y))
        self.vertices.add(y)
        self.depth[y] = self.depth[x] + 1
        self.reach_from(y, g)

    def reach_from(self, x: int, g: _Capacities) -> None:
        depth, cap, vertices, frontier = self.depth[x], g.cap, self.vertices, self.frontier
        for y in g.out[x]:
            c = cap[(x, y)]
            if c and y not in vertices:
                heapq.heappush(frontier, (depth, -c, x, y))


class _Capacities:
    """g on D*: capacities in a dict of Python integers, with out-neighbour lists."""

    def __init__(self, capacity: dict[tuple[int, int], int]) -> None:
        self.cap = {e: c for e, c in capacity.items() if c}
        self.out: dict[int, list[int]] = defaultdict(list)
        for a, b in self.cap:
            self.out[a].append(b)

    def get(self, a: int, b: int) -> int:
        return self.cap.get((a, b), 0)


@dataclass
class Packing:
    batches: list[Batch]
    mu_flows: int
    certified: int      # μ settled by the capacity bound, without a flow


class _OtherBatches:
    """m(R_i) summed by vertex set over every batch but the one being grown.

    Single-vertex sets (trees not started yet) are kept apart in ``single``: in D̄ each is
    an arc of capacity m into its root. ``done`` counts trees already spanning every
    compute node (they contain any y, so they cancel out of Thm 12).
    """

    def __init__(self, num_nodes: int) -> None:
        self.single = [0] * num_nodes
        self.sets: dict[frozenset[int], int] = defaultdict(int)
        self.total = 0
        self.done = 0

    def add(self, batch: Batch, sign: int = 1, complete: bool = False) -> None:
        self.total += sign * batch.m
        if complete:
            self.done += sign * batch.m
        elif len(batch.vertices) == 1:
            self.single[batch.root] += sign * batch.m
        else:
            key = frozenset(batch.vertices)
            self.sets[key] += sign * batch.m
            if not self.sets[key]:
                del self.sets[key]

    def missing(self, y: int) -> int:
        """Σ m(R_i) over the batches that do not contain y (they must still enter y)."""
        return self.total - self.done - self.single[y] - self.inside_sets(y)

    def inside_sets(self, y: int) -> int:
        """Σ m(R_i) over the other batches of several vertices that contain y."""
        return sum(m for v, m in self.sets.items() if y in v) if self.sets else 0


class _Packer:
    """D̄ of Thm 12 kept as one flow network between μ questions.

    The network holds the capacities g and an extra source node σ with an arc σ -> v of
    capacity ``single[v]`` for every compute node. F(x, y; D̄) is F(σ, y) with the arc σ -> x
    raised to ∞ (σ merges into x, so the arcs x -> r of D̄ are the arcs σ -> r). The
    network is only updated, never rebuilt, unless other batches with several vertices
    exist (then each gets its node s_i for that question).
    """

    def __init__(self, num_nodes: int, compute: list[int],
                 capacity: dict[tuple[int, int], int], total_trees: int) -> None:
        self.num_nodes = num_nodes
        self.g = _Capacities(capacity)
        self.inf = sum(self.g.cap.values()) + total_trees + 1
        self.flows = 0
        self.certified = 0
        self.others = _OtherBatches(num_nodes)
        self.sigma = num_nodes
        edges = list(self.g.cap)
        self.flow = FlowNetwork(num_nodes + 1)
        for a, b in edges:
            self.flow.add_arc(a, b, self.g.cap[(a, b)])
        for v in compute:
            self.flow.add_arc(self.sigma, v, 0)
        self.arc_of = {edge: i for i, edge in enumerate(edges)}
        self.sigma_arc = {v: len(edges) + i for i, v in enumerate(compute)}
        self.stale: set[tuple[int, int]] = set()   # arcs whose g the network lacks

    def use(self, x: int, y: int, amount: int) -> None:
        """Take ``amount`` of g(x, y) for a batch."""
        self.g.cap[(x, y)] -= amount
        self.stale.add((x, y))

    def sync_singles(self, *roots: int) -> None:
        for r in roots:
            self.flow.set_capacity(self.sigma_arc[r], self.others.single[r])

    def mu(self, batch: Batch, x: int, y: int) -> int:
        """Thm 12: min{g(x,y), m(R), F(x,y; D̄) - Σ_{i≠R} m(R_i)}, with a flow only when
        g(x, y) alone cannot show that every other batch still fits."""
        g = self.g.cap[(x, y)]
        bound = g if g < batch.m else batch.m
        others = self.others
        inside = others.inside_sets(y)
        missing = others.total - others.done - others.single[y] - inside
        if g >= missing + bound:
            # Every cut X ∋ y, ∌ x keeps the arc (x, y), so ρ(X) - μ still covers the
            # batches that must enter X: μ = bound needs no flow.
            self.certified += 1
            return bound
        self.flows += 1
        flow, cap, arc_of = self.flow, self.g.cap, self.arc_of
        for edge in self.stale:
            flow.set_capacity(arc_of[edge], cap[edge])
        self.stale.clear()
        sets = [(v, m) for v, m in others.sets.items() if y not in v] if others.sets else []
        if not sets:
            arc = self.sigma_arc[x]
            flow.set_capacity(arc, self.inf)
            value = flow.max_flow(self.sigma, y)
            flow.set_capacity(arc, others.single[x])
        else:
            value = self._with_sets(x, y, sets)
        value -= others.total - others.done - inside
        return max(0, min(bound, value))

    def _with_sets(self, x: int, y: int, sets: list[tuple[frozenset[int], int]]) -> int:
        """F(σ, y) with a node s_i per other batch R_i of several vertices (σ -> s_i of
        capacity m(R_i), s_i -> R_i of ∞), on a copy of the network."""
        tails, heads, caps = self.flow.arrays()
        tails, heads, caps = list(tails), list(heads), list(caps)
        caps[self.sigma_arc[x]] = self.inf
        aux = self.num_nodes + 1
        for verts, m in sets:
            tails.append(self.sigma)
            heads.append(aux)
            caps.append(m)
            tails += [aux] * len(verts)
            heads += verts
            caps += [self.inf] * len(verts)
            aux += 1
        return self.flow.sibling(aux, tails, heads, caps).max_flow(self.sigma, y)

    def extend(self, batch: Batch) -> tuple[int, int, int]:
        """The first frontier edge (x, y) with μ > 0, and μ.

        An edge with μ = 0 is dropped for good: F(x, y; D̄) - Σ m(R_i) never grows while
        capacities only shrink, other batches only grow and R only gains vertices, so it
        stays 0 for this batch and for any batch later split off it.
        """
        frontier, vertices, cap, pop = batch.frontier, batch.vertices, self.g.cap, heapq.heappop
        while frontier:
            _, _, x, y = pop(frontier)
            if y in vertices or not cap[(x, y)]:
                continue
            mu = self.mu(batch, x, y)
            if mu:
                return x, y, mu
        raise ScheduleError(
            "internal error: no edge can extend the out-tree rooted at node "
            f"{batch.root}; the capacities do not admit the requested trees.")


def _greedy(compute: list[int], capacity: dict[tuple[int, int], int], demands: dict[int, int],
            groups: Sequence[str | None], progress: Progress | None = None) -> Packing | None:
    """Grow every batch without μ flows, entering each group (server) of compute nodes
    once and spreading inside it; None as soon as a batch cannot grow.

    Thm 12's flows only guarantee that growth never gets stuck; a packing that completes
    within the capacities is a packing however it was found. On clusters of identical
    servers whose only tight cuts are unions of servers this completes; elsewhere it
    gives up and Alg. 5 runs.
    """
    g = _Capacities(capacity)
    target = len(compute)
    pending = [Batch(r, m, {r}, {r: 0}) for r, m in demands.items() if m]
    done: list[Batch] = []
    cap = g.cap
    while pending:
        batch = pending.pop(0)
        if not batch.edges:
            batch.reach_from(batch.root, g)
        present = {groups[v] for v in batch.vertices}
        deferred: list[tuple[int, int, int, int]] = []     # cross edges into entered groups
        frontier, vertices = batch.frontier, batch.vertices
        while len(vertices) < target:
            forced = not frontier
            if forced and not deferred:
                return None
            entry = heapq.heappop(deferred if forced else frontier)
            x, y = entry[2], entry[3]
            c = cap[(x, y)]
            if y in vertices or not c:
                continue
            gy = groups[y]
            if not forced and gy is not None and gy in present and groups[x] != gy:
                heapq.heappush(deferred, entry)     # spread inside the group first
                continue
            if c < batch.m:
                copy = batch.copy(batch.m - c)
                copy.frontier = [*frontier, *deferred]
                heapq.heapify(copy.frontier)
                pending.insert(0, copy)
                batch.m = c
            cap[(x, y)] = c - batch.m
            present.add(gy)
            batch.grow(x, y, g)
        batch.frontier, batch.depth = [], {}
        done.append(batch)
        if progress:
            progress("tree packing", len(done) / (len(done) + len(pending)))
    return Packing(done, 0, 0)


def greedy_packing(compute: list[int], capacity: dict[tuple[int, int], int],
                   demands: dict[int, int], groups: Sequence[str | None] | None,
                   progress: Progress | None = None) -> Packing | None:
    """The flow-free greedy (:func:`_greedy`) when some compute node has a group, else
    None; None also when the greedy gives up."""
    if groups is None or all(groups[c] is None for c in compute):
        return None
    return _greedy(compute, capacity, demands, groups, progress)


def pack_trees(num_nodes: int, compute: list[int], capacity: dict[tuple[int, int], int],
               demands: dict[int, int], progress: Progress | None = None,
               groups: Sequence[str | None] | None = None,
               interleave: bool = False) -> Packing:
    """Alg. 5: ``demands[r]`` out-trees rooted at each r, spanning ``compute``, within
    ``capacity`` (ForestColl asks k per compute node; Blink asks K at one root).

    ``capacity`` maps logical edges between compute nodes (indices < num_nodes) to
    integer capacities in trees. With ``groups`` (a group name or None per node) a
    flow-free greedy packing (:func:`_greedy`) is tried first. With ``interleave``, the
    batches grow together instead (:func:`_pack_interleaved`; no greedy first).
    """
    if interleave:
        return _pack_interleaved(num_nodes, compute, capacity, demands, progress)
    quick = greedy_packing(compute, capacity, demands, groups, progress)
    if quick is not None:
        return quick
    packer = _Packer(num_nodes, compute, capacity, sum(demands.values()))
    pending = [Batch(r, m, {r}, {r: 0}) for r, m in demands.items() if m]
    for batch in pending:
        packer.others.add(batch)
    packer.sync_singles(*demands)
    done: list[Batch] = []
    target = len(compute)
    while pending:
        batch = pending.pop(0)
        packer.others.add(batch, -1)
        packer.sync_singles(batch.root)
        if not batch.edges:
            batch.reach_from(batch.root, packer.g)
        while len(batch.vertices) < target:
            x, y, mu = packer.extend(batch)
            if mu < batch.m:
                # Keep the split-off copy next, so one root's trees finish together.
                copy = batch.copy(batch.m - mu)
                pending.insert(0, copy)
                packer.others.add(copy)
                packer.sync_singles(copy.root)
                batch.m = mu
            batch.grow(x, y, packer.g)
            packer.use(x, y, mu)
        batch.frontier, batch.depth = [], {}
        done.append(batch)
        packer.others.add(batch, complete=True)
        if progress:
            progress("tree packing", len(done) / (len(done) + len(pending)))
    return Packing(done, packer.flows, packer.certified)


def _pack_interleaved(num_nodes: int, compute: list[int],
                      capacity: dict[tuple[int, int], int], demands: dict[int, int],
                      progress: Progress | None = None) -> Packing:
    """Alg. 5 with the batches grown together, one edge at a time, the batch whose
    shallowest frontier edge is shallowest first (ties: the batch waiting longest).

    Thm 12's μ keeps every other batch completable whatever their state, so the order in
    which batches grow is free; batch by batch, a late batch finds the capacity near its
    root taken by the earlier ones' deep branches and comes out deep (2x MI250 at k = 2:
    trees up to 14 hops, 9 this way). Depth is the pipeline's fill and drain, so its
    reduce-scatter runs closer to its bound with these trees. Every batch's vertex set
    differs while they grow, so each μ that needs a flow gets a node per other batch
    (:meth:`_Packer._with_sets`): slower on large networks.
    """
    packer = _Packer(num_nodes, compute, capacity, sum(demands.values()))
    order = 0
    heap: list[tuple[int, int, Batch]] = []
    for r, m in demands.items():
        if m:
            batch = Batch(r, m, {r}, {r: 0})
            packer.others.add(batch)
            batch.reach_from(r, packer.g)
            heap.append((0, order, batch))
            order += 1
    heapq.heapify(heap)
    packer.sync_singles(*demands)
    done: list[Batch] = []
    target, total = len(compute), len(heap)
    while heap:
        _, _, batch = heapq.heappop(heap)
        packer.others.add(batch, -1)
        packer.sync_singles(batch.root)
        x, y, mu = packer.extend(batch)
        if mu < batch.m:
            copy = batch.copy(batch.m - mu)
            packer.others.add(copy)
            heapq.heappush(heap, (batch.depth[x], order, copy))
            order += 1
            total += 1
            batch.m = mu
        batch.grow(x, y, packer.g)
        packer.use(x, y, mu)
        if len(batch.vertices) < target:
            packer.others.add(batch)
            heapq.heappush(heap, (batch.frontier[0][0] if batch.frontier else 0, order, batch))
            order += 1
        else:
            batch.frontier, batch.depth = [], {}
            done.append(batch)
            packer.others.add(batch, complete=True)
            if progress:
                progress("tree packing", len(done) / total)
        packer.sync_singles(batch.root)
    return Packing(done, packer.flows, packer.certified)
