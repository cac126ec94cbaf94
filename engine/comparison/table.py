"""ForestColl against today's schedules on one topology, with one cost model for all.

Every algorithm's schedule becomes a :class:`~canopy.engine.model.plan.CollectivePlan`;
its bandwidth bound comes from the congestion of the physical links
(:func:`~canopy.engine.model.plan.bandwidth_bound`; TACOS synthesizes a schedule per size: the
best of their bounds, so no executed time beats its row's bound) and its time at each
message size from the α-β simulator (:func:`canopy.engine.execution.simulate.fastest`, which also
picks the pipeline depth).
ForestColl's plan is timed with the connections its MSCCL export takes within the
runtime's limits (:func:`canopy.engine.deploy.runtime_choice.runtime_schedule`: the layout,
or a schedule with fewer trees where sharing connections would cost more), so compare and
``canopy check-xml`` time the same program; the row's ``details["connections"]`` says which.
Used by ``canopy compare`` and the editor's Compare dock.

Defaults keep this fast on the samples: TACOS tries 1, 2 and 4 chunks per node, keeps the
best of 4 seeds for each (fewer on large topologies,
:func:`canopy.engine.baselines.tacos.auto_seeds`) and unwinds switches into rings; the ring
search tries up to 32 rings; the simulator (switches cut-through by default) unrolls at most
MAX_MESSAGES sends of a loop and extrapolates the rest from its period, and Blink's and
TACOS's loops too short next to their pipeline for that (Blink's 256 iterations over 42
stages at 64 GPUs; :func:`_saturates`) from the busiest link's time per iteration once short
runs show it saturated (``saturated``,
:func:`canopy.engine.execution.extrapolation.loop_time`: within 0.05 % of the full runs at
8 x DGX A100 (tests), in fewer sends). ForestColl's row runs such loops in full, as its
layouts were chosen and as ``canopy check-xml`` times its XML.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from canopy.engine.allreduce.lp_schedule import describe_choice
from canopy.engine.baselines.blink import blink_baseline
from canopy.engine.baselines.lr_rings import lr_baseline
from canopy.engine.baselines.ring import ring_baseline
from canopy.engine.baselines.shortfall import SHORTFALL, shortfall_line
from canopy.engine.baselines.tacos import DEFAULT_CHUNKS, tacos_baseline
from canopy.engine.deploy.best_schedule import best_schedule
from canopy.engine.deploy.runtime_choice import RuntimeChoice, runtime_schedule
from canopy.engine.execution.compiler import pipeline_stages
from canopy.engine.execution.program import (
    CUT_THROUGH,
    DEFAULT_LATENCY_US,
    SWITCH_MODES,
    SimulationResult,
    algbw_gbps,
)
from canopy.engine.execution.simulate import MAX_PIECES, REPORT_SIZES, fastest, plan_bound
from canopy.engine.generators.gpu_models import gpu_of
from canopy.engine.model.collectives import COLLECTIVES
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.limits import (
    COMPARE_BASE_BYTES,
    COMPARE_BYTES_PER_GPU,
    SOLVE_BYTES_PER_PAIR,
    check_memory,
    check_simulable,
)
from canopy.engine.model.plan import (
    ALGORITHMS,
    BaselineResult,
    CollectivePlan,
    bandwidth_bound,
    schedule_plan,
)
from canopy.engine.model.progress import Progress
from canopy.engine.model.topology import Topology
from canopy.engine.msccl.threadblocks import MscclLimitError, MscclLimits
from canopy.engine.network.indexed import Network

FORMAT = "canopy-comparison"
VERSION = 1

TICK_SECONDS = 0.1     # most time between progress calls while a row is being built
DEEPEST = 4 * MAX_PIECES   # deepest pipeline a baseline held back by its fill is timed at
SLOW_FROM = 512        # compute nodes from which the baselines in SLOW are left out unless forced
SLOW = {
    "tacos": "its randomised greedy synthesis matches every chunk at every node, N² "
             "deliveries per chunk count and seed (0.9 CPU s each at 512 GPUs compiled, "
             "more in Python, and a dozen of them), and its timetable of N² sends per "
             "piece cannot run folded",
    "blink": "choosing its root takes N - 1 maxflows on the whole network for every root "
             "it tries (one per class of interchangeable GPUs), minutes from 512 GPUs",
}
LAYOUT_PHASE = "forestcoll layout"   # the progress phase of ForestColl's layout choice
# (its fraction is the choice's own, runtime_schedule's progress; the rows' is the table's)
LAYOUT_OMITTED = ("runs without the MSCCL runtime's thread-block limit: at {} GPUs choosing "
                  "the connections it exports simulates every candidate layout unfolded "
                  "(minutes); canopy compare --algorithms forestcoll,ring,... chooses them")


class _Reporter:
    """Progress for one comparison: at every row and message size, and in between (from
    the solver, the ring search and the simulator) at most every TICK_SECONDS with the
    last phase and fraction, so that a ``progress`` that raises Cancelled stops the work
    within a fraction of a second."""

    def __init__(self, progress: Progress | None) -> None:
        self.progress = progress
        self.phase = ""
        self.fraction = 0.0
        self.last = time.perf_counter()

    def step(self, phase: str, fraction: float) -> None:
        self.phase, self.fraction = phase, fraction
        if self.progress is not None:
            self.last = time.perf_counter()
            self.progress(phase, fraction)

    def tick(self, *_: object) -> None:
        """Repeat the last step if TICK_SECONDS have passed (any arguments are ignored)."""
        if self.progress is not None and time.perf_counter() - self.last >= TICK_SECONDS:
            self.step(self.phase, self.fraction)


@dataclass
class ComparisonRow:
    """One algorithm: its bound, simulated time per message size, or why it does not apply."""

    algorithm: str
    algbw: Fraction | None
    times_us: dict[int, Fraction] = field(default_factory=dict)
    pieces: dict[int, int] = field(default_factory=dict)
    stages: dict[int, int] = field(default_factory=dict)   # sends a piece goes through
    # per size the bound (GB/s) and busiest link of the plan run there (TACOS: its own)
    bounds: dict[int, tuple[Fraction, tuple[str, str]]] = field(default_factory=dict)
    reason: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    omitted: bool = False       # left out for time (SLOW), ``reason`` says how to force it

    def algbw_at(self, size: int) -> Fraction:
        """Simulated nccl-tests algbw (GB/s) at ``size`` bytes."""
        return algbw_gbps(size, self.times_us[size])


@dataclass
class Comparison:
    """All rows for one topology and collective; ForestColl's row first."""

    topology: str
    collective: str
    compute_nodes: int
    sizes: tuple[int, ...]
    rows: list[ComparisonRow]
    default_latency: Fraction
    switch_mode: str = CUT_THROUGH

    def row(self, algorithm: str) -> ComparisonRow | None:
        return next((r for r in self.rows if r.algorithm == algorithm), None)

    def ratio(self, row: ComparisonRow, size: int | None = None) -> Fraction | None:
        """How many times ForestColl's algbw is this row's (bound, or at ``size``)."""
        fc = self.row("forestcoll")
        if fc is None or row.reason is not None or fc.reason is not None:
            return None
        if size is None:
            return None if fc.algbw is None or row.algbw is None else fc.algbw / row.algbw
        return row.times_us[size] / fc.times_us[size]

    def _fc_time(self, size: int) -> Fraction:
        fc = self.row("forestcoll")
        if fc is None:
            raise ScheduleError("internal error: the comparison has no ForestColl row.")
        return fc.times_us[size]

    def notes(self) -> list[str]:
        """One line per baseline that runs faster than ForestColl at some size, and one
        per baseline below SHORTFALL of its own bound at the largest size, saying why."""
        fc = self.row("forestcoll")
        if fc is None or fc.reason is not None:
            return []
        return self._faster_notes(fc) + self.shortfalls()

    def shortfalls(self) -> list[str]:
        """Why each baseline runs below SHORTFALL of its own bound at the largest size
        (:func:`canopy.engine.baselines.shortfall.shortfall_line`)."""
        lines = []
        for row in self.rows:
            if row.algorithm == "forestcoll" or row.reason is not None or not row.times_us \
                    or not row.algbw:
                continue
            size = max(row.times_us)
            line = shortfall_line(row.algorithm, row.algbw_at(size) / row.algbw,
                                  _size_text(size), row.details, row.stages.get(size, 0),
                                  row.pieces.get(size, 1), row.algbw, row.bounds.get(size),
                                  size)
            if line is not None:
                lines.append(line)
        return lines

    def _faster_notes(self, fc: ComparisonRow) -> list[str]:
        lines = []
        for row in self.rows:
            if row is fc or row.reason is not None:
                continue
            faster = [s for s in self.sizes if s in row.times_us and s in fc.times_us
                      and row.times_us[s] < fc.times_us[s]]
            if not faster:
                continue
            s = faster[0]
            where = ", ".join(_size_text(x) for x in faster)
            if row.stages.get(s, 0) < fc.stages.get(s, 0):
                why = (f"latency: its data crosses {row.stages[s]} hops in a row there, "
                       f"ForestColl's deepest tree {fc.stages[s]}")
            elif row.pieces.get(s, 1) < fc.pieces.get(s, 1):
                why = (f"fewer, larger messages ({row.pieces[s]} pieces against "
                       f"ForestColl's {fc.pieces[s]})")
            elif fc.algbw is not None:
                why = (f"ForestColl's pipeline reaches only "
                       f"{float(fc.algbw_at(s) / fc.algbw):.0%} of its bound there")
            else:
                why = "its pipeline runs faster there"
            lines.append(f"{row.algorithm} is faster than ForestColl at {where}: {why}.")
        return lines

    def to_json(self) -> dict[str, Any]:
        """The canopy-comparison v1 document."""
        rows = []
        for r in self.rows:
            ratio = self.ratio(r)
            rows.append({
                "algorithm": r.algorithm,
                "algbw": None if r.algbw is None else round(float(r.algbw), 6),
                "algbw_exact": None if r.algbw is None else str(r.algbw),
                "time_us": {str(s): round(float(t), 6) for s, t in r.times_us.items()},
                "algbw_at": {str(s): round(float(r.algbw_at(s)), 6) for s in r.times_us},
                "pipeline_chunks": {str(s): p for s, p in r.pieces.items()},
                "pipeline_stages": {str(s): p for s, p in r.stages.items()},
                "bound_at": {str(s): round(float(b), 6) for s, (b, _) in r.bounds.items()},
                "ratio_to_forestcoll": None if ratio is None else round(float(ratio), 6),
                "ratio_to_forestcoll_at": {} if ratio is None else
                {str(s): round(float(r.times_us[s] / self._fc_time(s)), 6)
                 for s in r.times_us},
                "not_applicable": r.reason,
                "omitted": r.omitted,
                "details": _plain(r.details),
            })
        return {"format": FORMAT, "version": VERSION, "collective": self.collective,
                "topology": self.topology, "compute_nodes": self.compute_nodes,
                "sizes": list(self.sizes),
                "default_latency_us": float(self.default_latency),
                "switch_mode": self.switch_mode,
                "units": {"algbw": "GB/s (1e9 bytes/s), nccl-tests algbw = size / time",
                          "time_us": "microseconds", "sizes": "bytes"},
                "notes": self.notes(),
                "rows": rows}


