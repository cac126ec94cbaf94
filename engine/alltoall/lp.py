"""The link-based maximum concurrent flow LP, solved with HiGHS (scipy.optimize.linprog).

Basu et al. (arXiv:2309.13541), "link-based schedules" (Fig. 1): flows on links. Commodities
with the same source are aggregated: ``f_s(e)`` is the flow on arc ``e`` of everything that
compute node ``s`` sends, with conservation

    in_s(v) - out_s(v) = λ  at every compute node v ≠ s,   0 at every switch,

and ``Σ_s f_s(e) ≤ c(e)`` on every arc. A single-source flow with these demands splits
into one path flow per destination, so the aggregation loses nothing; it keeps the LP at
N·|E| variables instead of N²·|E|.

Two phases: the first maximises λ and yields the capacity duals (the length function of
the dual certificate, :mod:`canopy.engine.alltoall.bound`); the second fixes λ and
minimises total flow at that λ, so that flows run on short routes and carry no cycles.

HiGHS works in floating point with primal and dual feasibility tolerance
:data:`TOLERANCE`; the exact optimum is recovered from its answer and certified elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix, csr_matrix
from scipy.sparse.csgraph import shortest_path

from canopy.engine.alltoall.problem import AllToAllProblem
from canopy.engine.alltoall.schedule import RATIONAL_DENOMINATOR
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.limits import LP_BYTES_PER_ENTRY, check_memory
from canopy.engine.model.progress import Progress, report

TOLERANCE = 1e-9
#: HiGHS's interior point method with crossover (a vertex solution) is the fastest here.
METHOD = "highs-ipm"


@dataclass(frozen=True)
class LinkFlows:
    """HiGHS's answer in units of ``scale`` GB/s: ``flow[k, a]`` is source ``compute[k]``'s
    flow on arc ``a``; ``duals[a] ≥ 0`` the capacity duals of phase 1."""

    lam: float
    flow: np.ndarray
    duals: np.ndarray
    scale: float


def usable_arcs(problem: AllToAllProblem, source: int) -> np.ndarray:
    """Indices of the arcs that flows from ``source`` may use."""
    tails, heads = problem.tails, problem.heads
    ok = (heads != source) & ((tails == source) | problem.relay[tails])
    return np.flatnonzero(ok)


def _options() -> dict[str, float]:
    return {"primal_feasibility_tolerance": TOLERANCE, "dual_feasibility_tolerance": TOLERANCE}


@dataclass(frozen=True)
class _LinkLP:
    """The aggregated link LP's matrices over the flow variables ``(src[i], arc[i])`` and a
    last column for λ; capacities in units of ``scale`` GB/s."""

    a_eq: csr_matrix
    a_ub: csr_matrix
    cap: np.ndarray
    src: np.ndarray
    arc: np.ndarray
    scale: float

    @property
    def lam_col(self) -> int:
        return len(self.src)

    def flows(self, x: np.ndarray, num_sources: int, m: int) -> np.ndarray:
        flow = np.zeros((num_sources, m))
        flow[self.src, self.arc] = np.maximum(x[:self.lam_col], 0.0)
        return flow


def _build(problem: AllToAllProblem, arcs_of: Callable[[int], np.ndarray]) -> _LinkLP:
    """The LP of the module docstring with source ``s``'s flow on ``arcs_of(s)`` only."""
    n, m, big_n = problem.n, problem.m, problem.num_compute
    cap = problem.float_capacity()
    scale = float(cap.max())
    is_compute = np.zeros(n, dtype=bool)
    is_compute[list(problem.compute)] = True
    rows, cols, vals = [], [], []
    var_source, var_arc = [], []
    offset = 0
    for k, s in enumerate(problem.compute):
        arcs = arcs_of(s)
        count = len(arcs)
        var_source.append(np.full(count, k))
        var_arc.append(arcs)
        ids = offset + np.arange(count)
        # conservation rows of source k: node v != s gets row k*(n-1) + (v - (v > s))
        for ends, sign in ((problem.heads[arcs], 1.0), (problem.tails[arcs], -1.0)):
            keep = ends != s
            rows.append(k * (n - 1) + ends[keep] - (ends[keep] > s))
            cols.append(ids[keep])
            vals.append(np.full(int(keep.sum()), sign))
        offset += count
    num_flow = offset
    demand_rows = np.array([k * (n - 1) + v - (v > s) for k, s in enumerate(problem.compute)
                            for v in range(n) if v != s and is_compute[v]])
    rows.append(demand_rows)
    cols.append(np.full(len(demand_rows), num_flow))
    vals.append(np.full(len(demand_rows), -1.0))
    a_eq = coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(big_n * (n - 1), num_flow + 1)).tocsr()
    arc = np.concatenate(var_arc)
    a_ub = coo_matrix((np.ones(num_flow), (arc, np.arange(num_flow))),
                      shape=(m, num_flow + 1)).tocsr()
    return _LinkLP(a_eq, a_ub, cap / scale, np.concatenate(var_source), arc, scale)


