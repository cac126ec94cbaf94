"""The whole ForestColl pipeline: optimum, switch removal, tree packing, map back, verify.

ForestColl (arXiv:2402.06787) §4.1 gives the outline. ``solve`` returns a :class:`Schedule` only
after
:func:`canopy.engine.model.verification.verify` has accepted it.

Reduce-scatter runs out-trees against their arrows (§4.6). On bidirectional networks the
allgather trees serve; when some link is one-way, the reduce trees are out-trees of the
transposed network, whose optimum is the same because every node is balanced.
"""

from __future__ import annotations

import time
from dataclasses import replace
from fractions import Fraction
from typing import Any

from canopy.engine.forestcoll.edge_splitting import LogicalTopology, remove_switches
from canopy.engine.forestcoll.fewest_trees import (
    SearchStats,
    balanced_u,
    fewest_k_candidates,
    next_breakpoint,
    target_share,
)
from canopy.engine.forestcoll.optimum import Optimum, find_fixed_k, find_optimum, floored
from canopy.engine.forestcoll.symmetric_packing import pack_symmetric
from canopy.engine.forestcoll.tree_packing import Batch, Packing, greedy_packing, pack_trees
from canopy.engine.model.collectives import COLLECTIVES
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.limits import MAX_K, SOLVE_BYTES_PER_PAIR, check_memory, number_text
from canopy.engine.model.plan import add_path_load
from canopy.engine.model.progress import Progress, report
from canopy.engine.model.schedule import OptimumSummary, Schedule, Tree, TreeEdge
from canopy.engine.model.topology import Topology
from canopy.engine.model.verification import verify
from canopy.engine.network.indexed import Network

BUILD_PHASES = ("switch removal", "tree packing", "mapping back")


def transpose(net: Network) -> Network:
    """The same network with every link reversed."""
    return replace(net, capacity={(b, a): c for (a, b), c in net.capacity.items()})


def is_symmetric(net: Network) -> bool:
    return all(net.capacity.get((b, a)) == c for (a, b), c in net.capacity.items())


def map_back(net: Network, logical: LogicalTopology, batches: list[Batch]) -> list[Tree]:
    """Give every unit tree physical paths; a batch splits where its units' paths differ.

    Equal (edge, path) pairs are one shared :class:`TreeEdge`, so memory grows with the
    distinct routes, not with N·k·(N-1) tree edges.
    """
    names = net.names
    # A path (it starts at x and ends at y) names its tree edge. Route pools hand out the
    # same path objects again and again, so they are looked up by identity first (the
    # dict keeps each path alive, so its id is never reused), by value otherwise.
    by_id: dict[int, tuple[tuple[int, ...], TreeEdge]] = {}
    shared: dict[tuple[int, ...], TreeEdge] = {}

    def tree_edge(x: int, y: int, path: tuple[int, ...]) -> TreeEdge:
        known = by_id.get(id(path))
        if known is not None:
            return known[1]
        edge = shared.get(path)
        if edge is None:
            edge = TreeEdge(names[x], names[y], tuple(names[p] for p in path))
            shared[path] = edge
        by_id[id(path)] = (path, edge)
        return edge

    trees: list[Tree] = []
    per_root: dict[int, int] = {}
    order = {c: i for i, c in enumerate(net.compute)}
    routes = logical.routes
    for batch in sorted(batches, key=lambda b: order[b.root]):
        parts: list[tuple[int, list[TreeEdge]]] = [(batch.m, [])]
        m = batch.m
        for x, y in batch.edges:
            front = routes[(x, y)].segments[0]
            if front[1] > m:    # the common case: the first path has units to spare
                front[1] -= m
                known = by_id.get(id(front[0]))
                edge = known[1] if known is not None else tree_edge(x, y, front[0])
                for _, edges in parts:
                    edges.append(edge)
                continue
            pieces = routes[(x, y)].take(m)
            if len(pieces) == 1:
                edge = tree_edge(x, y, pieces[0][0])
                for _, edges in parts:
                    edges.append(edge)
                continue
            refined: list[tuple[int, list[TreeEdge]]] = []
            pi, left = 0, pieces[0][1]
            for count, edges in parts:
                while count:
                    used = min(count, left)
                    refined.append((used, [*edges, tree_edge(x, y, pieces[pi][0])]))
                    count -= used
                    left -= used
                    if left == 0 and pi + 1 < len(pieces):
                        pi += 1
                        left = pieces[pi][1]
            parts = refined
        for count, edges in parts:
            index = per_root.get(batch.root, 0)
            per_root[batch.root] = index + 1
            trees.append(Tree(names[batch.root], index, count, tuple(edges)))
    return trees


