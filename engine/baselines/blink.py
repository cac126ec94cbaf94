"""Blink+Switch: optimal single-root spanning-tree packing on the switch-free topology.

Blink packs spanning out-trees all rooted at one node and runs allreduce as a reduce
into that root (the trees reversed) pipelined with a broadcast from it. Blink does not
handle switches; forestcoll.txt §5.2 ("Blink+Switch") applies Blink's packing to
ForestColl's switch-free logical topology D* (switch removal by edge splitting, §4.3,
:func:`engine.splitting.remove_switches`), and so do we.

Packing: by Edmonds' branching theorem the largest number of edge-disjoint spanning
out-trees rooted at r is K_r = min_v F(r, v) on D* (capacities in units of the tree
bandwidth y). We try every root, keep the one with the largest K_r (the first on ties),
and build the K_r trees with the batched packing of forestcoll.txt §4.4 (Alg. 5,
Thm 12 after Bérczi & Frank, here with every batch rooted at r). Each tree carries
1/K_r of the whole message. The trees are then mapped back to physical paths.

Blink performs allgather and reduce-scatter as an allreduce (forestcoll.txt §5.2 cites
this suggestion), so every collective runs the allreduce plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.baselines.common import BaselineResult, bandwidth_bound, trees_plan
from engine.errors import ScheduleError
from engine.maxflow import FlowNetwork
from engine.network import Network
from engine.optimality import find_optimum
from engine.schedule import Tree, TreeEdge
from engine.splitting import LogicalTopology, remove_switches
from engine.topology import Topology


@dataclass
class Batch:
    """``m`` identical partial out-trees rooted at ``root`` (edges parents first)."""

    root: int
    m: int
    vertices: set[int]
    depth: dict[int, int]
    edges: list[tuple[int, int]] = field(default_factory=list)

    def copy(self, m: int) -> Batch:
        return Batch(self.root, m, set(self.vertices), dict(self.depth), list(self.edges))


def single_root_counts(net: Network, capacity: dict[tuple[int, int], int]) -> dict[int, int]:
    """K_r = min over compute v != r of F(r, v) for every compute root r (Edmonds)."""
    flow = FlowNetwork(net.n)
    for (a, b), c in capacity.items():
        if c:
            flow.add_arc(a, b, c)
    return {r: min(flow.max_flow(r, v) for v in net.compute if v != r) for r in net.compute}


def _mu(net: Network, g: dict[tuple[int, int], int], batch: Batch, others: list[Batch],
        x: int, y: int) -> int:
    """How many of the batch's trees may take edge (x, y) (forestcoll.txt App. C.3,
    Thm 12): min{g(x,y), m(R), F(x, y; D̄) - Σ_{i≠R} m(R_i)}, D̄ adding for every other
    batch R_i a node s_i, an arc x -> s_i of m(R_i) and arcs s_i -> R_i unbounded.
    Batches already holding y add m(R_i) to F and to the sum alike, so they are left
    out; batches with equal vertex sets share one s_i."""
    bound = min(g.get((x, y), 0), batch.m)
    groups: dict[frozenset[int], int] = {}
    for other in others:
        if y not in other.vertices:
            key = frozenset(other.vertices)
            groups[key] = groups.get(key, 0) + other.m
    if not groups or not bound:
        return bound
    flow = FlowNetwork(net.n + len(groups))
    for (a, b), c in g.items():
        if c:
            flow.add_arc(a, b, c)
    unbounded = sum(g.values()) + sum(groups.values()) + 1
    for aux, (vertices, m) in enumerate(groups.items(), start=net.n):
        flow.add_arc(x, aux, m)
        for v in vertices:
            flow.add_arc(aux, v, unbounded)
    return max(0, min(bound, flow.max_flow(x, y) - sum(groups.values())))


def pack_single_root(net: Network, capacity: dict[tuple[int, int], int], root: int,
                     count: int) -> list[Batch]:
    """``count`` spanning out-trees rooted at ``root`` within ``capacity``, in batches
    (Alg. 5 of forestcoll.txt with every batch rooted at ``root``). Edges are tried
    shallowest tail first, widest first, so the trees come out low."""
    g = dict(capacity)
    heads: dict[int, list[int]] = {}
    for (a, b), c in sorted(capacity.items()):
        if c:
            heads.setdefault(a, []).append(b)
    pending = [Batch(root, count, {root}, {root: 0})]
    done: list[Batch] = []
    while pending:
        batch = pending.pop(0)
        while len(batch.vertices) < len(net.compute):
            candidates = sorted((batch.depth[x], -g[(x, y)], x, y) for x in batch.vertices
                                for y in heads.get(x, []) if y not in batch.vertices
                                and g[(x, y)])
            for _, _, x, y in candidates:
                mu = _mu(net, g, batch, pending + done, x, y)
                if mu:
                    break
            else:
                raise ScheduleError(f"internal error: the out-trees of {net.names[root]} "
                                    "cannot be extended.")
            if mu < batch.m:
                pending.insert(0, batch.copy(batch.m - mu))
                batch.m = mu
            batch.edges.append((x, y))
            batch.vertices.add(y)
            batch.depth[y] = batch.depth[x] + 1
            g[(x, y)] -= mu
        done.append(batch)
    return done


def map_back(net: Network, logical: LogicalTopology, batches: list[Batch]) -> list[Tree]:
    """Trees with physical paths: each logical edge's units keep the route that edge
    splitting recorded; a batch splits where its units' routes differ."""
    trees: list[Tree] = []
    for batch in batches:
        parts: list[tuple[int, list[tuple[int, ...]]]] = [(batch.m, [])]
        for edge in batch.edges:
            pieces = logical.routes[edge].take(batch.m)
            refined = []
            for count, paths in parts:
                while count:
                    path, left = pieces[0]
                    used = min(count, left)
                    refined.append((used, [*paths, path]))
                    count -= used
                    if used == left:
                        pieces.pop(0)
                    else:
                        pieces[0] = (path, left - used)
            parts = refined
        for count, paths in parts:
            edges = tuple(TreeEdge(net.names[x], net.names[y], tuple(net.names[p] for p in path))
                          for (x, y), path in zip(batch.edges, paths, strict=True))
            trees.append(Tree(net.names[batch.root], len(trees), count, edges))
    return trees


