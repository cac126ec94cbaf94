"""Upper bounds on λ*: the dual (length) certificate, cut bounds and Theorem 1's bound.

*Length certificate.* LP duality for maximum concurrent flow: for any lengths l ≥ 0 on
the links, every schedule sends λ along each of the N(N-1) pairs over paths at least
dist_l(s, t) long, so ``λ · Σ_{s≠t} dist_l(s, t) ≤ Σ_e c_e l_e``. The optimal duals of
the LP make this tight; any other lengths give a valid, looser bound. It is computed here
in exact integer arithmetic, so it certifies the solver's floating-point answer.

*Cut bound.* For a node set S holding a compute nodes with b outside it, a·b pairs must
cross from S to its complement: ``λ ≤ c⁺(S) / (a·b)``. It is independent of the LP and can
be loose (the flow-cut gap of multi-commodity flow).

*Theorem 1* of Basu et al. (arXiv:2309.13541): on a d-regular graph, all-to-all time grows
as Ω(N log_d N). With hop lengths, each source has at most d^k nodes at distance k (the
Moore bound), which bounds Σ_t dist(s, t) below and hence λ above.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Collection, Sequence
from fractions import Fraction

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import dijkstra

from canopy.engine.alltoall.problem import AllToAllProblem

_EXACT_FLOAT = 1 << 52


def _integer_lengths(lengths: list[Fraction]) -> list[int]:
    den = 1
    for x in lengths:
        den = math.lcm(den, x.denominator)
    return [int(x * den) for x in lengths]


def pair_distances(problem: AllToAllProblem, lengths: list[int]) -> list[list[int]]:
    """dist[k][j]: shortest distance from compute node k to compute node j under integer
    ``lengths``, relaying only through nodes that may forward."""
    n = problem.n
    big_n = problem.num_compute
    longest = max(lengths, default=0) * n
    if longest < _EXACT_FLOAT:
        # compute nodes that may not relay get a separate "arrival" copy (index n + k)
        heads = problem.heads.copy()
        if problem.forwarding != "all":
            slot = {c: k for k, c in enumerate(problem.compute)}
            for a, v in enumerate(problem.heads):
                if int(v) in slot:
                    heads[a] = n + slot[int(v)]
        graph = csr_matrix((np.array(lengths, dtype=np.float64), (problem.tails, heads)),
                           shape=(n + big_n, n + big_n))
        dist = dijkstra(graph, indices=list(problem.compute))
        cols = list(problem.compute) if problem.forwarding == "all" else \
            [n + k for k in range(big_n)]
        block = dist[:, cols]
        block[np.arange(big_n), np.arange(big_n)] = 0
        return [[int(x) for x in row] for row in block]
    return [_dijkstra(problem, lengths, s) for s in problem.compute]


def _dijkstra(problem: AllToAllProblem, lengths: list[int], source: int) -> list[int]:
    out: list[list[tuple[int, int]]] = [[] for _ in range(problem.n)]
    for a, (u, v) in enumerate(zip(problem.tails, problem.heads, strict=True)):
        out[int(u)].append((int(v), lengths[a]))
    dist: dict[int, int] = {source: 0}
    heap = [(0, source)]
    done: set[int] = set()
    while heap:
        d, u = heapq.heappop(heap)
        if u in done:
            continue
        done.add(u)
        if u != source and not problem.relay[u]:
            continue
        for v, w in out[u]:
            if d + w < dist.get(v, d + w + 1):
                dist[v] = d + w
                heapq.heappush(heap, (d + w, v))
    return [0 if t == source else dist[t] for t in problem.compute]


def length_bound(problem: AllToAllProblem, lengths: list[Fraction]) -> Fraction | None:
    """Σ c_e l_e / Σ_{s≠t} dist_l(s, t): an exact upper bound on λ* (None if the
    distances are all zero, which bounds nothing)."""
    ints = _integer_lengths(lengths)
    dist = pair_distances(problem, ints)
    total = sum(sum(row) for row in dist)
    if total == 0:
        return None
    budget = sum((c * x for c, x in zip(problem.capacity, ints, strict=True)), Fraction(0))
    return budget / total


def _integer_capacities(problem: AllToAllProblem) -> tuple[np.ndarray, int]:
    den = 1
    for c in problem.capacity:
        den = math.lcm(den, c.denominator)
    ints = [int(c * den) for c in problem.capacity]
    dtype = np.int64 if sum(ints) < 1 << 62 else object
    return np.array(ints, dtype=dtype), den


_CUT_CHUNK = 1 << 22    # booleans per block of sides tried at once by cut_bound


def cut_ratio(problem: AllToAllProblem, side: set[int],
              caps: tuple[np.ndarray, int] | None = None) -> Fraction | None:
    """c⁺(S) / (a·b) for S = ``side``, or None when S or its complement has no compute."""
    inside = sum(1 for c in problem.compute if c in side)
    outside = problem.num_compute - inside
    if inside == 0 or outside == 0:
        return None
    ints, den = caps or _integer_capacities(problem)
    member = np.zeros(problem.n, dtype=bool)
    member[list(side)] = True
    leaving = ints[member[problem.tails] & ~member[problem.heads]].sum()
    return Fraction(int(leaving), den * inside * outside)


def cut_bound(problem: AllToAllProblem, candidates: Sequence[Collection[int]] | None = None
              ) -> tuple[Fraction, set[int]]:
    """The smallest cut ratio among single compute nodes, their complements and
    ``candidates`` and theirs: an upper bound on λ* found without the LP. Each side's
    leaving capacity is an integer row sum; the first side of least ratio is kept."""
    bases = [np.array([c]) for c in problem.compute] + \
        [np.asarray(side if isinstance(side, np.ndarray) else list(side), dtype=np.int64)
         for side in candidates or []]
    base = np.zeros((len(bases), problem.n), dtype=bool)
    base[np.repeat(np.arange(len(bases)), [len(side) for side in bases]),
         np.concatenate(bases)] = True
    ints, den = _integer_capacities(problem)
    compute = np.zeros(problem.n, dtype=bool)
    compute[list(problem.compute)] = True
    best: tuple[int, int, np.ndarray] | None = None     # (leaving, inside·outside, side)
    rows = max(1, _CUT_CHUNK // max(len(problem.tails), problem.n, 1))
    for start in range(0, len(bases), rows):
        member = base[start:start + rows]
        member = np.stack([member, ~member], axis=1).reshape(-1, problem.n)
        inside = (member & compute).sum(axis=1).tolist()
        crossing = member[:, problem.tails] & ~member[:, problem.heads]
        leaving = (crossing @ ints).tolist()
        for row, left in enumerate(leaving):
            pairs = inside[row] * (problem.num_compute - inside[row])
            if pairs and (best is None or left * best[1] < best[0] * pairs):
                best = (int(left), pairs, member[row])
    assert best is not None
    return Fraction(best[0], den * best[1]), set(np.flatnonzero(best[2]).tolist())


def ball_cuts(problem: AllToAllProblem, lengths: list[int], limit: int = 4096
              ) -> list[np.ndarray]:
    """Balls around compute nodes under ``lengths`` (nested prefixes by distance): the cuts
    the dual lengths point at, tried by :func:`cut_bound`."""
    graph = csr_matrix((np.array(lengths, dtype=np.float64) + 1e-9, (problem.tails,
                                                                      problem.heads)),
                       shape=(problem.n, problem.n))
    sources = list(problem.compute)[: max(1, limit // max(problem.n, 1))]
    dist = dijkstra(graph, indices=sources)
    balls = []
    for row in dist:
        order = np.argsort(row, kind="stable")
        balls += [order[:size] for size in range(1, problem.n)]
    return balls


def moore_distance_sum(n: int, degree: int) -> int:
    """The least possible Σ_t dist(s, t) over the other n-1 nodes when s reaches at most
    ``degree``^k nodes at distance k (the Moore bound behind Theorem 1)."""
    total, left, k, width = 0, n - 1, 1, degree
    while left > 0:
        take = min(left, width)
        total += k * take
        left -= take
        k += 1
        width *= degree
    return total


def regular_bound(problem: AllToAllProblem) -> Fraction | None:
    """Theorem 1's bound for d-regular direct-connect networks (every node compute, every
    node with d out-links of equal bandwidth b): λ* ≤ d·b / moore_distance_sum(N, d),
    so all-to-all time is at least M·moore_distance_sum(N, d)/(N·d·b) = Ω(M log_d N / d·b)
    per rank buffer of M bytes. None when the network is not of that kind."""
    if problem.num_compute != problem.n:
        return None
    degrees = np.bincount(problem.tails, minlength=problem.n)
    caps = set(problem.capacity)
    if len(set(degrees.tolist())) != 1 or len(caps) != 1:
        return None
    d = int(degrees[0])
    b = caps.pop()
    return d * b / moore_distance_sum(problem.n, d)
