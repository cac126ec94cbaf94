"""Reduce-scatter trees reshaped so the pipeline fills fast: parents swapped between trees.

**Why.** In a reduction every leaf sends from the first loop iteration on, so in the
execution model (:mod:`canopy.engine.execution.simulate`) every link is shared by all its
connections from the start and a piece climbs its tree about one level per period of
the busiest link. A link the schedule loads to the bound (ForestColl (arXiv:2402.06787) §5.3's
congestion; on 2x MI250 the 16 GB/s links to the switch) then idles until the subtrees
below its edges have reduced their first pieces, and it cannot catch up later: it is
loaded to capacity. The run takes the bound's time plus that fill, which grows with the
height of the subtrees whose data the saturated links carry, not with the trees'
height alone; the time-reversed allgather on the same trees fills far sooner.

**How.** Take a node u with parent p in tree a and parent q in tree b, over routes r and
s, a and b of equal multiplicity. Giving u parent q over s in a and p over r in b moves
no load: the same unit trees still cross every link, so the link loads, the tree
bandwidth y and the verification (:func:`canopy.engine.model.verification.verify`) are those
of the schedule; the trees stay spanning where neither new parent lies in u's subtree.
Such swaps are chosen in two passes:

1. For every link the reduction loads to capacity, the mean height (weighted by
   multiplicity) of the subtrees whose data its edges carry, when the link can start;
   swaps that lower the sum of the eighth powers of these means (a smooth maximum over
   the links) are taken node by node until none is left (first improvement).
2. Then ``tries`` swaps drawn at random (a seeded generator: the same answer every run)
   are simulated, a reduction of SAMPLE_PIECES pieces of the reference size's piece,
   and kept where the run is faster: the fill is settled within that many pieces, and
   the mean heights are only its proxy.

What each pass gains, and what cheaper passes lose, is measured in docs/performance.md
("Reduce-scatter pipeline fill").
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, replace
from fractions import Fraction

from canopy.engine.execution.simulate import simulate
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.plan import path_links, schedule_plan, trees_plan
from canopy.engine.model.schedule import Schedule, Tree, TreeEdge
from canopy.engine.model.topology import Topology
from canopy.engine.model.verification import verify

SAMPLE_PIECES = 16            # pieces simulated per swap tried in pass 2
REFERENCE_PIECES = 256        # the pieces of the reference size (1 GiB at 64 KiB slices)
POWER = 8                     # the smooth maximum's power in pass 1
MAX_ROUNDS = 30               # passes over the nodes in pass 1 (it settles in about 5)
FILL_TRIES = 600              # swaps simulated in pass 2
DRAWS_PER_TRY = 100           # pass 2 gives up after this many draws per swap simulated

Link = tuple[str, str]


@dataclass
class _Tree:
    """A tree as parent pointers: per node (not the root) its parent and the route."""

    root: str
    index: int
    multiplicity: int
    parent: dict[str, tuple[str, tuple[str, ...]]]

    def children(self) -> dict[str, list[str]]:
        kids: dict[str, list[str]] = defaultdict(list)
        for node, (up, _) in self.parent.items():
            kids[up].append(node)
        return kids

    def heights(self) -> dict[str, int]:
        """Per node the height of its subtree (leaves 0): the levels its data has climbed
        when it can send."""
        kids = self.children()
        order = [self.root]
        for node in order:
            order.extend(kids[node])
        height: dict[str, int] = {}
        for node in reversed(order):
            height[node] = 1 + max((height[c] for c in kids[node]), default=-1)
        return height

    def in_subtree(self, node: str, ancestor: str) -> bool:
        """Whether ``node`` lies in ``ancestor``'s subtree (is it or a descendant): a walk
        up the parent pointers, not over the subtree."""
        while node != ancestor:
            if node not in self.parent:
                return False
            node = self.parent[node][0]
        return True

    def tree(self) -> Tree:
        """Back to a :class:`Tree`, parents before children (children by name)."""
        kids: dict[str, list[str]] = defaultdict(list)
        for node, (up, _) in self.parent.items():
            kids[up].append(node)
        edges, order = [], [self.root]
        for node in order:
            for child in sorted(kids[node]):
                edges.append(TreeEdge(node, child, self.parent[child][1]))
                order.append(child)
        return Tree(self.root, self.index, self.multiplicity, tuple(edges))


def _reduce_links(route: tuple[str, ...]) -> list[Link]:
    """The links a reduce edge's data crosses (against the arrow)."""
    return path_links(tuple(reversed(route)))


