"""Which connections a tree schedule's transfers take, within the MSCCL runtime's limits.

One decision, used twice: ``canopy compare`` simulates the plan this returns
(:func:`canopy.engine.execution.simulate.plan_program` reads every
:class:`~canopy.engine.model.plan.FlowEdge`'s ``channel``), and the MSCCL export writes the
same connections (:func:`canopy.engine.msccl.writer.plan_layout`: a transfer on the
channel its edge names, one thread block per connection, each connection's transfers in
the order the simulation sends them). So the XML that ``canopy check-xml`` times and the
schedule ``canopy compare`` times are the same program.

A *connection* is (sender, receiver, channel) with one physical route. In the execution
model a link shared by several connections is shared among them equally, so a tree of
multiplicity m (m unit trees of ForestColl (arXiv:2402.06787) Prop. 3, m chunks of the XML) keeps
its
share of a link only if it streams on m connections. The runtime bounds connections: at
most ``max_channels`` channels per pair of GPUs, one thread block per connection end and
``max_tbs_per_gpu`` thread blocks per GPU (its SMs), ``max_tbs_per_channel`` per channel.
:func:`layouts` lists the layouts that fit, :func:`runtime_layout` takes the first:

1. **Unit connections**: every unit tree edge its own connection. The plan is returned
   unchanged (its edges name no channel: the simulation gives each tree edge one
   connection of weight m; the export writes the ``pipelined`` layout, m connections).
   Where this fits nothing else is considered. It fits when a thread block per
   connection end does, or else when the export's pipelined layout does: a relay
   receives a unit tree's chunk and forwards it in one thread block (``rcs``), so it
   needs fewer thread blocks (:func:`_unit_threadblocks`; rail-leaf-spine-4x8
   allreduce at k = 1: 95 fused, 125 counted per end). Such a thread block streams
   both connections as the simulation's do: its receive of the next iteration does
   not wait for its forward of this one (:mod:`canopy.engine.msccl.timing`).
2. **q chunks per connection**, for the smallest q that fits and for q = the largest
   multiplicity (one connection per tree edge): every tree of multiplicity m is cut into
   ceil(m/q) trees of at most q chunks (as equal as whole chunks allow), and every edge
   of those gets a channel of its own. Trees keep their links' shares in proportion to
   their data up to rounding.
3. **Shared connections**: the tree edges between two GPUs over one route share ``n``
   connections ("shared"); or the same per phase, so allreduce's reductions and
   broadcasts never wait on each other ("shared by phase"); or per step within the piece
   ("shared by step"). Starting from one per tree edge, the key with most connections
   at the GPU furthest over its budget gives one up until every GPU fits. A key's tree
   edges, sorted by (phase, step within the piece, tree), go to its connections in runs
   of nearly equal chunks, so a connection carries transfers of neighbouring steps
   only: a transfer on a shared connection waits behind the earlier ones of its loop
   iteration, and one far down its tree would hold back those near the root (and the
   next iteration's). Within a loop iteration every shared connection sends in that
   same order (the one :func:`canopy.engine.execution.simulate.plan_program` uses), successive
   iterations follow each other, and the order only grows along the steps a transfer
   waits on, so the program cannot deadlock.
4. **Unit trees, shared where links have slack** (given the topology, where unit
   connections need at most 2.5 times the thread blocks): the trees cut into unit trees
   as in 2 with q = 1, then connections merged as in 3 by phase or by 2 steps, but the
   key that gives one up is the one whose links then stream least long (connections
   times the fullest connection's chunks over capacity): every connection carries whole
   chunks, so trees keep their shares of the links the schedule loads to capacity.
5. **Paired thread blocks** (:mod:`canopy.engine.msccl.pairing`): where a thread block per
   connection end is too many, a GPU's receive-only and send-only connection ends share
   thread blocks, receives before sends, where that holds nothing back (a relay's receive
   and forward; a receive nobody forwards before a later send). Unit connections paired
   ("unit, paired", then nothing else, as unit) and each shared layout with as many more
   connections as pairing fits (", paired"; by bisection on the connection ends per GPU):
   mi250-2x16 allgather at k = 2 keeps a connection per unit tree edge in 108 thread blocks
   (123 with relays fused), 2 x DGX A100 allreduce at k = 13 one per tree edge, which runs
   closer to the optimum than any shared layout.

6. **Unit trees, evenly shared**: the trees cut into unit trees as in 4, the unit tree
   edges between two GPUs over one route on as many connections as hold at most T
   chunks each, for the smallest T that fits (:func:`_even_unit`), so the connections of
   a link carry nearly equal chunks.
7. **Unit trees, shared by link slack** (given the topology, where unit connections need
   at most 2.5 times the thread blocks): the trees cut into unit trees as in 4, and the
   tree edges of a phase and band of 2 steps over one route on a connection per unit tree
   edge where the busiest link of the route is among the most loaded, one per 2 unit
   tree edges or one for them all where it has slack, the least loaded links coarsened
   first until every GPU fits (:func:`slack_tiers`): every connection of a link loaded
   to capacity carries one chunk, so each keeps its share of it.

Thread blocks are counted without fusing receive and send (what the export writes for
layouts 2 and 3): one per (peer, direction, channel) a GPU uses, plus one for its local
copies; for unit connections, where that count is over the budget, as the export lays
them out (fused); paired layouts one per pair instead of two.
"""
from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from canopy.engine.model.plan import (
    CollectivePlan,
    FlowEdge,
    FlowTree,
    Path,
    bandwidth_bound,
    link_loads,
    path_links,
    tree_levels,
)
from canopy.engine.model.topology import Topology
from canopy.engine.msccl.lowering import chunks_per_root, plan_steps
from canopy.engine.msccl.options import MscclOptions
from canopy.engine.msccl.pairing import pair_threadblocks, threadblocks_per_gpu
from canopy.engine.msccl.threadblocks import (
    MscclLimitError,
    MscclLimits,
    assign_threadblocks,
    parser_elements,
)
from canopy.engine.network.servers import server_members, server_rotation

