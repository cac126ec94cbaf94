"""The cheapest change of class bandwidths that reaches a target optimum, exactly.

x* >= t holds iff every cut S has B+(S) >= t·|S ∩ V_c| (Zhao et al., "ForestColl",
arXiv:2402.06787, §3.1 eq. (1)), and B+(S) is linear in the class bandwidths, so the
cheapest setting is a linear program with one constraint per cut. Only a few cuts
matter; they are generated: solve the LP over the cuts found so far (HiGHS), make its
answer exact (the vertex of its tight constraints, solved in fractions, with exact
dual multipliers proving it optimal over those cuts), then ask the exact cut oracle
whether some cut is still below the target at that point; if so, add it and repeat.
The answer is exact: the returned bandwidths reach the target (the oracle's final
answer proves it) and cost the least among all that do (the LP over the generated
cuts is a relaxation, and its exact optimum is feasible for every cut).

Prices are per GB/s of added bandwidth per link of a class (each duplex link counted
once); a class without a price keeps its bandwidth. Bandwidths only go up.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction

from canopy.engine.advise.parametric import ParametricNetwork, solve_ratio
from canopy.engine.model.errors import CanopyError

MAX_ROUNDS = 200


@dataclass(frozen=True)
class TargetAnswer:
    """The class bandwidths (GB/s per link) that reach the target at least price."""

    bandwidths: list[Fraction]
    price: Fraction
    ratio: Fraction             # x* at those bandwidths (>= the target)
    cut: tuple[int, ...]        # the cut that limits it there
    rounds: int


def reachable_ratio(pnet: ParametricNetwork, priced: list[int]) -> Fraction | None:
    """x* with every priced class bought without limit (None: no limit at all)."""
    settings: list[Fraction | None] = list(pnet.today())
    for c in priced:
        settings[c] = None
    cut = solve_ratio(pnet, settings)
    return None if cut is None else cut.ratio


def _row(pnet: ParametricNetwork, cut: tuple[int, ...], priced: list[int],
         today: list[Fraction], target: Fraction) -> tuple[list[Fraction], Fraction]:
    """The cut's constraint Σ_c a_c·B_c >= rhs over the priced classes."""
    k = pnet.compute_in(cut)
    coefficients = [Fraction(0)] * len(priced)
    where = {c: i for i, c in enumerate(priced)}
    held = Fraction(0)
    for j in pnet.crossing(cut):
        held += pnet.fixed[j]
        for c, a in pnet.terms[j].items():
            if c in where:
                coefficients[where[c]] += a
            else:
                held += a * today[c]
    return coefficients, target * k - held


def cheapest_upgrade(pnet: ParametricNetwork, target: Fraction,
                     prices: dict[int, Fraction]) -> TargetAnswer:
    """The least-price class bandwidths with x* >= ``target`` (GB/s per compute node).

    Raises CanopyError when no price names a class, a price is not positive, or the
    target is above what the priced classes can reach.
    """
    priced = sorted(prices)
    if not priced:
        raise CanopyError("the price file names no link class of the topology.")
    for c in priced:
        if prices[c] <= 0:
            raise CanopyError(f"class '{pnet.classes[c].name}' has price {prices[c]}; a "
                              "price is a positive number per GB/s per link.")
    today = pnet.today()
    reach = reachable_ratio(pnet, priced)
    if reach is not None and reach < target:
        raise CanopyError("the target is above what upgrading the priced classes can "
                          f"reach (an optimum of {reach} GB/s per GPU at most).")
    weights = [prices[c] * len(pnet.classes[c].links) for c in priced]
    lower = [today[c] for c in priced]
    rows: list[tuple[list[Fraction], Fraction]] = []
    point = list(lower)
    for rounds in range(1, MAX_ROUNDS + 1):
        settings = list(today)
        for i, c in enumerate(priced):
            settings[c] = point[i]
        found = solve_ratio(pnet, settings)
        assert found is not None
        if found.ratio >= target:
            price = sum((w * (b - lo) for w, b, lo in zip(weights, point, lower, strict=True)),
                        Fraction(0))
            return TargetAnswer(settings, price, found.ratio, found.nodes, rounds)
        rows.append(_row(pnet, found.nodes, priced, today, target))
        point = _exact_lp(weights, lower, rows)
    raise CanopyError("the target LP did not settle within "
                      f"{MAX_ROUNDS} rounds of cut generation.")


