"""Fewest trees per node at the optimum, or within a tolerance of it (ForestColl: Zhao et al.,
arXiv:2402.06787, §4.5, App. C.4).

Prop. 3 gives the smallest k whose trees all carry the same bandwidth y = gcd(x*, {b_e}),
but a schedule with fewer trees often reaches the same x*: with k trees per node and
capacities floor(U·b_e) (Thm 13) the per-node rate is k/U, so k reaches a target rate
x_t iff the fixed-k test (Thm 5 on G⃗_k(floor(U·b_e))) passes at U = k/x_t (Thm 14:
feasibility is monotone in U).

Candidates k = 1, 2, ... are tried in order. Before the N maxflows of the full test,
each k must pass a necessary test on every cut S met so far (S* first):
Σ_{e ∈ δ+(S)} floor(U·b_e) >= k·|S ∩ V_c|. At the optimum (x_t = x*) on S* this says
exactly that k·b_e/x* is an integer on every link leaving S*, since Σ b_e/x* = |S*∩V_c|.
Every cut a failed flow test returns joins the list, so each cut rules out all later k it
can. The search ends at the latest at Prop. 3's k, where floor(U·b_e) = b_e/y exactly;
with awkward bandwidths that k can be astronomically large, so past SEARCH_LIMIT
candidates it goes straight to Prop. 3's k.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction

from canopy.engine.forestcoll.optimum import Optimum, find_fixed_k, rational_gcd
from canopy.engine.model.limits import number_text
from canopy.engine.model.progress import Progress, report
from canopy.engine.model.schedule import Schedule
from canopy.engine.network.indexed import Network, source_network, weakest_sink

SEARCH_LIMIT = 10_000
"""Candidates k tried one by one before the search settles for Prop. 3's k."""


@dataclass
class SearchStats:
    """What the search cost: k values rejected by a cut alone, and full flow tests."""

    cut_rejected: int = 0
    flow_tests: int = 0
    cuts: int = 0
    tried: list[int] = field(default_factory=list)  # k that passed but did not build


@dataclass(frozen=True)
class _Cut:
    demand: int                       # |S ∩ V_c|
    ratios: tuple[tuple[int, int], ...]  # (p, q) with U·b_e = k·p/q for each e ∈ δ+(S)

    def admits(self, k: int) -> bool:
        return sum(k * p // q for p, q in self.ratios) >= k * self.demand


def _cut(net: Network, side: set[int], unit: Fraction) -> _Cut:
    """The cut S = ``side`` with U = k·unit: ratios b_e·unit over the links leaving S."""
    ratios = []
    for (a, b), c in net.capacity.items():
        if a in side and b not in side:
            r = c * unit
            ratios.append((r.numerator, r.denominator))
    return _Cut(sum(1 for c in net.compute if c in side), tuple(ratios))


def next_breakpoint(net: Network, u: Fraction) -> Fraction:
    """The smallest U' > u at which some floor(U'·b_e) grows."""
    return min(Fraction(math.floor(u * c) + 1) / c for c in net.capacity.values())


def balanced_u(net: Network, k: int, inverse_x: Fraction) -> Fraction:
    """The smallest U >= k/x* that makes every U·b_e an integer: U = m/g with
    g = gcd{b_e}. Capacities U·b_e are then proportional to b, so every node stays
    balanced (Eulerian: Thm 7 isolates every switch) and the fixed-k test passes
    because U >= k/x* (Thm 1 scaled by U). So every k has a schedule, at
    U <= k/x* + 1/g."""
    g = rational_gcd(list(net.capacity.values()))
    return Fraction(math.ceil(k * inverse_x * g)) / g


def target_share(tolerance: Fraction) -> Fraction:
    """The fraction of x* a schedule within ``tolerance`` percent must reach."""
    if not 0 <= tolerance < 100:
        raise ValueError(f"tolerance must be in [0, 100) percent, not {tolerance}")
    return 1 - tolerance / 100


def fewest_k_candidates(net: Network, opt: Optimum, tolerance: Fraction = Fraction(0),
                        progress: Progress | None = None,
                        stats: SearchStats | None = None) -> Iterator[tuple[int, Fraction]]:
    """Yield (k, U) in increasing k for every k whose best fixed-k rate k/U is within
    ``tolerance`` percent of x*; U is the smallest such (exactly k/x* at tolerance 0).

    The caller takes the first one it can build; Prop. 3's k always comes last at the
    latest. ``progress`` may raise Cancelled between candidates.
    """
    stats = SearchStats() if stats is None else stats
    share = target_share(tolerance)
    unit = opt.inverse_x / share          # U = k·unit reaches share·x* exactly
    n = len(net.compute)
    cuts = [_cut(net, set(opt.bottleneck_cut), unit)]
    stats.cuts = 1
    k_max = opt.k
    for k in range(1, min(k_max, SEARCH_LIMIT) + 1):
        report(progress, "fewest k", (k - 1) / k_max)
        if not all(cut.admits(k) for cut in cuts):
            stats.cut_rejected += 1
            continue
        u = k * unit
        caps = {e: int(k * (c * unit)) for e, c in net.capacity.items()}
        stats.flow_tests += 1
        value, _, side = weakest_sink(source_network(net, caps, k), net, stop_below=n * k)
        if value < n * k:
            cuts.append(_cut(net, set(side) - {net.source}, unit))
            stats.cuts += 1
            continue
        if share != 1:
            u = find_fixed_k(net, k, opt).u_star   # the best U for this k, at most k·unit
        yield k, u
    if k_max > SEARCH_LIMIT:
        yield k_max, k_max * opt.inverse_x      # Prop. 3: capacities b_e / y, exact


def trees_per_gpu(k: int) -> str:
    """ "1 tree per GPU", "13 trees per GPU": k, the trees rooted at every compute node."""
    return f"{number_text(k)} tree{'' if k == 1 else 's'} per GPU"


def describe_k(schedule: Schedule) -> str:
    """How many trees a schedule takes and what they reach, in words first and notation
    second, e.g. "1 tree per GPU reaches the optimum (k = 1; Prop. 3's k = 1625)"."""
    share = schedule.algbw / schedule.optimal_algbw
    k = schedule.k
    verb = "reaches" if k == 1 else "reach"
    if schedule.fixed_k:
        reach = (f"{trees_per_gpu(k)}, as asked, {verb} {float(share) * 100:.2f} % of the "
                 f"optimum (k = {number_text(k)} fixed")
    elif share == 1:
        reach = f"{trees_per_gpu(k)} {verb} the optimum (k = {number_text(k)}"
    else:
        tolerance = schedule.extra.get("k_search", {}).get("tolerance_percent", "0")
        reach = (f"{trees_per_gpu(k)} {'is' if k == 1 else 'are'} the fewest within "
                 f"{tolerance} % of the optimum, {float(share) * 100:.2f} % of it "
                 f"(k = {number_text(k)}")
    return f"{reach}; Prop. 3's k = {number_text(schedule.optimum.k)})"
