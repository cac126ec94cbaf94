"""The allreduce schedule of ForestColl's LP (6) (ForestColl (arXiv:2402.06787) App. E), built
exactly.

LP (6) (:mod:`canopy.engine.allreduce.lp`) splits every link into a reduce budget c^RE
and a broadcast budget c^BC and asks, per phase, a maxflow of Σ x_v from the source to
every compute node. Both phases then run at once (the reduction of one piece while an
earlier piece is broadcast), so the allreduce moves M in M / Σ x_v. This module turns
the LP's floating-point solution into a verified schedule:

1. Solve LP (6) with every rate x_v equal (App. E's perspective (ii) only; on every
   bundled sample and generator where the LP beats reduce-scatter + allgather this
   reaches the free LP's value, see ``bench/allreduce_lp.py``), as written with flow
   variables or, on large networks, by cut generation (:func:`solve_lp`). Equal rates
   keep Canopy's schedule model: k unit trees per node in each phase, which is what the
   plan, the simulator and the MSCCL lowering take.
2. Rationalize the budgets (HiGHS returns a basic solution, whose coordinates are
   rationals of small denominator) and clip them so c^RE + c^BC <= b exactly.
3. Per phase, the exact optimum of the budget network (Thm 1 on c^BC; on the transposed
   c^RE for the in-trees) gives x_BC* and x_RE*; x = min of both is exact and
   independent of the LP. The allreduce algbw is N·x.
4. Trees: k unit trees per node at y in each phase, with capacities floor(U·c) and U = k/x
   (Thm 13-14, the fewest k first, as :mod:`canopy.engine.forestcoll.fewest_trees` does), switches
   removed
   by edge splitting (§4.3: each phase's budgets are balanced at every switch, an LP
   constraint) and out-trees packed (§4.4). The reduce trees are out-trees of the
   transposed budget network, run against their arrows. Where every link joins two GPUs
   and is two-way with one bandwidth, N·k' undirected spanning trees for a smaller k'
   may reach the same x, each reducing up and broadcasting down
   (:mod:`canopy.engine.allreduce.spanning_trees`: on the 4x4 mesh k' = 1 against k = 3); then
   those run. Otherwise, where that k is above 1, integer tree counts per link for
   k = 1, 2, ... ROUNDED_MAX_K at the same x (:mod:`canopy.engine.allreduce.rounding`, a
   MILP) may pack fewer trees than the LP's own budgets (mi250-8plus8: k = 1 against 8,
   so every unit tree edge gets a connection of its own); the first that builds runs.
5. :func:`canopy.engine.model.verification.verify` checks the schedule exactly: both phases'
   loads added on every link within its bandwidth, every tree spanning, k trees per root.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from fractions import Fraction

from canopy.engine.allreduce.lp import AllreduceLP, cut_bound, lp_size, solve_allreduce_lp
from canopy.engine.allreduce.lp_cuts import solve_allreduce_cuts
from canopy.engine.allreduce.partition_bound import best_partition_bound
from canopy.engine.allreduce.rounding import MAX_VARIABLES, integer_budgets, milp_size
from canopy.engine.allreduce.spanning_trees import symmetric_trees
from canopy.engine.forestcoll.optimum import find_fixed_k, find_optimum, floored, rational_gcd
from canopy.engine.forestcoll.solve import build_forest
from canopy.engine.model.errors import CanopyError, ScheduleError
from canopy.engine.model.limits import LP_BYTES_PER_ENTRY, check_memory
from canopy.engine.model.plan import bandwidth_bound, check_coverage, schedule_plan
from canopy.engine.model.progress import Progress
from canopy.engine.model.schedule import OptimumSummary, Schedule, Tree
from canopy.engine.model.topology import Topology
from canopy.engine.model.verification import verify
from canopy.engine.network.indexed import Network

DENOMINATOR_LIMIT = 10**6   # budgets / largest bandwidth are rationalized to this
FEWEST_K_LIMIT = 64         # k tried one by one before the exact k = x / gcd
FLOWS_MAX_VARIABLES = 20_000  # larger LPs are solved by cut generation (allreduce_cuts)
LP_MODES = ("auto", "on", "off")
ROUNDED_MAX_K = 3           # integer budgets (allreduce_rounding) are tried up to this k


@dataclass(frozen=True)
class Budgets:
    """Exact link budgets per phase (GB/s), keyed by the Network's node indices."""

    reduce: dict[tuple[int, int], Fraction]
    broadcast: dict[tuple[int, int], Fraction]


