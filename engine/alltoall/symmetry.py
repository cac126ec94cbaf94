"""Automorphisms that carry one compute node onto every other: the all-to-all LP folded.

On a network whose automorphism group moves the first compute node s₀ onto every compute
node (a torus, a hypercube, a ring: vertex-transitive networks), the link LP of
:mod:`.lp` has an optimum invariant under the group (average any optimum over it: the
feasible set and λ are invariant). In such an optimum source v's flow is source s₀'s
carried by any automorphism σ_v with σ_v(s₀) = v, so the LP over s₀'s flow alone, each
link carrying the images Σ_v f₀(σ_v⁻¹(e)) ≤ c(e), has the same optimum with N times
fewer variables (Basu et al., arXiv:2309.13541, solve the link LP for every source; the
folding is the standard symmetry reduction of an LP). Whatever the argument, the folded
answer is a feasible all-to-all flow, and :mod:`.solve` only calls it exact when its
verified schedule meets the length certificate computed in exact arithmetic.
"""

from __future__ import annotations

from collections import deque

import networkx as nx
import numpy as np

from canopy.engine.alltoall.problem import AllToAllProblem
from canopy.engine.model.disjoint_sets import DisjointSets

#: Direct searches for an automorphism onto a compute node the generated ones miss.
MAX_SEARCHES = 16


def _graph(problem: AllToAllProblem, marked: int) -> nx.DiGraph:
    """The problem's arcs with every node labelled by (compute, relays), ``marked`` by a
    label of its own (bandwidths are checked on the automorphism found, :func:`_arc_map`)."""
    compute = set(problem.compute)
    g = nx.DiGraph()
    for i in range(problem.n):
        label = ("marked",) if i == marked else (i in compute, bool(problem.relay[i]))
        g.add_node(i, label=label)
    g.add_edges_from(zip(problem.tails.tolist(), problem.heads.tolist(), strict=True))
    return g


def _signature(problem: AllToAllProblem, v: int) -> tuple[object, ...]:
    """What every automorphism keeps of compute node ``v``: its arcs' bandwidths and its
    hop distances to the compute nodes (compute nodes that differ in it have no
    automorphism between them, and no search is needed to say so)."""
    out = sorted(c for c, t in zip(problem.capacity, problem.tails.tolist(), strict=True)
                 if t == v)
    ins = sorted(c for c, h in zip(problem.capacity, problem.heads.tolist(), strict=True)
                 if h == v)
    succ: dict[int, list[int]] = {}
    for t, h in zip(problem.tails.tolist(), problem.heads.tolist(), strict=True):
        succ.setdefault(t, []).append(h)
    dist = {v: 0}
    queue = deque([v])
    while queue:
        u = queue.popleft()
        for w in succ.get(u, []):
            if w not in dist:
                dist[w] = dist[u] + 1
                queue.append(w)
    hops = sorted(dist.get(c, -1) for c in problem.compute)
    return tuple(out), tuple(ins), tuple(hops)


def _arc_map(problem: AllToAllProblem, perm: np.ndarray,
             index: dict[tuple[int, int], int]) -> np.ndarray | None:
    """The arcs' images under the node permutation ``perm``, or None when it is not an
    automorphism (an arc without an image of the same bandwidth, relay or compute flags
    not kept)."""
    images = np.empty(problem.m, dtype=np.int64)
    for a in range(problem.m):
        b = index.get((int(perm[problem.tails[a]]), int(perm[problem.heads[a]])))
        if b is None or problem.capacity[b] != problem.capacity[a]:
            return None
        images[a] = b
    if not np.array_equal(problem.relay[perm], problem.relay):
        return None
    compute = np.zeros(problem.n, dtype=bool)
    compute[list(problem.compute)] = True
    if not np.array_equal(compute[perm], compute):
        return None
    return images


def transitive_maps(problem: AllToAllProblem) -> tuple[list[np.ndarray], list[np.ndarray]] | None:
    """Per compute node v (rank order), an automorphism σ_v with σ_v(compute[0]) = v: the
    node permutations and their arc permutations; None where the search finds none for
    some compute node (the network is not vertex-transitive, or not visibly so).

    Automorphisms onto the neighbours of s₀ are searched (VF2++, s₀ and its image marked),
    and their products reach the rest of s₀'s orbit; a compute node they miss is searched
    directly, up to MAX_SEARCHES times."""
    if problem.num_compute < 2 or len({_signature(problem, v) for v in problem.compute}) > 1:
        return None
    s0 = problem.compute[0]
    index = problem.arc_index()
    base = _graph(problem, s0)
    identity = np.arange(problem.n, dtype=np.int64)
    found: dict[int, tuple[np.ndarray, np.ndarray]] = {
        s0: (identity, np.arange(problem.m, dtype=np.int64))}
    generators: list[tuple[np.ndarray, np.ndarray]] = []

    def search(v: int) -> bool:
        mapping = nx.vf2pp_isomorphism(base, _graph(problem, v), node_label="label")
        if mapping is None:
            return False
        perm = np.array([mapping[i] for i in range(problem.n)], dtype=np.int64)
        arcs = _arc_map(problem, perm, index)
        if arcs is None:
            return False
        generators.append((perm, arcs))
        return True

    def close() -> None:
        queue = deque(found)
        while queue:
            perm, arcs = found[queue.popleft()]
            for gen, gen_arcs in generators:
                target = int(gen[perm[s0]])
                if target not in found:
                    found[target] = (gen[perm], gen_arcs[arcs])
                    queue.append(target)

    compute = set(problem.compute)
    neighbours = sorted({int(h) for t, h in zip(problem.tails, problem.heads, strict=True)
                         if int(t) == s0 and int(h) in compute})
    for v in neighbours[:1] or []:
        if not search(v):
            return None
    close()
    searches = 0
    for v in problem.compute:
        if v in found:
            continue
        if searches >= MAX_SEARCHES or not search(v):
            return None
        searches += 1
        close()
    if any(v not in found for v in problem.compute):
        return None
    return ([found[v][0] for v in problem.compute], [found[v][1] for v in problem.compute])


def arc_orbits(problem: AllToAllProblem, arc_maps: list[np.ndarray]) -> np.ndarray:
    """Per arc, the smallest arc of its orbit under the group ``arc_maps`` generate."""
    sets = DisjointSets(range(problem.m))
    for images in arc_maps:
        for a, b in enumerate(images.tolist()):
            sets.union(a, b)
    smallest = np.empty(problem.m, dtype=np.int64)
    for orbit in sets.groups():
        smallest[list(orbit)] = min(orbit)
    return smallest
