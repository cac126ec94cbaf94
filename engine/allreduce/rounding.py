"""Fewer trees for App. E's allreduce: integer link budgets from a small MILP (HiGHS).

:func:`canopy.engine.allreduce.lp_schedule.lp_schedule` packs k trees per node and phase in
the LP's budgets c^RE and c^BC, floored at y = x / k (Thm 13): the LP splits links into
arbitrary fractions, so its budgets may need many trees to be used in full
(mi250-8plus8: k = 8, 256 trees, more connections than 108 thread blocks per GPU serve).
Any other split reaching the same rate x will do. With k trees per node and phase at
y = x / k, a split is a choice of integer tree counts per directed link,

    n^RE_e + n^BC_e <= floor(b_e / y),

such that each phase holds k out-trees per compute node (the reduce phase on the
transposed links): Edmonds' condition as ForestColl states it (ForestColl (arXiv:2402.06787) §4.2,
Thm 5), λ(s, t) >= k·N for every compute t in the network with an arc s -> v of
capacity k per compute v, written as one flow per (phase, t); and each phase's counts
balanced at every switch, so edge splitting (§4.3) turns its routes into
compute-to-compute ones. :func:`integer_budgets` solves that feasibility MILP with HiGHS
(``scipy.optimize.milp``, a node limit instead of a time limit so the answer does not
depend on the machine), with the fewest tree crossings of links in all as its
objective: short routes, lower trees (faster at small sizes: docs/performance.md).
HiGHS works in floating point; the counts it returns are only a proposal: the caller
builds the trees from them and verifies the schedule exactly
(:func:`canopy.engine.model.verification.verify`), falling back to the LP's budgets otherwise.
The node limit is the solver's stated bound here: where it stops the search, the LP's
budgets are used.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from canopy.engine.network.indexed import Network

NODE_LIMIT = 2000          # branch-and-bound nodes HiGHS may explore per MILP
MAX_VARIABLES = 20_000     # larger MILPs are not tried (the LP's budgets are used)


def milp_size(net: Network) -> int:
    """Variables of :func:`integer_budgets`' MILP: two counts per link, and per compute t
    and phase a flow per link and per source arc."""
    n_c, m = len(net.compute), len(net.capacity)
    return 2 * m + 2 * n_c * (m + n_c)


def integer_budgets(net: Network, k: int, y: Fraction
                    ) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], int]] | None:
    """(reduce, broadcast) integer tree counts per directed link of ``net`` (module
    docstring) for k trees per compute node and phase of bandwidth ``y``, or None when
    HiGHS finds none within NODE_LIMIT nodes (or proves there is none). Counts of 0 are
    left out."""
    from scipy.optimize import Bounds, LinearConstraint, milp  # here: 0.3 s of start-up
    from scipy.sparse import coo_matrix

    compute = list(net.compute)
    n_c = len(compute)
    edges = list(net.capacity)
    m = len(edges)
    per = m + n_c                      # one flow: per link, then per source arc s -> v
    flows0 = 2 * m                     # variables: n^RE (m) | n^BC (m) | flows
    n_vars = milp_size(net)
    entries: list[tuple[int, int, float]] = []
    low: list[float] = []
    high: list[float] = []

    def row(coefficients: list[tuple[int, float]], lo: float, hi: float) -> None:
        entries.extend((len(low), col, val) for col, val in coefficients)
        low.append(lo)
        high.append(hi)

    for j, e in enumerate(edges):
        row([(j, 1.0), (m + j, 1.0)], -np.inf, float(math.floor(net.capacity[e] / y)))
    for w in range(net.n):
        if net.is_compute(w):
            continue
        for base in (0, m):            # each phase balanced at every switch
            row([(base + j, 1.0) for j, (_, b) in enumerate(edges) if b == w]
                + [(base + j, -1.0) for j, (a, _) in enumerate(edges) if a == w], 0.0, 0.0)
    for ti, t in enumerate(compute):
        for phase, base in ((0, m), (1, 0)):        # 0: broadcast s -> t, 1: reduce t -> s
            f0 = flows0 + (2 * ti + phase) * per
            sign = 1.0 if phase == 0 else -1.0
            balance: dict[int, list[tuple[int, float]]] = {v: [] for v in range(net.n)}
            for j, (a, b) in enumerate(edges):
                balance[b].append((f0 + j, sign))
                balance[a].append((f0 + j, -sign))
                row([(f0 + j, 1.0), (base + j, -1.0)], -np.inf, 0.0)   # flow <= count
            for j, v in enumerate(compute):
                balance[v].append((f0 + m + j, 1.0))
            for v, coefficients in balance.items():
                row(coefficients, float(k * n_c) if v == t else 0.0,
                    np.inf if v == t else 0.0)
    rows, cols, values = zip(*entries, strict=True)
    matrix = coo_matrix((values, (rows, cols)), shape=(len(low), n_vars)).tocsr()
    upper = np.full(n_vars, np.inf)
    for block in range(2 * n_c):
        start = flows0 + block * per + m
        upper[start:start + n_c] = k                  # source arcs s -> v carry k
    integrality = np.zeros(n_vars)
    integrality[:2 * m] = 1
    cost = np.zeros(n_vars)
    cost[:2 * m] = 1.0                 # fewest link crossings: routes stay short
    result = milp(cost, constraints=LinearConstraint(matrix, low, high),
                  integrality=integrality, bounds=Bounds(0, upper),
                  options={"node_limit": NODE_LIMIT})
    if result.status != 0 or result.x is None:
        return None
    counts = np.round(result.x[:2 * m]).astype(int)
    reduce = {e: int(counts[j]) for j, e in enumerate(edges) if counts[j] > 0}
    broadcast = {e: int(counts[m + j]) for j, e in enumerate(edges) if counts[m + j] > 0}
    return reduce, broadcast