def exact_budgets(net: Network, lp: AllreduceLP) -> Budgets:
    """The LP's budgets as Fractions with c^RE + c^BC <= b on every link, balanced at
    every switch (ScheduleError names the switch if rounding broke that)."""
    top = max(net.capacity.values())

    def rational(values: dict[tuple[int, int], float]) -> dict[tuple[int, int], Fraction]:
        out = {}
        for e, v in values.items():
            c = min(net.capacity[e], (Fraction(v) / top).limit_denominator(DENOMINATOR_LIMIT)
                    * top)
            if c > 0:
                out[e] = c
        return out

    reduce, broadcast = rational(lp.reduce_budget), rational(lp.broadcast_budget)
    for e, c in reduce.items():
        if e in broadcast and broadcast[e] + c > net.capacity[e]:
            broadcast[e] = net.capacity[e] - c
    for w in range(net.n):
        if net.is_compute(w):
            continue
        for phase, budget in (("reduce", reduce), ("broadcast", broadcast)):
            inflow = sum((c for (_, b), c in budget.items() if b == w), Fraction(0))
            outflow = sum((c for (a, _), c in budget.items() if a == w), Fraction(0))
            if inflow != outflow:
                raise ScheduleError(f"the allreduce LP's {phase} budget at switch "
                                    f"'{net.names[w]}' is not balanced after rounding.")
    return Budgets(reduce, broadcast)


def _phase_networks(net: Network, budgets: Budgets) -> tuple[Network, Network]:
    """(reduce, broadcast) budget networks; the reduce one transposed (in-trees become
    out-trees, as for reduce-scatter on one-way networks)."""
    reduce = replace(net, capacity={(b, a): c for (a, b), c in budgets.reduce.items()})
    return reduce, replace(net, capacity=dict(budgets.broadcast))


def _trees(nets: tuple[Network, Network], x: Fraction, progress: Progress | None,
           timings: dict[str, float]) -> tuple[int, Fraction, list[list[Tree]]]:
    """(k, y, [reduce trees, broadcast trees]) with y = x / k: the fewest k whose floored
    capacities floor(c / y) admit k trees per node in both phases and build."""
    exact_y = rational_gcd([x, *nets[0].capacity.values(), *nets[1].capacity.values()])
    exact_k = int(x / exact_y)
    for k in [*range(1, min(exact_k, FEWEST_K_LIMIT)), exact_k]:
        u = Fraction(k) / x
        if any(find_fixed_k(n, k).u_star > u for n in nets):
            continue
        try:
            forests = [build_forest(n, floored(n, u), k, progress, timings) for n in nets]
        except ScheduleError:
            if k == exact_k:
                raise
            continue
        return k, 1 / u, forests
    raise AssertionError("the exact k always builds")


def _rounded_trees(net: Network, x: Fraction, below_k: int, progress: Progress | None,
                   timings: dict[str, float]
                   ) -> tuple[int, Fraction, list[list[Tree]]] | None:
    """(k, y, [reduce trees, broadcast trees]) at rate ``x`` for the fewest k below
    ``below_k`` (at most ROUNDED_MAX_K) whose integer tree counts per link
    (:func:`canopy.engine.allreduce.rounding.integer_budgets`) build, or None. The counts
    become budgets n·y, whose floors at U = 1/y are the counts again (Thm 13)."""
    if milp_size(net) > MAX_VARIABLES:
        return None
    start = time.perf_counter()
    try:
        for k in range(1, min(below_k, ROUNDED_MAX_K + 1)):
            y = x / k
            found = integer_budgets(net, k, y)
            if found is None:
                continue
            budgets = Budgets(*({e: n * y for e, n in counts.items()} for counts in found))
            try:
                forests = [build_forest(n, floored(n, 1 / y), k, progress, timings)
                           for n in _phase_networks(net, budgets)]
            except ScheduleError:
                continue
            return k, y, forests
        return None
    finally:
        timings["integer budgets"] = time.perf_counter() - start


