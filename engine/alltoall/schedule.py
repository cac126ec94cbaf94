"""All-to-all schedules: weighted routes with exact rates, and their verification.

A schedule is a list of :class:`Route` objects. A route is an arborescence out of one source
compute node given by a parent array; it serves each node of ``targets`` at rate ``weight``
along the tree path to it. A path-based schedule (the "route-based" schedules of Basu
et al., arXiv:2309.13541, Fig. 1) uses one route per path (a single target); the
decomposition method yields spanning trees that serve every other compute node.

Rates are exact: integers over one common ``denominator``, in GB/s. :func:`exact_schedule`
turns the solvers' floating-point rates into exact ones without losing feasibility:
rates are rationalised, every pair is trimmed to the smallest pair's rate, and if
rounding overloads a link all rates shrink by the exact overload factor. :func:`verify`
then checks, in exact arithmetic, what the schedule achieves.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from canopy.engine.alltoall.problem import AllToAllProblem
from canopy.engine.model.errors import ScheduleError

#: Largest denominator used when a solver's floating-point rate is read as a fraction.
RATIONAL_DENOMINATOR = 10**6

#: Parent-array entries of the paths :func:`_integer_loads` walks together.
PATH_BATCH = 1 << 22


@dataclass(frozen=True)
class Route:
    """An arborescence out of ``source``: ``parent[v]`` is v's predecessor (-1 outside)."""

    source: int
    targets: np.ndarray
    parent: np.ndarray

    def path_to(self, target: int) -> tuple[int, ...]:
        nodes = [target]
        while nodes[-1] != self.source:
            nodes.append(int(self.parent[nodes[-1]]))
        return tuple(reversed(nodes))

    def paths(self) -> Iterator[tuple[int, tuple[int, ...]]]:
        """(target, node path) for every target; shared prefixes are built once."""
        known: dict[int, tuple[int, ...]] = {self.source: (self.source,)}
        for t in self.targets:
            above = []
            v = int(t)
            while v not in known:
                above.append(v)
                v = int(self.parent[v])
            path = known[v]
            for u in reversed(above):
                path = (*path, u)
                known[u] = path
            yield int(t), path


@dataclass
class AllToAllSchedule:
    """Routes with rates ``numerators[i] / denominator`` GB/s; ``lam`` is the rate every
    ordered pair of compute nodes receives (set by :func:`verify`)."""

    problem: AllToAllProblem
    routes: list[Route]
    numerators: list[int]
    denominator: int
    lam: Fraction = Fraction(0)
    #: the exact load on every arc (GB/s), set by :func:`verify` with ``lam``
    loads: tuple[Fraction, ...] = ()

    def rate(self, i: int) -> Fraction:
        return Fraction(self.numerators[i], self.denominator)

    def arc_loads(self) -> list[Fraction]:
        """The exact load on every arc (GB/s)."""
        if self.loads:
            return list(self.loads)
        loads = _integer_loads(self.problem, self.routes, self.numerators)
        return [Fraction(int(x), self.denominator) for x in loads]

    def paths(self) -> Iterator[tuple[int, int, tuple[int, ...], Fraction]]:
        """(source, target, node path, rate), identical paths of a pair merged."""
        merged: dict[tuple[int, int, tuple[int, ...]], int] = {}
        for route, num in zip(self.routes, self.numerators, strict=True):
            if num == 0:
                continue
            for t, path in route.paths():
                key = (route.source, t, path)
                merged[key] = merged.get(key, 0) + num
        for (s, t, path), num in merged.items():
            yield s, t, path, Fraction(num, self.denominator)


def path_route(problem: AllToAllProblem, nodes: list[int]) -> Route:
    parent = np.full(problem.n, -1, dtype=np.int64)
    for u, v in zip(nodes, nodes[1:], strict=False):
        parent[v] = u
    return Route(nodes[0], np.array([nodes[-1]], dtype=np.int64), parent)


# ------------------------------------------------------------------ exact loads


def _arc_lookup(problem: AllToAllProblem) -> tuple[np.ndarray, np.ndarray]:
    keys = problem.tails * problem.n + problem.heads
    order = np.argsort(keys)
    return keys[order], order


