"""The decomposition for large networks: per-source shortest-path trees, balanced by
multiplicative link lengths (Garg-Könemann / Fleischer style).

The link LP has N·|E| variables, too many at a thousand nodes. As in the split into a master
problem and per-source child problems of Basu et al. (arXiv:2309.13541) ("master LP with
parallel child LPs"), the work is split by source. A *routing tree* is an arborescence out
of one source sending the same rate to every other compute node; every single-source flow of
the link LP is a convex combination of such trees (choose each node's parent arc with
probability proportional to its inflow), so trees lose nothing.

Each child problem is one source's shortest-path tree under the current link lengths
(one Dijkstra). The master keeps exponential lengths l_e ∝ exp(ε·load_e/c_e): after
each source routes its share along its tree, the lengths of the links it loaded grow, so
the next sources avoid them. The average over phases is a feasible schedule once scaled
by its congestion; the lengths also give the certificate
λ* ≤ Σ c_e l_e / Σ_{s≠t} dist_l(s, t) (:mod:`canopy.engine.alltoall.bound`), so the loop
stops once λ is within ``target_gap`` of the best certificate (or after ``max_rounds``
phases, reporting the gap it reached).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import dijkstra

from canopy.engine.alltoall.problem import AllToAllProblem
from canopy.engine.alltoall.schedule import Route
from canopy.engine.model.progress import Progress, report

#: Integer lengths of the final certificate are the best lengths scaled to this size.
LENGTH_SCALE = 1 << 24
MAX_ROUNDS = 200
#: Multiplicative step per phase.
EPSILON = 0.2


@dataclass
class DecompositionResult:
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
        self.sources = np.array(problem.compute, dtype=np.int64)
        self.targets = np.arange(n, n + big_n) if self.split else self.sources

    def shortest(self, lengths: np.ndarray, rows: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
        """Distances and predecessors from the compute nodes ``rows`` (default: all)."""
        graph = csr_matrix((lengths, (self.problem.tails, self.heads)),
                           shape=(self.size, self.size))
        starts = self.sources if rows is None else self.sources[rows]
        dist, pred = dijkstra(graph, indices=starts, return_predecessors=True)
        return dist, pred

    def columns(self, pred: np.ndarray, rows: np.ndarray
                ) -> tuple[list[Route], np.ndarray]:
        """Routes of the trees in ``pred`` (one row per compute index in ``rows``) and the
        number of targets each tree sends over each arc (a rows × arcs matrix)."""
        problem = self.problem
        count = len(rows)
        line = np.arange(count)[:, None]
        cur = np.broadcast_to(self.targets, (count, len(self.targets))).copy()
        own = self.sources[rows] if not self.split else problem.n + rows
        cur[cur == own[:, None]] = -1
        loads = np.zeros(count * problem.m, dtype=np.int64)
        start = self.sources[rows][:, None]
        while True:
            live = (cur >= 0) & (cur != start)
            if not live.any():
                break
            r = np.broadcast_to(line, cur.shape)[live]
            v = cur[live]
            u = pred[r, v]
            arcs = self.order[np.searchsorted(self.keys, u * self.size + v)]
            loads += np.bincount(r * problem.m + arcs, minlength=count * problem.m)
            cur[live] = u
        routes = []
        for i, k in enumerate(rows):
            s = int(self.sources[k])
            reach = np.flatnonzero(pred[i] >= 0)
            parent = np.full(problem.n, -1, dtype=np.int32)
            real = reach.copy()
            if self.split:
                arrive = real >= problem.n
                real[arrive] = self.sources[real[arrive] - problem.n]
            parent[real] = pred[i, reach]
            targets = self.sources[self.sources != s]
            routes.append(Route(s, targets, parent))
        return routes, loads.reshape(count, problem.m)


class _Mixture:
    """How often each routing tree was chosen (trees that come back are merged)."""

    def __init__(self) -> None:
        self.pool: dict[tuple[int, bytes], int] = {}
        self.routes: list[Route] = []
        self.weights: list[float] = []

    def count(self, route: Route) -> None:
        key = (route.source, route.parent.tobytes())
        if key not in self.pool:
            self.pool[key] = len(self.routes)
            self.routes.append(route)
            self.weights.append(0.0)
        self.weights[self.pool[key]] += 1

    def forget(self) -> None:
        self.pool.clear()
        self.routes.clear()
        self.weights.clear()

    def rates(self, factor: float) -> list[float]:
        return [w * factor for w in self.weights]


def _certificate(trees: _Trees, cap: np.ndarray, lengths: np.ndarray) -> float:
    """Σ c_e l_e / Σ_{s≠t} dist_l(s, t) in floating point (a guide; the final bound is
    recomputed exactly)."""
    dist, _ = trees.shortest(lengths)
    block = dist[:, trees.targets]
    pair_sum = block.sum() - np.trace(block)       # a source's own target is not a pair
    return float((cap * lengths).sum() / pair_sum)


def solve_decomposition(problem: AllToAllProblem, progress: Progress | None = None,
                        target_gap: float = 0.01, max_rounds: int = MAX_ROUNDS,
                        seed: int = 0) -> DecompositionResult:
    """Per-source trees under multiplicative lengths (module docstring). Rates are in units
    of the largest link bandwidth."""
    big_n, m = problem.num_compute, problem.m
    cap = problem.float_capacity()
    cap = cap / cap.max()
    trees = _Trees(problem)
    rng = np.random.default_rng(seed)
    lengths = 1.0 / cap
    guess = _certificate(trees, cap, lengths)       # the hop-style bound: a rate to route
    mixture = _Mixture()
    total = np.zeros(m)
    best_bound, best_lengths = guess, lengths.copy()
    lam = 0.0
    rounds = counted = 0
    for rounds in range(1, max_rounds + 1):
        for k in rng.permutation(big_n):
            rows = np.array([k])
            _, pred = trees.shortest(lengths, rows)
            routes, loads = trees.columns(pred, rows)
            step = guess * loads[0]
            total += step
            lengths = lengths * np.exp(EPSILON * step / cap)
            lengths /= lengths.max()
            mixture.count(routes[0])
        counted += 1
        congestion = float((total / counted / cap).max())
        lam = guess / congestion
        bound = _certificate(trees, cap, lengths)
        if bound < best_bound:
            best_bound, best_lengths = bound, lengths.copy()
        report(progress, "decomposition", min(1.0, rounds / max_rounds))
        # a margin for the exact rounding of rates and lengths afterwards
        if lam >= (1 - 0.8 * target_gap) * best_bound:
            break
        if rounds & (rounds - 1) == 0:
            # average over the later phases only: forget the first half at powers of two
            total[:] = 0
            mixture.forget()
            counted = 0
    # rounded up, so no positive length becomes 0 (which would shorten distances)
    ints = np.ceil(best_lengths * LENGTH_SCALE / best_lengths.max()).astype(np.int64)
    return DecompositionResult(mixture.routes, mixture.rates(guess / congestion / counted),
                               ints, lam, best_bound, rounds)
