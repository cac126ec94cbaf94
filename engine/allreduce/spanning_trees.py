"""Allreduce on two-way links by spanning trees: the same trees reduce and broadcast.

ForestColl's allreduce LP (ForestColl (arXiv:2402.06787) App. E) splits every link into a reduction
and
a broadcast budget and packs k in-trees and k out-trees per GPU in them
(:mod:`canopy.engine.allreduce.lp_schedule`). Where every link is two-way with the same
bandwidth both ways and there are no switches, another packing reaches the same rate with
fewer trees: take one *undirected* spanning tree per unit tree, broadcast down it from its
root and reduce up it. A tree that uses the link pair {u, v} then loads u -> v in one phase
and v -> u in the other, so both phases together load each direction of {u, v} by y per
tree using it: N·k spanning trees of bandwidth y fit when no pair {u, v} is used by more
than floor(b_uv / y) of them, whichever their roots (any spanning tree can be rooted at
any node). That is a spanning-tree packing in the multigraph with floor(b_uv / y) copies
of every pair, which Edmonds' matroid partition algorithm decides exactly (:func:`pack`;
Nash-Williams-Tutte: it exists iff every partition P of the nodes is crossed by at least
N·k·(|P| - 1) copies). On the 4x4 mesh the LP's 80 GB/s needs k = 3 unit trees per GPU
and phase there (52 trees, 240 connection ends on a centre GPU); here k = 1 reaches it
(16 trees, 80 connection ends), so the MSCCL runtime's 108 thread blocks hold a
connection per tree edge.

:func:`symmetric_trees` tries k = 1, 2, ... below the LP schedule's k; the caller verifies
the schedule exactly (:func:`canopy.engine.model.verification.verify`).
"""

from __future__ import annotations

import time
from collections import deque
from fractions import Fraction

import numpy as np

from canopy.engine.model.disjoint_sets import DisjointSets
from canopy.engine.model.schedule import Tree, TreeEdge
from canopy.engine.model.topology import Topology

MAX_TREE_EDGES = 20_000   # N·k·(N - 1) above which the packing is not tried
TIME_LIMIT_S = 20.0       # the packing gives up (returns None) after this much CPU time

Pair = tuple[str, str]


def two_way_pairs(topology: Topology) -> dict[Pair, Fraction] | None:
    """Bandwidth per pair {u, v} (as (u, v) with u < v) where every live link joins two
    compute nodes and has the same bandwidth both ways; None otherwise."""
    caps = topology.capacities()
    compute = set(topology.compute_nodes())
    pairs: dict[Pair, Fraction] = {}
    for (u, v), b in caps.items():
        if u not in compute or v not in compute or caps.get((v, u)) != b:
            return None
        if u < v:
            pairs[(u, v)] = b
    return pairs