def route_counts(problem: AllToAllProblem, route: Route,
                 lookup: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """How many targets of ``route`` cross each arc; raises ScheduleError when a tree
    path is not made of arcs, loops, or relays through a node that may not forward."""
    keys, order = lookup or _arc_lookup(problem)
    counts = np.zeros(problem.m, dtype=np.int64)
    cur = np.asarray(route.targets, dtype=np.int64).copy()
    if (cur == route.source).any():
        raise ScheduleError(f"a route of '{problem.names[route.source]}' targets itself.")
    for _ in range(problem.n):
        cur = cur[cur != route.source]
        if cur.size == 0:
            return counts
        par = route.parent[cur]
        if (par < 0).any():
            raise ScheduleError(f"a route of '{problem.names[route.source]}' does not reach "
                                f"'{problem.names[int(cur[par < 0][0])]}'.")
        inner = par[par != route.source]
        if inner.size and not problem.relay[inner].all():
            bad = int(inner[~problem.relay[inner]][0])
            raise ScheduleError(f"a route of '{problem.names[route.source]}' relays through "
                                f"'{problem.names[bad]}', which may not forward.")
        want = par * problem.n + cur
        pos = np.searchsorted(keys, want)
        pos = np.minimum(pos, len(keys) - 1)
        if (keys[pos] != want).any():
            i = int(np.flatnonzero(keys[pos] != want)[0])
            raise ScheduleError(f"a route uses {problem.names[int(par[i])]} -> "
                                f"{problem.names[int(cur[i])]}, which is not a link.")
        np.add.at(counts, order[pos], 1)
        cur = par
    raise ScheduleError(f"a route of '{problem.names[route.source]}' contains a cycle.")


def _integer_loads(problem: AllToAllProblem, routes: list[Route],
                   numerators: list[int]) -> np.ndarray:
    """The exact load of every arc, as integers over the schedule's denominator (an
    object array). Single-target routes (paths) are walked together, one hop of all of
    them per step (:func:`_path_arcs`); trees, and any path that fails a check (so that
    its error names it), go through :func:`route_counts` one by one."""
    lookup = _arc_lookup(problem)
    loads = np.zeros(problem.m, dtype=object)
    loads[:] = 0
    paths = [i for i, (route, num) in enumerate(zip(routes, numerators, strict=True))
             if num and route.targets.size == 1]
    done: set[int] = set()
    step = max(1, PATH_BATCH // problem.n)        # paths walked together (parent arrays)
    for first in range(0, len(paths), step):
        batch = paths[first:first + step]
        walked = _path_arcs(problem, [routes[i] for i in batch], lookup)
        if walked is not None:
            which, arcs = walked
            nums = np.array([numerators[i] for i in batch], dtype=object)
            np.add.at(loads, arcs, nums[which])
            done.update(batch)
    for i, (route, num) in enumerate(zip(routes, numerators, strict=True)):
        if num and i not in done:
            counts = route_counts(problem, route, lookup)
            nz = np.flatnonzero(counts)
            loads[nz] += counts[nz].astype(object) * num
    return loads


def _path_arcs(problem: AllToAllProblem, paths: list[Route],
               lookup: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
    """(path index, arc) for every hop of every single-target route in ``paths``, walked
    back from the targets all at once; None when any path fails a check of
    :func:`route_counts` (the caller then walks them one by one for the error)."""
    if not paths:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    keys, order = lookup
    n = problem.n
    parent = np.stack([r.parent for r in paths]).astype(np.int64)
    source = np.array([r.source for r in paths], dtype=np.int64)
    cur = np.array([int(r.targets[0]) for r in paths], dtype=np.int64)
    live = np.arange(len(paths), dtype=np.int64)
    if (cur == source).any():
        return None
    which_parts: list[np.ndarray] = []
    arc_parts: list[np.ndarray] = []
    for _ in range(n):
        keep = cur != source[live]
        live, cur = live[keep], cur[keep]
        if live.size == 0:
            return np.concatenate(which_parts), np.concatenate(arc_parts)
        par = parent[live, cur]
        if (par < 0).any():
            return None
        inner = par != source[live]
        if not problem.relay[par[inner]].all():
            return None
        want = par * n + cur
        pos = np.minimum(np.searchsorted(keys, want), len(keys) - 1)
        if (keys[pos] != want).any():
            return None
        which_parts.append(live)
        arc_parts.append(order[pos])
        cur = par
    return None


def _served(problem: AllToAllProblem, routes: list[Route], numerators: list[int]
            ) -> dict[tuple[int, int], int]:
    served: dict[tuple[int, int], int] = {(s, t): 0 for s in problem.compute
                                          for t in problem.compute if s != t}
    for route, num in zip(routes, numerators, strict=True):
        for t in route.targets:
            key = (route.source, int(t))
            if key not in served:
                raise ScheduleError(f"a route of '{problem.names[route.source]}' serves "
                                    f"'{problem.names[int(t)]}', which is not a compute node.")
            served[key] += num
    return served


# ------------------------------------------------------------------ exact rates


def exact_schedule(problem: AllToAllProblem, routes: list[Route], rates: list[float],
                   unit: Fraction = Fraction(1), rational: bool = True) -> AllToAllSchedule:
    """Exact rates (GB/s) from floating-point ``rates`` in units of ``unit`` GB/s (the
    solvers work with bandwidths scaled to at most 1): read each as a fraction (small
    denominators when ``rational``, else binary fractions), trim every pair down to the
    least-served pair, and shrink all rates by the exact overload factor if any link is
    over its bandwidth. The result is feasible by construction and then verified."""
    if rational:
        fracs = [Fraction(r).limit_denominator(RATIONAL_DENOMINATOR) if r > 0 else Fraction(0)
                 for r in rates]
        den = 1
        for f in fracs:
            den = math.lcm(den, f.denominator)
            if den > 1 << 62:
                return exact_schedule(problem, routes, rates, unit, rational=False)
        nums = [f.numerator * (den // f.denominator) for f in fracs]
    else:
        den = 1 << 40
        nums = [max(0, round(r * den)) for r in rates]
    nums = [x * unit.numerator for x in nums]
    den *= unit.denominator
    served = _served(problem, routes, nums)
    floor = min(served.values())
    if floor <= 0:
        raise ScheduleError("the solver's flows leave some pair of compute nodes unserved.")
    _trim(routes, nums, served, floor)
    loads = _integer_loads(problem, routes, nums)
    over = max((Fraction(int(load)) / (c * den) for load, c in zip(loads, problem.capacity,
                                                                    strict=True) if load),
               default=Fraction(0))
    if over > 1:
        nums = [x * over.denominator for x in nums]
        den *= over.numerator
    schedule = AllToAllSchedule(problem, routes, nums, den)
    verify(schedule)
    return schedule


def _trim(routes: list[Route], nums: list[int], served: dict[tuple[int, int], int],
          floor: int) -> None:
    """Lower rates until every pair gets exactly ``floor``: per pair for paths, per
    source for spanning trees (which serve all of a source's pairs at once)."""
    groups: dict[tuple[int, int], list[int]] = {}
    for i, route in enumerate(routes):
        key = (route.source, int(route.targets[0]) if route.targets.size == 1 else -1)
        groups.setdefault(key, []).append(i)
    for (s, t), indices in groups.items():
        first = int(routes[indices[0]].targets[0])
        excess = served[(s, t if t >= 0 else first)] - floor
        for i in sorted(indices, key=lambda j: -nums[j]):
            if excess <= 0:
                break
            cut = min(excess, nums[i])
            nums[i] -= cut
            excess -= cut


# ------------------------------------------------------------------ verification


def verify(schedule: AllToAllSchedule) -> Fraction:
    """Check ``schedule`` exactly and set ``schedule.lam``: every route is made of links,
    relays only through nodes that may forward (so each commodity's flow is conserved at
    every other node), every link's load is within its bandwidth, and every ordered pair
    of distinct compute nodes is served at the same rate λ > 0. Raises ScheduleError."""
    problem = schedule.problem
    den = schedule.denominator
    nums = schedule.numerators
    if len(nums) != len(schedule.routes) or any(x < 0 for x in nums):
        raise ScheduleError("an all-to-all schedule has a negative or missing rate.")
    loads = _integer_loads(problem, schedule.routes, nums)
    for a, (load, c) in enumerate(zip(loads, problem.capacity, strict=True)):
        if Fraction(int(load), den) > c:
            u, v = problem.names[int(problem.tails[a])], problem.names[int(problem.heads[a])]
            raise ScheduleError(f"the all-to-all schedule loads link {u} -> {v} with "
                                f"{float(Fraction(int(load), den)):.6g} GB/s, over its "
                                f"{float(c):.6g} GB/s.")
    served = _served(problem, schedule.routes, nums)
    values = set(served.values())
    if len(values) != 1 or 0 in values:
        (s, t), low = min(served.items(), key=lambda kv: kv[1])
        raise ScheduleError(f"the all-to-all schedule serves pairs unequally "
                            f"({problem.names[s]} -> {problem.names[t]} gets "
                            f"{float(Fraction(low, den)):.6g} GB/s).")
    schedule.lam = Fraction(values.pop(), den)
    schedule.loads = tuple(Fraction(int(load), den) for load in loads)
    return schedule.lam
