"""Tree packing on vertex-transitive fabrics by translation (ForestColl (arXiv:2402.06787) §4.4).

§4.4 asks for k out-trees rooted at every compute node, spanning all of them, such that
every logical edge (x, y) of D* lies in at most g(x, y) trees. When the compute nodes form
a group G (here a product Z_d1 x ... x Z_dr) acting on D* by translations v -> v + t that
keep every arc and its capacity (tori, rings, hypercubes, circulants: Cayley graphs), an
arc (v, v + s) has a label s and g depends only on s. Build k trees rooted at 0 that use
label s at most g(s) times in total, then translate them to every root t. An arc
(v, v + s) lies in the translate by t of a tree edge (u, u + s) exactly when t = v - u, so
its load is the number of tree edges labelled s at root 0: the same on every arc of a
label, and within g. The packing therefore holds without a single flow (Alg. 5 is
needed only to *find* one); the schedule is verified before it is returned anyway.

Translations are found from the topology alone: the positions of the compute nodes are
read in mixed radix, with strides taken from the offsets of position 0's neighbours,
and a candidate is kept only if every arc of D* translates onto an arc of equal capacity.
"""

from __future__ import annotations

from collections import deque

from canopy.engine.forestcoll.tree_packing import Batch, Packing

MAX_CANDIDATES = 64


def _radix_chains(n: int, offsets: set[int]) -> list[list[int]]:
    """Stride chains 1 | s2 | ... | sr | n built from ``offsets`` (longest first)."""
    divisors = sorted(o for o in offsets if 1 < o < n and n % o == 0)
    chains: list[list[int]] = []

    def extend(chain: list[int]) -> None:
        if len(chains) >= MAX_CANDIDATES:
            return
        chains.append(chain)
        for d in divisors:
            if d > chain[-1] and d % chain[-1] == 0:
                extend([*chain, d])

    extend([1])
    return sorted(chains, key=len, reverse=True)