def lp_schedule(topology: Topology, lp: AllreduceLP | None = None,
                progress: Progress | None = None, where: str = "",
                spanning: bool = True) -> Schedule:
    """The verified allreduce schedule of LP (6) with equal rates (see the module doc).

    ``lp`` must come from :func:`solve_allreduce_lp` with ``equal_rates=True`` on this
    topology (solved here if None). ``spanning`` False keeps the per-phase trees of the
    LP's own budgets (step 4) even where spanning trees for both phases or integer
    budgets would need fewer.
    ``schedule.extra["allreduce_lp"]`` records the LP, the exact algbw and the gain over
    reduce-scatter + allgather.
    """
    start = time.perf_counter()
    net = Network.from_topology(topology, where)
    if lp is None:
        lp = solve_lp(net)
    timings = {"allreduce LP": time.perf_counter() - start}
    nets = _phase_networks(net, exact_budgets(net, lp))
    x = min(find_optimum(n).x for n in nets)
    k, y, (reduce_trees, trees) = _trees(nets, x, progress, timings)
    start_symmetric = time.perf_counter()
    symmetric = symmetric_trees(topology, x, k) if spanning else None
    if symmetric is not None:      # fewer trees at the same rate, both phases on each
        k, y, trees = symmetric
        reduce_trees = trees
    timings["spanning trees"] = time.perf_counter() - start_symmetric
    fewer = _rounded_trees(net, x, k, progress, timings) if spanning and k > 1 else None
    if fewer is not None:
        k, y, (reduce_trees, trees) = fewer
    opt = find_optimum(net)
    summary = OptimumSummary(opt.inverse_x, tuple(opt.cut_names()), opt.cut_bandwidth,
                             opt.k, opt.tree_bandwidth)
    schedule = Schedule("allreduce", list(topology.compute_nodes()), k, y, trees, summary,
                        reduce_trees=reduce_trees, reduce_tree_bandwidth=y, timings=timings,
                        split_budgets=True)
    algbw = verify(topology, schedule)
    plan = schedule_plan(schedule)
    check_coverage(plan)
    bound, _ = bandwidth_bound(plan, topology.capacities())
    if bound < algbw:
        raise ScheduleError(f"internal error: the allreduce LP schedule's plan reaches "
                            f"{float(bound):.4f} GB/s, below its verified {float(algbw):.4f}.")
    if abs(float(algbw) - lp.value) > lp.margin * lp.value:
        raise ScheduleError(f"the rounded allreduce LP budgets reach {float(algbw):.6f} GB/s, "
                            f"not the LP's {lp.value:.6f} GB/s.")
    info = lp.to_dict()
    info.update(used=False, schedule_algbw_exact=str(algbw),
                gain_exact_percent=str((algbw / lp.rs_ag - 1) * 100),
                rates="equal", budgets_rationalized_to=f"1/{DENOMINATOR_LIMIT} of the "
                "largest bandwidth",
                trees=("in-trees and out-trees per phase in integer link budgets (MILP)"
                       if fewer is not None else
                       "one spanning tree per unit tree for both phases (two-way links)"
                       if symmetric is not None else "in-trees and out-trees per phase"))
    schedule.extra["allreduce_lp"] = info
    timings["total"] = time.perf_counter() - start
    return schedule


def solve_lp(net: Network, time_limit: float | None = None) -> AllreduceLP:
    """LP (6) with equal rates, as written (flow variables) up to FLOWS_MAX_VARIABLES and
    by cut generation beyond (:mod:`canopy.engine.allreduce.lp_cuts`; switch-heavy networks
    need many cuts, tori and meshes few)."""
    check_memory(f"the allreduce LP of {len(net.compute):,} GPUs",
                 LP_BYTES_PER_ENTRY * lp_entries(net))
    if lp_size(net) <= FLOWS_MAX_VARIABLES:
        return solve_allreduce_lp(net, equal_rates=True, time_limit=time_limit)
    return solve_allreduce_cuts(net, equal_rates=True, time_limit=time_limit)