def pack(nodes: list[str], copies: dict[Pair, int], count: int,
         time_limit: float = TIME_LIMIT_S) -> list[list[Pair]] | None:
    """``count`` edge-disjoint spanning trees of the multigraph with ``copies[pair]``
    parallel edges per pair, as lists of pairs; None when there are none (or the search
    took more than ``time_limit`` CPU seconds).

    Edmonds' matroid partition algorithm on ``count`` graphic matroids: edge copies are
    offered one at a time; one that closes a cycle in every forest may still get in by a
    chain of exchanges (it replaces an edge on its cycle in forest i, that edge goes to
    another forest, ...), found by breadth-first search, so the chain is a shortest one
    and every forest stays a forest. A copy that gets in nowhere stays out for good (it is
    spanned by the union of the forests, which only grows). The trees found are checked
    before they are returned.
    """
    start = time.process_time()
    n = len(nodes)
    need = count * (n - 1)
    if sum(copies.values()) < need:
        return None
    index = {x: i for i, x in enumerate(nodes)}
    ends: list[tuple[int, int]] = []
    pairs = sorted(copies)
    for copy in range(max(copies.values(), default=0)):      # round robin over the pairs
        ends.extend((index[p[0]], index[p[1]]) for p in pairs if copies[p] > copy)
    where = [-1] * len(ends)
    adj: list[list[dict[int, int]]] = [[{} for _ in range(n)] for _ in range(count)]
    views: list[tuple[list[int], list[int], list[int], list[int]] | None] = [None] * count

    def view(f: int) -> tuple[list[int], list[int], list[int], list[int]]:
        """(component, parent, parent edge, depth) of forest f's nodes."""
        found = views[f]
        if found is None:
            comp, parent, pedge, depth = [-1] * n, [-1] * n, [-1] * n, [0] * n
            for s in range(n):
                if comp[s] < 0:
                    comp[s] = s
                    queue = [s]
                    for a in queue:
                        for b, e in adj[f][a].items():
                            if comp[b] < 0:
                                comp[b], parent[b], pedge[b], depth[b] = s, a, e, depth[a] + 1
                                queue.append(b)
            found = views[f] = (comp, parent, pedge, depth)
        return found

    def cycle(f: int, a: int, b: int) -> list[int]:
        """The edges of forest f's path from a to b."""
        _, parent, pedge, depth = view(f)
        out = []
        while a != b:
            if depth[a] < depth[b]:
                a, b = b, a
            out.append(pedge[a])
            a = parent[a]
        return out

    def move(e: int, f: int) -> None:
        old = where[e]
        a, b = ends[e]
        if old >= 0:
            del adj[old][a][b], adj[old][b][a]
            views[old] = None
        adj[f][a][b] = adj[f][b][a] = e
        views[f] = None
        where[e] = f

    def offer(s: int) -> bool:
        label: dict[int, int | None] = {s: None}
        queue = deque([s])
        while queue:
            x = queue.popleft()
            a, b = ends[x]
            for f in range(count):
                if f == where[x]:
                    continue
                comp = view(f)[0]
                if comp[a] != comp[b]:
                    target: int | None = f
                    cur: int | None = x
                    while cur is not None and target is not None:
                        old = where[cur]
                        move(cur, target)
                        cur, target = label[cur], old
                    return True
                for y in cycle(f, a, b):
                    if y not in label:
                        label[y] = x
                        queue.append(y)
            if time.process_time() - start > time_limit:
                return False
        return False

    placed = 0
    for e in range(len(ends)):
        if placed == need or time.process_time() - start > time_limit:
            break
        if offer(e):
            placed += 1
    if placed < need:
        return None
    trees = [[(nodes[a], nodes[b]) for a, b in (ends[e] for e in range(len(ends))
                                                if where[e] == f)] for f in range(count)]
    return trees if all(_spanning(nodes, t) for t in trees) else None


def _spanning(nodes: list[str], edges: list[Pair]) -> bool:
    """Whether ``edges`` form a spanning tree of ``nodes``."""
    if len(edges) != len(nodes) - 1:
        return False
    sets = DisjointSets(nodes)
    return all(sets.union(a, b) for a, b in edges)


def _oriented(edges: list[Pair], root: str) -> list[TreeEdge]:
    """``edges`` as an out-tree from ``root``, parents first (breadth-first)."""
    near: dict[str, list[str]] = {}
    for a, b in edges:
        near.setdefault(a, []).append(b)
        near.setdefault(b, []).append(a)
    out, seen, queue = [], {root}, [root]
    for a in queue:
        for b in sorted(near.get(a, [])):
            if b not in seen:
                seen.add(b)
                out.append(TreeEdge(a, b, (a, b)))
                queue.append(b)
    return out


def _height(edges: list[Pair], root: str) -> int:
    depth = {root: 0}
    for e in _oriented(edges, root):
        depth[e.dst] = depth[e.src] + 1
    return max(depth.values())


def symmetric_trees(topology: Topology, x: Fraction, below_k: int
                    ) -> tuple[int, Fraction, list[Tree]] | None:
    """(k, y, trees): the fewest k < ``below_k`` whose N·k spanning trees of bandwidth
    y = x / k fit the two-way links (module docstring), rooted k per compute node so the
    trees are as low as an assignment makes them (the summed heights minimal,
    :func:`scipy.optimize.linear_sum_assignment`); None where the links are not all
    two-way between compute nodes or no such k packs. Each tree serves both phases."""
    pairs = two_way_pairs(topology)
    nodes = list(topology.compute_nodes())
    n = len(nodes)
    if pairs is None or n < 2:
        return None
    for k in range(1, below_k):
        if n * k * (n - 1) > MAX_TREE_EDGES:
            return None
        y = x / k
        copies = {p: int(b / y) for p, b in pairs.items() if b >= y}
        found = pack(nodes, copies, n * k)
        if found is None:
            continue
        from scipy.optimize import linear_sum_assignment  # here: 0.3 s of start-up

        cost = np.array([[_height(t, r) for r in nodes for _ in range(k)] for t in found])
        rows, cols = linear_sum_assignment(cost)
        roots = {int(t): nodes[int(c) // k] for t, c in zip(rows, cols, strict=True)}
        trees: list[Tree] = []
        per_root: dict[str, int] = {}
        for t in sorted(range(len(found)), key=lambda t: (nodes.index(roots[t]), t)):
            root = roots[t]
            per_root[root] = per_root.get(root, 0) + 1
            trees.append(Tree(root, per_root[root] - 1, 1, tuple(_oriented(found[t], root))))
        return k, y, trees
    return None
