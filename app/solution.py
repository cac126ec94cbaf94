"""Everything the editor shows about one solve, computed off the GUI thread.

:func:`compute_solution` runs in the background job: the verified schedule
(:func:`canopy.engine.forestcoll.solve.solve`), the load of every physical link
(:func:`canopy.engine.model.link_load.link_loads`), the algbw with k fixed to 1…10
(ForestColl (arXiv:2402.06787)
§4.5, Thms 13-15), the modelled collective time from 1 KiB to 4 GiB
(:mod:`canopy.engine.comparison.plot_series`) and the schedule's executed time in the execution
model
(:func:`canopy.engine.comparison.plot_series.executed_times`). The GUI thread then only draws. No
Qt here.
"""

from __future__ import annotations

import pickle
import time
from array import array
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from canopy.engine.comparison.plot_series import (
    GB,
    collective_time_us,
    executed_times,
    message_sizes,
)
from canopy.engine.deploy.best_schedule import best_schedule
from canopy.engine.execution.compiler import sends_per_piece
from canopy.engine.forestcoll.optimum import Optimum, find_fixed_k, optimum
from canopy.engine.model.collectives import collective_algbw
from canopy.engine.model.limits import simulable
from canopy.engine.model.link_load import LinkLoad, link_loads
from canopy.engine.model.plan import schedule_plan
from canopy.engine.model.progress import Progress
from canopy.engine.model.schedule import OptimumSummary, Schedule, Tree
from canopy.engine.model.topology import Topology
from canopy.engine.network.indexed import Network

CURVE_MAX_K = 10
EDITOR_SENDS_LIMIT = 5_000
"""Largest loop iteration (sends) whose executed time the editor simulates with a solve: a
64-GPU cluster's iteration (4,032 sends) fits; a 128-GPU one (16,256) would make every solve
wait for a long simulation."""
Hop = tuple[str, str]


@dataclass(frozen=True)
class ShownTree:
    """A tree as the Trees dock lists it: which phase runs it and in which direction."""

    tree: Tree
    phase: str          # "allgather", "reduce-scatter", "reduce", "broadcast", "both phases"
    reverse: bool       # data runs against the tree's arrows (reduce, §4.6)
    bandwidth: Fraction  # multiplicity · y: the bandwidth all its unit trees move together
    height: int         # tree.height, computed once off the GUI thread

    @property
    def name(self) -> str:
        return f"{self.tree.root} #{self.tree.index}"


def shown_trees(schedule: Schedule) -> list[ShownTree]:
    """The schedule's trees in listing order, each with its phase and data direction.

    Reduce-scatter runs the out-trees against their arrows; allreduce runs the same trees
    both ways unless the network is one-way somewhere, in which case ``reduce_trees``
    carry the reduce phase (ForestColl (arXiv:2402.06787) §4.6).
    """
    y = schedule.tree_bandwidth

    def shown(trees: list[Tree], phase: str, reverse: bool, y: Fraction) -> list[ShownTree]:
        return [ShownTree(t, phase, reverse, t.multiplicity * y, t.height) for t in trees]

    if schedule.collective == "allgather":
        return shown(schedule.trees, "allgather", False, y)
    if schedule.collective == "reduce-scatter":
        return shown(schedule.trees, "reduce-scatter", True, y)
    if schedule.reduce_trees is None:
        return shown(schedule.trees, "both phases", False, y)
    reduce_y = schedule.reduce_tree_bandwidth or y
    return (shown(schedule.reduce_trees, "reduce", True, reduce_y)
            + shown(schedule.trees, "broadcast", False, y))


def hop_orders(shown: ShownTree) -> dict[Hop, list[int]]:
    """Each directed physical link the tree's data crosses, with its hop numbers.

    A hop's number counts the physical hops from the root along the tree's routes (1 for
    the root's first link); in a reduce phase data runs the other way, so the numbers
    count from the deepest leaf instead.
    """
    tree = shown.tree
    reach = {tree.root: 0}
    numbers: dict[Hop, set[int]] = {}
    for edge in tree.edges:
        start = reach[edge.src]
        for i, hop in enumerate(zip(edge.path, edge.path[1:], strict=False)):
            numbers.setdefault(hop, set()).add(start + i + 1)
        reach[edge.dst] = start + len(edge.path) - 1
    if not shown.reverse:
        return {hop: sorted(ns) for hop, ns in numbers.items()}
    last = max(reach.values())
    return {(b, a): sorted(last - n + 1 for n in ns) for (a, b), ns in numbers.items()}


@dataclass
class Solution:
    """One solve's schedule and everything derived from it for display."""

    topology: Topology                    # the snapshot that was solved
    signature: tuple[Any, ...]
    schedule: Schedule
    trees: list[ShownTree]
    loads: dict[Hop, LinkLoad]
    curve: list[tuple[int, Fraction]]     # (k, best algbw with k fixed)
    sizes: list[int]                      # message sizes in bytes
    bandwidth_us: list[Fraction]          # size / algbw
    latency_us: Fraction | None           # added by the deepest route, when latencies exist
    seconds: float                        # wall time of the whole background job
    executed_us: list[tuple[int, Fraction]] = field(default_factory=list)  # simulated
    executed_note: str = ""               # why executed_us is empty, when it is
    # the pickled schedule whose executed times a job of their own is simulating (the
    # editor shows the results first: :func:`compute_solution` with ``executed=False``)
    schedule_to_simulate: bytes = b""

    @property
    def collective(self) -> str:
        return self.schedule.collective

    def times_us(self) -> list[Fraction]:
        """Modelled collective time per message size (bandwidth bound plus latency)."""
        extra = self.latency_us or Fraction(0)
        return [t + extra for t in self.bandwidth_us]