Group = tuple[str, str, Path]          # (sender, receiver, route): one kind of connection
Key = tuple[Any, ...]                  # a group, or a group's edges of one phase (and step)
COPY_THREADBLOCKS = 1                  # a GPU's local copies share one thread block
STEP_BANDS = 3                         # most steps of a piece one connection may carry
UNIT_SHARE_FACTOR = Fraction(5, 2)      # unit connections per thread block still worth merging
SLACK_GRAINS = (1, 2, 0)                # layout 7's unit chunks per connection (0: one per key)
SLACK_DETAIL = 3                        # layout 7's keys: by phase and band of 2 steps


def _sender_receiver(tree: FlowTree, edge: FlowEdge) -> Group:
    """Who sends over ``edge`` and over which route (reduce trees send child to parent)."""
    if tree.reduce:
        return edge.child, edge.parent, edge.path
    return edge.parent, edge.child, edge.path


def _fits(counts: dict[Key, int], limits: MscclLimits) -> bool:
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
    for (u, v, *_), n in _split_counts(plan, multiplicities(plan), 1).items():
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


def _unit_fits(plan: CollectivePlan, mult: list[int], limits: MscclLimits) -> bool:
    """Whether unit connections fit ``limits``: a thread block per connection end, or the
    export's fused layout (:func:`_unit_threadblocks`)."""
    if _fits(_split_counts(plan, mult, 1), limits):
        return True
    found = _unit_threadblocks(plan, limits)
    return found is not None and found <= limits.max_tbs_per_gpu


def multiplicities(plan: CollectivePlan) -> list[int]:
    n, chunks = len(plan.compute_nodes), chunks_per_root(plan)
    return [int(t.share * n * chunks) for t in plan.trees]


def _split_counts(plan: CollectivePlan, mult: list[int], q: int) -> dict[Key, int]:
    counts: dict[Key, int] = defaultdict(int)
    for tree, m in zip(plan.trees, mult, strict=True):
        parts = math.ceil(m / q)
        for e in tree.edges:
            counts[_sender_receiver(tree, e)] += parts
    return counts


def _parts(m: int, q: int) -> list[int]:
    """m chunks in ceil(m/q) parts of at most q, as equal as whole chunks allow."""
    count = math.ceil(m / q)
    base, extra = divmod(m, count)
    return [base + 1] * extra + [base] * (count - extra)


class _Channels:
    """Channel ids per pair of GPUs: each group (route) of a pair takes the next ids."""

    def __init__(self) -> None:
        self.next: dict[tuple[str, str], int] = defaultdict(int)
        self.first: dict[Key, int] = {}

    def ids(self, group: Key, count: int) -> list[int]:
        if group not in self.first:
            self.first[group] = self.next[group[:2]]
            self.next[group[:2]] += count
        return list(range(self.first[group], self.first[group] + count))


def _split_trees(plan: CollectivePlan, mult: list[int], q: int) -> CollectivePlan:
    """``plan`` with every tree of multiplicity m cut into ceil(m/q) trees of at most q
    chunks (same edges; keys extended by the part where a tree is cut)."""
    unit = plan.trees[0].share / mult[0]
    phases: list[list[FlowTree]] = [[], []]
    for index, (tree, m) in enumerate(zip(plan.trees, mult, strict=True)):
        phase = phases[0 if index < len(plan.reduce_trees) else 1]
        for part, size in enumerate(_parts(m, q)):
            key = tree.key if m <= q else (tree.key, part)
            phase.append(replace(tree, key=key, share=size * unit))
    return replace(plan, reduce_trees=tuple(phases[0]), broadcast_trees=tuple(phases[1]))