def _exact_lp(weights: list[Fraction], lower: list[Fraction],
              rows: list[tuple[list[Fraction], Fraction]]) -> list[Fraction]:
    """min weights·B s.t. rows (a·B >= rhs) and B >= lower, exactly: HiGHS picks the
    vertex, fractions solve and certify it; a vertex search when that fails."""
    import numpy as np
    from scipy.optimize import linprog

    m = len(weights)
    a_ub = -np.array([[float(a) for a in coeffs] for coeffs, _ in rows])
    b_ub = -np.array([float(rhs) for _, rhs in rows])
    result = linprog(np.array([float(w) for w in weights]), A_ub=a_ub, b_ub=b_ub,
                     bounds=[(float(lo), None) for lo in lower], method="highs")
    constraints = [(coeffs, rhs) for coeffs, rhs in rows]
    constraints += [([Fraction(int(i == j)) for j in range(m)], lower[i]) for i in range(m)]
    if result.status == 0:
        slack = [float(sum(float(a) * x for a, x in zip(coeffs, result.x, strict=True))
                       - float(rhs)) for coeffs, rhs in constraints]
        order = sorted(range(len(constraints)), key=lambda i: abs(slack[i]))
        tight = [i for i in order if abs(slack[i]) <= 1e-7 * (1 + abs(float(
            constraints[i][1])))]
        for chosen in itertools.islice(itertools.combinations(tight, m), 2000):
            answer = _certified_vertex(weights, constraints, list(chosen))
            if answer is not None:
                return answer
    best: tuple[Fraction, list[Fraction]] | None = None
    for chosen in itertools.combinations(range(len(constraints)), m):
        answer = _certified_vertex(weights, constraints, list(chosen))
        if answer is not None:
            return answer
        point = _vertex(constraints, list(chosen))
        if point is not None and _feasible(constraints, point):
            cost = sum((w * x for w, x in zip(weights, point, strict=True)), Fraction(0))
            if best is None or cost < best[0]:
                best = (cost, point)
    if best is None:
        raise CanopyError("the target LP has no solution over the cuts found.")
    return best[1]


def _vertex(constraints: list, chosen: list[int]) -> list[Fraction] | None:
    """The point where the ``chosen`` constraints are tight (None: not a single point)."""
    m = len(chosen)
    matrix = [list(constraints[i][0]) + [constraints[i][1]] for i in chosen]
    return _solve(matrix, m)


def _solve(matrix: list[list[Fraction]], m: int) -> list[Fraction] | None:
    """Gauss-Jordan elimination in fractions of the m x (m+1) augmented ``matrix``."""
    for col in range(m):
        pivot = next((r for r in range(col, m) if matrix[r][col] != 0), None)
        if pivot is None:
            return None
        matrix[col], matrix[pivot] = matrix[pivot], matrix[col]
        head = matrix[col][col]
        matrix[col] = [v / head for v in matrix[col]]
        for r in range(m):
            if r != col and matrix[r][col] != 0:
                factor = matrix[r][col]
                matrix[r] = [v - factor * p for v, p in zip(matrix[r], matrix[col],
                                                            strict=True)]
    return [matrix[r][m] for r in range(m)]


def _feasible(constraints: list, point: list[Fraction]) -> bool:
    return all(sum((a * x for a, x in zip(coeffs, point, strict=True)), Fraction(0)) >= rhs
               for coeffs, rhs in constraints)


def _certified_vertex(weights: list[Fraction], constraints: list,
                      chosen: list[int]) -> list[Fraction] | None:
    """The vertex of ``chosen`` when it is feasible and optimal: weights are a
    non-negative combination of the chosen constraints' normals (LP duality)."""
    point = _vertex(constraints, chosen)
    if point is None or not _feasible(constraints, point):
        return None
    m = len(chosen)
    transposed = [[constraints[chosen[r]][0][col] for r in range(m)] + [weights[col]]
                  for col in range(m)]
    duals = _solve(transposed, m)
    if duals is None or any(y < 0 for y in duals):
        return None
    return point