def build_forest(net: Network, caps: dict[tuple[int, int], int], k: int,
                 progress: Progress | None = None,
                 timings: dict[str, float] | None = None,
                 shallow: bool = False) -> list[Tree]:
    """Alg. 4 then Alg. 5 then map back: k unit trees per compute node within ``caps``.
    With ``shallow``, Alg. 5 grows the trees together (no flow-free packing first), so
    they come out lower (:func:`canopy.engine.forestcoll.tree_packing.pack_trees`'
    ``interleave``)."""
    timings = {} if timings is None else timings
    compute, demands = list(net.compute), dict.fromkeys(net.compute, k)

    def split(chords: bool, unproven: bool = True) -> LogicalTopology:
        start = time.perf_counter()
        report(progress, "switch removal", 0.0)
        logical = remove_switches(net, caps, k, progress, chords=chords, unproven=unproven)
        timings["switch removal"] = (timings.get("switch removal", 0)
                                     + time.perf_counter() - start)
        return logical

    def pack_without_flows(logical: LogicalTopology) -> Packing | None:
        if shallow:
            return None
        start = time.perf_counter()
        report(progress, "tree packing", 0.0)
        packing = (pack_symmetric(compute, logical.capacity, demands)
                   or greedy_packing(compute, logical.capacity, demands, net.groups,
                                     progress))
        timings["tree packing"] = timings.get("tree packing", 0) + time.perf_counter() - start
        return packing

    logical = split(chords=True)
    packing = pack_without_flows(logical)
    if packing is None and logical.chords:
        # Chords keep trees low, but where the flow-free packings cannot use them, rings
        # are split instead, which they pack on clusters of servers (Alg. 5 is slow there).
        logical = split(chords=False)
        packing = pack_without_flows(logical)
    if packing is None:
        if not logical.certified:   # Alg. 5 needs Thm 5's guarantee
            logical = split(chords=False, unproven=False)
        start = time.perf_counter()
        packing = pack_trees(net.n, compute, logical.capacity, demands, progress,
                             interleave=shallow)
        timings["tree packing"] = timings.get("tree packing", 0) + time.perf_counter() - start
    start = time.perf_counter()
    report(progress, "mapping back", 0.0)
    trees = map_back(net, logical, packing.batches)
    timings["mapping back"] = timings.get("mapping back", 0) + time.perf_counter() - start
    return trees


MAX_BREAKPOINTS = 16  # U values tried past the first before jumping to balanced_u


def tree_rate(net: Network, trees: list[Tree]) -> Fraction:
    """The bandwidth y every unit tree of ``trees`` can carry: min over links of b_e divided
    by the unit trees whose routes cross e (at least 1/U for trees built within
    floor(U·b_e), and more when the routes leave every link some slack)."""
    uses: dict[TreeEdge, int] = {}
    for tree in trees:
        for e in tree.edges:
            uses[e] = uses.get(e, 0) + tree.multiplicity
    loads: dict[tuple[str, str], int] = {}
    for e, count in uses.items():
        add_path_load(loads, e.path, count)
    index = {name: i for i, name in enumerate(net.names)}
    return min(net.capacity[index[a], index[b]] / load for (a, b), load in loads.items())


