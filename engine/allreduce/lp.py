"""The allreduce linear program of ForestColl (arXiv:2402.06787) App. E, solved with HiGHS (scipy).

Reduce-scatter + allgather (§4.6) gives every compute node an equal share and the same
bandwidth to both phases. LP (6) lets each node v aggregate and broadcast its own rate
x_v and splits each link into c^RE_e + c^BC_e <= b_e:

    max Σ_v x_v  s.t. for every compute t:
        F(s, t) >= Σ x_v in (links c^BC, arcs s -> v of capacity x_v)   [broadcast]
        F(t, s) >= Σ x_v in (links c^RE, arcs v -> s of capacity x_v)   [reduce]

each maxflow written as flow variables with conservation (App. E). The allreduce then
takes M / Σ x_v, so Σ x_v is its algbw in the nccl-tests sense.

Switches: App. E adds a level of indirection (compute-to-compute bandwidths b' routed
as a multicommodity flow) because trees must become compute-to-compute routes. Here
each phase's link budget is required to be balanced at every switch instead, which
every schedule of routed trees satisfies (each route enters and leaves a switch once);
this keeps the LP small. The LP is therefore an upper bound on every routed allreduce
schedule of this form, and RS + AG's exact value is feasible in it, hence a lower bound.

Checks against independent exact bounds: RS + AG = N·x*/2 (§4.6, feasible: halve every
link) must not exceed the LP value, and the LP value must not exceed the cut bound
min B+(S) over cuts S splitting the compute nodes (summing the two phases' cut
constraints gives b(δ+(S)) >= Σ x_v; information-theoretically, M must leave S).
Both hold up to the stated solver tolerance.

Where the LP wins on the bundled samples (mesh-2d-3x3, mi250-8plus8) it wins by the same
amount with all x_v equal (``equal_rates``): the gain comes from App. E's perspective
(ii), running reduction and broadcast at the same time on split link budgets, so that
low-degree nodes (mesh corners) are leaves of both phases.
:mod:`canopy.engine.allreduce.lp_schedule` turns the equal-rates solution into an exact,
verified schedule and uses it where it beats RS + AG.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from canopy.engine.forestcoll.optimum import find_optimum
from canopy.engine.model.collectives import collective_algbw
from canopy.engine.model.errors import CanopyError
from canopy.engine.network.indexed import Network
from canopy.engine.network.maxflow import FlowNetwork

if TYPE_CHECKING:
    from scipy.sparse import coo_matrix

FEASIBILITY_TOLERANCE = 1e-9   # HiGHS primal and dual feasibility tolerance we set
RELATIVE_MARGIN = 1e-6         # comparisons with the exact bounds allow this much


@dataclass(frozen=True)
class AllreduceLP:
    """LP (6)'s optimum next to the exact bounds it is checked against (GB/s)."""

    value: float                # Σ x_v: allreduce algbw the LP allows
    rates: dict[str, float]     # x_v per compute node
    rs_ag: Fraction             # exact algbw of reduce-scatter + allgather (lower bound)
    cut_bound: Fraction         # exact min B+(S) over cuts splitting V_c (upper bound)
    variables: int
    constraints: int
    tolerance: float = FEASIBILITY_TOLERANCE
    margin: float = RELATIVE_MARGIN
    formulation: str = "flows"  # "flows" (LP (6) as written) or "cuts" (allreduce_cuts)
    # c^RE and c^BC per directed link (node indices of the Network), GB/s, from HiGHS
    reduce_budget: dict[tuple[int, int], float] = field(default_factory=dict, repr=False)
    broadcast_budget: dict[tuple[int, int], float] = field(default_factory=dict, repr=False)

    @property
    def gain(self) -> float:
        """How much the LP beats RS + AG, as a fraction (0 when it does not)."""
        return max(0.0, self.value / float(self.rs_ag) - 1)

    @property
    def beats_rs_ag(self) -> bool:
        return self.gain > self.margin

    def to_dict(self) -> dict[str, object]:
        """For the schedule JSON: floats from HiGHS, exact bounds as "p/q" strings."""
        return {"algbw": round(self.value, 6), "rs_ag_algbw_exact": str(self.rs_ag),
                "cut_bound_exact": str(self.cut_bound), "beats_rs_ag": self.beats_rs_ag,
                "gain_percent": round(self.gain * 100, 4),
                "solver": "HiGHS (scipy.optimize.linprog)", "formulation": self.formulation,
                "feasibility_tolerance": self.tolerance, "used": False,
                "variables": self.variables, "constraints": self.constraints,
                "rates": {v: round(r, 6) for v, r in self.rates.items()}}

    def summary(self) -> str:
        verdict = (f"beats reduce-scatter + allgather by {self.gain * 100:.2f} %"
                   if self.beats_rs_ag else "equals reduce-scatter + allgather")
        return (f"allreduce LP (App. E, HiGHS, feasibility tolerance {self.tolerance:g}): "
                f"{self.value:.4f} GB/s, {verdict} ({float(self.rs_ag):.4f} GB/s); "
                f"cut bound {float(self.cut_bound):.4f} GB/s")