Member = tuple[tuple[int, int], int, int]     # ((phase, step within the piece), tree, edge)
_MEMBERS: list[tuple[Any, int, dict[Key, list[Member]]]] = [(None, 0, {})]   # the last
# plan and detail asked about, and their members, replaced as a whole (threads)


def _members(plan: CollectivePlan, detail: int = 0) -> dict[Key, list[Member]]:
    """Tree edges (as ((phase, step within the piece), tree, edge) indices) by the key of
    the connections they may share: their group; with ``detail`` 1 also their phase
    (allreduce's reductions and broadcasts on connections of their own), with d >= 2
    also their band of d - 1 steps (d = 2: a connection carries one step of every
    piece). Each call gets lists of its own; the last plan's are computed once (paired
    layouts' bisections ask about one plan again and again: choosing 8 x DGX A100
    reduce-scatter's layout asked 18 times about 2 plans)."""
    known = _MEMBERS[0]
    if known[0] is not plan or known[1] != detail:
        members: dict[Key, list[Member]] = defaultdict(list)
        cut = len(plan.reduce_trees)
        for ti, tree in enumerate(plan.trees):
            phase = 0 if ti < cut else 1
            for ei, (e, level) in enumerate(zip(tree.edges, tree_levels(tree), strict=True)):
                band = level // (detail - 1) if detail >= 2 else 0
                key = (*_sender_receiver(tree, e), *(phase, band)[:detail])
                members[key].append(((phase, level), ti, ei))
        known = _MEMBERS[0] = (plan, detail, members)
    return defaultdict(list, {key: list(items) for key, items in known[2].items()})


def _shared_counts(plan: CollectivePlan, limits: MscclLimits, detail: int = 0,
                   topology: Topology | None = None, weighted: bool = True) -> dict[Key, int]:
    """Layout 3's connections per key (:func:`_members`): from one per tree edge, the key
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
    (:func:`_slack_choice`): connections merge where links have slack, so trees keep their
    shares of the links the schedule loads to capacity."""
    return _Descent(plan, limits.max_channels, detail, topology, weighted).counts(limits)


