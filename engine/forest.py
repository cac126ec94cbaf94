"""The whole ForestColl pipeline: optimum, switch removal, tree packing, map back, verify.

forestcoll.txt §4.1 gives the outline. ``solve`` returns a :class:`Schedule` only after
:func:`canopy.engine.verification.verify` has accepted it.

Reduce-scatter runs out-trees against their arrows (§4.6). On bidirectional networks the
allgather trees serve; when some link is one-way, the reduce trees are out-trees of the
transposed network, whose optimum is the same because every node is balanced.
"""

from __future__ import annotations

import time
from dataclasses import replace
from fractions import Fraction

from canopy.engine.errors import ScheduleError
from canopy.engine.network import Network
from canopy.engine.optimality import COLLECTIVES, Optimum, find_fixed_k, find_optimum
from canopy.engine.packing import Batch, pack_trees
from canopy.engine.progress import Progress, report
from canopy.engine.schedule import OptimumSummary, Schedule, Tree, TreeEdge
from canopy.engine.splitting import LogicalTopology, remove_switches
from canopy.engine.topology import Topology
from canopy.engine.verification import verify


def transpose(net: Network) -> Network:
    """The same network with every link reversed."""
    return replace(net, capacity={(b, a): c for (a, b), c in net.capacity.items()})


def is_symmetric(net: Network) -> bool:
    return all(net.capacity.get((b, a)) == c for (a, b), c in net.capacity.items())


def tree_capacities(net: Network, opt: Optimum, k: int | None
                    ) -> tuple[Fraction, dict[tuple[int, int], int]]:
    """(y, capacities in trees): b_e / y at the optimum (Prop. 3), or floor(U*·b_e) with
    y = 1/U* for a fixed k (Thm 13)."""
    if k is None:
        y = opt.tree_bandwidth
        return y, {e: int(c / y) for e, c in net.capacity.items()}
    fixed = find_fixed_k(net, k, opt)
    return fixed.tree_bandwidth, fixed.tree_capacities()


def map_back(net: Network, logical: LogicalTopology, batches: list[Batch]) -> list[Tree]:
    """Give every unit tree physical paths; a batch splits where its units' paths differ."""
    names = net.names
    trees: list[Tree] = []
    per_root: dict[int, int] = {}
    for batch in sorted(batches, key=lambda b: net.compute.index(b.root)):
        parts: list[tuple[int, list[tuple[int, ...]]]] = [(batch.m, [])]
        for edge in batch.edges:
            pieces = logical.routes[edge].take(batch.m)
            refined: list[tuple[int, list[tuple[int, ...]]]] = []
            pi, left = 0, pieces[0][1]
            for count, paths in parts:
                while count:
                    used = min(count, left)
                    refined.append((used, [*paths, pieces[pi][0]]))
                    count -= used
                    left -= used
                    if left == 0 and pi + 1 < len(pieces):
                        pi += 1
                        left = pieces[pi][1]
            parts = refined
        for count, paths in parts:
            index = per_root.get(batch.root, 0)
            per_root[batch.root] = index + 1
            edges = tuple(TreeEdge(names[x], names[y], tuple(names[p] for p in path))
                          for (x, y), path in zip(batch.edges, paths, strict=True))
            trees.append(Tree(names[batch.root], index, count, edges))
    return trees


def build_forest(net: Network, caps: dict[tuple[int, int], int], k: int,
                 progress: Progress | None = None,
                 timings: dict[str, float] | None = None) -> list[Tree]:
    """Alg. 4 then Alg. 5 then map back: k unit trees per compute node within ``caps``."""
    timings = {} if timings is None else timings
    start = time.perf_counter()
    report(progress, "switch removal", 0.0)
    logical = remove_switches(net, caps, k, progress)
    timings["switch removal"] = timings.get("switch removal", 0) + time.perf_counter() - start
    start = time.perf_counter()
    report(progress, "tree packing", 0.0)
    packing = pack_trees(net.n, list(net.compute), logical.capacity,
                         dict.fromkeys(net.compute, k), progress)
    timings["tree packing"] = timings.get("tree packing", 0) + time.perf_counter() - start
    start = time.perf_counter()
    report(progress, "mapping back", 0.0)
    trees = map_back(net, logical, packing.batches)
    timings["mapping back"] = timings.get("mapping back", 0) + time.perf_counter() - start
    return trees


