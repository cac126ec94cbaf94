"""LP (6) of ForestColl (arXiv:2402.06787) App. E by cut generation: the same optimum, far fewer
variables.

LP (6) asks, per phase and per compute node t, a flow of Σ x_v from the source; written
with flow variables (:func:`canopy.engine.allreduce.lp.solve_allreduce_lp`) that is
2·N·(|E| + N) of them, which HiGHS needs minutes for on 64-GPU tori. By maxflow-mincut
(Thm 1 of the paper, with a rate x_v per node) each phase's flow condition is the same as

    c^BC(δ+(S)) >= Σ_{v ∈ S ∩ V_c} x_v   for every S ⊂ V with S ⊉ V_c       [broadcast]
    c^RE(δ-(S)) >= Σ_{v ∈ S ∩ V_c} x_v   for every such S                    [reduce]

(the source side of an s-t cut is {s} ∪ S; the arcs s -> v for v outside S cross it).
So the LP keeps only x, c^RE and c^BC (N + 2|E| variables) and the cuts found so far:
starting from the cuts V - {t}, it solves, then runs one maxflow per phase and compute
node on the solution's budgets (the separation oracle); every minimum cut that violates
its inequality is added, until none does. The result is LP (6)'s optimum (same
constraints, same tolerance): the schedule built from it is then checked exactly
(:mod:`canopy.engine.allreduce.lp_schedule`), and the tests compare both formulations.

Every round's LP is a relaxation of LP (6), so its value is an upper bound; reduce-scatter
+ allgather (§4.6, exact) is feasible in LP (6), a lower bound. Once the relaxation's
value is within the solver tolerance of RS + AG the two are equal and the generation
stops there (``certified_tie``): on symmetric networks many budgets are optimal and
cutting them off one by one would take hundreds of rounds for nothing.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from canopy.engine.allreduce.lp import (
    FEASIBILITY_TOLERANCE,
    RELATIVE_MARGIN,
    AllreduceLP,
    cut_bound,
)
from canopy.engine.forestcoll.optimum import find_optimum
from canopy.engine.model.collectives import collective_algbw
from canopy.engine.model.errors import CanopyError
from canopy.engine.network.indexed import Network
from canopy.engine.network.maxflow import FlowNetwork
from canopy.engine.network.servers import network_rotation

if TYPE_CHECKING:
    from scipy.sparse import coo_matrix

FLOW_SCALE = 1 << 40       # budgets (as fractions of the largest bandwidth) in flow units
MAX_ROUNDS = 200           # separation rounds before giving up


class _Orbits:
    """Links, and compute nodes, up to a symmetry π of the network (the identity when
    there is none). LP (6)'s feasible set is invariant under every automorphism and is
    convex, so averaging an optimal solution over the group <π> gives an optimal one that
    is constant on orbits: the LP keeps one budget per link orbit and the separation needs
    one maxflow per orbit of compute nodes (a cut violated for t is, moved by π, violated
    for π(t), and gives the same row)."""

    def __init__(self, net: Network, edges: list[tuple[int, int]], image: list[int] | None):
        self.edge_orbit = list(range(len(edges)))
        self.targets = list(net.compute)
        if image is None:
            self.count = len(edges)
            return
        index = {e: j for j, e in enumerate(edges)}
        orbit_of: dict[int, int] = {}
        self.count = 0
        for j in range(len(edges)):           # labels in order of each orbit's first link
            if j in orbit_of:
                continue
            a, b = edges[j]
            while index[(a, b)] not in orbit_of:
                orbit_of[index[(a, b)]] = self.count
                a, b = image[a], image[b]
            self.count += 1
        self.edge_orbit = [orbit_of[j] for j in range(len(edges))]
        seen: set[int] = set()
        self.targets = []
        for t in net.compute:
            if t not in seen:
                self.targets.append(t)
                while t not in seen:
                    seen.add(t)
                    t = image[t]


def _cut_row(net: Network, edges: list[tuple[int, int]], orbits: _Orbits,
             side: frozenset[int], reduce: bool, n_c: int) -> list[tuple[int, float]]:
    """Coefficients of Σ_{v∈S} x_v - c(δ(S)) <= 0 in the layout x | c^RE | c^BC (one
    budget per link orbit; repeated columns are summed when the matrix is built)."""
    base = n_c if reduce else n_c + orbits.count
    row = [(j, 1.0) for j, v in enumerate(net.compute) if v in side]
    for j, (a, b) in enumerate(edges):
        leaves = (b in side and a not in side) if reduce else (a in side and b not in side)
        if leaves:
            row.append((base + orbits.edge_orbit[j], -1.0))
    return row


def _violated(net: Network, edges: list[tuple[int, int]], orbits: _Orbits, values: np.ndarray,
              reduce: bool, n_c: int) -> list[frozenset[int]]:
    """Minimum cuts S (source side minus s) whose inequality the solution breaks."""
    base = n_c if reduce else n_c + orbits.count
    rates = values[:n_c]
    flow = FlowNetwork(net.n + 1)
    for j, (a, b) in enumerate(edges):
        cap = int(values[base + orbits.edge_orbit[j]] * FLOW_SCALE)
        if cap > 0:
            flow.add_arc(*((b, a) if reduce else (a, b)), cap)
    for j, v in enumerate(net.compute):
        flow.add_arc(net.source, v, int(rates[j] * FLOW_SCALE))
    need = float(rates.sum()) * FLOW_SCALE
    found = []
    for t in orbits.targets:
        value, side = flow.min_cut(net.source, t)
        if value < need * (1 - RELATIVE_MARGIN / 10):
            # In the transposed network the source side S is entered by the reduce arcs.
            found.append(frozenset(side) - {net.source})
    return found


def solve_allreduce_cuts(net: Network, equal_rates: bool = False,
                         time_limit: float | None = None) -> AllreduceLP:
    """LP (6) on ``net`` by cut generation (see the module doc); the switch-balanced phase
    budgets and the bound checks are those of :func:`~canopy.engine.allreduce.lp.
    solve_allreduce_lp`. On identical servers
    (:func:`canopy.engine.network.servers.network_rotation`) the budgets are
    one per link orbit (:class:`_Orbits`). CanopyError when ``time_limit`` seconds (wall)
    pass first."""
    start = time.perf_counter()
    compute = list(net.compute)
    n_c = len(compute)
    edges = list(net.capacity)
    image = network_rotation(net)
    orbits = _Orbits(net, edges, image)
    q = orbits.count
    top = max(net.capacity.values())
    n_vars = n_c + 2 * q
    base_ub: list[list[tuple[int, float]]] = []
    base_rhs: list[float] = []
    for j, e in enumerate(edges):
        if orbits.edge_orbit[j] == len(base_ub):      # an orbit's first link
            base_ub.append([(n_c + len(base_ub), 1.0), (n_c + q + len(base_ub), 1.0)])
            base_rhs.append(float(net.capacity[e] / top))
    eq: list[list[tuple[int, float]]] = []
    for w in range(net.n):
        if net.is_compute(w):
            continue
        for base in (n_c, n_c + q):
            eq.append([(base + orbits.edge_orbit[j], 1.0)
                       for j, (_, b) in enumerate(edges) if b == w]
                      + [(base + orbits.edge_orbit[j], -1.0)
                         for j, (a, _) in enumerate(edges) if a == w])
    if equal_rates:
        eq += [[(0, 1.0), (j, -1.0)] for j in range(1, n_c)]
    elif image is not None:
        position = {v: j for j, v in enumerate(compute)}
        eq += [[(j, 1.0), (position[image[v]], -1.0)] for j, v in enumerate(compute)]
    cuts: dict[tuple[bool, frozenset[int]], list[tuple[int, float]]] = {}
    for reduce in (True, False):
        for t in orbits.targets:
            side = frozenset(range(net.n)) - {t}
            cuts[(reduce, side)] = _cut_row(net, edges, orbits, side, reduce, n_c)

    from scipy.optimize import linprog  # here: 0.3 s of start-up for allreduce only
    from scipy.sparse import coo_matrix

    def matrix(rows: list[list[tuple[int, float]]]) -> coo_matrix:
        r = [i for i, row in enumerate(rows) for _ in row]
        c = [col for row in rows for col, _ in row]
        v = [val for row in rows for _, val in row]
        return coo_matrix((v, (r, c)), shape=(len(rows), n_vars)).tocsr()

    rs_ag = collective_algbw("allreduce", n_c, find_optimum(net).x)
    tie = float(rs_ag / top) * (1 + RELATIVE_MARGIN)
    cost = np.zeros(n_vars)
    cost[:n_c] = -1.0
    a_eq = matrix(eq) if eq else None
    b_eq = np.zeros(len(eq)) if eq else None
    for _ in range(MAX_ROUNDS):
        left = None if time_limit is None else time_limit - (time.perf_counter() - start)
        if left is not None and left <= 0:
            raise CanopyError(f"the allreduce LP (cut generation) passed its time limit of "
                              f"{time_limit:g} s.")
        rows = base_ub + list(cuts.values())
        result = linprog(cost, A_ub=matrix(rows),
                         b_ub=np.array(base_rhs + [0.0] * len(cuts)), A_eq=a_eq, b_eq=b_eq,
                         bounds=(0, None), method="highs", options={
                             "primal_feasibility_tolerance": FEASIBILITY_TOLERANCE,
                             "dual_feasibility_tolerance": FEASIBILITY_TOLERANCE,
                             **({"time_limit": left} if left is not None else {})})
        if result.status != 0:
            raise CanopyError(f"HiGHS could not solve the allreduce LP: {result.message}")
        if -result.fun <= tie:
            break   # relaxation <= RS + AG <= LP (6): a tie, certified
        new = [(reduce, side) for reduce in (True, False)
               for side in _violated(net, edges, orbits, result.x, reduce, n_c)]
        new = [key for key in new if key not in cuts]
        if not new:
            break
        for reduce, side in new:
            cuts[(reduce, side)] = _cut_row(net, edges, orbits, side, reduce, n_c)
    else:
        raise CanopyError(f"the allreduce LP's cut generation did not settle in {MAX_ROUNDS} "
                          "rounds.")
    scale = float(top)
    x = result.x
    lp = AllreduceLP(
        value=-float(result.fun) * scale,
        rates={net.names[v]: float(x[j]) * scale for j, v in enumerate(compute)},
        rs_ag=rs_ag, cut_bound=cut_bound(net),
        variables=n_vars, constraints=len(base_ub) + len(cuts) + len(eq),
        reduce_budget={e: float(x[n_c + orbits.edge_orbit[j]]) * scale
                       for j, e in enumerate(edges)},
        broadcast_budget={e: float(x[n_c + q + orbits.edge_orbit[j]]) * scale
                          for j, e in enumerate(edges)},
        formulation="cuts")
    low, high = float(lp.rs_ag), float(lp.cut_bound)
    if not (low * (1 - RELATIVE_MARGIN) <= lp.value <= high * (1 + RELATIVE_MARGIN)):
        raise CanopyError(f"the allreduce LP value {lp.value:.6f} GB/s is outside its exact "
                          f"bounds [{low:.6f}, {high:.6f}] GB/s (solver tolerance exceeded).")
    return lp