class _Descent:
    """:func:`_shared_counts` for every thread-block budget of one plan: the order in which
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
    """:class:`_Descent`'s order: first the counts once every pair of GPUs is within
    ``max_channels``, then before each key gives up a connection (the most connections
    of a GPU, that GPU, the key; None and the end where it has none left to give up)."""
    members = _members(plan, detail)
    counts: dict[Key, int] = {k: len(v) for k, v in members.items()}
    pick = _slack_choice(plan, members, counts, topology) if topology is not None else None
    rank = {g: i for i, g in enumerate(sorted(counts))}
    at: dict[str, list[Key]] = defaultdict(list)
    per_pair: dict[tuple[str, str], int] = defaultdict(int)
    for group, n in counts.items():
        at[group[0]].append(group)
        at[group[1]].append(group)
        per_pair[group[:2]] += n
    per_gpu = {gpu: sum(counts[g] for g in groups) for gpu, groups in at.items()}
    gpu_rank = {gpu: i for i, gpu in enumerate(sorted(per_gpu))}
    gpus = [(-n, -gpu_rank[gpu], gpu) for gpu, n in per_gpu.items()]
    heapq.heapify(gpus)

    # allreduce: a broadcast step follows every reduction step of the piece
    offset = 1 + max((g[-1] for g in counts if g[-2] == 0), default=-1) \
        if detail >= 2 and plan.reduce_trees and plan.broadcast_trees else 0

    def need(group: Key) -> float:
        if detail < 2 or not plan.reduce_trees or not weighted:   # broadcasts: equal
            return counts[group]
        return counts[group] / (offset * group[-2] + group[-1] + 1)

    def entry(group: Key) -> tuple[float, int, Key]:
        return -need(group), -rank[group], group

    def give_up(group: Key) -> None:
        counts[group] -= 1
        per_pair[group[:2]] -= 1
        for gpu in group[:2]:
            per_gpu[gpu] -= 1
            heapq.heappush(gpus, (-per_gpu[gpu], -gpu_rank[gpu], gpu))

    def crowded(group: Key) -> bool:
        return per_pair[group[:2]] > max_channels and counts[group] > 1

    pairs = [entry(g) for g in counts if crowded(g)]
    heapq.heapify(pairs)
    while pairs:
        weight, _, group = heapq.heappop(pairs)
        if -weight == need(group) and crowded(group):
            give_up(group)
            if crowded(group):
                heapq.heappush(pairs, entry(group))
    mine = {gpu: [entry(g) for g in groups if counts[g] > 1] for gpu, groups in at.items()}
    for heap in mine.values():
        heapq.heapify(heap)
    yield dict(counts)
    while True:
        while -gpus[0][0] != per_gpu[gpus[0][2]]:
            heapq.heappop(gpus)
        gpu = gpus[0][2]
        heap = mine[gpu]
        while heap and (-heap[0][0] != need(heap[0][2]) or counts[heap[0][2]] <= 1):
            heapq.heappop(heap)
        if not heap:
            yield per_gpu[gpu], gpu, None
            return
        group = heap[0][2] if pick is None else \
            pick([g for g in at[gpu] if counts[g] > 1])
        yield per_gpu[gpu], gpu, group
        give_up(group)
        if counts[group] > 1:
            for end in group[:2]:
                heapq.heappush(mine[end], entry(group))


def _slack_choice(plan: CollectivePlan,
                  members: dict[Key, list[Member]],
                  counts: dict[Key, int], topology: Topology
                  ) -> Callable[[list[Key]], Key]:
    """How :func:`_shared_counts` picks the key that gives up a connection when it knows
    the topology: the one after which the slowest of its links is fastest, a link's time
    per loop iteration being its connections times the most chunks one of them carries
    over its capacity (connections share a link equally, so the link streams for as
    long as its fullest connection needs at that share); ties: most connections."""
    caps = topology.capacities()
    mult = multiplicities(plan)
    load = {k: sum(mult[ti] for _, ti, _ in v) for k, v in members.items()}
    links = {k: path_links(k[2] if k[2][0] == k[0] else tuple(reversed(k[2])))
             for k in members}
    on_link: dict[tuple[str, str], list[Key]] = defaultdict(list)
    for k, route in links.items():
        for link in route:
            on_link[link].append(k)

    def link_time(link: tuple[str, str], less: Key) -> Fraction:
        total, fullest = 0, 0
        for k in on_link[link]:
            n = counts[k] - (k == less)
            total += n
            fullest = max(fullest, -(-load[k] // n))
        return Fraction(total * fullest) / caps[link]

    def pick(choices: list[Key]) -> Key:
        return min(choices, key=lambda k: (max(link_time(link, k) for link in links[k]),
                                           -counts[k], k))
    return pick


def _contiguous(loads: list[int], parts: int) -> list[int]:
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
class _Servers:
    """Identical servers: the rotation π of the servers
    (:func:`canopy.engine.network.servers.server_rotation`) and per node in a server (server,
    index within it, servers)."""

    rotation: dict[str, str]
    where: dict[str, tuple[int, int, int]]


def _servers(topology: Topology) -> _Servers | None:
    """The topology's identical servers, or None."""
    found = server_rotation(topology)
    if found is None:
        return None
    nodes = topology.nodes
    members = server_members([node.group for node in nodes])
    return _Servers(found[0], {nodes[v].id: (k, i, len(members))
                               for k, server in enumerate(members)
                               for i, v in enumerate(server)})


_INVARIANT: list[tuple[Any, Any, bool]] = [(None, None, False)]   # (the last plan and
# rotation asked about, whether π keeps the plan), replaced as a whole (threads)


def _tie_ranks(plan: CollectivePlan, servers: _Servers | None, counts: dict[Key, int]
               ) -> Callable[[int, str], tuple[int, ...]] | None:
    """How tree ``ti``'s edge sent by ``sender`` ranks among the edges of one connection and
    step: by the tree's index (None), or, where that is all that keeps the layout from
    being invariant under the rotation π of identical servers, by where the tree's root
    sits relative to the sender (servers ahead, index within its server) and the tree's
    index among those of its root and phase, which π keeps: the trees are invariant
    (:func:`canopy.engine.execution.folding.edge_permutation`), so are the connection ``counts``
    per key, every root and sender sits in a server and no edge has a priority of its
    own. Then the layout and its send order are invariant and the simulation runs it
    folded (:mod:`canopy.engine.execution.folding`); elsewhere nothing changes."""
    from canopy.engine.execution.folding import edge_permutation

    if servers is None:
        return None
    where, pi = servers.where, servers.rotation
    if any(t.root not in where or e.priority or (e.child if t.reduce else e.parent)
           not in where for t in plan.trees for e in t.edges):
        return None
    if any(counts.get((pi[k[0]], pi[k[1]], tuple(pi[x] for x in k[2]), *k[3:])) != n
           for k, n in counts.items()):
        return None
    known = _INVARIANT[0]              # layouts() asks about one plan many times
    if known[0] is not plan or known[1] is not pi:
        known = _INVARIANT[0] = (plan, pi, edge_permutation(plan, pi) is not None)
    if not known[2]:
        return None
    cut = len(plan.reduce_trees)
    nth: list[int] = []
    seen: dict[tuple[bool, str], int] = defaultdict(int)
    for ti, tree in enumerate(plan.trees):
        nth.append(seen[(ti < cut, tree.root)])
        seen[(ti < cut, tree.root)] += 1

    def rank(ti: int, sender: str) -> tuple[int, ...]:
        root, at = where[plan.trees[ti].root], where[sender]
        return ((root[0] - at[0]) % root[2], root[1], nth[ti])
    return rank