def cut_bound(net: Network) -> Fraction:
    """min B+(S) over S holding some compute nodes but not all: min over v of
    λ(c0, v) and λ(v, c0) for one fixed compute node c0 (every such S separates c0 from
    some v one way or the other)."""
    scale = math.lcm(*(c.denominator for c in net.capacity.values()))
    flow = FlowNetwork(net.n)
    for (a, b), c in net.capacity.items():
        flow.add_arc(a, b, int(c * scale))
    c0, *rest = net.compute
    best = min(min(flow.max_flow(c0, v), flow.max_flow(v, c0)) for v in rest)
    return Fraction(best, scale)


def lp_size(net: Network) -> int:
    """Variables of LP (6) on ``net``: x, two link budgets, two flows per compute node."""
    n_c, m = len(net.compute), len(net.capacity)
    return n_c + 2 * m + 2 * n_c * (m + n_c)


def solve_allreduce_lp(net: Network, equal_rates: bool = False,
                       time_limit: float | None = None) -> AllreduceLP:
    """Solve LP (6) on ``net`` (switch-balanced phase budgets, see the module doc).

    ``equal_rates`` adds x_v = x_u for all compute nodes: only App. E's perspective (ii),
    the split of each link between the phases, is then free. ``time_limit`` (seconds) is
    passed to HiGHS; CanopyError says so when it is reached."""
    compute = list(net.compute)
    n_c, n_v = len(compute), net.n
    edges = list(net.capacity)
    m = len(edges)
    top = max(net.capacity.values())
    b = np.array([float(net.capacity[e] / top) for e in edges])
    # Variable layout: x (n_c) | c_re (m) | c_bc (m) | per t and phase: f_e (m), f_src (n_c)
    x0, re0, bc0 = 0, n_c, n_c + m
    per = m + n_c
    flows0 = n_c + 2 * m
    n_vars = lp_size(net)
    eq_rows: list[tuple[int, int, float]] = []
    ub_rows: list[tuple[int, int, float]] = []
    ub_rhs: list[float] = []
    n_eq = 0

    def ub(entries: list[tuple[int, float]], rhs: float) -> None:
        row = len(ub_rhs)
        ub_rows.extend((row, col, val) for col, val in entries)
        ub_rhs.append(rhs)

    for ti, t in enumerate(compute):
        for phase, cap0 in ((0, bc0), (1, re0)):       # 0 broadcast s -> t, 1 reduce t -> s
            f0 = flows0 + (2 * ti + phase) * per
            # balance[v] is v's net inflow (broadcast, with the arc s -> v) or net outflow
            # (reduce, with the arc v -> s): 0 at every node but t, at least Σ x at t
            sign = 1.0 if phase == 0 else -1.0
            balance: dict[int, list[tuple[int, float]]] = {v: [] for v in range(n_v)}
            for j, (a, bb) in enumerate(edges):
                balance[bb].append((f0 + j, sign))
                balance[a].append((f0 + j, -sign))
                ub([(f0 + j, 1.0), (cap0 + j, -1.0)], 0.0)           # f_e <= c_e
            for j, v in enumerate(compute):
                balance[v].append((f0 + m + j, 1.0))
                ub([(f0 + m + j, 1.0), (x0 + j, -1.0)], 0.0)         # f_s,v <= x_v
            for v, entries in balance.items():
                if v == t:
                    ub([(col, -val) for col, val in entries]
                       + [(x0 + j, 1.0) for j in range(n_c)], 0.0)
                else:
                    eq_rows.extend((n_eq, col, val) for col, val in entries)
                    n_eq += 1
    for j in range(m):
        ub([(re0 + j, 1.0), (bc0 + j, 1.0)], float(b[j]))              # c_re + c_bc <= b
    for w in range(n_v):
        if net.is_compute(w):
            continue
        for cap0 in (re0, bc0):                       # each phase balanced at switches
            entries = [(cap0 + j, 1.0) for j, (_, bb) in enumerate(edges) if bb == w]
            entries += [(cap0 + j, -1.0) for j, (a, _) in enumerate(edges) if a == w]
            eq_rows.extend((n_eq, col, val) for col, val in entries)
            n_eq += 1

    if equal_rates:
        for j in range(1, n_c):
            eq_rows.extend([(n_eq, x0, 1.0), (n_eq, x0 + j, -1.0)])
            n_eq += 1

    from scipy.optimize import linprog  # here: 0.3 s of start-up for allreduce only
    from scipy.sparse import coo_matrix

    def matrix(rows: list[tuple[int, int, float]], count: int) -> coo_matrix:
        r, c, v = zip(*rows, strict=True) if rows else ((), (), ())
        return coo_matrix((v, (r, c)), shape=(count, n_vars)).tocsr()

    cost = np.zeros(n_vars)
    cost[x0:x0 + n_c] = -1.0
    result = linprog(cost, A_ub=matrix(ub_rows, len(ub_rhs)), b_ub=np.array(ub_rhs),
                     A_eq=matrix(eq_rows, n_eq) if n_eq else None,
                     b_eq=np.zeros(n_eq) if n_eq else None, bounds=(0, None),
                     method="highs-ipm", options={
                         "primal_feasibility_tolerance": FEASIBILITY_TOLERANCE,
                         "dual_feasibility_tolerance": FEASIBILITY_TOLERANCE,
                         **({"time_limit": time_limit} if time_limit is not None else {})})
    if result.status != 0:
        raise CanopyError(f"HiGHS could not solve the allreduce LP: {result.message}")
    scale = float(top)
    rates = {net.names[v]: float(result.x[x0 + j]) * scale for j, v in enumerate(compute)}
    opt = find_optimum(net)
    lp = AllreduceLP(value=-float(result.fun) * scale, rates=rates,
                     rs_ag=collective_algbw("allreduce", n_c, opt.x), cut_bound=cut_bound(net),
                     variables=n_vars, constraints=len(ub_rhs) + n_eq,
                     reduce_budget={e: float(result.x[re0 + j]) * scale
                                    for j, e in enumerate(edges)},
                     broadcast_budget={e: float(result.x[bc0 + j]) * scale
                                       for j, e in enumerate(edges)})
    low, high = float(lp.rs_ag), float(lp.cut_bound)
    if not (low * (1 - RELATIVE_MARGIN) <= lp.value <= high * (1 + RELATIVE_MARGIN)):
        raise CanopyError(f"the allreduce LP value {lp.value:.6f} GB/s is outside its exact "
                          f"bounds [{low:.6f}, {high:.6f}] GB/s (solver tolerance exceeded).")
    return lp