def blink_baseline(topology: Topology, collective: str = "allgather") -> BaselineResult:
    """Blink+Switch's trees and the algbw of running ``collective`` as an allreduce."""
    try:
        net = Network.from_topology(topology)
        if any(net.capacity.get((b, a)) != c for (a, b), c in net.capacity.items()):
            raise ScheduleError("Blink reduces over the reversed trees, which needs every "
                                "link to be duplex.")
        opt = find_optimum(net)
        y = opt.tree_bandwidth     # capacities in trees, b_e / y (Prop. 3)
        logical = remove_switches(net, {e: int(c / y) for e, c in net.capacity.items()},
                                  opt.k)
        counts = single_root_counts(net, logical.capacity)
        root = max(net.compute, key=lambda r: (counts[r], -net.compute.index(r)))
        if counts[root] == 0:
            raise ScheduleError("no node reaches every other on the logical topology.")
        batches = pack_single_root(net, logical.capacity, root, counts[root])
        trees = map_back(net, logical, batches)
    except ScheduleError as exc:
        return BaselineResult.not_applicable("blink", collective, str(exc))
    compute = topology.compute_nodes()
    plan = trees_plan("allreduce", compute, trees, counts[root], whole=True)
    algbw, link = bandwidth_bound(plan, topology.capacities())
    return BaselineResult(
        "blink", collective, algbw, schedule=trees,
        details={"root": net.names[root], "trees": counts[root],
                 "broadcast_gbps": counts[root] * y, "runs_as": "allreduce",
                 "bottleneck_link": list(link)},
        plan_at=lambda size: plan)