class _Proxy:
    """Pass 1's objective, kept per tree: per saturated link the summed height-weights."""

    def __init__(self, trees: list[_Tree], saturated: set[Link]) -> None:
        self.trees, self.saturated = trees, saturated
        self.weight: dict[Link, int] = defaultdict(int)
        for t in trees:
            for _, route in t.parent.values():
                for link in _reduce_links(route):
                    if link in saturated:
                        self.weight[link] += t.multiplicity
        self.parts = [self.part(t) for t in trees]
        self.sums: dict[Link, int] = defaultdict(int)
        for part in self.parts:
            for link, value in part.items():
                self.sums[link] += value

    def part(self, tree: _Tree) -> dict[Link, int]:
        height = tree.heights()
        out: dict[Link, int] = defaultdict(int)
        for node, (_, route) in tree.parent.items():
            for link in _reduce_links(route):
                if link in self.saturated:
                    out[link] += tree.multiplicity * height[node]
        return out

    def score(self, sums: dict[Link, int]) -> float:
        return sum((sums[link] / w) ** POWER for link, w in self.weight.items())

    def trial(self, a: int, b: int) -> tuple[float, dict[Link, int], list[dict[Link, int]]]:
        """The score with trees ``a`` and ``b`` as they are now (their parts recomputed)."""
        parts = [self.part(self.trees[a]), self.part(self.trees[b])]
        sums = dict(self.sums)
        for old, new in ((self.parts[a], parts[0]), (self.parts[b], parts[1])):
            for link, value in old.items():
                sums[link] -= value
            for link, value in new.items():
                sums[link] = sums.get(link, 0) + value
        return self.score(defaultdict(int, sums)), sums, parts


def _swap(trees: list[_Tree], node: str, a: int, b: int) -> bool:
    """Swap ``node``'s parents (and routes) between trees ``a`` and ``b`` where both stay
    trees; False (nothing changed) where they would not."""
    if not _can_swap(trees, node, a, b):
        return False
    ta, tb = trees[a], trees[b]
    ta.parent[node], tb.parent[node] = tb.parent[node], ta.parent[node]
    return True


def _can_swap(trees: list[_Tree], node: str, a: int, b: int) -> bool:
    """Whether :func:`_swap` would swap: the parents differ and neither tree gets a
    cycle."""
    ta, tb = trees[a], trees[b]
    pa, pb = ta.parent[node], tb.parent[node]
    return not (pa[0] == pb[0] or ta.in_subtree(pb[0], node) or tb.in_subtree(pa[0], node))


def _unswap(trees: list[_Tree], node: str, a: int, b: int) -> None:
    ta, tb = trees[a], trees[b]
    ta.parent[node], tb.parent[node] = tb.parent[node], ta.parent[node]


def _pass_one(trees: list[_Tree], nodes: list[str], saturated: set[Link]) -> None:
    proxy = _Proxy(trees, saturated)
    best = proxy.score(proxy.sums)
    for _ in range(MAX_ROUNDS):
        improved = False
        for node in nodes:
            holding = [i for i, t in enumerate(trees) if node in t.parent]
            for x, a in enumerate(holding):
                for b in holding[x + 1:]:
                    if trees[a].multiplicity != trees[b].multiplicity or \
                            not _swap(trees, node, a, b):
                        continue
                    score, sums, parts = proxy.trial(a, b)
                    if score < best:
                        best, improved = score, True
                        proxy.sums = defaultdict(int, sums)
                        proxy.parts[a], proxy.parts[b] = parts
                    else:
                        _unswap(trees, node, a, b)
        if not improved:
            return