def _channel_plan(plan: CollectivePlan, counts: dict[Key, int], detail: int = 0,
                  servers: _Servers | None = None) -> CollectivePlan:
    """``plan`` with each key's tree edges (:func:`_members`) on its ``counts[key]``
    connections, in runs of consecutive steps within the piece (phase, then step, then
    tree) of nearly equal chunks: a connection then carries transfers of neighbouring
    steps only, so a piece's late step holds back little (one connection per tree edge
    where counts allow). Trees of one step are ranked by :func:`_tie_ranks` (``servers``
    from :func:`_servers`), which also becomes each edge's ``priority``, the order of
    its sends among those of one step on a shared connection."""
    mult = multiplicities(plan)
    channels = _Channels()
    members = _members(plan, detail)
    cut = len(plan.reduce_trees)
    rank = _tie_ranks(plan, servers, counts)
    chosen: dict[tuple[int, int], int] = {}
    ranks: dict[tuple[int, int], tuple[int, ...]] = {}
    for group, items in members.items():
        ids = channels.ids(group, counts[group])
        for _, ti, ei in items:
            ranks[(ti, ei)] = (ti,) if rank is None else rank(ti, group[0])
        items.sort(key=lambda item: (item[0], ranks[item[1:]], item[1], item[2]))
        runs = _contiguous([mult[ti] for _, ti, _ in items], len(ids))
        for (_, ti, ei), run in zip(items, runs, strict=True):
            chosen[(ti, ei)] = ids[run]
    order = {r: Fraction(i) for i, r in enumerate(sorted(set(ranks.values())))}  # shared
    trees = [replace(t, edges=tuple(FlowEdge(e.parent, e.child, e.path,
                                             e.priority if rank is None else
                                             order[ranks[(ti, ei)]],
                                             chosen[(ti, ei)])
                                    for ei, e in enumerate(t.edges)))
             for ti, t in enumerate(plan.trees)]
    return replace(plan, reduce_trees=tuple(trees[:cut]), broadcast_trees=tuple(trees[cut:]))


def _steps_fit(plan: CollectivePlan, limits: MscclLimits) -> bool:
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


def layouts(plan: CollectivePlan, limits: MscclLimits | None = None,
            topology: Topology | None = None) -> list[tuple[str, CollectivePlan]]:
    """Every layout of ``plan`` that fits the runtime's limits (module docstring), named,
    in the order :func:`runtime_layout` prefers them: the plan itself ("unit") where every
    unit tree edge fits a connection of its own (then nothing else: it streams as the
    bound says); else its trees cut into parts of at most q chunks with a connection per
    edge, for the smallest q that fits (and whose steps the parser holds), and for the
    largest q (a connection per tree edge) if that differs; then shared connections.
    Plans whose edges already name channels (rings) or keep a timetable (TACOS) have
    themselves only. Empty when no layout fits.

    With ``topology``, also :func:`_unit_shared` layouts (trees cut into unit trees whose
    connections merge where links have slack), where few connections need merging."""
    return list(iter_layouts(plan, limits, topology))


def iter_layouts(plan: CollectivePlan, limits: MscclLimits | None = None,
                 topology: Topology | None = None) -> Iterator[tuple[str, CollectivePlan]]:
    """:func:`layouts` one at a time, each built when asked for: :func:`runtime_schedule`
    stops at the first that executes within GOOD_ENOUGH of the optimum, so the later ones
    (the paired layouts' bisections above all) are not built for nothing (on 8 x DGX A100's
    allgather the first, shared, is good enough, and building them all would take most of
    ``canopy compare``'s ForestColl row)."""
    limits = limits or MscclLimits()
    if plan.ordered_links or any(e.channel is not None for t in plan.trees for e in t.edges):
        yield ("as built", plan)
        return
    mult = multiplicities(plan)
    if _unit_fits(plan, mult, limits):
        yield ("unit", plan)
        return
    servers = _servers(topology) if topology is not None else None
    unit = _unit_paired(plan, mult, limits, servers)
    if unit is not None:
        yield ("unit, paired", unit)
        return
    fitting = [q for q in range(2, max(mult) + 1)
               if _fits(_split_counts(plan, mult, q), limits)][:1]
    if fitting and fitting[0] < max(mult):
        fitting.append(max(mult))
    for q in fitting:
        split = _split_trees(plan, mult, q)
        if not _steps_fit(split, limits):
            break
        yield (f"q = {q}", _channel_plan(split, _split_counts(split, [1] * len(split.trees), 1),
                                         servers=servers))
    banded = False
    for detail in range(STEP_BANDS + 2):
        if detail == 1 and not (plan.reduce_trees and plan.broadcast_trees) or banded:
            continue
        name = ("shared", "shared by phase", "shared by step")[min(detail, 2)]
        name = name if detail <= 2 else f"shared by {detail - 1} steps"
        # reductions: the bands weighted (early steps share first), and equal counts,
        # which run faster where the joins are few (mi250-8plus8 allreduce)
        for weighted in (True, False) if detail >= 2 and plan.reduce_trees else (True,):
            descent = _Descent(plan, limits.max_channels, detail, None, weighted)
            try:
                counts = descent.counts(limits)
            except MscclLimitError:
                continue
            if _fits(counts, limits):
                banded = detail >= 2
                yield (name if weighted else f"{name}, equal counts",
                       _channel_plan(plan, counts, detail, servers))
            paired = _paired_shared(plan, limits, detail, None, weighted, servers, descent)
            if paired is not None:
                yield (f"{name if weighted else f'{name}, equal counts'}, paired", paired)
    if topology is not None:
        yield from _unit_shared(plan, mult, limits, topology)
    yield from _even_unit(plan, mult, limits, servers)
    if topology is not None:
        yield from slack_tiers(plan, mult, limits, topology, servers)


