"""Blink+Switch: optimal single-root spanning-tree packing on the switch-free topology.

Blink packs spanning out-trees all rooted at one node and runs allreduce as a reduce
into that root (the trees reversed) pipelined with a broadcast from it. Blink does not
handle switches; ForestColl (arXiv:2402.06787) §5.2 ("Blink+Switch") applies Blink's packing to
ForestColl's switch-free logical topology D* (switch removal by edge splitting, §4.3,
:func:`canopy.engine.forestcoll.edge_splitting.remove_switches`), and so do we.

Packing: by Edmonds' branching theorem the largest number of edge-disjoint spanning
out-trees rooted at r is K_r = min_v F(r, v) on D* (capacities in units of the tree
bandwidth y). We try every root, keep the one with the largest K_r (the first on ties),
computing K_r once per orbit of interchangeable servers (:func:`root_images`) and not
for roots that cannot beat the best (:func:`best_root`), and build the K_r trees with
the batched packing of ForestColl (arXiv:2402.06787) §4.4 (Alg. 5, Thm 12 after Bérczi & Frank)
asked
for K_r trees at r alone. Each tree carries
1/K_r of the whole message. The trees are then mapped back to physical paths.

Blink performs allgather and reduce-scatter as an allreduce (ForestColl (arXiv:2402.06787) §5.2
cites
this suggestion), so every collective runs the allreduce plan.
"""

from __future__ import annotations

from canopy.engine.execution.simulate import plan_bound
from canopy.engine.forestcoll.edge_splitting import remove_switches
from canopy.engine.forestcoll.optimum import find_optimum
from canopy.engine.forestcoll.solve import map_back
from canopy.engine.forestcoll.tree_packing import pack_trees
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.plan import BaselineResult, trees_plan
from canopy.engine.model.topology import Topology
from canopy.engine.network.indexed import Network
from canopy.engine.network.maxflow import FlowNetwork
from canopy.engine.network.servers import identical_groups


def root_images(net: Network, capacity: dict[tuple[int, int], int]) -> dict[int, int]:
    """Each compute node mapped to the first node (in ``net.compute`` order) of its orbit
    under the automorphisms of D* found among the rotation of all servers (node groups)
    and the swaps of interchangeable servers
    (:func:`canopy.engine.network.servers.identical_groups`).

    Switch removal need not keep the physical network's symmetry, so each candidate map
    σ is used only if it keeps the compute nodes and maps every arc of D* to an arc of
    the same capacity; then F(σr, σv) = F(r, v) for all v, so K_σr = K_r.
    """
    arcs = {e: c for e, c in capacity.items() if c}
    servers: dict[str | None, list[int]] = {}
    for i, g in enumerate(net.groups):
        servers.setdefault(g, []).append(i)
    servers.pop(None, None)
    groups = list(servers.values())
    maps: list[dict[int, int]] = []
    if len(groups) > 1 and len({len(g) for g in groups}) == 1:
        maps.append({a: b for k, g in enumerate(groups)
                     for a, b in zip(g, groups[(k + 1) % len(groups)], strict=True)})
    for members in identical_groups(net):
        maps += [dict(zip(members[0], other, strict=True))
                 | dict(zip(other, members[0], strict=True)) for other in members[1:]]
    orbit = {c: c for c in net.compute}

    def first(c: int) -> int:
        while orbit[c] != c:
            c = orbit[c]
        return c

    for sigma in maps:
        if all(net.is_compute(a) == net.is_compute(b) for a, b in sigma.items()) and \
                all(arcs.get((sigma.get(a, a), sigma.get(b, b))) == c
                    for (a, b), c in arcs.items()):
            for a, b in sigma.items():
                if net.is_compute(a):
                    ra, rb = first(a), first(b)
                    orbit[max(ra, rb, key=net.compute.index)] = \
                        min(ra, rb, key=net.compute.index)
    return {c: first(c) for c in net.compute}


def best_root(net: Network, capacity: dict[tuple[int, int], int]) -> tuple[int, int]:
    """The root r with the largest K_r = min over compute v != r of F(r, v) (Edmonds), the
    first in ``net.compute`` order on ties, and its K_r.

    A root is skipped where K_r cannot beat the best so far, which is the same answer:
    one that is not the first of its orbit (:func:`root_images`; the first has the same
    K_r and comes earlier), one whose capacity out bounds every F(r, v) by that best,
    and one whose flows reach it (the rest of its minimum can only be lower)."""
    flow = FlowNetwork(net.n)
    out: dict[int, int] = {}
    for (a, b), c in capacity.items():
        if c:
            flow.add_arc(a, b, c)
            out[a] = out.get(a, 0) + c
    first = root_images(net, capacity)
    best: tuple[int, int] | None = None          # (K_r, r)
    for r in net.compute:
        if first[r] != r or best is not None and out.get(r, 0) <= best[0]:
            continue
        count = None
        for v in net.compute:
            if v != r:
                f = flow.max_flow(r, v)
                count = f if count is None else min(count, f)
                if best is not None and count <= best[0]:
                    break
        else:
            best = (count or 0, r)
    assert best is not None
    return best[1], best[0]


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
        root, count = best_root(net, logical.capacity)
        if count == 0:
            raise ScheduleError("no node reaches every other on the logical topology.")
        packing = pack_trees(net.n, list(net.compute), logical.capacity, {root: count})
        trees = map_back(net, logical, packing.batches)
    except ScheduleError as exc:
        return BaselineResult.not_applicable("blink", collective, str(exc))
    compute = topology.compute_nodes()
    plan = trees_plan("allreduce", compute, trees, count, whole=True)
    algbw, link = plan_bound(topology, plan)   # remembered: its row asks again
    return BaselineResult(
        "blink", collective, algbw, schedule=trees,
        details={"root": net.names[root], "trees": count,
                 "broadcast_gbps": count * y, "runs_as": "allreduce",
                 "bottleneck_link": list(link)},
        plan_at=lambda size: plan)
