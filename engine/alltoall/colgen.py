"""The decomposition for large networks: column generation over routing trees.

The link LP has N·|E| variables, too many at a thousand nodes. Following the summary's
split into a master LP and per-source child problems (alltoall-direct-connect-summary,
"master LP with parallel child LPs"), the master LP here chooses weights for *routing
trees*: a column is an arborescence out of one source that sends one unit to every
other compute node. Every single-source flow of the link LP is a convex combination of
such trees (choose each node's parent arc with probability proportional to its inflow),
so nothing is lost. The master has N + |E| rows:

    max λ   s.t.  Σ_{trees T of s} w_T ≥ λ  for each source s,
                  Σ_T w_T · load_T(e) ≤ c_e  for each link e.

The child problem of source s prices a new tree with the master's link duals y as
lengths: the cheapest tree is the shortest-path tree, of cost Σ_t dist_y(s, t). A tree
enters when that cost is below the source's dual. Every round also gives the length
certificate λ* ≤ Σ c_e y_e / Σ_{s≠t} dist_y(s, t), so the loop stops once the master's λ
is within ``target_gap`` of the best certificate, or when no tree prices out (optimal).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix, csr_matrix, hstack
from scipy.sparse.csgraph import dijkstra

from canopy.engine.alltoall.lp import TOLERANCE
from canopy.engine.alltoall.problem import AllToAllProblem
from canopy.engine.alltoall.schedule import Route
from canopy.engine.errors import ScheduleError
from canopy.engine.progress import Progress, report

#: Integer lengths of the final certificate are the duals scaled to this size.
LENGTH_SCALE = 1 << 24
#: Random trees per source in the first master (tie-breaking on uniform lengths).
INITIAL_TREES = 3
MAX_ROUNDS = 60


@dataclass
class ColumnGenerationResult:
    routes: list[Route]
    rates: list[float]
    lengths: np.ndarray
    lam: float
    bound: float
    iterations: int


class _Trees:
    """Shortest-path trees of every source at once, as routes and link-load columns."""

    def __init__(self, problem: AllToAllProblem) -> None:
        self.problem = problem
        n, big_n = problem.n, problem.num_compute
        self.split = problem.forwarding != "all"
        heads = problem.heads.copy()
        if self.split:
            slot = {c: k for k, c in enumerate(problem.compute)}
            for a, v in enumerate(problem.heads):
                if int(v) in slot:
                    heads[a] = n + slot[int(v)]
        self.size = n + big_n if self.split else n
        self.heads = heads
        keys = problem.tails * self.size + heads
        self.order = np.argsort(keys)
        self.keys = keys[self.order]
        self.targets = (np.arange(n, n + big_n) if self.split
                        else np.array(problem.compute, dtype=np.int64))

    def shortest(self, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        graph = csr_matrix((lengths, (self.problem.tails, self.heads)),
                           shape=(self.size, self.size))
        dist, pred = dijkstra(graph, indices=list(self.problem.compute),
                              return_predecessors=True)
        return dist, pred

    def columns(self, dist: np.ndarray, pred: np.ndarray
                ) -> tuple[list[Route], list[tuple[np.ndarray, np.ndarray]]]:
        """Routes and (arc ids, loads) of the trees in ``pred`` (one row per source)."""
        problem = self.problem
        big_n = problem.num_compute
        rows = np.arange(big_n)
        sub = np.zeros((big_n, self.size), dtype=np.int64)
        sub[:, self.targets] = 1
        sources = np.array(problem.compute, dtype=np.int64)
        sub[rows, problem.n + rows if self.split else sources] = 0
        order = np.argsort(-dist, axis=1, kind="stable")
        for j in range(self.size):
            v = order[:, j]
            p = pred[rows, v]
            ok = p >= 0
            np.add.at(sub, (rows[ok], p[ok]), sub[rows[ok], v[ok]])
        routes, cols = [], []
        for k, s in enumerate(problem.compute):
            nodes = np.flatnonzero((pred[k] >= 0) & (sub[k] > 0))
            want = pred[k, nodes] * self.size + nodes
            pos = np.searchsorted(self.keys, want)
            cols.append((self.order[pos], sub[k, nodes]))
            parent = np.full(problem.n, -1, dtype=np.int64)
            real = nodes.copy()
            if self.split:
                arrive = real >= problem.n
                real[arrive] = np.array(problem.compute)[real[arrive] - problem.n]
            parent[real] = pred[k, nodes]
            targets = np.array([c for c in problem.compute if c != s], dtype=np.int64)
            routes.append(Route(s, targets, parent))
        return routes, cols


def solve_column_generation(problem: AllToAllProblem, progress: Progress | None = None,
                            target_gap: float = 0.01, seed: int = 0) -> ColumnGenerationResult:
    """Column generation over routing trees (module docstring)."""
    big_n, m = problem.num_compute, problem.m
    cap = problem.float_capacity()
    cap = cap / cap.max()
    trees = _Trees(problem)
    rng = np.random.default_rng(seed)
    routes: list[Route] = []
    columns: list[csr_matrix] = []

    def add(new_routes: list[Route], cols: list[tuple[np.ndarray, np.ndarray]],
            keep: np.ndarray) -> None:
        for k in np.flatnonzero(keep):
            arcs, loads = cols[k]
            routes.append(new_routes[k])
            rows = np.concatenate([[k], big_n + arcs])
            vals = np.concatenate([[-1.0], loads.astype(float)])
            columns.append(coo_matrix((vals, (rows, np.zeros(len(rows), dtype=np.int64))),
                                      shape=(big_n + m, 1)).tocsr())

    base = 1.0 / cap
    for _ in range(INITIAL_TREES):
        lengths = base * (1 + 0.5 * rng.random(m))
        dist, pred = trees.shortest(lengths)
        new_routes, cols = trees.columns(dist, pred)
        add(new_routes, cols, np.ones(big_n, dtype=bool))

    best_bound = np.inf
    best_lengths = np.ones(m)
    lam = 0.0
    weights = np.zeros(0)
    rounds = 0
    for rounds in range(1, MAX_ROUNDS + 1):
        lam, weights, duals_src, duals_cap = _master(columns, big_n, m, cap)
        lengths = np.maximum(duals_cap, 0.0)
        floor = 1e-9 * max(float(lengths.max()), 1e-12)
        dist, pred = trees.shortest(lengths + floor)
        sums = dist[:, trees.targets].sum(axis=1)
        if not trees.split:
            sums -= dist[np.arange(big_n), np.array(problem.compute)]
        bound = float((cap * lengths).sum() / max(sums.sum(), 1e-300))
        if bound < best_bound:
            best_bound, best_lengths = bound, lengths
        report(progress, "decomposition", min(1.0, rounds / MAX_ROUNDS))
        gap = 1 - lam / best_bound if best_bound > 0 else 0.0
        price = sums < duals_src * (1 - 1e-9)
        if gap <= target_gap or not price.any():
            break
        new_routes, cols = trees.columns(dist, pred)
        add(new_routes, cols, price)
    scale = LENGTH_SCALE / max(float(best_lengths.max()), 1e-300)
    ints = np.rint(best_lengths * scale).astype(np.int64)
    keep = weights > 1e-12
    kept = [r for r, k in zip(routes, keep, strict=True) if k]
    return ColumnGenerationResult(kept, [float(w) for w in weights[keep]], ints, lam,
                                  best_bound, rounds)


def _master(columns: list[csr_matrix], big_n: int, m: int, cap: np.ndarray
            ) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """Solve the master LP: (λ, tree weights, source duals, link duals)."""
    lam_col = coo_matrix((np.ones(big_n), (np.arange(big_n), np.zeros(big_n, dtype=np.int64))),
                         shape=(big_n + m, 1)).tocsr()
    a_ub = hstack(columns + [lam_col], format="csc")
    b_ub = np.concatenate([np.zeros(big_n), cap])
    c = np.zeros(a_ub.shape[1])
    c[-1] = -1.0
    res = linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=(0, None), method="highs-ds",
                  options={"primal_feasibility_tolerance": TOLERANCE,
                           "dual_feasibility_tolerance": TOLERANCE})
    if res.status != 0:
        raise ScheduleError(f"HiGHS could not solve the all-to-all master LP ({res.message}).")
    duals = -np.asarray(res.ineqlin.marginals)
    return float(res.x[-1]), np.asarray(res.x[:-1]), duals[:big_n], duals[big_n:]