def lp_entries(net: Network) -> int:
    """Constraint-matrix entries :func:`solve_lp` starts from, doubled for the cuts
    later rounds add: with flow variables, about three per variable; by cut generation,
    the first round's cuts V - {t} per phase and compute node t (each with every other
    compute node's rate and t's incoming or outgoing link budgets)."""
    if lp_size(net) <= FLOWS_MAX_VARIABLES:
        return 3 * lp_size(net)
    n_c = len(net.compute)
    return 2 * 2 * n_c * (n_c + 2 * len(net.capacity) // max(1, net.n))


def choose_allreduce(topology: Topology, schedule: Schedule, mode: str = "auto",
                     progress: Progress | None = None, where: str = "",
                     spanning: bool = True) -> Schedule:
    """The allreduce schedule to run: ``schedule`` (reduce-scatter + allgather, §4.6) or
    LP (6)'s schedule where that is faster; ``extra["allreduce_lp"]`` says which and why.

    ``mode`` "auto" solves the LP (:func:`solve_lp`, to its optimum) unless an exact bound
    already equals RS + AG, so that nothing can beat it: the cut bound, or a partition
    bound (:mod:`canopy.engine.allreduce.partition_bound`); "on" solves it even then;
    "off" never does. ``spanning`` is :func:`lp_schedule`'s.
    """
    if mode not in LP_MODES:
        raise ScheduleError(f"unknown allreduce LP mode '{mode}'; use {', '.join(LP_MODES)}.")
    if schedule.collective != "allreduce" or mode == "off":
        return schedule
    start = time.perf_counter()
    net = Network.from_topology(topology, where)
    rs_ag = schedule.optimal_algbw
    bound = cut_bound(net)
    size = lp_size(net)
    info: dict[str, object] = {"used": False, "rs_ag_algbw_exact": str(rs_ag),
                               "cut_bound_exact": str(bound), "variables": size}
    partition = best_partition_bound(net, rs_ag) if bound != rs_ag else None
    if partition is not None:
        info["partition_bound_exact"] = str(partition.value)
    schedule.timings["allreduce bound"] = time.perf_counter() - start
    if bound == rs_ag and mode == "auto":
        info["note"] = ("not solved: the cut bound equals reduce-scatter + allgather, so no "
                        "allreduce is faster")
    elif partition is not None and partition.value == rs_ag and mode == "auto":
        info["note"] = (f"not solved: {partition.describe()}, which equals reduce-scatter + "
                        "allgather, so no allreduce is faster")
    else:
        chosen = _lp_choice(topology, schedule, info, progress, where, spanning)
        if chosen is not None:
            return chosen
    schedule.extra["allreduce_lp"] = info
    return schedule


def _lp_choice(topology: Topology, schedule: Schedule, info: dict[str, object],
               progress: Progress | None, where: str, spanning: bool) -> Schedule | None:
    """LP (6)'s schedule where it beats reduce-scatter + allgather, else None with
    ``info`` saying why."""
    start = time.perf_counter()
    try:
        lp = solve_lp(Network.from_topology(topology, where))
    except CanopyError as exc:
        info["note"] = f"not solved: {exc}"
        return None
    finally:
        schedule.timings["allreduce LP"] = time.perf_counter() - start
    info.update(lp.to_dict())
    if not lp.beats_rs_ag:
        info["note"] = "equals reduce-scatter + allgather"
        return None
    try:
        chosen = lp_schedule(topology, lp, progress, where, spanning)
    except ScheduleError as exc:
        info["note"] = f"beats reduce-scatter + allgather but not used: {exc}"
        return None
    chosen.extra["allreduce_lp"].update(used=True, note=(
        "used: reduction and broadcast run at once on split link budgets"))
    chosen.timings["reduce-scatter + allgather"] = schedule.timings.get("total", 0.0)
    return chosen


def describe_choice(schedule: Schedule) -> str:
    """One line: which allreduce schedule runs and why (empty if the LP was not asked)."""
    info = schedule.extra.get("allreduce_lp")
    if not isinstance(info, dict):
        return ""
    rs_ag = Fraction(str(info["rs_ag_algbw_exact"]))
    if info.get("used"):
        gain = (schedule.algbw / rs_ag - 1) * 100
        return (f"ForestColl's allreduce LP (App. E, HiGHS, tolerance "
                f"{info['feasibility_tolerance']:g}): {float(schedule.algbw):.2f} GB/s, "
                f"{float(gain):.2f} % above reduce-scatter + allgather ({float(rs_ag):.2f} "
                "GB/s); reduction and broadcast run at once on split link budgets")
    return (f"reduce-scatter then allgather on the trees ({float(rs_ag):.2f} GB/s); "
            f"ForestColl's allreduce LP (App. E), which runs both at once, "
            f"{_lp_words(str(info['note']))}")


def _lp_words(note: str) -> str:
    """The LP's note as the end of a sentence about it ("... LP (App. E), which ...")."""
    if note == "equals reduce-scatter + allgather":
        return "finds nothing faster"
    if note.startswith("not solved: "):
        return "was not solved: " + note.removeprefix("not solved: ")
    return note
