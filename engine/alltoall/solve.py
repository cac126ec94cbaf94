"""All-to-all end to end: optimum, schedule, certificate, bounds.

``solve_alltoall`` picks the exact link LP for small and medium networks and the
decomposition (:mod:`.decomposition`) for large ones (``method="auto"``). The link LP first
tries the hop-length bound on shortest routes alone (:func:`.lp.solve_at_hop_bound`: when
flows reach it, it is λ* and the two phases are skipped). It turns the solver's
flows into an exact, verified schedule, and certifies it with the length bound computed
in exact arithmetic. The result is *exact* when the verified schedule's rate equals the
certified bound: then it is λ* itself, whatever the solver's tolerance. Otherwise it
states the gap between the two.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from canopy.engine.alltoall import bound as bounds
from canopy.engine.alltoall.decomposition import solve_decomposition
from canopy.engine.alltoall.exact import exact_flows
from canopy.engine.alltoall.lp import (
    TOLERANCE,
    LinkFlows,
    check_link_lp_memory,
    solve_at_hop_bound,
    solve_folded_lp,
    solve_link_lp,
)
from canopy.engine.alltoall.nic import augment_host_nic
from canopy.engine.alltoall.paths import decompose
from canopy.engine.alltoall.problem import AllToAllProblem, build_problem
from canopy.engine.alltoall.schedule import (
    RATIONAL_DENOMINATOR,
    AllToAllSchedule,
    exact_schedule,
    verify,
)
from canopy.engine.alltoall.symmetry import arc_orbits, transitive_maps
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.limits import LimitError
from canopy.engine.model.progress import Progress, report
from canopy.engine.model.topology import Topology

METHODS = ("auto", "lp", "decomposition")
#: ``method="auto"`` uses the link LP up to this many flow variables (N·|E|).
LP_VARIABLES = 150_000
#: Ball cuts are tried for the cut bound on networks up to this many nodes.
BALL_CUT_NODES = 256


@dataclass
class AllToAllResult:
    """λ (GB/s per ordered pair) achieved by a verified schedule, and what bounds it.

    ``bound`` is the certified upper bound on λ* (the length certificate), ``cut_bound``
    the best cut ratio found (``cut_side`` its source side), ``regular_bound`` Theorem 1's
    bound where it applies. ``exact`` means ``lam == bound == λ*``."""

    problem: AllToAllProblem
    schedule: AllToAllSchedule
    method: str
    bound: Fraction
    cut_bound: Fraction
    cut_side: set[int]
    regular_bound: Fraction | None
    bottleneck: list[int]
    seconds: float
    tolerance: float = TOLERANCE
    iterations: int = 0
    #: the host-NIC bandwidth and forwarding style when the topology was augmented
    nic: tuple[Fraction, str] | None = None

    @property
    def lam(self) -> Fraction:
        return self.schedule.lam

    @property
    def exact(self) -> bool:
        return self.lam == self.bound

    @property
    def num_compute(self) -> int:
        return self.problem.num_compute

    @property
    def algbw(self) -> Fraction:
        """All-to-all algbw = N·λ (GB/s): a per-rank buffer of M bytes takes M / algbw."""
        return self.num_compute * self.lam

    @property
    def bound_algbw(self) -> Fraction:
        return self.num_compute * self.bound

    @property
    def cut_bound_algbw(self) -> Fraction:
        return self.num_compute * self.cut_bound

    @property
    def gap(self) -> float:
        """1 - λ / bound: 0 when exact."""
        return float(1 - self.lam / self.bound)

    def bottleneck_links(self) -> list[tuple[str, str]]:
        names = self.problem.names
        return [(names[int(self.problem.tails[a])], names[int(self.problem.heads[a])])
                for a in self.bottleneck]


def solve_alltoall(topo: Topology, forwarding: str = "all", method: str = "auto",
                   progress: Progress | None = None, where: str = "",
                   target_gap: float = 0.01, nic_bandwidth: Fraction | None = None,
                   nic_forwarding: str = "nic") -> AllToAllResult:
    """The all-to-all optimum of ``topo`` with a verified schedule (module docstring).

    ``target_gap`` is where the decomposition stops (relative gap to its bound). With
    ``nic_bandwidth`` (GB/s) every compute node reaches its links through a NIC with that
    host-NIC bandwidth, forwarding in the NIC or the host (:mod:`.nic`; Basu et al.,
    arXiv:2309.13541, Fig. 2). Failed links and switches carry nothing. Raises TopologyError
    for unusable input and ScheduleError if verification fails. ``method="lp"`` is refused
    first (LimitError) when the link LP would pass the memory budget, before any bound is
    computed; ``"auto"`` then takes the decomposition."""
    if method not in METHODS:
        raise ScheduleError(f"method must be one of {', '.join(METHODS)}, not '{method}'.")
    start = time.process_time()
    if nic_bandwidth is not None:
        topo = augment_host_nic(topo, nic_bandwidth, nic_forwarding)
    problem = build_problem(topo, forwarding, where)
    if method == "auto":
        usable = problem.num_compute * problem.m
        method = "lp" if usable <= LP_VARIABLES and _link_lp_fits(problem) \
            else "decomposition"
    elif method == "lp":
        # first: the bounds and the symmetry search before it take minutes at scale, and
        # the link LP is what the method falls back to when neither folding nor the hop
        # bound gives the optimum
        check_link_lp_memory(problem)
    unit = max(problem.capacity)
    iterations = 0
    hops = bounds.length_bound(problem, [Fraction(1)] * problem.m)
    if method == "lp":
        folded = transitive_maps(problem)
        schedule: AllToAllSchedule | None = None
        lengths: list[Fraction] = []
        if folded is not None:
            flows = solve_folded_lp(problem, folded[1], arc_orbits(problem, folded[1]),
                                    progress)
            schedule, lengths = _lp_schedule(problem, flows, unit, progress, folded)
        if schedule is None:
            schedule = _at_hop_bound(problem, hops, unit, progress)
            lengths = [Fraction(1)] * problem.m
        if schedule is None:          # neither folded nor at the hop bound: the whole LP
            flows = solve_link_lp(problem, progress)
            schedule, lengths = _lp_schedule(problem, flows, unit, progress)
        assert schedule is not None
    else:
        cg = solve_decomposition(problem, progress, target_gap=target_gap)
        iterations = cg.iterations
        report(progress, "exact schedule", 0.0)
        schedule = exact_schedule(problem, cg.routes, cg.rates, unit, rational=False)
        lengths = [Fraction(int(x)) for x in cg.lengths]
    report(progress, "certificate", 0.5)
    certified = _certify(problem, lengths)
    best = min(x for x in (certified, hops) if x is not None)
    den = _lcm_den(lengths)
    ints = [int(x * den) for x in lengths]
    candidates = bounds.ball_cuts(problem, ints) if problem.n <= BALL_CUT_NODES else []
    cut, side = bounds.cut_bound(problem, candidates)
    if schedule.lam > best or schedule.lam > cut:
        raise ScheduleError("the all-to-all schedule claims more than an upper bound allows, "
                            "which is a bug in Canopy.")
    bottleneck = _bottleneck(schedule, best)
    report(progress, "certificate", 1.0)
    nic = None if nic_bandwidth is None else (nic_bandwidth, nic_forwarding)
    return AllToAllResult(problem, schedule, method, best, cut, side,
                          bounds.regular_bound(problem), bottleneck,
                          time.process_time() - start, iterations=iterations, nic=nic)


def _link_lp_fits(problem: AllToAllProblem) -> bool:
    try:
        check_link_lp_memory(problem)
    except LimitError:
        return False
    return True


def _at_hop_bound(problem: AllToAllProblem, hops: Fraction | None, unit: Fraction,
                  progress: Progress | None) -> AllToAllSchedule | None:
    """The exact schedule at the hop-length bound when flows on shortest routes reach it
    (:func:`.lp.solve_at_hop_bound`; on symmetric networks such as tori they do), else
    None: the bound is then λ* itself, with no LP for the maximum."""
    if hops is None:
        return None
    flows = solve_at_hop_bound(problem, hops, progress)
    if flows is None:
        return None
    report(progress, "exact schedule", 0.0)
    return _exact_lp_schedule(problem, flows.flow, unit, hops)


def _lp_schedule(problem: AllToAllProblem, flows: LinkFlows, unit: Fraction,
                 progress: Progress | None,
                 folded: tuple[list[np.ndarray], list[np.ndarray]] | None = None
                 ) -> tuple[AllToAllSchedule | None, list[Fraction]]:
    """The exact schedule of the link LP's ``flows`` and the length function of its
    duals: the exact flows on HiGHS's support at the certified rate, else HiGHS's flows
    decomposed and rounded; for the folded LP's flows (``folded``: the automorphisms they
    were folded by, as nodes and arcs) None unless the exact flows meet the certificate
    (the whole LP is solved then)."""
    fallback = folded is None
    lengths = [Fraction(float(y)).limit_denominator(RATIONAL_DENOMINATOR)
               for y in flows.duals]
    report(progress, "exact schedule", 0.0)
    certified = _certify(problem, lengths)
    schedule = _exact_lp_schedule(problem, flows.flow, unit, certified, folded)
    if schedule is None and fallback:
        routes, rates = decompose(problem, flows.flow, flows.lam)
        schedule = exact_schedule(problem, routes, rates, unit)
    if not fallback and (schedule is None or schedule.lam != certified):
        return None, lengths
    return schedule, lengths


def _exact_lp_schedule(problem: AllToAllProblem, flow: np.ndarray, unit: Fraction,
                       bound: Fraction | None,
                       folded: tuple[list[np.ndarray], list[np.ndarray]] | None = None
                       ) -> AllToAllSchedule | None:
    """The schedule of the exact flows on HiGHS's support at rate ``bound`` (:mod:`.exact`),
    or None when there are none."""
    if bound is None:
        return None
    got = exact_flows(problem, flow, unit, bound, None if folded is None else folded[1])
    if got is None:
        return None
    exact, den = got
    routes, rates = decompose(problem, exact, int(bound * den),
                              None if folded is None else folded[0])
    schedule = AllToAllSchedule(problem, routes, [int(r) for r in rates], den)
    verify(schedule)
    return schedule


def _lcm_den(values: list[Fraction]) -> int:
    den = 1
    for x in values:
        den = math.lcm(den, x.denominator)
    return den


def _certify(problem: AllToAllProblem, lengths: list[Fraction]) -> Fraction | None:
    if not any(lengths):
        return None
    return bounds.length_bound(problem, lengths)


def _bottleneck(schedule: AllToAllSchedule, bound: Fraction) -> list[int]:
    """Links the schedule saturates: at their bandwidth when it is exact, else within
    twice the relative gap to ``bound`` of it."""
    slack = 2 * (1 - schedule.lam / bound)
    loads = schedule.arc_loads()
    return [a for a, (load, c) in enumerate(zip(loads, schedule.problem.capacity, strict=True))
            if load >= c * (1 - slack)]