def build_fixed_k(net: Network, k: int, u: Fraction, u_max: Fraction | None,
                  inverse_x: Fraction, progress: Progress | None,
                  timings: dict[str, float], shallow: bool = False
                  ) -> tuple[Fraction, list[Tree]]:
    """(y, trees): k unit trees per compute node within floor(U·b_e), for the smallest U
    from ``u`` (at most ``u_max``) at which switch removal succeeds, and the bandwidth
    y >= 1/U each tree carries (:func:`tree_rate`).

    At U* of Thm 14 the floors may leave a switch unbalanced on a one-way network and
    Steiner out-trees (which branch inside switches, Thm 13) are then not always
    routable as compute-to-compute paths, which is what a runtime executes. Then the
    next breakpoints of U are tried, and after MAX_BREAKPOINTS of them
    :func:`canopy.engine.forestcoll.fewest_trees.balanced_u`, where capacities are proportional to
    b and
    Thm 7 guarantees success. Raise ScheduleError only if ``u_max`` stops the search.
    At U > U* the routes may leave slack on every link, so y is measured from the trees
    rather than taken as 1/U: the schedule then claims exactly what it achieves.
    """
    last = balanced_u(net, k, inverse_x)
    tries = 0
    while True:
        if u_max is not None and u > u_max:
            raise ScheduleError(f"no schedule with k = {k} within U = {u_max}.")
        try:
            trees = build_forest(net, floored(net, u), k, progress, timings, shallow)
            if u == k * inverse_x:  # k/U = x*: no schedule is faster, so y is exactly 1/U
                return 1 / u, trees
            return tree_rate(net, trees), trees
        except ScheduleError:
            if u >= last:
                raise
        tries += 1
        u = min(next_breakpoint(net, u) if tries <= MAX_BREAKPOINTS else last, last)


def _fixed_forests(nets: list[Network], opt: Optimum, k: int, progress: Progress | None,
                   timings: dict[str, float], shallow: bool = False
                   ) -> list[tuple[Fraction, list[Tree]]]:
    """(y, trees) per network with k fixed by the user (Thms 13-14)."""
    out = []
    for n in nets:
        out.append(build_fixed_k(n, k, find_fixed_k(n, k, opt).u_star, None, opt.inverse_x,
                                 progress, timings, shallow))
    return out


def _fewest_forests(nets: list[Network], opt: Optimum, tolerance: Fraction,
                    progress: Progress | None, timings: dict[str, float],
                    shallow: bool = False
                    ) -> tuple[int, list[tuple[Fraction, list[Tree]]], dict[str, Any]]:
    """The fewest k per node within ``tolerance`` percent of x* that builds on every
    network of the collective (:mod:`canopy.engine.forestcoll.fewest_trees`). Prop. 3's k always
    builds:
    its capacities b_e / y are exact."""
    stats = SearchStats()
    limit = opt.inverse_x / target_share(tolerance)   # U/k may not exceed this
    start = time.perf_counter()
    built_before = sum(timings.get(phase, 0.0) for phase in BUILD_PHASES)
    forests = None
    for k, u in fewest_k_candidates(nets[0], opt, tolerance, progress, stats):
        us = [u] + [find_fixed_k(n, k, opt).u_star for n in nets[1:]]
        if any(v > k * limit for v in us):
            stats.tried.append(k)
            continue
        try:
            forests = []
            for n, v in zip(nets, us, strict=True):
                forests.append(build_fixed_k(n, k, v, k * limit, opt.inverse_x, progress,
                                             timings, shallow))
            break
        except ScheduleError:
            stats.tried.append(k)
    assert forests is not None   # the search ends at Prop. 3's k, which always builds
    building = sum(timings.get(phase, 0.0) for phase in BUILD_PHASES)
    timings["fewest k"] = time.perf_counter() - start - (building - built_before)
    info = {"tolerance_percent": str(tolerance), "prop3_k": opt.k,
            "flow_tests": stats.flow_tests, "cut_rejected": stats.cut_rejected,
            "cuts": stats.cuts, "unbuildable_k": stats.tried}
    return k, forests, info