class _Group:
    """Z_d1 x ... x Z_dr on positions 0..n-1 read in mixed radix with the given strides."""

    def __init__(self, n: int, strides: list[int]) -> None:
        dims = [b // a for a, b in zip(strides, [*strides[1:], n], strict=True)]
        self.n = n
        self.digits = [tuple((v // s) % d for s, d in zip(strides, dims, strict=True))
                       for v in range(n)]
        self.strides, self.dims = strides, dims

    def shift(self, t: int) -> list[int]:
        """v + t for every position v."""
        return [self.combine(v, t, 1) for v in range(self.n)]

    def shifts(self) -> list[list[int]]:
        """shift(t) for every t, each from a smaller one by a unit step (n lookups each)."""
        units = [self.shift(s) for s in self.strides]
        images = [list(range(self.n))]
        for t in range(1, self.n):
            i = next(i for i, d in enumerate(self.digits[t]) if d)
            unit = units[i]
            images.append([unit[x] for x in images[t - self.strides[i]]])
        return images

    def combine(self, a: int, b: int, sign: int) -> int:
        """a + b (sign 1) or a - b (sign -1) as a position."""
        return sum(((x + sign * y) % d) * s for x, y, d, s in
                   zip(self.digits[a], self.digits[b], self.dims, self.strides, strict=True))


def _labels(group: _Group, out: list[list[tuple[int, int]]]) -> dict[int, int] | None:
    """g per label s if every arc's translates are arcs of the same capacity, else None.

    ``out[a]`` lists (head, capacity) of a's arcs. Position 0's arcs give the labels; every
    other position must have exactly those (its labels are distinct, as its heads are),
    which fails early, at the first position that differs, for a wrong group.
    """
    cap = {group.combine(b, 0, -1): c for b, c in out[0]}
    for a, arcs in enumerate(out):
        if len(arcs) != len(cap) or any(cap.get(group.combine(b, a, -1)) != c
                                        for b, c in arcs):
            return None
    return cap


def _trees_at_zero(group: _Group, cap: dict[int, int], k: int
                   ) -> list[tuple[int, list[int]]] | None:
    """k spanning trees rooted at 0 as (multiplicity, parent-label list) pairs (-1 at 0),
    each label s used at most cap[s] times in all; grown together in BFS order, each
    vertex taking the label with the most capacity left, shortest-path parents preferred.
    None if stuck.

    Up to :data:`ONE_BY_ONE_K` trees are grown one by one; more are grown as groups of
    equal trees, each vertex splitting a group where its labels change, so the work
    depends on n and the labels, not on k (a fixed k of 10^12 costs what 10^3 does)."""
    n, labels = group.n, sorted(cap)
    step = {s: group.shift(s) for s in labels}
    dist = {0: 0}
    order = [0]
    queue = deque([0])
    while queue:
        v = queue.popleft()
        for s in labels:
            w = step[s][v]
            if w not in dist:
                dist[w] = dist[v] + 1
                order.append(w)
                queue.append(w)
    if len(order) < n:
        return None
    rank = {v: i for i, v in enumerate(order)}
    back = {s: [group.combine(v, s, -1) for v in range(n)] for s in labels}
    left = dict(cap)
    if k <= ONE_BY_ONE_K:
        trees = [[-1] * n for _ in range(k)]
        for v in order[1:]:
            for tree in trees:
                best = max((s for s in labels if rank[back[s][v]] < rank[v] and left[s] > 0),
                           key=lambda s: (dist[back[s][v]] == dist[v] - 1, left[s]),
                           default=None)
                if best is None:
                    return None
                left[best] -= 1
                tree[v] = best
        return [(1, tree) for tree in trees]
    groups: list[tuple[int, list[int]]] = [(k, [-1] * n)]
    for v in order[1:]:
        eligible = [s for s in labels if rank[back[s][v]] < rank[v]]
        near = [s for s in eligible if dist[back[s][v]] == dist[v] - 1]
        counts = _greedy_counts(near, left, k)
        rest = k - sum(counts.values())
        if rest:
            far = [s for s in eligible if s not in near]
            for s, c in _greedy_counts(far, left, rest).items():
                counts[s] = counts.get(s, 0) + c
            rest = k - sum(counts.values())
        if rest:
            return None
        for s, c in counts.items():
            left[s] -= c
        groups = _split_groups(groups, v, [(s, c) for s, c in counts.items() if c])
    return groups


ONE_BY_ONE_K = 256
"""Largest k whose trees :func:`_trees_at_zero` grows one by one."""


def _greedy_counts(candidates: list[int], left: dict[int, int], picks: int
                   ) -> dict[int, int]:
    """How often each candidate label is taken by up to ``picks`` picks, each of the
    label with the most capacity left (the smallest label among equals): water filling,
    in time independent of ``picks``."""
    levels = sorted({left[s] for s in candidates if left[s] > 0}, reverse=True)
    total = sum(left[s] for s in candidates if left[s] > 0)
    if picks >= total:
        return {s: left[s] for s in candidates if left[s] > 0}
    # the final level: the lowest λ with sum(max(0, left - λ)) <= picks
    level, taken = levels[0], 0
    for lower in [*levels[1:], 0]:
        above = sum(1 for s in candidates if left[s] >= level)
        need = above * (level - lower)
        if taken + need > picks:
            level -= (picks - taken) // above
            taken += above * ((picks - taken) // above)
            break
        taken += need
        level = lower
    counts = {s: max(0, left[s] - level) for s in candidates}
    for s in sorted(candidates):           # the remainder: one each at the level, in order
        if taken == picks:
            break
        if left[s] >= level > 0:
            counts[s] += 1
            taken += 1
    return {s: c for s, c in counts.items() if c}


def _split_groups(groups: list[tuple[int, list[int]]], v: int,
                  blocks: list[tuple[int, int]]) -> list[tuple[int, list[int]]]:
    """Give vertex ``v`` label s in the next c trees for each (s, c) of ``blocks``, in
    order over ``groups`` (multiplicity, labels), splitting a group a block ends inside."""
    out: list[tuple[int, list[int]]] = []
    blocks = list(reversed(blocks))
    label, need = blocks.pop()
    for m, tree in groups:
        while m:
            take = min(m, need)
            part = tree if take == m else list(tree)
            part[v] = label
            out.append((take, part))
            m -= take
            need -= take
            if not need and blocks:
                label, need = blocks.pop()
    return out


def pack_symmetric(compute: list[int], capacity: dict[tuple[int, int], int],
                   demands: dict[int, int]) -> Packing | None:
    """The packing of :func:`canopy.engine.forestcoll.tree_packing.pack_trees` by translation,
    or None
    when the compute nodes carry no translation group of D* or the trees do not fit."""
    n = len(compute)
    k = demands.get(compute[0], 0) if compute else 0
    if n < 2 or k < 1 or set(demands) != set(compute) or any(
            m != k for m in demands.values()):
        return None
    pos = {v: i for i, v in enumerate(compute)}
    arcs: dict[tuple[int, int], int] = {}
    for (a, b), c in capacity.items():
        if c:
            if a not in pos or b not in pos:
                return None
            arcs[(pos[a], pos[b])] = c
    out: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for (a, b), c in arcs.items():
        out[a].append((b, c))
    for strides in _radix_chains(n, {b for b, _ in out[0]}):
        group = _Group(n, strides)
        cap = _labels(group, out)
        if cap is None:
            continue
        trees = _trees_at_zero(group, cap, k)
        if trees is None:
            return None
        return Packing(_translate(group, compute, trees), 0, 0)
    return None


def _translate(group: _Group, compute: list[int], trees: list[tuple[int, list[int]]]
               ) -> list[Batch]:
    """Every distinct tree at 0 (with its multiplicity) translated to every root."""
    n = group.n
    distinct: dict[tuple[int, ...], int] = {}
    for count, labels in trees:
        distinct[tuple(labels)] = distinct.get(tuple(labels), 0) + count
    shapes = []
    for tree, m in distinct.items():
        parent = [group.combine(v, s, -1) if s >= 0 else -1 for v, s in enumerate(tree)]
        ordered: list[tuple[int, int]] = []
        stack = [0]
        children: list[list[int]] = [[] for _ in range(n)]
        for v, p in enumerate(parent):
            if p >= 0:
                children[p].append(v)
        while stack:     # parents first
            x = stack.pop()
            for y in children[x]:
                ordered.append((x, y))
                stack.append(y)
        shapes.append((m, ordered))
    everyone = set(compute)
    batches = []
    for t, shifted in enumerate(group.shifts()):
        image = [compute[v] for v in shifted]
        for m, ordered in shapes:    # finished: no growth state (Batch)
            batches.append(Batch(compute[t], m, everyone, {},
                                 [(image[x], image[y]) for x, y in ordered]))
    return batches