@dataclass(frozen=True)
class Bound:
    """The optimum alone (no trees): what a bound-only job returns, shown while the
    schedule is still being built (ForestColl (arXiv:2402.06787) §3.1 eq. (1), §4.2 Prop. 3)."""

    topology: Topology
    signature: tuple[Any, ...]
    collective: str
    compute_nodes: int
    optimum: OptimumSummary
    seconds: float

    @property
    def optimum_algbw(self) -> Fraction:
        return collective_algbw(self.collective, self.compute_nodes, self.optimum.x)


def compute_bound(topology: Topology, collective: str = "allgather",
                  progress: Progress | None = None) -> Bound:
    """The optimum, the bottleneck cut, Prop. 3's k and y of ``topology``: no trees."""
    start = time.perf_counter()
    if progress is not None:
        progress("optimum", 0.0)
    opt = optimum(topology)
    summary = OptimumSummary(opt.inverse_x, tuple(opt.cut_names()), opt.cut_bandwidth,
                             opt.k, opt.tree_bandwidth)
    return Bound(topology, topology.fingerprint(), collective, len(opt.network.compute),
                 summary, time.perf_counter() - start)


def fixed_k_curve(topology: Topology, schedule: Schedule, progress: Progress | None = None,
                  max_k: int = CURVE_MAX_K) -> list[tuple[int, Fraction]]:
    """Best algbw with k = 1..max_k trees per node (§4.5), reusing the solve's 1/x*."""
    net = Network.from_topology(topology)
    index = {name: i for i, name in enumerate(net.names)}
    summary = schedule.optimum
    known = Optimum(net, summary.inverse_x,
                    tuple(index[name] for name in summary.bottleneck_cut), rounds=0)
    curve = []
    for k in range(1, max_k + 1):
        if progress is not None:
            progress("fixed-k curve", (k - 1) / max_k)
        curve.append((k, find_fixed_k(net, k, known).algbw(schedule.collective)))
    return curve


def _compact(loads: dict[Hop, LinkLoad]) -> dict[Hop, LinkLoad]:
    """The loads with each link's tree positions in an :class:`array.array` of ints
    instead of a list.

    At 1,024 GPUs these lists hold millions of tree positions: as Python ints they are much
    of the solution's pickle and of its decoding, all of it holding the interpreter lock the
    editor's event loop needs, and every full pass of the garbage collector walked them. An
    array pickles as one block of bytes and is no container the collector looks into.
    Reading them (``load.trees[:12]``, ``len``) is unchanged.
    """
    return {hop: replace(load, trees=array("i", load.trees)) for hop, load in loads.items()}


def compute_solution(topology: Topology, collective: str = "allgather", k: int | None = None,
                     progress: Progress | None = None, executed: bool = True) -> Solution:
    """Solve ``topology`` and derive loads, the fixed-k curve and the time model.

    The executed times (the schedule simulated at several sizes) take far longer than
    the rest at 32-64 GPUs; with ``executed=False`` they are left out and the solution
    carries its schedule pickled (``schedule_to_simulate``) for :func:`executed_of` in a
    job of its own, so the editor shows the results as soon as the schedule is built."""
    start = time.perf_counter()
    schedule = best_schedule(topology, collective, k=k, progress=progress)
    if progress is not None:
        progress("link load", 0.0)
    loads = _compact(link_loads(schedule, topology))
    curve = fixed_k_curve(topology, schedule, progress)
    sizes = message_sizes()
    bandwidth_us = [Fraction(size) * 10**6 / (schedule.algbw * GB) for size in sizes]
    latency_us = collective_time_us(schedule, topology, 0) if topology.latencies() else None
    times: list[tuple[int, Fraction]] = []
    note = ""
    pending = b""
    sends = sends_per_piece(schedule_plan(schedule), frozenset(topology.switch_nodes()))
    if not simulable(topology):      # the simulator works in floating point
        note = "bandwidths past floating point"
    elif sends > EDITOR_SENDS_LIMIT:
        note = (f"{sends:,} sends per iteration (limit {EDITOR_SENDS_LIMIT:,}); "
                "Compare runs it")
    elif not executed:
        pending = pickle.dumps(schedule, pickle.HIGHEST_PROTOCOL)
    else:
        times = executed_of_schedule(schedule, topology, progress)
    return Solution(topology, topology.fingerprint(), schedule, shown_trees(schedule), loads,
                    curve, sizes, bandwidth_us, latency_us, time.perf_counter() - start,
                    times, note, pending)


def executed_of_schedule(schedule: Schedule, topology: Topology,
                         progress: Progress | None = None) -> list[tuple[int, Fraction]]:
    """The executed times the editor plots: the schedule simulated at the plot's sizes."""
    if progress is not None:
        progress("executed time", 0.0)
    return executed_times(schedule, topology, check=None if progress is None
                          else lambda: progress("executed time", 0.5))
