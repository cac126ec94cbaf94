"""Exact link flows from HiGHS's floating-point vertex: the support, solved exactly.

HiGHS returns a vertex of the link LP (:mod:`.lp`) to within its tolerance; rounding its
numbers one by one loses exactness (a saturated link overflows by 1e-12 and every rate
must shrink). Instead the exact solution with the same *support* is recovered at the
certified rate λ = B (the length certificate of :mod:`.bound`, which is ≥ λ*):

1. Per source, the arcs HiGHS uses form a graph; a spanning tree of it (rooted at the
   source) leaves a few *cotree* arcs. Conservation with demand B at every other compute
   node fixes each tree arc's flow as an affine function of the cotree flows
   (the net flow into a subtree is B times the compute nodes in it).
2. Every link HiGHS saturates gives one equation: the flows over it sum to its bandwidth.
   In the cotree flows this is a small integer linear system, solved modulo several
   primes, combined by the Chinese remainder theorem and read back as fractions by
   rational reconstruction (free variables, if the support is not a vertex's, keep their
   rationalised HiGHS values).
3. The fractions are checked exactly: equations, nonnegativity, every bandwidth.

If any check fails, the caller falls back to rounding. When it succeeds the flows serve
every pair at exactly B, and B is an upper bound on λ*, so λ* = B exactly.
"""

from __future__ import annotations

import math
from collections import deque
from fractions import Fraction

import numpy as np

from canopy.engine.alltoall.problem import AllToAllProblem

#: Flow below this (in units of the largest bandwidth) is not part of the support.
SUPPORT = 1e-7
#: Primes below 2^31, so products of two residues fit in int64.
_START = (1 << 31) - 1
MAX_PRIMES = 48