def fill_swaps(topology: Topology, schedule: Schedule, tries: int | None = None,
               seed: int = 0) -> Schedule:
    """``schedule`` (a reduce-scatter) with parents swapped between its trees so that its
    pipeline fills sooner (module docstring); the same k, y, link loads and bound, with
    ``extra["fill_swaps"]`` set, verified again. Schedules of other collectives, with
    separate reduce trees, with nothing saturated, where no swap helps or (a bug) whose
    swapped forest fails verification are returned as they are.
    ``tries``: pass 2's swaps simulated (FILL_TRIES by default)."""
    tries = FILL_TRIES if tries is None else tries
    if schedule.collective != "reduce-scatter" or schedule.reduce_trees is not None:
        return schedule
    caps = topology.capacities()
    trees = [_Tree(t.root, t.index, t.multiplicity, {e.dst: (e.src, e.path) for e in t.edges})
             for t in schedule.trees]
    load: dict[Link, int] = defaultdict(int)
    for t in trees:
        for _, route in t.parent.values():
            for link in _reduce_links(route):
                load[link] += t.multiplicity
    saturated = {link for link, n in load.items() if n * schedule.tree_bandwidth == caps[link]}
    if not saturated:
        return schedule
    nodes = list(schedule.compute_nodes)
    before = [dict(t.parent) for t in trees]
    _pass_one(trees, nodes, saturated)

    size = Fraction(1 << 30) * SAMPLE_PIECES / REFERENCE_PIECES
    plan = schedule_plan(replace(schedule, trees=[t.tree() for t in trees]))
    flows = list(plan.reduce_trees)

    def run_time(changed: tuple[int, ...] = ()) -> Fraction:
        # a swap changes two trees: only theirs are built again (the rest of the plan
        # is the same FlowTrees, so each run costs the simulation and little else)
        if changed:
            two = trees_plan(schedule.collective, schedule.compute_nodes,
                             [trees[i].tree() for i in changed], schedule.k)
            for i, flow in zip(changed, two.reduce_trees, strict=True):
                flows[i] = flow
        return simulate(topology, replace(plan, reduce_trees=tuple(flows)), size,
                        SAMPLE_PIECES, budget=None, symmetry=False).time_us

    # a swap keeps every node in the trees that hold it, and only a swap changes the
    # trees: where none can be made now, no draw ever makes one (looked at where the
    # pairs are no more than the draws would be: in a large forest a swap is soon drawn)
    holding_of = {node: [i for i, t in enumerate(trees) if node in t.parent] for node in nodes}
    pairs = sum(len(h) * (len(h) - 1) // 2 for h in holding_of.values())
    if pairs <= DRAWS_PER_TRY * tries and not any(
            trees[a].multiplicity == trees[b].multiplicity and _can_swap(trees, node, a, b)
            for node, holding in holding_of.items()
            for x, a in enumerate(holding) for b in holding[x + 1:]):
        tries = 0
    best = run_time() if tries else Fraction(0)
    rng = random.Random(seed)
    runs = 0
    for _ in range(DRAWS_PER_TRY * tries):
        if runs == tries:
            break
        node = rng.choice(nodes)
        holding = holding_of[node]
        if len(holding) < 2:
            continue
        a, b = rng.sample(holding, 2)
        if trees[a].multiplicity != trees[b].multiplicity or not _swap(trees, node, a, b):
            continue
        runs += 1
        kept = flows[a], flows[b]
        time_us = run_time((a, b))
        if time_us < best:
            best = time_us
        else:
            _unswap(trees, node, a, b)
            flows[a], flows[b] = kept
    if [t.parent for t in trees] == before:
        return schedule
    swapped = replace(schedule, trees=[t.tree() for t in trees],
                      extra={**schedule.extra, "fill_swaps": True})
    try:
        verify(topology, swapped)       # the argument above, checked
    except ScheduleError:
        return schedule
    return swapped