def _size_text(size: int) -> str:
    for shift, unit in ((30, "G"), (20, "M"), (10, "K")):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift}{unit}"
    return f"{size} B"


def _plain(value: Any) -> Any:
    if isinstance(value, Fraction):
        return float(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _plans_by_size(choice: RuntimeChoice) -> Callable[[Fraction], CollectivePlan]:
    """The laid-out plan a message of each size runs: the MSCCL runtime loads an XML per
    size range where :func:`runtime_schedule` chose one (``choice.below``)."""
    return lambda size: choice.at(size).plan


def _saturates(algorithm: str, collective: str) -> bool:
    """Whether ``algorithm``'s row times its loops with the saturation rule
    (:func:`canopy.engine.execution.extrapolation.loop_time`): Blink's single-root trees and
    TACOS's timetables, which cannot run folded, and whose busiest link saturates within an
    eighth of the loop (TACOS's allreduce timetables run a little above that link's time, so
    the rule's short runs would only add to the full run, as on rings)."""
    return algorithm == "blink" or (algorithm == "tacos" and collective != "allreduce")


def _held_by_fill(topology: Topology, plan: CollectivePlan, sim: SimulationResult,
                  switch_mode: str) -> bool:
    """Whether a row timed at the model's deepest pipeline (MAX_PIECES iterations) runs
    below SHORTFALL of its plan's bound while filling and draining its pipeline could
    account for the gap (the rule of :func:`canopy.engine.baselines.shortfall
    .shortfall_line`): its pieces cross ``stages`` sends in a row, up to (stages - 1) /
    (pieces + stages - 1) of the time. A runtime runs such a loop deeper (Blink's
    single-root trees on a 4x4x4 torus are 30 sends deep); MAX_PIECES only bounds the
    simulation's cost, so the row is timed again up to DEEPEST iterations."""
    if sim.pieces < MAX_PIECES:
        return False
    fraction = sim.algbw / plan_bound(topology, plan)[0]
    stages = pipeline_stages(topology, plan, switch_mode)
    fill = Fraction(stages - 1, sim.pieces + stages - 1)
    return fraction < SHORTFALL and fill >= (1 - fraction) / 2     # as shortfall_line


def _forestcoll(topology: Topology, collective: str, report: _Reporter,
                limits: MscclLimits | None = None, lay_out: bool = True) -> BaselineResult:
    """ForestColl's row: the schedule and layout :func:`runtime_schedule` runs (and the
    MSCCL export writes). ``solve_algbw`` and ``optimum_algbw`` are the exact optimum
    (ForestColl's App. E LP schedule's for allreduce where that wins); the row's bound is
    the running schedule's (below the optimum where a fewer-trees schedule runs). Without
    ``lay_out`` the schedule runs with a connection per tree edge (see LAYOUT_OMITTED).
    The layout choice is reported as its own phase (LAYOUT_PHASE)."""
    schedule = best_schedule(topology, collective, progress=report.tick)
    optimum = max(schedule.algbw, schedule.optimal_algbw)
    which = describe_choice(schedule) if collective == "allreduce" else ""
    plan_at: Callable[[Fraction], CollectivePlan] | None = None
    if not lay_out:
        laid_out = schedule_plan(schedule)
        connections: dict[str, Any] = {"layout": "a connection per tree edge",
                                       "note": LAYOUT_OMITTED.format(
                                           len(topology.compute_nodes()))}
    else:
        row_phase, row_fraction = report.phase, report.fraction
        report.step(LAYOUT_PHASE, 0.0)
        try:
            choice = runtime_schedule(topology, schedule, limits,
                                      lambda _, fraction: report.step(LAYOUT_PHASE, fraction))
            schedule, laid_out, connections = choice.schedule, choice.plan, choice.describe()
            plan_at = _plans_by_size(choice)
        except MscclLimitError as exc:
            laid_out, connections = schedule_plan(schedule), {"layout": f"none fits: {exc}"}
        report.step(row_phase, row_fraction)
    algbw, link = bandwidth_bound(laid_out, topology.capacities())
    return BaselineResult("forestcoll", collective, algbw, schedule=schedule,
                          details={"k": schedule.k, "trees": len(schedule.trees),
                                   "solve_algbw": optimum, "optimum_algbw": optimum,
                                   "schedule_algbw": schedule.algbw,
                                   "bottleneck_link": list(link),
                                   "connections": connections,
                                   **({"allreduce_schedule": which} if which else {})},
                          plan_at=plan_at or (lambda size: laid_out))


def compare(topology: Topology, collective: str = "allgather",
            sizes: tuple[int, ...] = REPORT_SIZES, algorithms: tuple[str, ...] = ALGORITHMS,
            tacos_chunks: tuple[int, ...] = DEFAULT_CHUNKS, tacos_seeds: int | None = None,
            tacos_unwinding: str = "ring", default_latency: Fraction = DEFAULT_LATENCY_US,
            switch_mode: str = CUT_THROUGH, progress: Progress | None = None,
            where: str = "", limits: MscclLimits | None = None,
            force: tuple[str, ...] = ()) -> Comparison:
    """Build every algorithm's schedule on ``topology`` and time it at ``sizes`` bytes.

    ForestColl's row always comes first (the ratios refer to it); ``algorithms`` picks
    the baselines. ``switch_mode`` is how the simulator's switches forward
    (:mod:`canopy.engine.execution.simulate`: cut-through, or store-and-forward).

    Parameters
    ----------
    topology : Topology
        The network.
    collective : {"allgather", "reduce-scatter", "allreduce"}
        The collective every algorithm runs.
    sizes : tuple of int
        Message sizes in bytes (nccl-tests convention).
    algorithms : tuple of str
        Baselines to build besides ForestColl (:data:`canopy.engine.model.plan.ALGORITHMS`).
    progress : Progress, optional
        Called as ``progress(algorithm, fraction)`` as rows and sizes complete and at least
        every TICK_SECONDS in between; it may raise :class:`canopy.engine.model.progress.Cancelled`.
    where : str, optional
        Names the input in error messages.
    limits : MscclLimits, optional
        The MSCCL runtime's limits ForestColl's layout must keep (default: the SMs of the
        topology's GPU model, else an A100's 108), as ``canopy solve --msccl`` exports it.
    force : tuple of str, optional
        Rows to build in full even where they would take minutes: from SLOW_FROM compute
        nodes the baselines in SLOW are otherwise omitted, their row saying why, and
        ForestColl's schedule runs with a connection per tree edge instead of the MSCCL
        layout chosen by simulation (LAYOUT_OMITTED) unless "forestcoll" is named
        (``canopy compare --algorithms forestcoll,tacos`` forces both).

    Returns
    -------
    Comparison
        One row per algorithm: its bandwidth bound and simulated time and algbw per size.

    Raises
    ------
    TopologyError
        A topology that cannot be solved, named by ``where``, or with a bandwidth the
        floating-point simulator cannot take (:func:`canopy.engine.model.limits.check_simulable`).
    ScheduleError
        Unknown collective, algorithm or switch mode, or sizes that are not positive.

    Examples
    --------
    >>> from canopy.engine import compare, load_sample
    >>> rows = compare(load_sample("forestcoll-fig2.json"), sizes=(1 << 20,),
    ...                algorithms=("ring",)).rows
    >>> [row.algorithm for row in rows]
    ['forestcoll', 'ring']
    """
    if collective not in COLLECTIVES:
        raise ScheduleError(f"unknown collective '{collective}'; use one of "
                            f"{', '.join(COLLECTIVES)}.")
    check_simulable(topology, where)
    unknown = [a for a in algorithms if a not in ALGORITHMS]
    if unknown:
        raise ScheduleError(f"unknown algorithm '{unknown[0]}'; use {', '.join(ALGORITHMS)}.")
    if switch_mode not in SWITCH_MODES:
        raise ScheduleError(f"unknown switch mode '{switch_mode}'; use "
                            f"{' or '.join(SWITCH_MODES)}.")
    if not sizes or any(s <= 0 for s in sizes):
        raise ScheduleError("message sizes must be positive numbers of bytes.")
    Network.from_topology(topology, where)   # one clear sentence for a bad topology
    gpus = len(topology.compute_nodes())
    check_memory(f"comparing schedules on {gpus:,} GPUs",
                 COMPARE_BASE_BYTES + COMPARE_BYTES_PER_GPU * gpus
                 + SOLVE_BYTES_PER_PAIR * gpus * (gpus - 1))
    if limits is None:       # the topology's GPU model's SMs (generate --gpu), else an A100's
        limits = MscclLimits(max_tbs_per_gpu=gpu_of(topology).sms)
    report = _Reporter(progress)
    nodes = len(topology.compute_nodes())
    builders: dict[str, Callable[[], BaselineResult]] = {
        "forestcoll": lambda: _forestcoll(topology, collective, report, limits,
                                          nodes < SLOW_FROM or "forestcoll" in force),
        "ring": lambda: ring_baseline(topology, collective, progress=report.tick),
        "blink": lambda: blink_baseline(topology, collective),
        "tacos": lambda: tacos_baseline(topology, collective, tacos_chunks, tacos_seeds,
                                        tacos_unwinding, default_latency),
        "lr1": lambda: lr_baseline(topology, collective, "lr1"),
        "lr3": lambda: lr_baseline(topology, collective, "lr3"),
    }
    order = ["forestcoll"] + [a for a in algorithms if a != "forestcoll"]
    rows = []
    for done, name in enumerate(order):
        report.step(name, done / len(order))
        if name in SLOW and nodes >= SLOW_FROM and name not in force:
            rows.append(ComparisonRow(name, None, omitted=True, reason=(
                f"omitted at {nodes} GPUs: {SLOW[name]}; ask for it by name to run it "
                f"anyway (canopy compare --algorithms {name}).")))
            continue
        start = time.perf_counter()
        result = builders[name]()
        row = ComparisonRow(name, result.algbw, reason=result.not_applicable_reason,
                            details=result.details)
        if result.applicable and result.plan_at is not None:
            depth = 1
            staged: CollectivePlan | None = None
            stages = 0
            bound: tuple[Fraction, tuple[str, str]] | None = None
            bounds: list[Fraction] = []     # of each distinct plan
            for step, size in enumerate(sorted(sizes)):
                report.step(name, (done + (step + 1) / (len(sizes) + 1)) / len(order))
                plan = result.plan_at(Fraction(size))
                saturated = _saturates(name, collective)
                sim = fastest(topology, plan, size, default_latency, depth, switch_mode,
                              report.tick, saturated=saturated)
                if saturated and _held_by_fill(topology, plan, sim, switch_mode):
                    deeper = fastest(topology, plan, size, default_latency, sim.pieces,
                                     switch_mode, report.tick, saturated=True,
                                     deepest=DEEPEST)
                    sim = min(sim, deeper, key=lambda r: r.time_us)
                depth = sim.pieces
                row.times_us[size] = sim.time_us
                row.pieces[size] = sim.pieces
                if plan is not staged:
                    staged, stages = plan, pipeline_stages(topology, plan, switch_mode)
                    bound = plan_bound(topology, plan)
                    bounds.append(bound[0])
                row.stages[size] = stages
                if bound is not None:
                    row.bounds[size] = bound
            if len(bounds) > 1:     # a schedule per size (TACOS): the best of their bounds
                row.algbw = max(bounds if row.algbw is None else [row.algbw, *bounds])
        row.seconds = time.perf_counter() - start
        rows.append(row)
    report.step("done", 1.0)
    return Comparison(topology.name, collective, nodes, tuple(sizes), rows, default_latency,
                      switch_mode)