def _is_prime(n: int) -> bool:
    """Deterministic Miller-Rabin for n < 2^32 (bases 2, 7, 61)."""
    if n < 2 or n % 2 == 0:
        return n == 2
    d, r = n - 1, 0
    while d % 2 == 0:
        d //= 2
        r += 1
    for a in (2, 7, 61):
        if a % n == 0:
            continue
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(r - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _primes() -> list[int]:
    out: list[int] = []
    p = _START
    while len(out) < MAX_PRIMES:
        if _is_prime(p):
            out.append(p)
        p -= 2
    return out


def _reduce(a: np.ndarray, b: np.ndarray, p: int, pivots: list[int] | None
            ) -> tuple[list[int], np.ndarray] | None:
    """Gauss-Jordan of ``a x = b`` modulo ``p``; returns the pivot columns and x (free
    columns 0), or None if inconsistent or the pivots differ from ``pivots``."""
    a = a % p
    b = b % p
    rows, cols = a.shape
    found: list[int] = []
    r = 0
    for c in range(cols):
        if r == rows:
            break
        nz = np.flatnonzero(a[r:, c])
        if nz.size == 0:
            continue
        i = r + int(nz[0])
        if i != r:
            a[[r, i]] = a[[i, r]]
            b[[r, i]] = b[[i, r]]
        inv = pow(int(a[r, c]), p - 2, p)
        a[r] = a[r] * inv % p
        b[r] = b[r] * inv % p
        col = a[:, c].copy()
        col[r] = 0
        hit = np.flatnonzero(col)
        if hit.size:
            a[hit] = (a[hit] - col[hit, None] * a[r]) % p
            b[hit] = (b[hit] - col[hit] * b[r]) % p
        found.append(c)
        r += 1
    if b[r:].any() or (pivots is not None and found != pivots):
        return None
    x = np.zeros(cols, dtype=np.int64)
    x[found] = b[: len(found)]
    return found, x


def _rational(u: int, m: int) -> Fraction | None:
    """The fraction a/b ≡ u (mod m) with |a|, b ≤ √(m/2), if there is one."""
    bound = math.isqrt(m // 2)
    r0, r1, s0, s1 = m, u % m, 0, 1
    while r1 > bound:
        q = r0 // r1
        r0, r1 = r1, r0 - q * r1
        s0, s1 = s1, s0 - q * s1
    if s1 == 0 or abs(s1) > bound or math.gcd(s1, m) != 1:
        return None
    return Fraction(r1, s1)


def _solve(a: np.ndarray, b: list[Fraction], guess: np.ndarray) -> list[Fraction] | None:
    """The exact solution of the integer system ``a y = b`` (module docstring, step 2)."""
    cols = a.shape[1]
    primes = _primes()

    def residues(values: list[Fraction], p: int) -> np.ndarray:
        return np.array([v.numerator % p * pow(v.denominator % p, p - 2, p) % p
                         for v in values], dtype=np.int64)

    first = _reduce(a, residues(b, primes[0]), primes[0], None)
    if first is None:
        return None
    pivots = first[0]
    free = [c for c in range(cols) if c not in set(pivots)]
    fixed = {c: Fraction(float(guess[c])).limit_denominator(10**6) for c in free}
    rhs = list(b)
    for c, value in fixed.items():
        if value:
            rhs = [r - int(a[i, c]) * value for i, r in enumerate(rhs)]
    sub = a[:, pivots]
    modulus, acc = 1, [0] * len(pivots)
    for p in primes:
        got = _reduce(sub, residues(rhs, p), p, list(range(len(pivots))))
        if got is None:
            continue
        x = got[1]
        # Chinese remainder: acc ≡ old (mod modulus), acc ≡ x (mod p)
        inv = pow(modulus % p, p - 2, p)
        acc = [v + modulus * ((int(xi) - v) * inv % p) for v, xi in zip(acc, x, strict=True)]
        modulus *= p
        values = [_rational(v, modulus) for v in acc]
        if any(v is None for v in values):
            continue
        exact = [Fraction(0)] * cols
        for c, v in zip(pivots, values, strict=True):
            assert v is not None
            exact[c] = v
        for c, v in fixed.items():
            exact[c] = v
        if _satisfies(a, exact, b):
            return exact
    return None


def _satisfies(a: np.ndarray, y: list[Fraction], b: list[Fraction]) -> bool:
    """Whether ``a y = b`` holds exactly: over the common denominator of ``y``, in
    Python integers."""
    den = 1
    for v in y:
        den = math.lcm(den, v.denominator)
    nums = np.array([v.numerator * (den // v.denominator) for v in y], dtype=object)
    lhs = a.astype(object).dot(nums) if len(y) else np.zeros(a.shape[0], dtype=object)
    return all(int(left) * rhs.denominator == rhs.numerator * den
               for left, rhs in zip(lhs, b, strict=True))


class _Up:
    """The parent of a node in one source's spanning tree of its support."""

    def __init__(self, parent_arc: dict[int, int], tails: np.ndarray, heads: np.ndarray
                 ) -> None:
        self.parent_arc, self.tails, self.heads = parent_arc, tails, heads

    def __call__(self, v: int) -> int:
        a = self.parent_arc[v]
        return int(self.tails[a]) if int(self.heads[a]) == v else int(self.heads[a])


def _source_forms(problem: AllToAllProblem, k: int, row: np.ndarray, unit: Fraction,
                  lam: Fraction, const: dict[tuple[int, int], Fraction],
                  terms: dict[tuple[int, int], dict[int, int]], guess: list[float],
                  cotree: list[tuple[int, int]]) -> bool:
    """Step 1 for source ``compute[k]`` on the support of its flow ``row``: the affine
    form of every arc it uses (``const``, ``terms``) in new cotree variables (``cotree``,
    HiGHS's values in ``guess``); False when its support misses a compute node."""
    tails, heads = problem.tails, problem.heads
    is_compute = np.zeros(problem.n, dtype=bool)
    is_compute[list(problem.compute)] = True
    s = problem.compute[k]
    support = [int(a) for a in np.flatnonzero(row > SUPPORT)]
    touching: dict[int, list[int]] = {}
    for a in support:
        touching.setdefault(int(tails[a]), []).append(a)
        touching.setdefault(int(heads[a]), []).append(a)
    parent_arc = {s: -1}
    depth = {s: 0}
    order = [s]
    queue = deque([s])
    while queue:
        u = queue.popleft()
        for a in touching.get(u, []):
            v = int(heads[a]) if int(tails[a]) == u else int(tails[a])
            if v not in parent_arc:
                parent_arc[v] = a
                depth[v] = depth[u] + 1
                order.append(v)
                queue.append(v)
    if any(t not in parent_arc for t in problem.compute):
        return False
    tree = {a for a in parent_arc.values() if a >= 0}
    up = _Up(parent_arc, tails, heads)
    count = {v: int(is_compute[v] and v != s) for v in order}
    for v in reversed(order[1:]):
        count[up(v)] += count[v]
    for v in order[1:]:
        a = parent_arc[v]
        sign = 1 if int(heads[a]) == v else -1
        const[(k, a)] = sign * lam * count[v]
        terms[(k, a)] = {}
    for a in support:
        if a in tree or int(tails[a]) not in parent_arc:
            continue
        var = len(cotree)
        cotree.append((k, a))
        guess.append(float(row[a]) * float(unit))
        const[(k, a)] = Fraction(0)
        terms[(k, a)] = {var: 1}
        u, w = int(tails[a]), int(heads[a])
        # entering sub(c) for c on w's side of the tree path, leaving on u's side
        for node, coef in ((w, -1), (u, 1)):
            other = u if node == w else w
            x, y = node, other
            while depth[x] > depth[y]:
                x = up(x)
            while depth[y] > depth[x]:
                y = up(y)
            while x != y:
                x, y = up(x), up(y)
            lca = x
            c = node
            while c != lca:
                b = parent_arc[c]
                sign = 1 if int(heads[b]) == c else -1
                form = terms[(k, b)]
                form[var] = form.get(var, 0) + coef * sign
                c = up(c)
    return True


def exact_flows(problem: AllToAllProblem, flow: np.ndarray, unit: Fraction, lam: Fraction,
                arc_maps: list[np.ndarray] | None = None) -> tuple[np.ndarray, int] | None:
    """Exact per-source arc flows serving every pair at ``lam`` GB/s on the support of
    ``flow`` (HiGHS's flows in units of ``unit`` GB/s), as integer numerators (an object
    array, sources × arcs) over one denominator; None when the support admits none.

    With ``arc_maps`` (per compute node v, the arc permutation of an automorphism carrying
    the first compute node onto v: :mod:`canopy.engine.alltoall.symmetry`), only the first
    source's flows are unknowns and source v's are their images, as the folded LP has them:
    the system is N times smaller, every link's equation summing the images on it."""
    m = problem.m
    # affine forms of every used (source, arc): constant + Σ coef · y[var]
    const: dict[tuple[int, int], Fraction] = {}
    terms: dict[tuple[int, int], dict[int, int]] = {}
    guess: list[float] = []
    cotree: list[tuple[int, int]] = []
    for k in range(1 if arc_maps is not None else problem.num_compute):
        if not _source_forms(problem, k, flow[k], unit, lam, const, terms, guess, cotree):
            return None
    images = arc_maps or [np.arange(m)] * problem.num_compute
    # equations: every arc that carries flow and is (nearly) saturated
    load = flow.sum(axis=0)
    cap = problem.float_capacity() / float(unit)
    users: dict[int, list[tuple[int, int]]] = {}
    for key in const:
        if arc_maps is None:
            users.setdefault(key[1], []).append(key)
        else:
            for maps in arc_maps:
                users.setdefault(int(maps[key[1]]), []).append(key)
    tight = [a for a in range(m) if a in users and load[a] >= cap[a] - 1e-6]
    exact_y: list[Fraction] = []
    if cotree:
        matrix = np.zeros((len(tight), len(cotree)), dtype=np.int64)
        rhs = []
        for i, a in enumerate(tight):
            total = problem.capacity[a]
            for key in users[a]:
                total -= const[key]
                for var, coef in terms[key].items():
                    matrix[i, var] += coef
            rhs.append(total)
        solved = _solve(matrix, rhs, np.array(guess))
        if solved is None:
            return None
        exact_y = solved
    values: dict[tuple[int, int], Fraction] = {}
    for key, c0 in const.items():
        value = c0 + sum((coef * exact_y[var] for var, coef in terms[key].items()),
                         Fraction(0))
        if value < 0:
            return None
        values[key] = value
    den = lam.denominator
    for value in values.values():
        den = math.lcm(den, value.denominator)
    out = np.zeros((problem.num_compute, m), dtype=object)
    out[:] = 0
    for (k, a), value in values.items():
        for j in ([k] if arc_maps is None else range(problem.num_compute)):
            out[j, images[j][a]] = value.numerator * (den // value.denominator)
    for a in range(m):
        if sum(out[:, a]) > problem.capacity[a] * den:
            return None
    return out, den
