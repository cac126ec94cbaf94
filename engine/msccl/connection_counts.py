"""Connections counted against the MSCCL runtime's limits, and given up where they do not fit.

How many connections (sender, receiver, channel) a plan's tree edges take, whether a GPU's
thread blocks and channels fit :class:`~canopy.engine.msccl.threadblocks.MscclLimits`, and
the descent that merges the tree edges of one connection key onto fewer connections until
every GPU fits (:class:`Descent`): the building blocks of the layouts in
:mod:`canopy.engine.msccl.connections`.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import numpy as np

from canopy.engine.model.memo import RecentMemo
from canopy.engine.model.plan import (
    CollectivePlan,
    FlowEdge,
    FlowTree,
    Path,
    path_links,
    tree_levels,
)
from canopy.engine.model.topology import Topology
from canopy.engine.msccl.lowering import chunks_per_root, plan_steps
from canopy.engine.msccl.options import MscclOptions
from canopy.engine.msccl.threadblocks import (
    MscclLimitError,
    MscclLimits,
    assign_threadblocks,
    parser_elements,
)
from canopy.engine.network.servers import server_members, server_rotations

Group = tuple[str, str, Path]          # (sender, receiver, route): one kind of connection


Key = tuple[Any, ...]                  # a group, or a group's edges of one phase (and step)


COPY_THREADBLOCKS = 1                  # a GPU's local copies share one thread block


def sender_receiver(tree: FlowTree, edge: FlowEdge) -> Group:
    """Who sends over ``edge`` and over which route (reduce trees send child to parent)."""
    if tree.reduce:
        return edge.child, edge.parent, edge.path
    return edge.parent, edge.child, edge.path


def fits(counts: dict[Key, int], limits: MscclLimits) -> bool:
    """Whether ``counts`` connections per group fit the runtime's limits (see the module
    docstring): channels per pair, thread blocks per GPU and per channel."""
    per_pair: dict[tuple[str, str], int] = defaultdict(int)
    per_gpu: dict[str, int] = defaultdict(int)
    for key, n in counts.items():
        u, v = key[0], key[1]
        per_pair[(u, v)] += n
        per_gpu[u] += n
        per_gpu[v] += n
    if any(n > limits.max_channels for n in per_pair.values()):
        return False
    if any(n + COPY_THREADBLOCKS > limits.max_tbs_per_gpu for n in per_gpu.values()):
        return False
    ends: dict[str, int] = defaultdict(int)        # peer-directions per GPU
    for u, v in per_pair:
        ends[u] += 1
        ends[v] += 1
    return all(n <= limits.max_tbs_per_channel for n in ends.values())


_UNIT_COUNTS: RecentMemo[int | None] = RecentMemo(8)


def unit_threadblocks(plan: CollectivePlan, limits: MscclLimits) -> int | None:
    """:func:`_unit_threadblocks`, remembered for the last few plans: the runtime choice
    asks it of a candidate's plan, and the report of the choice asks it again."""
    return _UNIT_COUNTS.get(plan, limits, lambda: _unit_threadblocks(plan, limits))


def _unit_threadblocks(plan: CollectivePlan, limits: MscclLimits) -> int | None:
    """The most thread blocks a GPU needs when the export writes ``plan`` with unit
    connections (:mod:`canopy.engine.msccl.writer`'s ``pipelined`` layout at one chunk per
    step, relays fused), in place or out of place, whichever needs more; None when that
    layout breaks another of ``limits`` (channels, steps, thread blocks per channel), or
    cannot meet ``max_tbs_per_gpu`` because even a thread block per receive-and-send pair of
    its connection ends would be too many, or because two GPUs have more unit tree edges
    between them than ``max_channels`` (each is a send step of its own unit tree's chain,
    and that layout gives every chain connections of its own, so they would need that many
    channels: the thread-block assignment fails, as it would only after placing every chain
    it can, slowly on large clusters)."""
    per_gpu: dict[str, int] = defaultdict(int)
    per_pair: dict[tuple[str, str], int] = defaultdict(int)
    for (u, v, *_), n in split_counts(plan, multiplicities(plan), 1).items():
        per_gpu[u] += n
        per_gpu[v] += n
        per_pair[(u, v)] += n
    if math.ceil(max(per_gpu.values(), default=0) / 2) > limits.max_tbs_per_gpu or \
            max(per_pair.values(), default=0) > limits.max_channels:
        return None
    options = MscclOptions(limits=limits)
    counting = replace(limits, max_tbs_per_gpu=max(limits.max_tbs_per_gpu, 1 << 20))
    most = 0
    for inplace in (True, False):
        try:
            steps = plan_steps(plan, chunks_per_root(plan), inplace, limits.max_count, piece=1,
                               fuse_fanout=False)
            layout = assign_threadblocks(steps, counting, options.fuse, options.channels, "own")
        except MscclLimitError:
            return None
        most = max(most, *(len(rank) for rank in layout.tbs))
    return most


