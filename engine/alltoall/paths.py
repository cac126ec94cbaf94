"""Path decomposition of link flows: one source's aggregated flow into paths per target.

The link LP (:mod:`canopy.engine.alltoall.lp`) gives each source one flow serving every
other compute node with demand λ. The classical flow decomposition walks back from a target
along arcs that still carry flow until it reaches the source, removes the smallest flow on
that path (or the target's remaining demand) and repeats; a walk that meets itself cancels
the cycle it found. This yields the route-based form of Basu et al. (arXiv:2309.13541,
Fig. 1): a set of paths with rates for every commodity.
"""

from __future__ import annotations

import numpy as np

from canopy.engine.alltoall.problem import AllToAllProblem
from canopy.engine.alltoall.schedule import Route, path_route

#: Flow below this (in units of the largest link bandwidth) is solver noise.
NOISE = 1e-9


def decompose(problem: AllToAllProblem, flow: np.ndarray, lam: float,
              node_maps: list[np.ndarray] | None = None) -> tuple[list[Route], list[float]]:
    """Paths and their rates from ``flow[k, a]`` (source ``compute[k]``) at demand ``lam``.

    With exact flows (an object array of integers, ``lam`` an integer) every step is exact
    and the rates are integers. With ``node_maps`` (per compute node v an automorphism
    carrying the first compute node onto v, whose image of the first source's flow source
    v's flow is: :mod:`canopy.engine.alltoall.symmetry`) only the first source's flow is
    decomposed and the other sources take the images of its paths."""
    into: list[list[int]] = [[] for _ in range(problem.n)]
    for a, v in enumerate(problem.heads):
        into[int(v)].append(a)
    into_arr = [np.array(arcs, dtype=np.int64) for arcs in into]
    routes: list[Route] = []
    rates: list[float] = []
    for k, s in enumerate(problem.compute[:1] if node_maps is not None else problem.compute):
        f = flow[k].copy()
        for t in problem.compute:
            if t == s:
                continue
            need = lam
            while need > NOISE:
                path = _walk_back(problem, f, into_arr, s, t)
                if path is None:
                    break
                arcs, nodes = path
                amount = min(need, f[arcs].min())
                f[arcs] -= amount
                need -= amount
                routes.append(path_route(problem, nodes))
                rates.append(amount)
    if node_maps is not None:
        first = [[int(v) for v in r.path_to(int(r.targets[0]))] for r in routes]
        routes = [path_route(problem, [int(perm[v]) for v in nodes])
                  for perm in node_maps for nodes in first]
        rates = rates * len(node_maps)
    return routes, rates


def _walk_back(problem: AllToAllProblem, f: np.ndarray, into: list[np.ndarray], s: int,
               t: int) -> tuple[np.ndarray, list[int]] | None:
    """A path s -> t on arcs with flow above NOISE (cancelling any cycle met on the way)."""
    while True:
        nodes = [t]
        arcs: list[int] = []
        position = {t: 0}
        v = t
        while v != s:
            cand = into[v]
            if cand.size == 0:
                return None
            a = int(cand[np.argmax(f[cand])])
            if f[a] <= NOISE:
                return None
            u = int(problem.tails[a])
            arcs.append(a)
            if u in position:
                cycle = np.array(arcs[position[u]:], dtype=np.int64)
                f[cycle] -= f[cycle].min()
                break
            position[u] = len(nodes)
            nodes.append(u)
            v = u
        else:
            return np.array(arcs, dtype=np.int64), list(reversed(nodes))
