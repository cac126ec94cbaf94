"""Data behind the editor's plots: algbw against fixed k, and time against message size.

* ``fixed_k_curve`` gives, for k = 1..K, the best algbw with k trees per node (ForestColl,
  arXiv:2402.06787, §4.5, Thms 13-15) next to the optimum; it needs only the U* search, not
  the trees.
* ``collective_time_us`` is the bandwidth bound M / algbw (§3.1 eq. (1)) plus, where
  links carry latencies, the latency of the deepest root-to-leaf route of any tree
  (twice for allreduce, whose reduce and broadcast phases run one after the other).
* ``executed_times`` is what the schedule takes when run the way the MSCCL runtime
  runs it (:mod:`canopy.engine.execution.simulate`, best pipeline depth per size).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

from canopy.engine.execution.simulate import fastest
from canopy.engine.forestcoll.optimum import Optimum, find_fixed_k, find_optimum
from canopy.engine.model.plan import schedule_plan
from canopy.engine.model.schedule import Schedule, Tree
from canopy.engine.model.topology import Topology
from canopy.engine.network.indexed import Network

GB = 10**9
EXECUTED_SIZES = tuple(2**e for e in (10, 16, 20, 24, 28, 30))


def fixed_k_curve(topology: Topology, max_k: int = 10, collective: str = "allgather",
                  optimum: Optimum | None = None) -> list[tuple[int, Fraction]]:
    """[(k, best algbw with k trees per node)] for k = 1..max_k (exact)."""
    net = Network.from_topology(topology)
    opt = optimum or find_optimum(net)
    return [(k, find_fixed_k(net, k, opt).algbw(collective)) for k in range(1, max_k + 1)]


def tree_latency_us(tree: Tree, latency: dict[tuple[str, str], Fraction],
                    reverse: bool = False) -> Fraction:
    """Latency of the deepest root-to-leaf route of ``tree`` through its physical paths
    (with ``reverse``, of the reduce phase that runs every hop the other way)."""
    arrive = {tree.root: Fraction(0)}
    for e in tree.edges:
        hops = [(b, a) if reverse else (a, b) for a, b in zip(e.path, e.path[1:], strict=False)]
        arrive[e.dst] = arrive[e.src] + sum((latency.get(h, Fraction(0)) for h in hops),
                                            Fraction(0))
    return max(arrive.values())


def collective_time_us(schedule: Schedule, topology: Topology, size_bytes: int) -> Fraction:
    """Modelled time (µs) of the collective on ``size_bytes`` of data."""
    latency = topology.latencies()
    bandwidth_us = Fraction(size_bytes) / (schedule.algbw * GB) * 10**6
    if not latency:
        return bandwidth_us
    reduce_trees = schedule.reduce_trees or schedule.trees
    phases = {"allgather": [(schedule.trees, False)],
              "reduce-scatter": [(reduce_trees, True)],
              "allreduce": [(reduce_trees, True), (schedule.trees, False)]}[schedule.collective]
    return bandwidth_us + sum((max(tree_latency_us(t, latency, rev) for t in trees)
                               for trees, rev in phases), Fraction(0))


def message_sizes(smallest: int = 1024, largest: int = 4 * 1024**3) -> list[int]:
    """Powers of two from 1 KiB to 4 GiB: the x axis of the time plot."""
    sizes = []
    size = smallest
    while size <= largest:
        sizes.append(size)
        size *= 2
    return sizes


def executed_times(schedule: Schedule, topology: Topology,
                   sizes: tuple[int, ...] = EXECUTED_SIZES,
                   check: Callable[[], None] | None = None) -> list[tuple[int, Fraction]]:
    """[(size in bytes, simulated time in µs)] of the schedule at ``sizes`` (ascending;
    each size's depth search starts from the previous size's best depth). ``check`` is
    passed to the simulator and may raise to stop."""
    plan = schedule_plan(schedule)
    depth = 1
    times = []
    for size in sorted(sizes):
        sim = fastest(topology, plan, size, start=depth, check=check)
        depth = sim.pieces
        times.append((size, sim.time_us))
    return times
