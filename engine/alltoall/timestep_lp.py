"""The time-stepped all-to-all LP: store-and-forward relays, solved with HiGHS.

Basu et al. (arXiv:2309.13541), "time-stepped MCF": where a relay stores a whole message
before forwarding it, the schedule runs in T steps of equal length τ, and a compute node can
forward in step t+1 only what it held at the end of step t. This is a multi-commodity flow
over the *time-expanded* network (Ford-Fulkerson's flows over time):

* layer t = 0..T holds a copy of every compute node (what it has at the end of step t);
  holdover arcs (v, t) -> (v, t+1) keep data at v, uncapacitated;
* a link u -> v in step t runs from u's layer t-1 to v's layer t, carrying at most
  c(u, v)·τ; switches cut through (they hold nothing): a link into a switch in step t
  enters the switch's step-t copy, and links out of it in the same step leave it;
* the source s may send its own data in any step; every other compute node must hold
  exactly D of s's data at the end (layer T) — what it relays it must pass on.

As in the link LP (:mod:`.lp`), commodities are aggregated per source (a single-source
flow over the time-expanded network splits into one path per destination). With τ = 1
and link bandwidths in GB/s, D is GB per pair; a per-rank buffer of M bytes (M/N per
pair) then takes T·M/(N·D), so the store-and-forward algbw is N·D/T (per-step latency
aside). It never exceeds the fluid optimum N·λ* of the link LP, and approaches it as T
grows, which :func:`solve_time_steps` checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix

from canopy.engine.alltoall.lp import METHOD, TOLERANCE, usable_arcs
from canopy.engine.alltoall.problem import AllToAllProblem
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.limits import MAX_LP_NONZEROS, MAX_TIME_STEPS, LimitError


@dataclass(frozen=True)
class TimeSteppedResult:
    """The time-stepped LP's optimum with ``steps`` steps: every ordered pair receives
    ``pair_data`` GB in steps of 1 s (floating point, HiGHS tolerance ``tolerance``);
    ``step_loads[t][(u, v)]`` is the data on link u -> v in step t+1."""

    steps: int
    num_compute: int
    pair_data: float
    step_loads: tuple[dict[tuple[str, str], float], ...]
    tolerance: float = TOLERANCE

    @property
    def algbw(self) -> float:
        """N·D/T GB/s: a per-rank buffer of M bytes takes M / algbw (latency aside)."""
        return self.num_compute * self.pair_data / self.steps


def solve_time_steps(problem: AllToAllProblem, steps: int) -> TimeSteppedResult:
    """Maximise D over ``steps`` store-and-forward steps (module docstring). Raises
    ScheduleError when ``steps`` cannot reach every pair."""
    if not 1 <= steps <= MAX_TIME_STEPS:
        raise ScheduleError(f"the time-stepped LP takes 1 to {MAX_TIME_STEPS:,} steps "
                            f"(docs/limits.md), not {steps:,}.")
    per_step = 3 * sum(len(usable_arcs(problem, s)) for s in problem.compute)
    if per_step * steps > MAX_LP_NONZEROS:
        raise LimitError(f"the time-stepped LP of {steps:,} steps would have about "
                         f"{per_step * steps:,} matrix entries, over Canopy's limit of "
                         f"{MAX_LP_NONZEROS:,} (docs/limits.md); this network takes at most "
                         f"{max(1, MAX_LP_NONZEROS // per_step):,} steps.")
    is_compute = np.zeros(problem.n, dtype=bool)
    is_compute[list(problem.compute)] = True
    cap = problem.float_capacity()
    scale = float(cap.max())
    keys: list[tuple[int, int, int]] = []     # (source, arc, step); holdovers (-1, -1, -1)
    rows: list[int] = []
    entries: list[int] = []
    signs: list[float] = []
    demand_rows: list[int] = []
    nrows = 0

    def add(row: int, col: int, sign: float) -> None:
        rows.append(row)
        entries.append(col)
        signs.append(sign)

    for k, s in enumerate(problem.compute):
        # one conservation row per (node, layer); the source's own rows are dropped
        node_row: dict[tuple[int, int], int] = {}
        for t in range(1, steps + 1):
            for v in range(problem.n):
                if v != s:
                    node_row[(v, t)] = nrows
                    nrows += 1
        for a in usable_arcs(problem, s):
            u, v = int(problem.tails[a]), int(problem.heads[a])
            for t in range(1, steps + 1):
                if u != s and is_compute[u] and t == 1:
                    continue                         # relays hold nothing before step 1
                col = len(keys)
                keys.append((k, int(a), t))
                if u != s:
                    # a compute relay sends what it held at layer t-1; a switch, what
                    # entered it in step t
                    if is_compute[u]:
                        add(node_row[(u, t - 1)], col, -1.0)
                    else:
                        add(node_row[(u, t)], col, -1.0)
                add(node_row[(v, t)], col, 1.0)
        for v in problem.compute:
            if v == s:
                continue
            for t in range(1, steps):
                col = len(keys)
                keys.append((-1, -1, -1))
                add(node_row[(v, t)], col, -1.0)
                add(node_row[(v, t + 1)], col, 1.0)
            demand_rows.append(node_row[(v, steps)])
    d_col = len(keys)
    for row in demand_rows:
        add(row, d_col, -1.0)
    nvar = d_col + 1
    a_eq = coo_matrix((signs, (rows, entries)), shape=(nrows, nvar)).tocsr()
    flows = [(i, key) for i, key in enumerate(keys) if key[0] >= 0]
    cap_rows = [key[1] * steps + key[2] - 1 for _, key in flows]
    a_ub = coo_matrix((np.ones(len(flows)), (cap_rows, [i for i, _ in flows])),
                      shape=(problem.m * steps, nvar)).tocsr()
    b_ub = np.repeat(cap / scale, steps)
    c = np.zeros(nvar)
    c[d_col] = -1.0
    res = linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=np.zeros(nrows),
                  bounds=(0, None), method=METHOD,
                  options={"primal_feasibility_tolerance": TOLERANCE,
                           "dual_feasibility_tolerance": TOLERANCE})
    if res.status != 0:
        raise ScheduleError(f"HiGHS could not solve the time-stepped LP ({res.message}).")
    data = float(res.x[d_col]) * scale
    if data <= TOLERANCE * scale:
        raise ScheduleError(f"{steps} store-and-forward step{'s' if steps != 1 else ''} "
                            "cannot reach every pair of compute nodes; allow more steps.")
    loads: list[dict[tuple[str, str], float]] = [{} for _ in range(steps)]
    names = problem.names
    for i, (_, a, t) in flows:
        x = float(res.x[i]) * scale
        if x > TOLERANCE * scale:
            link = (names[int(problem.tails[a])], names[int(problem.heads[a])])
            loads[t - 1][link] = loads[t - 1].get(link, 0.0) + x
    return TimeSteppedResult(steps, problem.num_compute, data, tuple(loads))


def check_against_fluid(result: TimeSteppedResult, fluid_algbw: Fraction) -> None:
    """The stepped schedule is a fluid schedule too: its algbw cannot exceed N·λ*."""
    if result.algbw > float(fluid_algbw) * (1 + 1e-6):
        raise ScheduleError("the time-stepped LP claims more than the fluid optimum allows, "
                            "which is a bug in Canopy.")
