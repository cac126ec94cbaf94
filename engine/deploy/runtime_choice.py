"""The connection layout a runtime will run, chosen by simulating candidates.

:func:`runtime_schedule` chooses by execution: where the schedule does not get unit
connections it simulates every layout of it and of the fewest-trees schedules within a
few percent of the optimum, and runs the fastest at 1 GiB, or among those within NEAR of
it the fastest at 1 GiB and 256 MiB together; messages below 512 MiB run the fastest at
256 MiB, an XML per size range where that differs
(``canopy compare``, ``canopy solve --msccl`` and the editor's export all call it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import NamedTuple

from canopy.engine.deploy.accumulation import accumulating, arranges
from canopy.engine.deploy.choice_progress import ChoiceProgress
from canopy.engine.deploy.reduction_fill import fill_swaps
from canopy.engine.model.plan import (
    CollectivePlan,
    bandwidth_bound,
    schedule_plan,
)
from canopy.engine.model.progress import Progress
from canopy.engine.model.schedule import Schedule
from canopy.engine.model.topology import Topology
from canopy.engine.msccl.connection_counts import multiplicities, server_places
from canopy.engine.msccl.connections import (
    describe_layout,
    iter_layouts,
    layout_text,
    runtime_layout,
    slack_tiers,
)
from canopy.engine.msccl.threadblocks import (
    MscclLimits,
)

TOLERANCES = (1, 2, 4, 10)  # percent of the optimum fewer-trees candidates may give up
REFERENCE_SIZE = 1 << 30    # bytes at which candidates are simulated
GOOD_ENOUGH = Fraction(99, 100)   # a candidate executing this near the optimum ends the search
EVEN_MARGIN = Fraction(1, 100)    # what layout 6 must gain at 1 GiB over the best to run
NEAR = Fraction(1, 200)           # candidates this near the best at 1 GiB (of the optimum) ...
KEEP = Fraction(95, 100)          # ... but not below this where the best is at least this ...
SECOND_SIZE = 256 << 20           # ... are also simulated at this size: both sizes decide;
BOUNDARY = 512 << 20              # the fastest at SECOND_SIZE runs messages below this
SPLIT_GAIN = Fraction(1, 400)     # ... where it gains this much there (of the optimum)
_MEMO_SIZE = 8
SHALLOW_MAX_NODES = 64            # networks on which shallow twins are tried (Alg. 5 flows)
PRUNE = NEAR + 2 * EVEN_MARGIN    # a layout this far below the fastest so far is not finished
SCREENS_CHECKED = 3               # layouts fastest at their first depth asked if their plan fits


@dataclass
class RuntimeChoice:
    """The schedule to run, its plan (``base``) and that plan laid out (``plan``); ``note``
    says why it is not the schedule asked for, or its first layout (None when it is
    both); ``optimum`` is the exact optimum the fraction of ``candidates`` refers to;
    ``candidates`` lists what was simulated (k, tolerance, layout, fraction of the
    optimum executed at REFERENCE_SIZE), best last chosen."""

    schedule: Schedule
    base: CollectivePlan
    plan: CollectivePlan
    note: str | None = None
    optimum: Fraction | None = None
    candidates: list[dict[str, object]] = field(default_factory=list)
    cpu_seconds: float = 0.0          # what choosing cost (time.process_time)
    layout: str = ""                  # the name :func:`layouts` gives the chosen layout
    limits: MscclLimits = field(default_factory=MscclLimits)   # the limits it was laid out for
    below: RuntimeChoice | None = None   # what messages under ``boundary`` bytes run instead
    boundary: int = 0                    # (the runtime loads an XML per size range)
    # the same choice with its reductions ordered for the MSCCL++ export (export_choice)
    exported: RuntimeChoice | None = field(default=None, repr=False, compare=False)

    def at(self, size: int | Fraction) -> RuntimeChoice:
        """The choice a message of ``size`` bytes runs (``below`` under ``boundary``)."""
        return self.below if self.below is not None and size < self.boundary else self

    def ranges(self) -> list[tuple[int, int | None, RuntimeChoice]]:
        """(first byte count, byte count it stops before or None, choice) per size range:
        one range unless ``below`` is set."""
        if self.below is None:
            return [(0, None, self)]
        return [(0, self.boundary, self.below), (self.boundary, None, self)]

    def describe(self) -> dict[str, object]:
        """:func:`describe_layout` of the choice, with its note and the candidates (and, where
        smaller messages run another choice, ``below``: its k, layout and boundary)."""
        out = describe_layout(self.base, self.plan, self.layout, self.limits)
        if self.note is not None:
            out["note"] = self.note
        if self.below is not None:
            out["below"] = {"max_bytes": self.boundary, "k": self.below.schedule.k,
                            "trees": len(self.below.schedule.trees),
                            **describe_layout(self.below.base, self.below.plan,
                                              self.below.layout, self.limits)}
        if self.candidates:
            out["candidates"] = self.candidates
            out["choice_cpu_seconds"] = round(self.cpu_seconds, 2)
        return out


def _optimum(schedule: Schedule) -> Fraction:
    """The exact optimum ``schedule`` is measured against: Thm 1's (allreduce: RS + AG,
    §4.6), or App. E's LP schedule's where that is higher."""
    return max(schedule.algbw, schedule.optimal_algbw)


def _signature(topology: Topology, schedule: Schedule, limits: MscclLimits) -> Hashable:
    """What :func:`runtime_schedule`'s answer depends on (the memo's key)."""
    trees = tuple((t.root, t.multiplicity, t.edges) for t in schedule.trees)
    reduce = tuple((t.root, t.multiplicity, t.edges) for t in schedule.reduce_trees or ())
    return (topology.fingerprint(), schedule.collective, schedule.k,
            schedule.algbw, schedule.fixed_k, schedule.split_budgets, trees, reduce, limits)


_MEMO: dict[Hashable, RuntimeChoice] = {}


def runtime_schedule(topology: Topology, schedule: Schedule, limits: MscclLimits | None = None,
                     progress: Progress | None = None) -> RuntimeChoice:
    """The schedule to export and simulate, and its layout, chosen by executed speed.

    Where ``schedule`` gets unit connections it runs as its bound says and is taken as it
    is. Otherwise each of its :func:`layouts` (trees cut into q-chunk parts, shared
    connections) is simulated (:func:`canopy.engine.execution.simulate.fastest`, REFERENCE_SIZE
    bytes, the default latency, cut-through switches), and so are those of the
    fewest-trees schedules within TOLERANCES percent of the optimum (``canopy solve
    --tolerance``, :mod:`canopy.engine.forestcoll.fewest_trees`; for allreduce also reduce-scatter +
    allgather where ``schedule`` is App. E's): the candidate with the highest simulated
    algbw runs. A schedule at 97 % of the optimum that executes at 99 % of its own bound
    beats an optimal one whose pieces wait on shared connections (measured examples of
    this and of the rules below: docs/performance.md, "The runtime choice's rules"). The
    search stops
    once a candidate executes within GOOD_ENOUGH of the optimum, and at the first
    tolerance whose schedule gets unit connections (larger ones only lose bandwidth).
    A candidate whose plan's bandwidth bound is no higher than the best executed fraction
    so far is not simulated (no layout executes above it), and a layout whose simulation
    provably ends more than PRUNE of the optimum below the fastest so far is stopped there
    (the simulation's deadline: its links still have more bytes to carry than that time
    allows); it is listed with ``executed_below`` and can neither be chosen nor come near
    the best, since the best never falls more than EVEN_MARGIN below the fastest. So that
    the losers stop early, a candidate's layouts are simulated fastest first, by their
    time at the first depth the simulation runs (:func:`_screen`; the first layout alone,
    before the others are built, where it executes within GOOD_ENOUGH), and
    then taken in their own order: the rules below see them as if simulated in order (but
    for the cut, which may come from a layout past the one the search in order ends on).
    Only the fastest at that first depth runs deeper: the others are listed with their
    time there (``executed_first_depth``, or ``executed_first_depth_below`` where that
    run stopped) and can be neither chosen nor near the best (:meth:`_Screen.screened_out`);
    where that fastest executes within GOOD_ENOUGH, the layouts before it in order run in
    full, as the search in order would have run them. Layout 6
    (unit trees shared evenly) replaces the best only where it gains EVEN_MARGIN of the
    optimum, and a layout with trees no smaller than its replaces it within that margin
    (:func:`_even_margin`).
    A schedule with a fixed k keeps its k (only its layouts are compared). Where the
    search ends on unit connections below GOOD_ENOUGH, the same schedule with its trees
    grown together (lower) is simulated too (:func:`_consider_shallow`); where no
    candidate reaches KEEP, the best one's twin with lower trees on layout 7
    (:func:`_consider_shallow_tiers`). Candidates
    within NEAR of the best at 1 GiB (the fewest trees within 1 % are tried for this even
    past GOOD_ENOUGH) are also simulated at SECOND_SIZE, and the one running both sizes
    fastest together runs from BOUNDARY up (:func:`_near_tie`); the candidate fastest at
    SECOND_SIZE runs messages below BOUNDARY where that is another one
    (:func:`_smaller_messages`; the choice's ``below``: the runtime loads an XML per size
    range); the candidates tried for smaller messages are those within PRUNE of the
    fastest at 1 GiB. The MSCCL++ export takes the choice from :func:`export_choice`, which
    also orders the chosen plans' reductions for their programs.

    Deterministic, so ``canopy compare``, ``canopy solve --msccl`` and the editor's
    export take the same schedule and layout; the answer is memoized per topology,
    schedule and limits, so a process that compares and exports simulates once. Every
    candidate is a verified schedule (:func:`canopy.engine.forestcoll.solve.solve`).
    ``progress`` is called as ``progress("layout choice", fraction)`` as candidates are
    simulated (:class:`~canopy.engine.deploy.choice_progress.ChoiceProgress`); it may
    raise :class:`~canopy.engine.model.progress.Cancelled`, and then nothing is memoized.
    """
    limits = limits or MscclLimits()
    key = _signature(topology, schedule, limits)
    steps = ChoiceProgress(progress)
    if key in _MEMO:
        steps.done()
        return _MEMO[key]
    start = time.process_time()
    choice = _choose(topology, schedule, limits, steps=steps)
    choice.cpu_seconds = time.process_time() - start
    steps.done()
    if len(_MEMO) >= _MEMO_SIZE:
        _MEMO.pop(next(iter(_MEMO)))
    _MEMO[key] = choice
    return choice


class _Measured(NamedTuple):
    """A layout as simulated: its fraction of the optimum at REFERENCE_SIZE (the cut it
    was stopped at, ``below``, where it provably runs below that)."""

    fraction: Fraction
    below: Fraction | None


class _Candidate(NamedTuple):
    """A schedule on one of its layouts, as :func:`_choose` simulated it."""

    fraction: Fraction          # its algbw at REFERENCE_SIZE, of the optimum
    schedule: Schedule
    base: CollectivePlan        # the schedule's plan
    laid: CollectivePlan        # on the layout's connections
    name: str                   # the layout
    tolerance: str              # percent of the optimum the schedule was asked within


def _choose(topology: Topology, schedule: Schedule, limits: MscclLimits,
            unit_first: bool = True, check_plans: bool = True, fastest_first: bool = True,
            steps: ChoiceProgress | None = None) -> RuntimeChoice:
    """:func:`runtime_schedule` without the memo (``unit_first=False``: without
    :func:`_unit_first`, every candidate in the search's own order; for tests;
    ``check_plans=False``: every layout a candidate, whether or not its MSCCL++ plan fits,
    as where none does; ``fastest_first=False``: each candidate's layouts simulated in
    their own order, not the fastest first, :func:`_screen`; for tests; ``steps``: where
    its progress goes)."""
    steps = steps or ChoiceProgress(None)
    if not check_plans:
        return _choose_among(topology, schedule, limits, unit_first,
                             lambda k, laid: True, fastest_first, steps)
    return _choose_among(topology, schedule, limits, unit_first,
                         lambda k, laid: plan_fits(topology, k, laid, limits), fastest_first,
                         steps)


def _choose_among(topology: Topology, schedule: Schedule, limits: MscclLimits,
                  unit_first: bool, plan_fits: Callable[[int, CollectivePlan], bool],
                  fastest_first: bool, steps: ChoiceProgress) -> RuntimeChoice:
    """:func:`_choose` among the layouts ``plan_fits`` (k, laid-out plan) admits."""

    optimum = _optimum(schedule)
    plan = schedule_plan(schedule)
    found = _LazyLayouts(plan, limits, topology)
    if not found:
        runtime_layout(plan, limits)      # raises MscclLimitError with the reason
    if found[0][0] in ("unit", "as built"):
        return RuntimeChoice(schedule, plan, found[0][1], optimum=optimum,
                             layout=found[0][0], limits=limits)
    best: _Candidate | None = None
    simulated: list[_Candidate] = []
    tried: list[dict[str, object]] = []
    first_fraction: Fraction | None = Fraction(0)
    caps = topology.capacities()
    known: dict[Hashable, Fraction] = {}        # fractions the unit-first step simulated
    top = Fraction(0)                           # the highest fraction executed so far
    reachable = Fraction(0)                     # one some layout is known to reach
    stopped: set[int] = set()                   # entries of ``simulated`` stopped at PRUNE
    checked: dict[Hashable, bool] = {}          # whether a candidate's layout's plan fits

    def fits(candidate: Schedule, tolerance: str, name: str, laid: CollectivePlan) -> bool:
        key = _known_key(candidate, tolerance, name)
        if key not in checked:
            checked[key] = plan_fits(candidate.k, laid)
        return checked[key]

    def consider(candidate: Schedule, base: CollectivePlan,
                 options: Iterable[tuple[str, CollectivePlan]], tolerance: str) -> None:
        nonlocal reachable, first_fraction
        steps.candidate()
        if best is not None and bandwidth_bound(base, caps)[0] / optimum \
                <= best.fraction - NEAR - (EVEN_MARGIN if best.name.startswith("shared evenly")
                                          else 0):
            return                 # executes below its plan's bound: cannot come near the best
        # equal layouts run once (one stopped stays stopped: its fraction is the cut)
        timed: list[tuple[CollectivePlan, Fraction, Fraction | None]] = []

        def measure(name: str, laid: CollectivePlan) -> _Measured:
            nonlocal reachable
            fraction, below = next(((f, b) for other, f, b in timed if other == laid),
                                   (None, None))
            if fraction is None:
                fraction = known.get(_known_key(candidate, tolerance, name))
                if fraction is None:
                    fraction, below = _executed(topology, laid, optimum,
                                                max(top, reachable) - PRUNE, steps.check)
                timed.append((laid, fraction, below))
            if below is None and fraction > reachable and \
                    fits(candidate, tolerance, name, laid):
                reachable = fraction
            return _Measured(fraction, below)

        def _ends_alone(head: tuple[str, CollectivePlan]) -> bool:
            """Whether the first layout is measured alone, before the others are built:
            where its time is known already or it executes within GOOD_ENOUGH (the
            search in order then ends on it, as it often does). Asked with GOOD_ENOUGH as
            the deadline, a run that cannot get there stops early: the pipeline's fill
            already idles its busiest link too long."""
            from canopy.engine.execution.simulate import depths

            name, laid = head
            if _known_key(candidate, tolerance, name) in known:
                return True
            # (its first depth run in full, as the screen runs it, and kept for it)
            _at_first_depth(topology, laid, optimum, max(top, reachable) - PRUNE,
                            depths(topology, laid, REFERENCE_SIZE)[1], steps.check)
            return _executed(topology, laid, optimum, GOOD_ENOUGH, steps.check)[1] is None

        def note(name: str, laid: CollectivePlan, measured: _Measured) -> bool:
            """Note one measured layout in the search; True where it ends the search."""
            nonlocal best, first_fraction, top
            fraction, below = measured
            # (only where it decides something is a layout asked whether its plan fits:
            # writing the plan costs more than most simulations. A stopped layout can be
            # neither chosen nor near the best; one below the fastest so far and not
            # replacing the best is asked later, if ever, where it could be chosen
            # (``admitted`` below); one that does not fit leaves no trace but its entry)
            decides = below is None and (
                not tried or best is None or fraction > top or fraction >= GOOD_ENOUGH
                or fraction > best.fraction + _even_margin(name, laid, best.name, best.laid))
            if decides and not fits(candidate, tolerance, name, laid):
                if not tried:
                    first_fraction = None
                tried.append({**_entry(candidate, tolerance, name, optimum),
                              "mscclpp_plan": "does not fit"})
                return False
            top = max(top, fraction) if below is None else top
            if not tried:
                first_fraction = None if below is not None else fraction
            tried.append({**_entry(candidate, tolerance, name, optimum),
                          **({"executed_fraction": round(float(fraction), 4)} if below is None
                             else {"executed_below": round(float(below), 4)})})
            entry = _Candidate(fraction, candidate, base, laid, name, tolerance)
            if below is not None:
                stopped.add(len(simulated))
            simulated.append(entry)
            if below is None and (best is None or fraction > best.fraction + _even_margin(
                    name, laid, best.name, best.laid)):
                best = entry
            return fraction >= GOOD_ENOUGH

        layouts = iter(options)
        head = next(layouts, None)
        if head is None:
            return
        if not fastest_first or _ends_alone(head):
            if note(*head, measure(*head)):
                return
            rest = list(layouts)
        else:
            rest = [head, *layouts]     # screened with the others, but leads none
        first_runs = [Fraction(0)] * len(rest)
        screened: set[int] = set()
        screen: _Screen | None = None
        if fastest_first and len(rest) > 1:
            screen = _screen(
                topology, optimum, [(laid, known.get(_known_key(candidate, tolerance, name)))
                                    for name, laid in rest],
                max(top, reachable) - PRUNE,
                lambda i: fits(candidate, tolerance, rest[i][0], rest[i][1]), steps.check,
                followers=int(rest[0] is head))
            first_runs, screened = screen.fractions, screen.screened_out()
            reachable = max(reachable, screen.reached)
        measured: dict[int, _Measured] = {}
        for i in sorted(range(len(rest)), key=lambda i: (-first_runs[i], i)):
            if i in screened:
                continue
            measured[i] = measure(*rest[i])
            steps.layouts(1 + len(measured), 1 + len(rest) - len(screened))
            if measured[i].below is None and measured[i].fraction >= GOOD_ENOUGH and \
                    fits(candidate, tolerance, *rest[i]):
                for j in range(i):          # the search, in its order, ends here at the latest
                    screened.discard(j)
                    if j not in measured:
                        measured[j] = measure(*rest[j])
                break
        for i, (name, laid) in enumerate(rest):
            if i in screened:
                assert screen is not None
                run = screen.runs[i]
                assert run is not None
                if not tried:
                    first_fraction = None
                tried.append({**_entry(candidate, tolerance, name, optimum),
                              ("executed_first_depth" if run.below is None
                               else "executed_first_depth_below"): round(float(run.fraction), 4)})
            elif i not in measured or note(name, laid, measured[i]):
                return

    first = _unit_first(topology, schedule, limits, optimum) if unit_first else None
    fewer = not schedule.fixed_k and (schedule.k > 1 or bool(schedule.split_budgets))
    # slots: the unit-first candidate, the schedule, its fewer-trees ones, the shallow
    # twins (_consider_shallow, _consider_shallow_tiers) and the second size's simulations
    steps.plan((first is not None) + 1 + (bool(schedule.split_budgets) + len(TOLERANCES)
                                           if fewer else 0) + 3 + 1)
    if first is not None:
        consider(*first)
    skipped = best is not None and best.fraction >= GOOD_ENOUGH   # schedule's own layouts
    if not skipped:
        # the unit-first candidate did not end the search: the whole search, in its
        # order, the unit-first candidate's time reused
        if best is not None:
            known[_known_key(best.schedule, best.tolerance, best.name)] = best.fraction
        best = None
        simulated.clear()
        stopped.clear()
        tried.clear()
        consider(schedule, plan, found, "0")
        seen = {(schedule.k, schedule.split_budgets)}
        # (With k = 1 and no split budgets every fewer-trees schedule would be k = 1 again.)
        if not schedule.fixed_k and (schedule.k > 1 or schedule.split_budgets):
            extra = ["0"] if schedule.split_budgets else []
            for tolerance in [*extra, *(str(t) for t in TOLERANCES)]:
                # (best is None while every layout so far stopped below the unit-first's)
                if best is not None and best.fraction >= GOOD_ENOUGH and \
                        tolerance != str(TOLERANCES[0]):
                    break              # (the fewest trees within 1 % may still come NEAR)
                other = _solve(topology, schedule.collective, tolerance)
                if (other.k, False) in seen or \
                        (other.k > schedule.k and not schedule.split_budgets):
                    continue
                seen.add((other.k, False))
                other_plan = schedule_plan(other)
                options = _LazyLayouts(other_plan, limits, topology)
                consider(other, other_plan, options, tolerance)
                if options and options[0][0] in ("unit", "unit, paired"):
                    _consider_shallow(topology, other, tolerance, limits, consider,
                                      best.fraction if best is not None else Fraction(0))
                    break
    if best is None:
        # no candidate's MSCCL++ plan fits: choose as for MSCCL alone (the MSCCL++ export
        # then falls back to a tighter layout of the choice)
        return _choose(topology, schedule, limits, unit_first, check_plans=False,
                       fastest_first=fastest_first, steps=steps)
    if best.fraction < KEEP and not best.schedule.extra.get("shallow"):
        _consider_shallow_tiers(topology, best.schedule, best.tolerance, limits, consider)
    first_best = best
    at: list[tuple[CollectivePlan, Fraction]] = []      # layouts timed at SECOND_SIZE
    finished = [c for i, c in enumerate(simulated) if i not in stopped]

    def admitted(c: _Candidate) -> bool:
        """Whether ``c``'s plan fits, asked where it could be chosen; where it does not,
        its entry in ``tried`` says so instead of its times."""
        if fits(c.schedule, c.tolerance, c.name, c.laid):
            return True
        for entry in tried:
            if _is(entry, c):
                for key in [k for k in entry if k.startswith("executed")]:
                    del entry[key]
                entry["mscclpp_plan"] = "does not fit"
        return False

    steps.finishing()
    best, tie = _near_tie(topology, optimum, best, finished, tried, at, admitted)
    small, second = _smaller_messages(topology, optimum, best,
                                      [c for c in finished if c.fraction >= top - PRUNE],
                                      tried, at, admitted)
    fraction, chosen, base, laid, name, tolerance = best
    note = None
    if chosen is not schedule:
        what = (f"reduce-scatter + allgather with k = {chosen.k}" if schedule.split_budgets
                else f"k = {chosen.k}")
        if chosen.extra.get("shallow"):
            what += " with trees grown together (lower)"
        if chosen.extra.get("fill_swaps"):
            what += ", parents swapped between them for a fast fill"
        share = float(chosen.algbw / optimum) * 100
        note = (f"runs {what} (the fewest trees within {tolerance} % of the optimum, "
                f"{share:.2f} % of it; {layout_text(name)}) at {float(fraction):.1%} of the "
                f"optimum at 1 GiB: the optimal k = {schedule.k} needs more connections than "
                f"{limits.max_tbs_per_gpu} thread blocks per GPU serve and "
                + (f"{'' if first_fraction is None else 'runs at '}"
                   f"{_fraction_text(first_fraction, tried)} ({layout_text(found[0][0])})"
                   if not skipped
                   else f"would run on {layout_text(found[0][0])}, not simulated: fewer trees "
                   "on unit connections run this near the optimum"))
    elif name != found[0][0]:
        note = (f"runs k = {chosen.k} on {layout_text(name)} ({float(fraction):.1%} of the "
                f"optimum at 1 GiB; "
                f"{layout_text(found[0][0])} {_fraction_text(first_fraction, tried)})")
    if best is not first_best:
        note = (f"runs k = {chosen.k} on {layout_text(name)} ({float(fraction):.2%} of the "
                f"optimum at 1 GiB, {float(tie[0]):.2%} at 256 MiB): k = "
                f"{first_best.schedule.k} on {layout_text(first_best.name)} runs "
                f"{float(first_best.fraction):.2%} at 1 GiB but {float(tie[1]):.2%} at 256 MiB")
    below = None
    if small is not None:
        below = RuntimeChoice(small.schedule, small.base, small.laid, optimum=optimum,
                              layout=small.name, limits=limits)
        # every note above names the chosen schedule already; the ranges then do not
        which = "" if note is not None else f"k = {chosen.k} on {layout_text(name)} "
        ranges = (f"runs {which}from {_mib(BOUNDARY)} up ({float(fraction):.2%} of the "
                  f"optimum at 1 GiB, {float(second[1]):.2%} at 256 MiB) and k = "
                  f"{small.schedule.k} on {layout_text(small.name)} below it "
                  f"({float(small.fraction):.2%} at 1 GiB, {float(second[0]):.2%} at "
                  "256 MiB): an MSCCL XML per size range")
        note = ranges if note is None else f"{note}; it {ranges}"
    return RuntimeChoice(chosen, base, laid, note, optimum, tried, layout=name, limits=limits,
                         below=below, boundary=BOUNDARY if below is not None else 0)


def export_choice(topology: Topology, schedule: Schedule, limits: MscclLimits | None = None,
                  progress: Progress | None = None) -> RuntimeChoice:
    """:func:`runtime_schedule`'s choice as the MSCCL++ export writes it: the chosen plans'
    nodes add their children's data in the order their simulation delivers it, where the
    MSCCL program gains by it (:func:`_accumulating`). ``canopy compare`` times the choice
    without this: the execution model lets a node's reductions go in any order, so the
    order changes no time of it, and finding it costs a simulation of every send and up
    to two of the MSCCL program (seconds on large shared layouts, which the MSCCL XML
    export, for the runtime that is going away, does not spend: it writes
    :func:`runtime_schedule`'s choice). Worked out once per memoized choice and kept
    beside it (``exported``): the memoized choice keeps the plans compare simulated."""
    choice = runtime_schedule(topology, schedule, limits, progress)
    if choice.exported is None:
        choice.exported = _accumulating(topology, choice, REFERENCE_SIZE)
    return choice.exported


def _accumulating(topology: Topology, choice: RuntimeChoice, size: int) -> RuntimeChoice:
    """``choice`` with its plan (and that of ``below``, at SECOND_SIZE) in the order in
    which its simulation at ``size`` bytes, at the depth the choice simulated, delivers
    each node's children's data, where its MSCCL program gains by it
    (:func:`canopy.engine.deploy.accumulation.accumulating`)."""
    from canopy.engine.execution.simulate import fastest

    plan = choice.plan
    if arranges(plan):
        plan = accumulating(topology, plan, size, fastest(topology, plan, size).pieces,
                            choice.schedule.k, choice.limits)
    below = None if choice.below is None else \
        _accumulating(topology, choice.below, SECOND_SIZE)
    return replace(choice, plan=plan, below=below, exported=None)


def plan_fits(topology: Topology, k: int, laid: CollectivePlan, limits: MscclLimits
              ) -> bool:
    """Whether the MSCCL++ plan of ``laid`` (a layout of a schedule with ``k``, in place)
    fits the runtime's thread blocks: ``max_tbs_per_gpu`` of at most 64 ops each, thread
    blocks over 64 ops cut into parts as the plan writer cuts them
    (:mod:`canopy.engine.mscclpp.writer`, rule 8). MSCCL++ runs more ops per step than
    MSCCL (a wait, a thread barrier and a semaphore release around each reduction), so a
    layout that fills the GPU's thread blocks in MSCCL may need more in MSCCL++: the
    choice passes over such layouts, so that the plan ``canopy solve --mscclpp`` writes
    is the program ``canopy compare`` times.

    The layout's MSCCL thread blocks (kept for the export,
    :func:`~canopy.engine.msccl.writer.kept_threadblocks`) are at most ``max_tbs_per_gpu``
    per GPU. Where no thread block can exceed 64 ops
    (:func:`~canopy.engine.mscclpp.writer.fits_uncut`), none is cut: the plan has as many,
    each with two channels at most (its receiving and its sending connection), so it
    fits. Otherwise the MSCCL program is built from them without the XML text and the
    plan's ops are counted without writing the plan
    (:func:`~canopy.engine.mscclpp.writer.check_fits`, the same verdict)."""
    from canopy.engine.msccl import MscclLimitError, MscclOptions
    from canopy.engine.msccl.writer import kept_threadblocks, threadblocks_algo
    from canopy.engine.mscclpp.files import rank_servers
    from canopy.engine.mscclpp.writer import MscclppLimitError, check_fits, fits_uncut

    options = MscclOptions(inplace=True, limits=limits, layout="auto")
    try:
        assignment = kept_threadblocks(laid, k, options)
    except MscclLimitError:
        return True       # the MSCCL export's own limits: it says so when it writes
    if fits_uncut(assignment):
        return True
    try:
        check_fits(threadblocks_algo(assignment, options, routes=False),
                   rank_servers(topology), limits.max_tbs_per_gpu)
    except MscclppLimitError:
        return False
    return True


def _executed(topology: Topology, laid: CollectivePlan, optimum: Fraction, cut: Fraction,
              check: Callable[[], None] | None = None) -> tuple[Fraction, Fraction | None]:
    """(fraction of ``optimum`` ``laid`` executes at REFERENCE_SIZE, None), or, where it
    provably executes below ``cut`` (positive), (``cut``, ``cut``): its simulation stops
    there (:func:`canopy.engine.execution.simulate.fastest`'s deadline; ``check`` as there)."""
    from canopy.engine.execution.program import BYTES_PER_US_PER_GBPS
    from canopy.engine.execution.simulate import fastest

    deadline = REFERENCE_SIZE / (cut * optimum * BYTES_PER_US_PER_GBPS) if cut > 0 else None
    result = fastest(topology, laid, REFERENCE_SIZE, check=check, deadline_us=deadline)
    if result.past_deadline:
        return cut, cut
    return result.algbw / optimum, None


def _screen(topology: Topology, optimum: Fraction,
            layouts: list[tuple[CollectivePlan, Fraction | None]], cut: Fraction,
            fits: Callable[[int], bool], check: Callable[[], None] | None = None,
            followers: int = 0) -> _Screen:
    """Each of ``layouts`` (with its fraction of ``optimum`` where known already) timed at
    the depth :func:`~canopy.engine.execution.simulate.fastest` runs first, and a fraction
    that one whose MSCCL++ plan fits provably executes at REFERENCE_SIZE (or 0), with that
    layout (:class:`_Screen`).

    fastest keeps the quickest of the depths it runs and reuses this run
    (:func:`~canopy.engine.execution.simulate.depths`), so a layout's time there is
    one it reaches; a run that provably ends below ``cut`` or PRUNE under the fastest so
    far is stopped (0 here: it cannot give the answer). Of the SCREENS_CHECKED fastest,
    the first whose plan ``fits`` (by index) gives the answer. Simulated fastest first,
    with that answer known from the start, the layouts that lose are stopped at PRUNE
    below it early in their runs. ``check`` goes to every simulation. The first
    ``followers`` layouts give no answer: they can only be behind it.

    The first layout of a candidate is screened as a follower: at the first depth the
    coarsest sharing ("shared") can run ahead of a layout sharing by step that overtakes
    it deeper, where the early steps of a reduction run ahead and its joins drain last
    (:func:`~canopy.engine.msccl.connection_counts.shared_counts`), so it screens out
    none, but one behind the answer there runs no deeper."""
    from canopy.engine.execution.simulate import depths

    fractions: list[Fraction] = []
    runs: list[_Measured | None] = []
    tried_depths: list[tuple[int, int, int] | None] = []
    for laid, fraction in layouts:
        run = found = None
        if fraction is None:
            found = depths(topology, laid, REFERENCE_SIZE)
            run = _at_first_depth(topology, laid, optimum,
                                  max([cut, *(f - PRUNE for f in fractions)]), found[1], check)
            fraction = run.fraction if run.below is None else Fraction(0)
        fractions.append(fraction)
        runs.append(run)
        tried_depths.append(found)
    ranked = sorted((i for i, f in enumerate(fractions) if f > 0 and i >= followers),
                    key=lambda i: (-fractions[i], i))
    for i in ranked[:SCREENS_CHECKED]:
        if fits(i):
            return _Screen(fractions, runs, tried_depths, fractions[i], i)
    return _Screen(fractions, runs, tried_depths, Fraction(0), None)


def _at_first_depth(topology: Topology, laid: CollectivePlan, optimum: Fraction,
                    bar: Fraction, first: int, check: Callable[[], None] | None = None
                    ) -> _Measured:
    """``laid``'s fraction of ``optimum`` at REFERENCE_SIZE at ``first``, the depth
    :func:`~canopy.engine.execution.simulate.fastest` runs first (a time its best depth
    reaches: :func:`~canopy.engine.execution.simulate.depths`), or (``bar``, ``bar``)
    where that run provably ends below ``bar`` (positive) and is stopped there."""
    from canopy.engine.execution.program import BYTES_PER_US_PER_GBPS
    from canopy.engine.execution.simulate import simulate

    deadline = REFERENCE_SIZE / (bar * optimum * BYTES_PER_US_PER_GBPS) if bar > 0 else None
    result = simulate(topology, laid, REFERENCE_SIZE, first, check=check, deadline_us=deadline)
    return _Measured(bar, bar) if result.past_deadline else \
        _Measured(result.algbw / optimum, None)


class _Screen(NamedTuple):
    """What :func:`_screen` found: each layout's fraction at the first depth (or its known
    one; 0 where its run stopped), its run there and the depths
    :func:`~canopy.engine.execution.simulate.fastest` would consider (None where known
    already), the fraction one whose MSCCL++ plan fits provably executes (or 0) and that
    layout."""

    fractions: list[Fraction]
    runs: list[_Measured | None]
    depths: list[tuple[int, int, int] | None]
    reached: Fraction
    leader: int | None

    def screened_out(self) -> set[int]:
        """The layouts that run no deeper: those slower at the first depth than the
        fastest there whose plan fits (the leader), or that provably ran slower (stopped
        below a bar under it). Deeper runs of a pipeline add its busiest link's time per
        further iteration once it is full, alike for every layout of one schedule with
        the same depths (same trees, same link loads), so such layouts keep their order
        at the first depth deeper down (``bench/choice_screen.py`` compares the choices
        made with and without this rule). Only layouts run at the leader's first depth
        and limit are compared with it; none where the leader's time was known already
        (its best depth's, not its first's)."""
        lead = self.leader
        if lead is None or self.runs[lead] is None:
            return set()
        return {i for i, r in enumerate(self.runs)
                if r is not None and 0 < r.fraction < self.reached
                and self.depths[i] == self.depths[lead]}


def _entry(candidate: Schedule, tolerance: str, layout: str, optimum: Fraction
           ) -> dict[str, object]:
    """What ``tried`` says of a candidate and layout before its times."""
    return {"k": candidate.k, "trees": len(candidate.trees),
            "tolerance_percent": tolerance, "layout": layout,
            "shallow": bool(candidate.extra.get("shallow")),
            "fill_swaps": bool(candidate.extra.get("fill_swaps")),
            "schedule_fraction": round(float(candidate.algbw / optimum), 4)}


def _fraction_text(fraction: Fraction | None, tried: list[dict[str, object]]) -> str:
    """"90.6%" of the first layout simulated, "runs below 94.2%" where it stopped there, or
    that its MSCCL++ plan does not fit."""
    if fraction is not None:
        return f"{float(fraction):.1%}"
    if "mscclpp_plan" in tried[0]:
        return "needs more thread blocks as an MSCCL++ plan than the GPU has"
    if "executed_first_depth" in tried[0]:
        return (f"{tried[0]['executed_first_depth']:.1%} at the first pipeline depth tried, "
                "behind another layout there, so not run deeper")
    if "executed_first_depth_below" in tried[0]:
        return (f"runs below {tried[0]['executed_first_depth_below']:.1%} at the first "
                "pipeline depth tried, behind another layout there, so not run deeper")
    return f"runs below {float(tried[0]['executed_below']):.1%}"     # type: ignore[arg-type]


def _unit_first(topology: Topology, schedule: Schedule, limits: MscclLimits,
                optimum: Fraction) -> tuple[Schedule, CollectivePlan, _LazyLayouts, str] | None:
    """The candidate :func:`_choose` simulates first, where ``schedule`` itself needs
    shared connections: the fewest-trees schedule its search would end on, the first
    within TOLERANCES percent of the optimum whose every unit tree edge gets a connection
    of its own (same rules: a k already seen or above ``schedule``'s is passed over), with
    its layouts; None where the search tries no fewer trees, none gets unit connections,
    or that one's plan bound is below GOOD_ENOUGH of ``optimum`` (no layout of it executes
    above its bound, so it could not end the search). A link is shared among its
    connections by weight, so on unit connections every tree keeps its share of every
    link and the schedule runs close to its bound, while shared connections make trees
    wait on each other, and simulating their layouts is most of the search's time. Where
    it runs within GOOD_ENOUGH of the optimum the search ends on it, as it would have
    ended on any candidate that does."""
    if schedule.fixed_k or not (schedule.k > 1 or schedule.split_budgets):
        return None
    seen = {(schedule.k, schedule.split_budgets)}
    extra = ["0"] if schedule.split_budgets else []
    for tolerance in [*extra, *(str(t) for t in TOLERANCES)]:
        other = _solve(topology, schedule.collective, tolerance)
        if (other.k, False) in seen or (other.k > schedule.k and not schedule.split_budgets):
            continue
        seen.add((other.k, False))
        other_plan = schedule_plan(other)
        options = _LazyLayouts(other_plan, limits, topology)
        if options and options[0][0] in ("unit", "unit, paired"):
            if bandwidth_bound(other_plan, topology.capacities())[0] < GOOD_ENOUGH * optimum:
                return None
            return other, other_plan, options, tolerance
    return None


def _known_key(candidate: Schedule, tolerance: str, layout: str) -> Hashable:
    """What names a candidate and layout within one :func:`_choose`."""
    return (tolerance, candidate.k, len(candidate.trees), layout,
            bool(candidate.extra.get("shallow")), bool(candidate.extra.get("fill_swaps")))


_SOLVED: dict[Hashable, Schedule] = {}
_SOLVED_SIZE = 8           # (a 1024-GPU schedule is tens of MB)


def _solve(topology: Topology, collective: str, tolerance: str, shallow: bool = False
           ) -> Schedule:
    """:func:`canopy.engine.forestcoll.solve.solve` within ``tolerance`` percent (and
    ``shallow``), remembered per network (:meth:`Topology.fingerprint`): a process that
    chooses for several collectives or sizes solves each fewest-trees schedule once."""
    from canopy.engine.forestcoll.solve import solve

    key = (topology.fingerprint(), collective, tolerance, shallow)
    found = _SOLVED.get(key)
    if found is None:
        found = solve(topology, collective, tolerance=tolerance, shallow=shallow)
        if len(_SOLVED) >= _SOLVED_SIZE:
            _SOLVED.pop(next(iter(_SOLVED)))
        _SOLVED[key] = found
    return found


def _mib(size: int) -> str:
    return f"{size >> 30} GiB" if size % (1 << 30) == 0 else f"{size >> 20} MiB"


def _consider_shallow(topology: Topology, schedule: Schedule, tolerance: str,
                      limits: MscclLimits,
                      consider: Callable[[Schedule, CollectivePlan,
                                          Iterable[tuple[str, CollectivePlan]], str], None],
                      best: Fraction) -> None:
    """Where the search ends on ``schedule`` (a fewest-trees schedule on unit connections)
    below GOOD_ENOUGH, also simulate its twin with the trees grown together
    (:func:`canopy.engine.forestcoll.solve.solve`'s ``shallow``: same k, same bound, lower trees),
    on networks of at most SHALLOW_MAX_NODES compute nodes and only where the twin gets
    unit connections too (one simulation). A reduction's pipeline fills and drains along
    its trees' height, so lower trees run it faster; allreduce's shared layouts gain
    nothing from them, so they are not tried here (layout 7 is:
    :func:`_consider_shallow_tiers`). A reduce-scatter twin is also simulated with parents
    swapped between its trees so that the links it loads to capacity start sooner
    (:func:`canopy.engine.deploy.reduction_fill.fill_swaps`: same loads and bound)."""

    if best >= GOOD_ENOUGH or len(topology.compute_nodes()) > SHALLOW_MAX_NODES:
        return
    twin = _solve(topology, schedule.collective, tolerance, shallow=True)
    if twin.k != schedule.k or twin.trees == schedule.trees:
        return
    twin_plan = schedule_plan(twin)
    options = _LazyLayouts(twin_plan, limits, topology)
    if options and options[0][0] in ("unit", "unit, paired"):
        consider(twin, twin_plan, options, tolerance)
    else:
        return
    swapped = fill_swaps(topology, twin)
    if swapped is twin:
        return
    swapped_plan = schedule_plan(swapped)
    options = _LazyLayouts(swapped_plan, limits, topology)
    if options and options[0][0] in ("unit", "unit, paired"):
        consider(swapped, swapped_plan, options, tolerance)


def _consider_shallow_tiers(topology: Topology, schedule: Schedule, tolerance: str,
                            limits: MscclLimits,
                            consider: Callable[[Schedule, CollectivePlan,
                                                Iterable[tuple[str, CollectivePlan]], str],
                                               None]) -> None:
    """Where no candidate executes within KEEP of the optimum, also simulate the best
    one's ``schedule`` (asked within ``tolerance``) as its twin with the trees grown
    together (:func:`canopy.engine.forestcoll.solve.solve`'s ``shallow``: same k, same bound, lower
    trees) on layout 7 (:func:`slack_tiers`) only, on networks of at most
    SHALLOW_MAX_NODES compute nodes: there the links loaded to capacity keep a connection
    per unit tree edge, and lower trees fill and drain sooner."""


    if len(topology.compute_nodes()) > SHALLOW_MAX_NODES or schedule.split_budgets:
        return                          # (App. E's schedules have no such twin)
    twin = _solve(topology, schedule.collective, tolerance, shallow=True)
    if twin.k != schedule.k or twin.trees == schedule.trees:
        return
    twin_plan = schedule_plan(twin)
    consider(twin, twin_plan, slack_tiers(twin_plan, multiplicities(twin_plan), limits,
                                           topology, server_places(topology)), tolerance)


class _LazyLayouts:
    """:func:`iter_layouts` with the first layout built at once (``found[0]``, ``not
    found``) and the rest built as iteration reaches them: what :func:`_choose` reads of
    a candidate's layouts, stopping where :func:`layouts` would have built them all."""

    def __init__(self, plan: CollectivePlan, limits: MscclLimits,
                 topology: Topology) -> None:
        self._rest = iter_layouts(plan, limits, topology)
        self._built = [first] if (first := next(self._rest, None)) is not None else []

    def __bool__(self) -> bool:
        return bool(self._built)

    def __getitem__(self, index: int) -> tuple[str, CollectivePlan]:
        return self._built[index]

    def __iter__(self) -> Iterator[tuple[str, CollectivePlan]]:
        yield from self._built
        for layout in self._rest:
            self._built.append(layout)
            yield layout


def _near_tie(topology: Topology, optimum: Fraction, best: _Candidate,
              simulated: list[_Candidate], tried: list[dict[str, object]],
              at: list[tuple[CollectivePlan, Fraction]] | None = None,
              admitted: Callable[[_Candidate], bool] = lambda c: True
              ) -> tuple[_Candidate, tuple[Fraction, Fraction]]:
    """The candidate to run from BOUNDARY up among ``best`` and those within NEAR of it at
    1 GiB: a near tie goes to the candidate that runs a SECOND_SIZE and a 1 GiB collective
    fastest together (``best`` where that ties; sizes from BOUNDARY to 1 GiB run it); none
    below KEEP of the optimum at 1 GiB where ``best`` is at least that.
    Fewer trees carry larger messages, which pipeline deeper at smaller sizes, so of two
    candidates nearly tied at 1 GiB the one with fewer trees is often faster over both.
    Returns the choice and (its, ``best``'s) fraction at SECOND_SIZE; the candidates
    simulated there get ``executed_fraction_256M`` in ``tried`` (and their layouts' times
    go to ``at``, :func:`_at_second`), but for those whose simulation stopped once they
    provably could neither beat the smallest total so far nor ``best`` at SECOND_SIZE by
    SPLIT_GAIN (what :func:`_smaller_messages` asks next). A candidate that finished there
    counts only where ``admitted`` (its MSCCL++ plan fits)."""
    near = [c for c in simulated
            if c.fraction >= max(best.fraction - NEAR, min(best.fraction, KEEP))]
    if len(near) < 2:
        return best, (Fraction(0), Fraction(0))
    mine = _at_second(topology, optimum, best, tried, at)
    assert mine is not None
    own = SECOND_SIZE / mine + REFERENCE_SIZE / best.fraction     # both sizes, once each
    least = own
    scored = []
    for c in near:
        if c is best:
            scored.append((-own, True, mine, c))
            continue
        # only a smaller total wins (a tie goes to ``best`` or the first in order); a run
        # that could also beat ``best`` at SECOND_SIZE by SPLIT_GAIN goes on to that bar,
        # the least :func:`_smaller_messages` asks of it next (a run stopped there is not
        # made again: the simulator keeps the deadline it provably ends after)
        room = least - REFERENCE_SIZE / c.fraction
        needed = SECOND_SIZE / room if room > 0 else None
        if needed is not None and c.fraction > mine + SPLIT_GAIN:
            needed = min(needed, mine + SPLIT_GAIN)
        second = _at_second(topology, optimum, c, tried, at, needed) \
            if needed is not None else None
        if second is None or not admitted(c):
            continue
        total = SECOND_SIZE / second + REFERENCE_SIZE / c.fraction
        least = min(least, total)
        scored.append((-total, False, second, c))
    _, _, second, chosen = max(scored, key=lambda s: s[:2])
    return chosen, (second, mine)


def _smaller_messages(topology: Topology, optimum: Fraction, main: _Candidate,
                      simulated: list[_Candidate], tried: list[dict[str, object]],
                      at: list[tuple[CollectivePlan, Fraction]] | None = None,
                      admitted: Callable[[_Candidate], bool] = lambda c: True
                      ) -> tuple[_Candidate | None, tuple[Fraction, Fraction]]:
    """What messages below BOUNDARY run instead of ``main`` (the choice at 1 GiB, after
    :func:`_near_tie`), or None: the candidate fastest at SECOND_SIZE, where that beats
    ``main`` there by SPLIT_GAIN of the optimum (a second XML for less is not worth it).
    The MSCCL runtime loads an XML per message-size range, so no one candidate has to
    serve every size: fewer trees carry larger messages, which pipeline deeper at 256 MiB,
    while more trees fill the links better at 1 GiB.
    A pipeline runs a smaller message at no higher algbw (its fill and drain take the same
    time, its steady part proportionally less), so only candidates running faster at 1 GiB
    than the fastest at SECOND_SIZE so far, and than ``main`` there plus SPLIT_GAIN, can
    win: ``main`` is simulated at SECOND_SIZE first, then the others from the fastest at
    1 GiB down while that holds.
    Returns that candidate and (its, ``main``'s) fraction at SECOND_SIZE; the candidates
    simulated there get ``executed_fraction_256M`` in ``tried``, but for those whose
    simulation stopped once they provably ran below the fastest there so far. Only a
    candidate ``admitted`` (its MSCCL++ plan fits) is taken."""
    others = sorted((c for c in simulated if c is not main and c.fraction > 0),
                    key=lambda c: -c.fraction)
    mine = _at_second(topology, optimum, main, tried, at) if others else None
    if mine is None or others[0].fraction <= mine + SPLIT_GAIN:
        return None, (Fraction(0), Fraction(0))
    top, chosen = mine + SPLIT_GAIN, main
    for c in others:
        if c.fraction <= top:
            break
        f = _at_second(topology, optimum, c, tried, at, top)
        if f is not None and f > top and admitted(c):
            top, chosen = f, c
    return (None if chosen is main else chosen), (top, mine)


def _at_second(topology: Topology, optimum: Fraction, c: _Candidate,
               tried: list[dict[str, object]],
               at: list[tuple[CollectivePlan, Fraction]] | None,
               needed: Fraction | None = None) -> Fraction | None:
    """``c``'s algbw at SECOND_SIZE as a fraction of the optimum, noted in ``tried``; equal
    layouts are timed once (``at``: the layouts timed so far and their fractions). With
    ``needed``, None where it provably runs below that fraction (its simulation stops
    there: the caller has no use for less)."""
    from canopy.engine.execution.program import BYTES_PER_US_PER_GBPS
    from canopy.engine.execution.simulate import fastest

    at = at if at is not None else []
    found = next((f for laid, f in at if laid == c.laid), None)
    if found is None:
        deadline = SECOND_SIZE / (needed * optimum * BYTES_PER_US_PER_GBPS) \
            if needed is not None and needed > 0 else None
        result = fastest(topology, c.laid, SECOND_SIZE, deadline_us=deadline)
        if result.past_deadline:
            assert needed is not None
            _note(tried, c, "executed_below_256M", needed)
            return None
        found = result.algbw / optimum
        at.append((c.laid, found))
    _note(tried, c, "executed_fraction_256M", found)
    return found


def _note(tried: list[dict[str, object]], c: _Candidate, key: str, value: Fraction) -> None:
    """Set ``key`` to ``value`` (4 digits) in the entries of ``tried`` that are ``c``."""
    for entry in tried:
        if _is(entry, c):
            entry[key] = round(float(value), 4)


def _is(entry: dict[str, object], c: _Candidate) -> bool:
    """Whether ``entry`` of ``tried`` is ``c``."""
    return entry["k"] == c.schedule.k and entry["layout"] == c.name and \
        entry["tolerance_percent"] == c.tolerance and \
        entry.get("shallow", False) == bool(c.schedule.extra.get("shallow")) and \
        entry.get("fill_swaps", False) == bool(c.schedule.extra.get("fill_swaps"))


def _even_margin(name: str, laid: CollectivePlan, best_name: str, best: CollectivePlan
                 ) -> Fraction:
    """What a layout must gain at 1 GiB over the best so far to replace it: EVEN_MARGIN for
    layout 6 (unit trees shared evenly), whose single-chunk messages pipeline less deeply
    at smaller sizes; minus EVEN_MARGIN for a layout whose largest tree is no smaller than layout
    5's it would replace; else nothing."""
    if name.startswith("shared evenly"):
        return EVEN_MARGIN
    if best_name.startswith("shared evenly") and \
            max(t.share for t in laid.trees) >= max(t.share for t in best.trees):
        return -EVEN_MARGIN
    return Fraction(0)