def solve(topology: Topology, collective: str = "allgather", k: int | None = None,
          progress: Progress | None = None, where: str = "",
          tolerance: Fraction | int | str = 0, shallow: bool = False) -> Schedule:
    """The verified schedule of ``topology`` for ``collective`` with the fewest trees per
    node that reaches the optimum (or comes within ``tolerance`` percent of it); with
    ``k``, the best schedule with exactly k trees per node (§4.5).

    Finds the optimum (ForestColl (arXiv:2402.06787) §4.2), removes switches by edge splitting
    (§4.3),
    packs k spanning out-trees per compute node (§4.4), maps their edges back to physical
    routes and verifies the result (:func:`canopy.engine.model.verification.verify`) before
    returning.

    Parameters
    ----------
    topology : Topology
        The network to schedule.
    collective : {"allgather", "reduce-scatter", "allreduce"}
        Reduce-scatter runs the trees backwards; allreduce is reduce-scatter then allgather.
    k : int, optional
        Trees per compute node. None (the default) takes the fewest trees per node that
        reach the optimum (:mod:`canopy.engine.forestcoll.fewest_trees`; at most Prop. 3's k, which
        stays
        in ``schedule.optimum.k``). Every k >= 1 has a schedule, one-way networks
        included (:func:`build_fixed_k`).
    progress : Progress, optional
        Called as ``progress(phase, fraction)``; it may raise
        :class:`canopy.engine.model.progress.Cancelled` to stop the work.
    where : str, optional
        Names the input (a file name) in error messages.
    tolerance : Fraction, int or str, optional
        With ``k`` None, the fewest trees per node whose algbw is within this many
        percent of the optimum (0 <= tolerance < 100).
    shallow : bool, optional
        Grow the trees together (:func:`build_forest`): lower trees, slower on large
        networks. ``schedule.extra["shallow"]`` says so.

    Returns
    -------
    Schedule
        The verified forest; ``schedule.algbw`` is the algbw it achieves (GB/s).

    Raises
    ------
    TopologyError
        The topology cannot be solved (one sentence naming the node or link).
    ScheduleError
        An unknown collective, a k below 1 or a tolerance outside [0, 100).

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
    if k is not None and not 1 <= k <= MAX_K:
        raise ScheduleError(f"k must be a whole number from 1 to {MAX_K:,} "
                            f"(docs/limits.md), not {number_text(k)}.")
    gpus = len(topology.compute_nodes())
    check_memory(f"a schedule of {gpus:,} GPUs", SOLVE_BYTES_PER_PAIR * gpus * (gpus - 1),
                 "canopy solve --bound-only gives the optimum and bottleneck without trees")
    try:
        tolerance = Fraction(str(tolerance))
        target_share(tolerance)
    except (ValueError, ZeroDivisionError):
        raise ScheduleError(f"the tolerance must be a percentage from 0 to below 100, not "
                            f"{tolerance}.") from None
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
    timings["optimum"] = time.perf_counter() - start
    report(progress, "optimum", 1.0)

    extra: dict[str, Any] = {}
    if k is None:
        k_used, forests, extra["k_search"] = _fewest_forests(nets, opt, tolerance, progress,
                                                             timings, shallow)
    else:
        k_used, forests = k, _fixed_forests(nets, opt, k, progress, timings, shallow)
    if shallow:
        extra["shallow"] = True
    y, trees = forests[-1]
    reduce_trees = forests[0][1] if len(forests) == 2 else None
    reduce_y = forests[0][0] if len(forests) == 2 else None

    summary = OptimumSummary(opt.inverse_x, tuple(opt.cut_names()), opt.cut_bandwidth,
                             opt.k, opt.tree_bandwidth)
    schedule = Schedule(collective, list(topology.compute_nodes()), k_used, y, trees, summary,
                        fixed_k=k is not None, reduce_trees=reduce_trees,
                        reduce_tree_bandwidth=reduce_y, timings=timings, extra=extra)
    report(progress, "verification", 0.0)
    start = time.perf_counter()
    verify(topology, schedule)
    timings["verification"] = time.perf_counter() - start
    timings["total"] = sum(timings.values())
    report(progress, "verification", 1.0)
    return schedule