def _even_unit(plan: CollectivePlan, mult: list[int], limits: MscclLimits,
               servers: _Servers | None = None) -> list[tuple[str, CollectivePlan]]:
    """Layout 6: ``plan`` cut into unit trees (q = 1), and the unit tree edges between two
    GPUs over one route on ceil(chunks / T) connections, for the smallest T that fits, in
    runs of neighbouring steps (:func:`_channel_plan`): every connection of a link then
    carries nearly the same chunks. A link is shared equally among its connections, so one
    carrying fewer chunks than its neighbours runs ahead at their expense and the heavy ones
    drain last. Equal chunks per connection keep them draining together: on the punctured
    torus's allgather and mi250-8plus8's allreduce (App. E) this runs closer to the optimum
    than whole trees shared by step (docs/performance.md, "MSCCL connection layouts")."""
    split = _split_trees(plan, mult, 1) if max(mult) > 1 else plan
    if not _steps_fit(split, limits):
        return []
    chunks = {key: len(items) for key, items in _members(split).items()}
    for most in range(1, max(chunks.values(), default=0) + 1):
        counts = {key: -(-n // most) for key, n in chunks.items()}
        if _fits(counts, limits):
            return [("shared evenly, unit trees", _channel_plan(split, counts, 0, servers))]
    return []


def _unit_split_to_share(plan: CollectivePlan, mult: list[int], limits: MscclLimits
                         ) -> CollectivePlan | None:
    """``plan`` cut into unit trees (q = 1) for layouts that merge its connections, or
    None where a connection per unit tree edge would need more than UNIT_SHARE_FACTOR
    times a GPU's thread blocks (most would be shared anyway) or the steps do not fit."""
    per_gpu: dict[str, int] = defaultdict(int)
    for (u, v, _), n in _split_counts(plan, mult, 1).items():
        per_gpu[u] += n
        per_gpu[v] += n
    if max(per_gpu.values()) > UNIT_SHARE_FACTOR * (limits.max_tbs_per_gpu - COPY_THREADBLOCKS):
        return None
    split = _split_trees(plan, mult, 1) if max(mult) > 1 else plan
    return split if _steps_fit(split, limits) else None


def slack_tiers(plan: CollectivePlan, mult: list[int], limits: MscclLimits,
                 topology: Topology, servers: _Servers | None = None
                 ) -> Iterator[tuple[str, CollectivePlan]]:
    """Layout 7: ``plan`` cut into unit trees (q = 1), its tree edges keyed by phase and
    band of 2 steps (:func:`_members`), and every key's connections set by the slack of the
    busiest link on its route (that link's load at the plan's bound over its capacity,
    ForestColl (arXiv:2402.06787) §5.3's congestion, in whole percent): a connection per
    unit tree edge, one per 2 unit tree edges of a band, or one per key. A link is shared
    equally among its connections (:mod:`canopy.engine.execution.simulate`), so on the links
    the schedule loads to capacity every unit tree keeps a connection, and its share, of its
    own; links with slack carry more chunks per connection. All keys start unit; until the
    connections fit ``limits``, the least loaded tier still finer than one per key takes the
    next coarser count. (On 2x MI250's allreduce at k = 2 with lower trees the 16 GB/s links
    to the switch stay unit, the more lightly loaded Infinity Fabric links take two chunks
    or a whole key per connection: fewer thread blocks than unit connections everywhere, and
    faster; merging only a few of a link's unit tree edges while the rest keep a connection
    each is much slower: every connection of a loaded link should carry the same chunks.
    docs/performance.md, "MSCCL connection layouts", has the figures.) Only where unit
    connections need at most UNIT_SHARE_FACTOR times a GPU's thread blocks (as
    :func:`_unit_shared`)."""
    split = _unit_split_to_share(plan, mult, limits)
    if split is None:
        return
    caps = topology.capacities()
    bound = bandwidth_bound(plan, caps)[0]
    loads = link_loads(plan)
    chunks: dict[Key, int] = {}
    tier: dict[Key, int] = {}
    for key, items in _members(split, SLACK_DETAIL).items():
        route = key[2] if key[2][0] == key[0] else tuple(reversed(key[2]))
        chunks[key] = len(items)
        tier[key] = math.floor(max(loads[link] * bound / caps[link]
                                   for link in path_links(route)) * 100)
    grain = dict.fromkeys(sorted(set(tier.values())), 0)   # index into SLACK_GRAINS
    while True:
        counts = {key: -(-n // SLACK_GRAINS[grain[tier[key]]]) if SLACK_GRAINS[grain[tier[key]]]
                  else 1 for key, n in chunks.items()}
        if _fits(counts, limits):
            yield ("shared by link slack, unit trees",
                   _channel_plan(split, counts, SLACK_DETAIL, servers))
            return
        coarser = next((t for t, g in grain.items() if g < len(SLACK_GRAINS) - 1), None)
        if coarser is None:
            return
        grain[coarser] += 1


def _unit_paired(plan: CollectivePlan, mult: list[int], limits: MscclLimits,
                 servers: _Servers | None = None
                 ) -> CollectivePlan | None:
    """Unit connections (a connection per unit tree edge, as layout 2 with q = 1) with
    receive-only and send-only connection ends paired in thread blocks
    (:func:`canopy.engine.msccl.pairing.pair_threadblocks`), or None when that does not
    fit: mi250-2x16 allgather at k = 2 needs 123 thread blocks per GPU with relays fused,
    87 paired."""
    counts = _split_counts(plan, mult, 1)
    per_pair: dict[tuple[str, str], int] = defaultdict(int)
    for (u, v, _), n in counts.items():
        per_pair[(u, v)] += n
    if any(n > limits.max_channels for n in per_pair.values()):
        return None
    split = _split_trees(plan, mult, 1)
    if not _steps_fit(split, limits):
        return None
    laid = _channel_plan(split, _split_counts(split, [1] * len(split.trees), 1),
                         servers=servers)
    return pair_threadblocks(laid, limits)


def _paired_shared(plan: CollectivePlan, limits: MscclLimits, detail: int,
                   topology: Topology | None, weighted: bool = True,
                   servers: _Servers | None = None, descent: _Descent | None = None
                   ) -> CollectivePlan | None:
    """Layout 3 with more connections than a thread block per connection end allows, the
    ends paired in thread blocks (:func:`canopy.engine.msccl.pairing.pair_threadblocks`):
    the most connection ends per GPU (up to twice its thread blocks, by bisection) whose
    pairing fits ``limits``; None when even the unpaired budget's does not pair.
    ``descent``: the plan's :class:`_Descent` where the caller has it (same arguments)."""
    descent = descent or _Descent(plan, limits.max_channels, detail, topology, weighted)
    found: CollectivePlan | None = None
    low, high = limits.max_tbs_per_gpu + 1, 2 * limits.max_tbs_per_gpu
    while low <= high:
        budget = (low + high) // 2
        wider = replace(limits, max_tbs_per_gpu=budget)
        try:
            counts = descent.counts(wider)
        except MscclLimitError:
            high = budget - 1
            continue
        laid = pair_threadblocks(_channel_plan(plan, counts, detail, servers), limits) \
            if _pairs_fit(counts, limits) else None
        if laid is None:
            high = budget - 1
        else:
            found, low = laid, budget + 1
    return found if found is not None and found.paired else None


def _pairs_fit(counts: dict[Key, int], limits: MscclLimits) -> bool:
    """Whether ``counts`` connections per key keep every pair of GPUs within
    ``max_channels`` (the thread blocks are :func:`pair_threadblocks`' to check)."""
    per_pair: dict[tuple[str, str], int] = defaultdict(int)
    for key, n in counts.items():
        per_pair[key[:2]] += n
    return all(n <= limits.max_channels for n in per_pair.values())


def _unit_shared(plan: CollectivePlan, mult: list[int], limits: MscclLimits,
                 topology: Topology) -> Iterator[tuple[str, CollectivePlan]]:
    """Layout 3 on ``plan`` cut into unit trees (q = 1), merging connections where links
    have slack (:func:`_shared_counts` with the topology), shared by phase and by 2 steps:
    every connection then carries whole chunks, so a tree keeps its share of a link (on the
    3x3 mesh's allreduce far closer to the optimum than whole trees on shared connections or
    2-chunk parts). Only where the unit connections need at most UNIT_SHARE_FACTOR times a
    GPU's thread blocks: beyond that most connections are shared anyway and whole trees run
    faster (punctured torus). Built one at a time (:func:`iter_layouts`)."""
    if max(mult) == 1:
        return                             # plan's own shared layouts are the same
    split = _unit_split_to_share(plan, mult, limits)
    if split is None:
        return
    servers = _servers(topology)
    for detail in (1, 3):
        if detail == 1 and not (plan.reduce_trees and plan.broadcast_trees):
            continue
        descent = _Descent(split, limits.max_channels, detail, topology, True)
        try:
            counts = descent.counts(limits)
        except MscclLimitError:
            continue
        name = "shared by phase" if detail == 1 else "shared by 2 steps"
        if _fits(counts, limits):
            yield (f"{name}, unit trees", _channel_plan(split, counts, detail, servers))
        paired = _paired_shared(split, limits, detail, topology, servers=servers,
                                descent=descent)
        if paired is not None:
            yield (f"{name}, unit trees, paired", paired)


def runtime_layout(plan: CollectivePlan, limits: MscclLimits | None = None) -> CollectivePlan:
    """``plan`` with the first of its :func:`layouts` (the one the MSCCL writer's "auto"
    layout takes for a plan nobody chose a layout for; :func:`runtime_schedule` chooses
    among all of them by simulation). Plans whose edges already name channels (rings) or
    keep a timetable (TACOS) are returned as they are. Raises :class:`MscclLimitError`
    when no layout fits."""
    found = next(iter_layouts(plan, limits), None)
    if found is None:
        _shared_counts(plan, limits or MscclLimits())   # names the GPU with too many peers
        raise MscclLimitError("the MSCCL program does not fit the runtime's limits: its GPUs "
                              "need more thread blocks per channel than the runtime allows.")
    return found[1]


def describe_layout(original: CollectivePlan, laid_out: CollectivePlan,
                    kind: str = "", limits: MscclLimits | None = None) -> dict[str, object]:
    """What :func:`runtime_layout` chose, for reports: the layout, its connections, the
    most chunks one carries per loop iteration and the most thread blocks one GPU needs
    for them (counted as in :func:`runtime_layout`; unit connections over the default
    budget per connection end as the export fuses them; ``limits`` default to an A100's).
    ``kind`` is the name
    :func:`layouts` gives a shared layout (which sharing); without it, shared is named
    generically."""
    mult = multiplicities(original)
    if laid_out is original:
        counts = _split_counts(original, mult, 1)
        name, most = "unit connections", 1
    else:
        load: dict[tuple[Group, object], int] = defaultdict(int)
        edges: dict[tuple[Group, object], int] = defaultdict(int)
        for tree, m in zip(laid_out.trees, multiplicities(laid_out), strict=True):
            for e in tree.edges:
                load[(_sender_receiver(tree, e), e.channel)] += m
                edges[(_sender_receiver(tree, e), e.channel)] += 1
        counts = defaultdict(int)
        for group, _ in load:
            counts[group] += 1
        most = max(load.values())
        if max(edges.values()) == 1:
            name = "a connection per tree edge"
        elif kind.startswith("shared"):
            name = layout_text(kind)
        else:
            name = "connections shared by tree edges"
        largest = max(multiplicities(laid_out))
        name += f" (trees of at most {largest} chunk{'s' if largest > 1 else ''})"
        if laid_out.paired:
            name += (f", {len(laid_out.paired)} thread blocks receiving one tree and "
                     "sending another")
    per_gpu: dict[str, int] = defaultdict(int)
    for (u, v, _), n in counts.items():
        per_gpu[u] += n
        per_gpu[v] += n
    threadblocks = max(per_gpu.values(), default=0) + COPY_THREADBLOCKS
    if laid_out.paired:
        threadblocks = max(threadblocks_per_gpu(laid_out).values())
    limits = limits or MscclLimits()
    if laid_out is original and threadblocks > limits.max_tbs_per_gpu:
        threadblocks = _unit_threadblocks(original, limits) or threadblocks
    return {"layout": name, "connections": sum(counts.values()),
            "chunks_per_connection": most,
            "unit_tree_edges": sum(m * len(t.edges) for m, t in zip(mult, original.trees,
                                                                        strict=True)),
            "threadblocks_per_gpu": threadblocks}


def layout_text(name: str) -> str:
    if name == "unit":
        return "unit connections"
    if name == "unit, paired":
        return "unit connections, receive and send ends paired in thread blocks"
    if name == "shared":
        return "shared connections"
    if name.startswith("shared"):
        return f"connections {name}"
    return f"trees cut into parts of {name} chunks, a connection per edge"