def unit_fits(plan: CollectivePlan, mult: list[int], limits: MscclLimits) -> bool:
    """Whether unit connections fit ``limits``: a thread block per connection end, or the
    export's fused layout (:func:`unit_threadblocks`)."""
    if fits(split_counts(plan, mult, 1), limits):
        return True
    found = unit_threadblocks(plan, limits)
    return found is not None and found <= limits.max_tbs_per_gpu


def multiplicities(plan: CollectivePlan) -> list[int]:
    """Each tree's chunks per root (in integers: a plan cut into unit trees has thousands
    of trees, and Fractions would cost most of this)."""
    n, chunks = len(plan.compute_nodes), chunks_per_root(plan)
    return [t.share.numerator * n * chunks // t.share.denominator for t in plan.trees]


def split_counts(plan: CollectivePlan, mult: list[int], q: int) -> dict[Key, int]:
    """Connections per group where every tree of multiplicity m is cut into ceil(m/q)
    parts, each part with a connection per edge (groups in the order their first edge
    comes)."""
    groups, edges = _tree_groups(plan)
    parts = np.array([-(-m // q) for m in mult], dtype=np.int64)
    counts: dict[Key, int] = defaultdict(int)
    counts.update(zip(groups, (parts @ edges).tolist(), strict=True))
    return counts


_GROUPS: RecentMemo[tuple[list[Group], Any]] = RecentMemo(1)


def _tree_groups(plan: CollectivePlan) -> tuple[list[Group], Any]:
    """The groups of ``plan``'s tree edges in the order their first edge comes, and per
    tree its edges in each (an integer matrix, trees by groups), kept for the last plan
    (a layout's bisection over q asks about one plan many times)."""
    def walk() -> tuple[list[Group], Any]:
        index: dict[Group, int] = {}
        cells = []
        for ti, tree in enumerate(plan.trees):
            for e in tree.edges:
                cells.append((ti, index.setdefault(sender_receiver(tree, e), len(index))))
        edges = np.zeros((len(plan.trees), len(index)), dtype=np.int64)
        np.add.at(edges, tuple(np.array(cells, dtype=np.int64).reshape(-1, 2).T), 1)
        return list(index), edges

    return _GROUPS.get(plan, "groups", walk)


def _parts(m: int, q: int) -> list[int]:
    """m chunks in ceil(m/q) parts of at most q, as equal as whole chunks allow."""
    count = math.ceil(m / q)
    base, extra = divmod(m, count)
    return [base + 1] * extra + [base] * (count - extra)


_SPLITS: RecentMemo[CollectivePlan] = RecentMemo(2)


def split_trees(plan: CollectivePlan, mult: list[int], q: int) -> CollectivePlan:
    """``plan`` with every tree of multiplicity m cut into ceil(m/q) trees of at most q
    chunks (same edges; keys extended by the part where a tree is cut), ``mult`` its
    :func:`multiplicities`; kept for the last few plans, so the layouts that cut a plan
    alike share one cut plan and what is worked out of it."""
    return _SPLITS.get(plan, q, lambda: _split_trees(plan, mult, q))


def _split_trees(plan: CollectivePlan, mult: list[int], q: int) -> CollectivePlan:
    """:func:`split_trees` made anew."""
    unit = plan.trees[0].share / mult[0]
    phases: list[list[FlowTree]] = [[], []]
    for index, (tree, m) in enumerate(zip(plan.trees, mult, strict=True)):
        phase = phases[0 if index < len(plan.reduce_trees) else 1]
        for part, size in enumerate(_parts(m, q)):
            key = tree.key if m <= q else (tree.key, part)
            phase.append(replace(tree, key=key, share=size * unit))
    return replace(plan, reduce_trees=tuple(phases[0]), broadcast_trees=tuple(phases[1]))


Member = tuple[tuple[int, int], int, int]     # ((phase, step within the piece), tree, edge)


_MEMBERS: RecentMemo[dict[Key, list[Member]]] = RecentMemo(1)


_EDGE_GROUPS: RecentMemo[list[tuple[Group, int, int, int, int]]] = RecentMemo(1)


def _edge_groups(plan: CollectivePlan) -> list[tuple[Group, int, int, int, int]]:
    """Per tree edge (trees in order, each tree's edges in order): its group, phase,
    step within the piece, tree and index in the tree; kept for the last plan (what
    :func:`connection_members` keys at every detail)."""
    def walk() -> list[tuple[Group, int, int, int, int]]:
        out = []
        cut = len(plan.reduce_trees)
        for ti, tree in enumerate(plan.trees):
            phase = 0 if ti < cut else 1
            for ei, (e, level) in enumerate(zip(tree.edges, tree_levels(tree), strict=True)):
                out.append((sender_receiver(tree, e), phase, level, ti, ei))
        return out

    return _EDGE_GROUPS.get(plan, "groups", walk)


def connection_members(plan: CollectivePlan, detail: int = 0) -> dict[Key, list[Member]]:
    """Tree edges (as ((phase, step within the piece), tree, edge) indices) by the key of
    the connections they may share: their group; with ``detail`` 1 also their phase
    (allreduce's reductions and broadcasts on connections of their own), with d >= 2
    also their band of d - 1 steps (d = 2: a connection carries one step of every
    piece). Each call gets lists of its own; the last plan's are computed once (paired
    layouts' bisections ask about one plan again and again: choosing 8 x DGX A100
    reduce-scatter's layout asked 18 times about 2 plans)."""
    return defaultdict(list, {key: list(items)
                              for key, items in _kept_members(plan, detail).items()})


def _kept_members(plan: CollectivePlan, detail: int) -> dict[Key, list[Member]]:
    """:func:`connection_members` as kept, for what only reads it."""
    def walk() -> dict[Key, list[Member]]:
        members: dict[Key, list[Member]] = defaultdict(list)
        for group, phase, level, ti, ei in _edge_groups(plan):
            key = group + ((phase, level // (detail - 1)) if detail >= 2 else (phase,)[:detail])
            members[key].append(((phase, level), ti, ei))
        return members

    return _MEMBERS.get(plan, detail, walk)


def shared_counts(plan: CollectivePlan, limits: MscclLimits, detail: int = 0,
                   topology: Topology | None = None, weighted: bool = True) -> dict[Key, int]:
    """Layout 3's connections per key (:func:`connection_members`): from one per tree edge, the key
    with most connections at the GPU furthest over its budget gives one up, until all fit;
    keys of steps (``detail`` >= 2) of plans that reduce count their connections divided by
    their band plus one (allreduce: broadcast bands after every reduction band), so the
    early steps of a piece, whose data is there first and would run ahead, share first and
    the later steps keep their share of the links (reductions' joins wait for the later
    steps: on the 4x4x4 torus's reduce-scatter equal counts run well below the optimum,
    these close to it). (First every pair over ``max_channels`` gives up, the key with most
    connections among them first; a pair never gets crowded again. Ties go to the larger key
    or GPU name. Heaps with stale entries skipped keep this fast on 1024 GPUs, where a pass
    over every key per connection given up is far too slow.) With ``topology``, the key of
    the GPU that gives one up is instead the one whose links then take least time
    (:class:`_SlackChoice`): connections merge where links have slack, so trees keep their
    shares of the links the schedule loads to capacity."""
    return Descent(plan, limits.max_channels, detail, topology, weighted).counts(limits)


class Descent:
    """:func:`shared_counts` for every thread-block budget of one plan: the order in which
    keys give up connections does not depend on the budget (the GPU with most connections
    gives one up until every GPU fits), so a budget's counts are those at the first point of
    that order where every GPU is within it. The order is followed as far as the budgets
    asked need and kept, so :func:`_paired_shared`'s bisection (up to 8 budgets) follows it
    once instead of once per budget (the same layouts, in less time)."""

    def __init__(self, plan: CollectivePlan, max_channels: int, detail: int,
                 topology: Topology | None, weighted: bool) -> None:
        self._order = _give_ups(plan, max_channels, detail, topology, weighted)
        start = next(self._order)
        assert isinstance(start, dict)
        self.start: dict[Key, int] = start          # after the crowded pairs gave up
        self.given: list[Key] = []                  # then the keys that gave one up, in order
        self.most: list[int] = []                   # most connections of a GPU before each
        self.stuck: str | None = None               # a GPU over budget with none to give up
        self._step()

    def _step(self) -> None:
        if self.most and self.stuck is None:
            self.given.append(self._next)
        step = next(self._order)
        assert isinstance(step, tuple)
        most, gpu, group = step
        self.most.append(most)
        if group is None:
            self.stuck = gpu
        else:
            self._next: Key = group

    def counts(self, limits: MscclLimits) -> dict[Key, int]:
        """The connections per key within ``limits.max_tbs_per_gpu``; raises
        MscclLimitError where a GPU over it has no key left to give one up."""
        budget = limits.max_tbs_per_gpu - COPY_THREADBLOCKS
        while self.most[-1] > budget:
            if self.stuck is not None:
                raise MscclLimitError(
                    f"the MSCCL program does not fit the runtime's limits: GPU {self.stuck} "
                    f"talks to more peers than its {limits.max_tbs_per_gpu} thread blocks "
                    "can serve.")
            self._step()
        done = next(j for j, most in enumerate(self.most) if most <= budget)
        counts = dict(self.start)
        for group in self.given[:done]:
            counts[group] -= 1
        return counts


def _give_ups(plan: CollectivePlan, max_channels: int, detail: int, topology: Topology | None,
              weighted: bool) -> Iterator[dict[Key, int] | tuple[int, str, Key | None]]:
    """:class:`Descent`'s order: first the counts once every pair of GPUs is within
    ``max_channels``, then before each key gives up a connection (the most connections
    of a GPU, that GPU, the key; None and the end where it has none left to give up)."""
    members = _kept_members(plan, detail)
    counts: dict[Key, int] = {k: len(v) for k, v in members.items()}
    slack = _SlackChoice(plan, members, counts, topology) if topology is not None else None
    rank = {g: i for i, g in enumerate(sorted(counts))}
    at: dict[str, list[Key]] = defaultdict(list)
    per_pair: dict[tuple[str, str], int] = defaultdict(int)
    for group, n in counts.items():
        at[group[0]].append(group)
        at[group[1]].append(group)
        per_pair[group[:2]] += n
    per_gpu = {gpu: sum(counts[g] for g in groups) for gpu, groups in at.items()}
    gpu_rank = {gpu: i for i, gpu in enumerate(sorted(per_gpu))}
    # the GPUs by most connections (then rank), entries gone stale skipped: made once the
    # pairs are within max_channels (each GPU's count as it is then), pushed to after
    gpus: list[tuple[int, int, str]] = []

    # allreduce: a broadcast step follows every reduction step of the piece
    offset = 1 + max((g[-1] for g in counts if g[-2] == 0), default=-1) \
        if detail >= 2 and plan.reduce_trees and plan.broadcast_trees else 0

    def need(group: Key, n: int) -> float:
        """How much ``group`` needs its ``n`` connections."""
        if detail < 2 or not plan.reduce_trees or not weighted:   # broadcasts: equal
            return n
        return n / (offset * group[-2] + group[-1] + 1)

    def entry(group: Key) -> tuple[float, int, Key]:
        return -need(group, counts[group]), -rank[group], group

    def give_up(group: Key) -> None:
        counts[group] -= 1
        if slack is not None:
            slack.moved(group)
        per_pair[group[:2]] -= 1
        for gpu in group[:2]:
            per_gpu[gpu] -= 1
            if gpus:
                heapq.heappush(gpus, (-per_gpu[gpu], -gpu_rank[gpu], gpu))

    # every pair of GPUs over max_channels gives up one at a time, the key that needs its
    # connections most (and has more than one) first: a key's need falls with each one it
    # gives up, so the pair gives up its excess largest (need, rank) of the counts its
    # keys pass through on their way down to one
    of_pair: dict[tuple[str, str], list[Key]] = defaultdict(list)
    for group in counts:
        of_pair[group[:2]].append(group)
    for pair, groups in of_pair.items():
        excess = per_pair[pair] - max_channels
        if excess > 0:
            down = sorted((-need(g, n), -rank[g], g)
                          for g in groups for n in range(counts[g], 1, -1))
            for _, _, group in down[:excess]:
                give_up(group)
    gpus.extend((-n, -gpu_rank[gpu], gpu) for gpu, n in per_gpu.items())
    heapq.heapify(gpus)
    mine = {gpu: [entry(g) for g in groups if counts[g] > 1] for gpu, groups in at.items()}
    for heap in mine.values():
        heapq.heapify(heap)
    yield dict(counts)
    while True:
        while -gpus[0][0] != per_gpu[gpus[0][2]]:
            heapq.heappop(gpus)
        gpu = gpus[0][2]
        heap = mine[gpu]
        while heap and (-heap[0][0] != need(heap[0][2], counts[heap[0][2]]) or
                        counts[heap[0][2]] <= 1):
            heapq.heappop(heap)
        if not heap:
            yield per_gpu[gpu], gpu, None
            return
        group = heap[0][2] if slack is None else \
            slack.pick([g for g in at[gpu] if counts[g] > 1])
        yield per_gpu[gpu], gpu, group
        give_up(group)
        if counts[group] > 1:
            for end in group[:2]:
                heapq.heappush(mine[end], entry(group))


class _SlackChoice:
    """How :func:`shared_counts` picks the key that gives up a connection when it knows
    the topology: the one after which the slowest of its links is fastest, a link's time
    per loop iteration being its connections times the most chunks one of them carries
    over its capacity (connections share a link equally, so the link streams for as
    long as its fullest connection needs at that share); ties: most connections.

    Per link its connections and its fullest keys are kept (the largest chunks per
    connection, the keys with it and the largest of the others), brought up to date for
    the links of a key that gave one up (:meth:`moved`): a link's time with one key
    giving one up is then found without a pass over the link's keys (every pick asks it of
    each of a GPU's keys and every link on their routes)."""

    def __init__(self, plan: CollectivePlan, members: dict[Key, list[Member]],
                 counts: dict[Key, int], topology: Topology) -> None:
        caps = topology.capacities()
        mult = multiplicities(plan)
        self.counts = counts
        self.load = {k: sum(mult[ti] for _, ti, _ in v) for k, v in members.items()}
        self.links = {k: path_links(k[2] if k[2][0] == k[0] else tuple(reversed(k[2])))
                      for k in members}
        self.on_link: dict[tuple[str, str], list[Key]] = defaultdict(list)
        for k, route in self.links.items():
            for link in route:
                self.on_link[link].append(k)
        # a link's time scaled by the common multiple of the capacities' numerators: an
        # integer, ordered as the times are (Fractions would cost most of a pick)
        used = [Fraction(caps[link]) for link in self.on_link]
        common = math.lcm(*(c.numerator for c in used)) if used else 1
        self.scale = {link: c.denominator * (common // c.numerator)
                      for link, c in zip(self.on_link, used, strict=True)}
        self.stats: dict[tuple[str, str], tuple[int, int, set[Key], int]] = {}
        self.dirty = set(self.on_link)

    def moved(self, key: Key) -> None:
        """``key`` gave up a connection: its links' figures are out of date."""
        self.dirty.update(self.links[key])

    def _fullest(self, key: Key, n: int) -> int:
        return -(-self.load[key] // n)

    def _refresh(self) -> None:
        for link in self.dirty:
            total, top, second = 0, 0, 0
            tops: set[Key] = set()
            for k in self.on_link[link]:
                total += self.counts[k]
                v = self._fullest(k, self.counts[k])
                if v > top:
                    second, top, tops = top, v, {k}
                elif v == top:
                    tops.add(k)
                elif v > second:
                    second = v
            self.stats[link] = (total, top, tops, second)
        self.dirty.clear()

    def link_time(self, link: tuple[str, str], less: Key) -> int:
        """The link's time with ``less`` on one connection fewer (scaled alike for every
        link)."""
        total, top, tops, second = self.stats[link]
        others = top if len(tops) > 1 or less not in tops else second
        total -= self.links[less].count(link)
        return total * max(others, self._fullest(less, self.counts[less] - 1)) \
            * self.scale[link]

    def pick(self, choices: list[Key]) -> Key:
        """The key of ``choices`` to give up a connection."""
        self._refresh()
        return min(choices, key=lambda k: (max(self.link_time(link, k)
                                               for link in self.links[k]),
                                           -self.counts[k], k))


def _contiguous(loads: Sequence[int], parts: int) -> list[int]:
    """Cut ``loads`` (in order) into ``parts`` non-empty runs of nearly equal sums (each
    item's run: where its prefix sum falls, moving one run at a time, and late enough
    that every run gets an item); ``parts`` is at most ``len(loads)``."""
    total, n = sum(loads), len(loads)
    out: list[int] = []
    prefix = 0
    for i, load in enumerate(loads):
        want = max(prefix * parts // total, parts - (n - i))
        prev = out[-1] if out else 0
        out.append(min(prev + 1, max(prev, want)) if out else 0)
        prefix += load
    return out


@dataclass(frozen=True)
class ServerPlaces:
    """Identical servers: the rotations of the servers the simulation folds by
    (:func:`canopy.engine.network.servers.server_rotations`, most folding first) with
    their orders, and per node in a server (server, index within it, servers)."""

    rotations: tuple[dict[str, str], ...]
    where: dict[str, tuple[int, int, int]]
    orders: tuple[int, ...]


_PLACES: dict[Any, ServerPlaces | None] = {}
_PLACES_KEPT = 4


def server_places(topology: Topology) -> ServerPlaces | None:
    """The topology's identical servers, or None where no rotation of them keeps it; kept
    for the last few networks (the layouts of every candidate of a runtime choice ask, and
    finding the rotations of many servers is not cheap)."""
    key = topology.fingerprint()
    if key in _PLACES:
        return _PLACES[key]
    found = server_rotations(topology)
    places = None
    if found:
        nodes = topology.nodes
        members = server_members([node.group for node in nodes])
        places = ServerPlaces(tuple(rotation for rotation, _ in found),
                              {nodes[v].id: (k, i, len(members))
                               for k, server in enumerate(members)
                               for i, v in enumerate(server)},
                              tuple(order for _, order in found))
    if len(_PLACES) >= _PLACES_KEPT:
        _PLACES.pop(next(iter(_PLACES)))
    _PLACES[key] = places
    return places


class _Built:
    """What :func:`channel_plan` computes of one plan and tie ranking whatever the detail
    and counts: each tree edge's rank among the edges of its connection and step, its
    priority, and the edges and trees built so far (immutable, so equal ones are shared
    between layouts of the plan). Every edge ranks by its tree and sender alone, so the
    priorities, numbered over the ranks of all edges, are the same at every detail."""

    def __init__(self, plan: CollectivePlan,
                 rank: Callable[[int, str], tuple[int, ...]] | None) -> None:
        self.starts: list[int] = [0]          # each tree's first edge in the flat order
        for tree in plan.trees:
            self.starts.append(self.starts[-1] + len(tree.edges))
        self.ranks: dict[tuple[int, int], tuple[int, ...]] = {
            (ti, ei): (ti,) if rank is None else rank(ti, e.child if tree.reduce else e.parent)
            for ti, tree in enumerate(plan.trees) for ei, e in enumerate(tree.edges)}
        order = {r: Fraction(i) for i, r in enumerate(sorted(set(self.ranks.values())))}
        self.priority: list[Fraction] = [order[r] for r in self.ranks.values()] \
            if rank is not None else [e.priority for tree in plan.trees for e in tree.edges]
        # per edge (flat order), the edges made of it by channel
        self.edges: list[dict[Hashable, FlowEdge]] = [{} for _ in range(self.starts[-1])]
        self.trees: dict[tuple[int, tuple[Hashable, ...]], FlowTree] = {}
        self._places: list[int] | None = None

    def places(self, plan: CollectivePlan) -> list[int]:
        """Per edge (flat order), its place among all of ``plan``'s (this one's) edges by
        phase, step within the piece, rank, tree and index in it: the order in which a
        key's edges go to its connections (:class:`_Laying`), sorted once for every
        detail."""
        if self._places is None:
            ranks = list(self.ranks.values())
            edges = _edge_groups(plan)
            order = sorted(range(len(edges)), key=lambda f: (
                (edges[f][1], edges[f][2]), ranks[f], edges[f][3], edges[f][4]))
            places = [0] * len(order)
            for place, f in enumerate(order):
                places[f] = place
            self._places = places
        return self._places


class _Laying:
    """What :func:`channel_plan` computes of one plan, ``detail`` and tie ranking whatever
    the counts: the keys, each key's tree edges in the order they go to its connections
    (``order``: their flat indices, key after key), their chunks (``shape``: an index
    into the distinct ``loads``), the keys pair of GPUs by pair of GPUs (in order within
    each), and (as asked) the runs of each distinct chunks per count (keys alike in chunks
    share them: most are)."""

    def __init__(self, plan: CollectivePlan, detail: int, built: _Built) -> None:
        starts = self.starts = built.starts
        edge_mult = [m for m, tree in zip(multiplicities(plan), plan.trees, strict=True)
                     for _ in tree.edges]
        place = built.places(plan)
        self.keys: list[Key] = []
        self.shape: list[int] = []
        shapes: dict[tuple[int, ...], int] = {}
        members: list[int] = []
        for group, items in _kept_members(plan, detail).items():
            flat = sorted([starts[ti] + ei for _, ti, ei in items], key=place.__getitem__)
            self.keys.append(group)
            members.extend(flat)
            loads = tuple(map(edge_mult.__getitem__, flat))
            self.shape.append(shapes.setdefault(loads, len(shapes)))
        self.loads = list(shapes)
        self.order = np.array(members, dtype=np.int64)
        self.sizes = np.array([len(self.loads[shape]) for shape in self.shape], dtype=np.int64)
        pairs: dict[tuple[str, str], int] = {}
        pair = np.array([pairs.setdefault(key[:2], len(pairs)) for key in self.keys],
                        dtype=np.int64)
        self.by_pair = np.argsort(pair, kind="stable")
        sorted_pair = pair[self.by_pair]
        self.pair_starts = np.flatnonzero(np.r_[True, sorted_pair[1:] != sorted_pair[:-1]])
        self.pair_sizes = np.diff(np.r_[self.pair_starts, len(pair)])
        self.runs: list[dict[int, Any]] = [{} for _ in self.loads]


class _Ties:
    """:func:`_tie_ranks`' answers about one plan and one set of identical servers that do
    not depend on the counts: whether its edges allow ranking by server at all, the image of
    each key under each rotation π of the servers, whether π maps the trees onto themselves
    (asked once per π, when needed), and the rank function."""

    def __init__(self, plan: CollectivePlan, servers: ServerPlaces) -> None:
        where = servers.where
        self.plan, self.servers = plan, servers
        self.possible = not any(t.root not in where or e.priority or
                                (e.child if t.reduce else e.parent) not in where
                                for t in plan.trees for e in t.edges)
        self.images: list[dict[Key, Key]] = [{} for _ in servers.rotations]
        self._invariant: list[bool | None] = [None] * len(servers.rotations)
        cut = len(plan.reduce_trees)
        nth: list[int] = []
        seen: dict[tuple[bool, str], int] = defaultdict(int)
        for ti, tree in enumerate(plan.trees):
            nth.append(seen[(ti < cut, tree.root)])
            seen[(ti < cut, tree.root)] += 1
        roots = [tree.root for tree in plan.trees]

        def rank(ti: int, sender: str) -> tuple[int, ...]:
            root, at = where[roots[ti]], where[sender]
            return ((root[0] - at[0]) % root[2], root[1], nth[ti])
        self.rank = rank

    def image(self, which: int, keys: Iterable[Key]) -> list[Key]:
        """``keys`` moved by the ``which``-th rotation."""
        images = self.images[which]
        pi = self.servers.rotations[which]
        for key in keys:
            if key not in images:
                images[key] = (pi[key[0]], pi[key[1]], tuple(pi[x] for x in key[2]), *key[3:])
        return list(map(images.__getitem__, keys))

    def invariant(self, which: int) -> bool:
        """Whether the ``which``-th rotation maps the trees onto themselves."""
        if self._invariant[which] is None:
            self._invariant[which] = edge_images(
                self.plan, self.servers.rotations[which]) is not None
        return bool(self._invariant[which])


_PERMUTATIONS: RecentMemo[Any] = RecentMemo(2)


def edge_images(plan: CollectivePlan, rotation: dict[str, str]) -> Any:
    """:func:`~canopy.engine.execution.folding.edge_permutation` of ``plan`` under
    ``rotation``, kept for the last few plans: the tie ranks of a plan's layouts and their
    pairing both ask."""
    from canopy.engine.execution.folding import edge_permutation

    return _PERMUTATIONS.get(plan, tuple(rotation.items()),
                             lambda: edge_permutation(plan, rotation))


_TIES: RecentMemo[_Ties] = RecentMemo(1)          # the last plan's (layouts() asks many times)
_LAYINGS: RecentMemo[_Laying] = RecentMemo(2)     # the last few plans'
_BUILT: RecentMemo[_Built] = RecentMemo(2)


def _tie_ranks(plan: CollectivePlan, servers: ServerPlaces | None, counts: dict[Key, int]
               ) -> Callable[[int, str], tuple[int, ...]] | None:
    """How tree ``ti``'s edge sent by ``sender`` ranks among the edges of one connection and
    step: by the tree's index (None), or, where that is all that keeps the layout from
    being invariant under a rotation π of identical servers (each of ``servers``'
    rotations, the ones the simulation folds by, most folding first: rotating by one
    server, or a leaf-spine's pods by a pod with their leaves exchanged), by where the
    tree's root sits relative to the sender (servers ahead, index within its server) and
    the tree's index among those of its root and phase, which every rotation of the
    servers keeps: the trees are invariant under π
    (:func:`canopy.engine.execution.folding.edge_permutation`), so are the connection
    ``counts`` per key, every root and sender sits in a server and no edge has a priority
    of its own. Then the layout and its send order are invariant and the simulation runs
    it folded (:mod:`canopy.engine.execution.folding`); elsewhere nothing changes."""
    if servers is None:
        return None
    ties = _TIES.get(plan, id(servers), lambda: _Ties(plan, servers))
    if not ties.possible:
        return None
    for which in range(len(servers.rotations)):
        if list(map(counts.get, ties.image(which, counts))) == list(counts.values()) and \
                ties.invariant(which):
            return ties.rank
    return None


def _built(plan: CollectivePlan, rank: Callable[[int, str], tuple[int, ...]] | None
           ) -> _Built:
    """The :class:`_Built` of ``plan`` and ``rank``, kept for the last few plans."""
    return _BUILT.get(plan, rank, lambda: _Built(plan, rank))


def _laying(plan: CollectivePlan, detail: int,
            rank: Callable[[int, str], tuple[int, ...]] | None) -> _Laying:
    """The :class:`_Laying` of ``plan``, ``detail`` and ``rank``, kept for the last few."""
    return _LAYINGS.get(plan, (detail, rank),
                        lambda: _Laying(plan, detail, _built(plan, rank)))


def layout_channels(plan: CollectivePlan, counts: dict[Key, int], detail: int = 0,
                    servers: ServerPlaces | None = None) -> list[int]:
    """The channel :func:`channel_plan` gives every edge of ``plan`` (trees in order, each
    tree's edges in order), without building the plan."""
    return _chosen(_laying(plan, detail, _tie_ranks(plan, servers, counts)), counts)


def _chosen(laying: _Laying, counts: dict[Key, int]) -> list[int]:
    """Per edge of the plan ``laying`` describes (flat order), its channel under
    ``counts``: each key's edges in runs over its connections, channels numbered per pair
    of GPUs in the order the keys come. (Over arrays of every edge: the paired layouts'
    bisections ask for many counts of one plan.)"""
    count = np.fromiter(map(counts.__getitem__, laying.keys), dtype=np.int64,
                        count=len(laying.keys))
    # each key's first channel: the connections of the keys of its pair of GPUs before it
    ahead = np.cumsum(count[laying.by_pair]) - count[laying.by_pair]
    first = np.empty_like(count)
    first[laying.by_pair] = ahead - np.repeat(ahead[laying.pair_starts], laying.pair_sizes)
    runs = []
    for shape, n in zip(laying.shape, count.tolist(), strict=True):
        known = laying.runs[shape]
        found = known.get(n)
        if found is None:
            found = known[n] = np.array(_contiguous(laying.loads[shape], n), dtype=np.int64)
        runs.append(found)
    chosen = np.empty(laying.starts[-1], dtype=np.int64)
    chosen[laying.order] = np.repeat(first, laying.sizes) + np.concatenate(runs)
    result: list[int] = chosen.tolist()
    return result


def channel_plan(plan: CollectivePlan, counts: dict[Key, int], detail: int = 0,
                  servers: ServerPlaces | None = None,
                  channels: Sequence[Hashable] | None = None) -> CollectivePlan:
    """``plan`` with each key's tree edges (:func:`connection_members`) on its ``counts[key]``
    connections, in runs of consecutive steps within the piece (phase, then step, then
    tree) of nearly equal chunks: a connection then carries transfers of neighbouring
    steps only, so a piece's late step holds back little (one connection per tree edge
    where counts allow). Trees of one step are ranked by :func:`_tie_ranks` (``servers``
    from :func:`server_places`), which also becomes each edge's ``priority``, the order of
    its sends among those of one step on a shared connection. (What does not depend on
    the counts is computed once per plan: :class:`_Built`, :class:`_Laying`.)
    ``channels``: every edge's channel (as :func:`layout_channels` lists them) instead,
    such as a paired layout's (:meth:`canopy.engine.msccl.pairing.Pairing.renumbered`),
    the edges ranked as for ``counts``."""
    rank = _tie_ranks(plan, servers, counts)
    built = _built(plan, rank)
    chosen = channels if channels is not None else _chosen(_laying(plan, detail, rank), counts)
    starts = built.starts
    made_trees = built.trees
    trees = []
    for ti, t in enumerate(plan.trees):
        start, end = starts[ti], starts[ti + 1]
        mine = tuple(chosen[start:end])
        tree = made_trees.get((ti, mine))
        if tree is None:
            edges: list[FlowEdge] = []
            for e, channel, priority, made in zip(t.edges, mine, built.priority[start:end],
                                                  built.edges[start:end], strict=True):
                edge = made.get(channel)
                if edge is None:
                    edge = made[channel] = FlowEdge(e.parent, e.child, e.path, priority,
                                                    channel)
                edges.append(edge)
            tree = made_trees[(ti, mine)] = FlowTree(t.key, t.root, tuple(edges), t.share,
                                                     t.reduce)
        trees.append(tree)
    cut = len(plan.reduce_trees)
    return replace(plan, reduce_trees=tuple(trees[:cut]), broadcast_trees=tuple(trees[cut:]))


def steps_fit(plan: CollectivePlan, limits: MscclLimits) -> bool:
    """Whether every GPU's steps, with as many thread blocks as it may have, stay within
    the parser's elements (:func:`~canopy.engine.msccl.threadblocks.parser_elements`):
    a step per transfer end (per ``max_count`` chunks) and at most one input copy per tree
    rooted there (reductions copy every tree's chunks on every GPU)."""
    mult = multiplicities(plan)
    steps: dict[str, int] = defaultdict(int)
    reduces = bool(plan.reduce_trees)
    for tree, m in zip(plan.trees, mult, strict=True):
        per = math.ceil(m / limits.max_count)
        for e in tree.edges:
            steps[e.parent] += per
            steps[e.child] += per
        if not reduces:
            steps[tree.root] += 1
    copies = len(plan.trees) if reduces else 0
    most = max(steps.values(), default=0) + copies
    return parser_elements(len(plan.compute_nodes), limits.max_tbs_per_gpu, most) \
        <= limits.max_elements_per_gpu