def solve(topology: Topology, collective: str = "allgather", k: int | None = None,
          progress: Progress | None = None, where: str = "") -> Schedule:
    """The optimal (or best fixed-k) verified schedule of ``topology`` for ``collective``.

    Finds the optimum (forestcoll.txt §4.2), removes switches by edge splitting (§4.3),
    packs k spanning out-trees per compute node (§4.4), maps their edges back to physical
    routes and verifies the result (:func:`canopy.engine.verification.verify`) before returning.

    Parameters
    ----------
    topology : Topology
        The network to schedule.
    collective : {"allgather", "reduce-scatter", "allreduce"}
        Reduce-scatter runs the trees backwards; allreduce is reduce-scatter then allgather.
    k : int, optional
        Trees per compute node; None for the optimal k (Prop. 3).
    progress : Progress, optional
        Called as ``progress(phase, fraction)``; it may raise
        :class:`canopy.engine.progress.Cancelled` to stop the work.
    where : str, optional
        Names the input (a file name) in error messages.

    Returns
    -------
    Schedule
        The verified forest; ``schedule.algbw`` is the algbw it achieves (GB/s).

    Raises
    ------
    TopologyError
        The topology cannot be solved (one sentence naming the node or link).
    ScheduleError
        An unknown collective, or a fixed k that no schedule can use.

    Examples
    --------
    >>> from canopy.engine import load_sample
    >>> schedule = solve(load_sample("forestcoll-fig2.json"), "allreduce")
    >>> schedule.algbw == schedule.optimal_algbw
    True
    """
    if collective not in COLLECTIVES:
        raise ScheduleError(f"unknown collective '{collective}'; use one of "
                            f"{', '.join(COLLECTIVES)}.")
    if k is not None and k < 1:
        raise ScheduleError(f"k must be a positive integer, not {k}.")
    timings: dict[str, float] = {}
    start = time.perf_counter()
    report(progress, "optimum", 0.0)
    net = Network.from_topology(topology, where)
    opt = find_optimum(net)
    if is_symmetric(net):
        nets = [net]
    else:
        nets = {"allgather": [net], "reduce-scatter": [transpose(net)],
                "allreduce": [transpose(net), net]}[collective]
    k_used = opt.k if k is None else k
    budgets = [tree_capacities(n, opt, k) for n in nets]
    timings["optimum"] = time.perf_counter() - start
    report(progress, "optimum", 1.0)

    try:
        forests = [build_forest(n, caps, k_used, progress, timings)
                   for n, (_, caps) in zip(nets, budgets, strict=True)]
    except ScheduleError as exc:
        if k is None:
            raise
        raise ScheduleError(
            f"with k fixed to {k}, rounding every link down to whole trees unbalances the "
            f"network: {exc} Try another k; the optimal k is {opt.k}.") from None
    trees, y = forests[-1], budgets[-1][0]
    reduce_trees = forests[0] if len(forests) == 2 else None
    reduce_y = budgets[0][0] if len(forests) == 2 else None

    summary = OptimumSummary(opt.inverse_x, tuple(opt.cut_names()), opt.cut_bandwidth,
                             opt.k, opt.tree_bandwidth)
    schedule = Schedule(collective, list(topology.compute_nodes()), k_used, y, trees, summary,
                        fixed_k=k is not None, reduce_trees=reduce_trees,
                        reduce_tree_bandwidth=reduce_y, timings=timings)
    report(progress, "verification", 0.0)
    start = time.perf_counter()
    verify(topology, schedule)
    timings["verification"] = time.perf_counter() - start
    timings["total"] = sum(timings.values())
    report(progress, "verification", 1.0)
    return schedule