def lp_entries(problem: AllToAllProblem) -> int:
    """Constraint-matrix entries of the link LP: two conservation entries and one capacity
    entry per flow variable (a source's usable arc), one demand entry per ordered pair."""
    big_n = problem.num_compute
    return 3 * sum(len(usable_arcs(problem, s)) for s in problem.compute) + big_n * big_n


def _two_phases(a_ub: csr_matrix, cap: np.ndarray, a_eq: csr_matrix,
                progress: Progress | None, label: str) -> tuple[float, np.ndarray, np.ndarray]:
    """The module docstring's two phases on an LP whose last column is λ: (λ, the capacity
    duals of phase 1, phase 2's solution, or phase 1's where phase 2 fails)."""
    lam_col = a_eq.shape[1] - 1
    b_eq = np.zeros(a_eq.shape[0])
    report(progress, f"{label}: maximum λ", 0.0)
    c = np.zeros(lam_col + 1)
    c[lam_col] = -1.0
    first = linprog(c, A_ub=a_ub, b_ub=cap, A_eq=a_eq, b_eq=b_eq, bounds=(0, None),
                    method=METHOD, options=_options())
    if first.status != 0:
        raise ScheduleError(f"HiGHS could not solve the all-to-all LP ({first.message}).")
    lam = float(first.x[lam_col])
    duals = np.maximum(-np.asarray(first.ineqlin.marginals), 0.0)

    report(progress, f"{label}: shortest flows", 0.5)
    c = np.ones(lam_col + 1)
    c[lam_col] = 0.0
    bounds = np.zeros((lam_col + 1, 2))
    bounds[:, 1] = np.inf
    # λ fixed at the phase-1 value read as a small fraction: the phase-2 vertex then has
    # small denominators too, which exact_schedule recovers
    bounds[lam_col] = float(Fraction(lam).limit_denominator(RATIONAL_DENOMINATOR))
    second = linprog(c, A_ub=a_ub, b_ub=cap, A_eq=a_eq, b_eq=b_eq, bounds=bounds,
                     method=METHOD, options=_options())
    return lam, duals, (second.x if second.status == 0 else first.x)


def check_link_lp_memory(problem: AllToAllProblem) -> None:
    """Raise LimitError (one sentence) when the link LP's estimated memory passes the
    budget: a count of the matrix's entries, quick at any size."""
    check_memory(f"the all-to-all LP of {problem.num_compute:,} GPUs",
                 LP_BYTES_PER_ENTRY * lp_entries(problem),
                 "--method decomposition needs far less")


def solve_link_lp(problem: AllToAllProblem, progress: Progress | None = None) -> LinkFlows:
    """Solve the aggregated link LP in two phases (module docstring); refused first when
    its estimated memory passes the budget."""
    check_link_lp_memory(problem)
    lp = _build(problem, lambda s: usable_arcs(problem, s))
    lam, duals, x = _two_phases(lp.a_ub, lp.cap, lp.a_eq, progress, "link LP")
    report(progress, "link LP: shortest flows", 1.0)
    return LinkFlows(lam, lp.flows(x, problem.num_compute, problem.m), duals, lp.scale)


def shortest_arcs(problem: AllToAllProblem) -> Callable[[int], np.ndarray]:
    """Per source, the usable arcs that lie on one of its shortest routes in hops (the arcs
    ``(u, v)`` with ``dist(s, v) = dist(s, u) + 1``, relaying only where nodes may)."""
    n = problem.n
    relaying = problem.relay[problem.tails]
    graph = csr_matrix((np.ones(int(relaying.sum())),
                        (problem.tails[relaying], problem.heads[relaying])), shape=(n, n))
    through = shortest_path(graph, unweighted=True)     # through relays only

    def arcs_of(s: int) -> np.ndarray:
        first = problem.heads[problem.tails == s]
        dist = 1 + through[first].min(axis=0) if first.size else np.full(n, np.inf)
        dist[first] = 1
        dist[s] = 0
        arcs = usable_arcs(problem, s)
        on_route = dist[problem.heads[arcs]] == dist[problem.tails[arcs]] + 1
        return arcs[on_route]

    return arcs_of


def solve_at_hop_bound(problem: AllToAllProblem, lam: Fraction,
                       progress: Progress | None = None) -> LinkFlows | None:
    """Flows serving every pair at ``lam`` GB/s, the hop-length bound Σc / Σ dist (Basu et
    al., arXiv:2309.13541, the length certificate with every length 1), or None when no
    flows reach it. At that rate every arc is full and every unit of flow takes a shortest
    route (the flows' total use, λ·Σ dist, equals Σc), so the LP keeps only the arcs on
    shortest routes and has no objective: a feasibility problem, much smaller than the
    two phases of :func:`solve_link_lp`, with λ known and optimal when it is feasible.
    Refused first (LimitError) when its estimated memory passes the budget."""
    arcs_of = shortest_arcs(problem)
    entries = 3 * sum(len(arcs_of(s)) for s in problem.compute) + problem.num_compute ** 2
    check_memory(f"the all-to-all LP at the hop bound of {problem.num_compute:,} GPUs",
                 LP_BYTES_PER_ENTRY * entries, "--method decomposition needs far less")
    lp = _build(problem, arcs_of)
    lam_col = lp.lam_col
    report(progress, "link LP: flows at the hop bound", 0.0)
    bounds = np.zeros((lam_col + 1, 2))
    bounds[:, 1] = np.inf
    bounds[lam_col] = float(lam) / lp.scale
    got = linprog(np.zeros(lam_col + 1), A_ub=lp.a_ub, b_ub=lp.cap, A_eq=lp.a_eq,
                  b_eq=np.zeros(lp.a_eq.shape[0]), bounds=bounds, method=METHOD,
                  options=_options())
    report(progress, "link LP: flows at the hop bound", 1.0)
    if got.status != 0:
        return None
    return LinkFlows(float(lam) / lp.scale, lp.flows(got.x, problem.num_compute, problem.m),
                     np.ones(problem.m), lp.scale)


def solve_folded_lp(problem: AllToAllProblem, arc_maps: list[np.ndarray], orbits: np.ndarray,
                    progress: Progress | None = None) -> LinkFlows:
    """The link LP folded by automorphisms (:mod:`canopy.engine.alltoall.symmetry`):
    only the first compute node's flow is a variable, source v's being its image under
    ``arc_maps[v]`` (an automorphism carrying the first onto v), and every arc carries
    the images of all sources' flows. The same two phases as :func:`solve_link_lp`, N
    times fewer variables; the answer is unfolded into every source's flow, and the
    capacity duals are averaged over the arcs' ``orbits`` (an invariant length function,
    as the certificate needs)."""
    n, m, big_n = problem.n, problem.m, problem.num_compute
    cap = problem.float_capacity()
    scale = float(cap.max())
    cap = cap / scale
    s = problem.compute[0]
    is_compute = np.zeros(n, dtype=bool)
    is_compute[list(problem.compute)] = True
    arcs = usable_arcs(problem, s)
    count = len(arcs)
    ids = np.arange(count)
    rows, cols, vals = [], [], []
    for ends, sign in ((problem.heads[arcs], 1.0), (problem.tails[arcs], -1.0)):
        keep = ends != s
        rows.append(ends[keep] - (ends[keep] > s))
        cols.append(ids[keep])
        vals.append(np.full(int(keep.sum()), sign))
    demand = np.array([v - (v > s) for v in range(n) if v != s and is_compute[v]])
    rows.append(demand)
    cols.append(np.full(len(demand), count))
    vals.append(np.full(len(demand), -1.0))
    a_eq = coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(n - 1, count + 1)).tocsr()
    images = np.concatenate([maps[arcs] for maps in arc_maps])
    a_ub = coo_matrix((np.ones(len(images)), (images, np.tile(ids, big_n))),
                      shape=(m, count + 1)).tocsr()
    lam, raw, x = _two_phases(a_ub, cap, a_eq, progress, "link LP (folded)")
    sums = np.bincount(orbits, weights=raw, minlength=m)
    sizes = np.bincount(orbits, minlength=m)
    duals = sums[orbits] / sizes[orbits]
    x = np.maximum(x[:count], 0.0)
    flow = np.zeros((big_n, m))
    for k, maps in enumerate(arc_maps):
        flow[k, maps[arcs]] = x
    report(progress, "link LP (folded): shortest flows", 1.0)
    return LinkFlows(lam, flow, duals, scale)
