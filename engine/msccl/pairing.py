"""Two connections in one thread block, where a thread block per connection end would be
more than the GPU's SMs.

An MSCCL thread block has at most one receive peer and one send peer on one channel and
runs its steps in order in every loop iteration (microsoft/msccl ``msccl_interpreter.h``);
a step is done once it may start and, if it receives, its message has arrived (a send
completes once its data is handed over). The writer's layouts with given channels
(:mod:`canopy.engine.deploy.runtime_choice`) give every connection end a thread block of its
own, so a GPU that receives over R connections and sends over S needs R + S. This module
puts a receive-only and a send-only connection end of a GPU into one thread block, which
runs the receives, then the sends, every iteration, only where that holds nothing back:

Every step of the receive connection within the piece comes before every step of the
send connection (ForestColl (arXiv:2402.06787)'s trees move a piece one level per step: reduce
trees by
the height of the sender's subtree, allreduce's broadcasts after every reduction), and:

* **Relays** (the pipelined export's ``rcs``/``rrs``): two connections of one tree edge
  each, the send's edge fed by the receive's (a broadcast edge and its parent edge, a
  reduction to the parent and an edge from a child). The send waits for that receive anyway,
  and the receive of the next iteration, which waits for this iteration's send to start,
  waits for nothing that has not arrived. (Where the receive connection also carried other
  trees' data, forwarded by other thread blocks, those would wait for the send's other
  inputs, and the XML would run far below its plan.)
* **Ends with a later send**: the receive connection carries data its receiver forwards to
  nobody (broadcast leaves; reduce-scatter's results). The send then waits for a receive
  that arrives a step before the send's own data, and the receive of the next iteration,
  held back until this iteration's sends have started, is waited on by no other step (a
  receive that other steps wait on would hold back its tree, and with it the whole
  schedule).

In the execution model (:func:`canopy.engine.execution.compiler.plan_program`,
``CollectivePlan.paired``) each send of a paired thread block waits for its last
receive of the iteration, as in the XML (the writer lists the receives first,
:func:`canopy.engine.msccl.threadblocks.assign_threadblocks`); the waits go from earlier
steps to later ones, so the program stays free of cycles. A GPU pairs only as many
connections as it must to fit ``max_tbs_per_gpu``, relays first, then the ends with the
most slack (the send latest after the receive).

A thread block has one channel, so the connections of a chain of pairs (a path: each
connection is paired at most at its receiver and at its sender) share one channel: the
chains are given channels greedily, the most constrained first, the lowest channel that
no other connection between the same two GPUs uses and where no GPU gets more than
``max_tbs_per_channel`` thread blocks; a chain that finds none is cut in two and the
GPUs it served are matched again without that pair.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from canopy.engine.model.memo import RecentMemo
from canopy.engine.model.plan import CollectivePlan, FlowEdge, FlowTree, tree_levels
from canopy.engine.msccl.connection_counts import ServerPlaces, edge_images
from canopy.engine.msccl.lowering import chunks_per_root
from canopy.engine.msccl.threadblocks import MscclLimits

Conn = tuple[str, str, Hashable]       # (sender, receiver, channel)
COPY_THREADBLOCKS = 1                  # a GPU's local copies share one thread block


@dataclass(slots=True)
class _Ends:
    """A connection's steps within the piece: its earliest and latest, how many XML steps
    one loop iteration gives it, whether its receiver forwards none of its data, how many
    tree edges it carries, and, for a connection of one edge, the receive connections
    that feed it (its sender's edges of the same tree: the parent's edge when
    broadcasting, the children's when reducing; None for a connection of several edges:
    only connections of one edge each pair as relays)."""

    first: int
    last: int
    steps: int
    terminal: bool
    fed_by: set[Conn] | None = None
    edges: int = 1


def connection_steps(plan: CollectivePlan, max_count: int = MscclLimits().max_count,
                     base: CollectivePlan | None = None) -> dict[Conn, _Ends]:
    """Every connection of a plan whose edges name channels, with the steps (within the
    piece, reductions first) of the transfers it carries (see :class:`_Ends`): a reduce
    edge's step is the height of its sender's subtree, a broadcast edge's its sender's
    depth plus one more than the reductions' last step. ``base``: a plan with the same
    trees and edges but for their channels (the plan ``plan`` was laid out from), whose
    steps are then worked out once for all its layouts."""
    return _connection_ends(base or plan, edge_channels(plan), max_count).ends()


def edge_channels(plan: CollectivePlan) -> list[Hashable]:
    """The channel of every edge of ``plan``, trees in order and each tree's edges in
    order (the order :func:`~canopy.engine.msccl.connection_counts.layout_channels`
    gives a layout's before its plan is built)."""
    return [e.channel for t in plan.trees for e in t.edges]


def _connection_ends(trees: CollectivePlan, channels: Sequence[Hashable], max_count: int
                     ) -> _Connections:
    """The connections of ``trees`` with its edges on ``channels`` (as
    :func:`edge_channels` lists them), their steps summed over arrays of every edge (the
    layouts of one plan are paired many times, and a pass over its edges in Python per
    layout would cost most of the pairing)."""
    facts = _edge_steps(trees, max_count)
    distinct = list(dict.fromkeys(channels))
    number = {channel: i for i, channel in enumerate(distinct)}
    channel = np.fromiter(map(number.__getitem__, channels), dtype=np.int64,
                          count=len(channels))
    codes, first_edge, conn_of = np.unique(facts.pair * len(distinct) + channel,
                                           return_index=True, return_inverse=True)
    order = np.argsort(first_edge, kind="stable")   # connections by their first edge
    renumbered = np.empty_like(order)
    renumbered[order] = np.arange(len(order))
    conn_of = renumbered[conn_of.reshape(-1)]
    codes, first_edge = codes[order], first_edge[order]
    count = len(codes)
    first = np.full(count, np.iinfo(np.int64).max)
    np.minimum.at(first, conn_of, facts.step)
    last = np.full(count, -1)
    np.maximum.at(last, conn_of, facts.step)
    steps = np.zeros(count, dtype=np.int64)
    np.add.at(steps, conn_of, facts.per)
    forwarded = np.bincount(conn_of, weights=~facts.terminal, minlength=count)
    pair, channel = np.divmod(codes, len(distinct))
    conns: list[Conn] = list(zip(facts.sender[pair].tolist(), facts.receiver[pair].tolist(),
                                 map(distinct.__getitem__, channel.tolist()), strict=True))
    return _Connections(conns, conn_of, pair, first.tolist(), last.tolist(), steps.tolist(),
                        (forwarded == 0).tolist(),
                        np.bincount(conn_of, minlength=count).tolist(), first_edge.tolist(),
                        facts)


@dataclass(frozen=True)
class _Connections:
    """A layout's connections (``conns``, in the order their first edge comes), per edge
    its connection's index (``conn_of``), and per connection its sender and receiver (an
    index into the plan's ``facts``), the figures of its :class:`_Ends` and its first
    edge."""

    conns: list[Conn]
    conn_of: Any
    pair: Any
    first: list[int]
    last: list[int]
    steps: list[int]
    terminal: list[bool]
    edges: list[int]
    first_edge: list[int]
    facts: _EdgeSteps

    def ends(self, gpus: list[str] | None = None) -> dict[Conn, _Ends]:
        """The :class:`_Ends` of every connection, or of those from or to ``gpus`` (the
        ones matching asks about)."""
        conn_of = self.conn_of.tolist()
        feeders = self.facts.feeders
        wanted: Iterable[int] = range(len(self.conns))
        if gpus is not None:
            near = np.zeros(len(self.facts.sender), dtype=bool)
            for gpu in gpus:
                near[self.facts.at.get(gpu, [])] = True
            wanted = np.flatnonzero(near[self.pair]).tolist()
        out: dict[Conn, _Ends] = {}
        for i in wanted:
            n = self.edges[i]
            fed_by = {self.conns[conn_of[f]] for f in feeders[self.first_edge[i]]} \
                if n == 1 else None
            out[self.conns[i]] = _Ends(self.first[i], self.last[i], self.steps[i],
                                       self.terminal[i], fed_by, n)
        return out


@dataclass(frozen=True)
class _EdgeSteps:
    """Every edge of a plan (trees in order, each tree's edges in order): its sender and
    receiver (an index into ``sender`` and ``receiver``; ``at``: those of each GPU), its
    step within the piece, the XML steps one loop iteration gives it, whether its
    receiver forwards none of its data, and the edges of its tree that feed it (into its
    sender)."""

    sender: Any
    receiver: Any
    at: dict[str, list[int]]
    pair: Any
    step: Any
    per: Any
    terminal: Any
    feeders: list[list[int]]


_EDGE_STEPS: RecentMemo[_EdgeSteps] = RecentMemo(1)


def _edge_steps(plan: CollectivePlan, max_count: int) -> _EdgeSteps:
    """The :class:`_EdgeSteps` of ``plan``, kept for the last plan asked (pairing asks
    about the layouts of one plan many times)."""
    return _EDGE_STEPS.get(plan, max_count, lambda: _walk_edge_steps(plan, max_count))


def _walk_edge_steps(plan: CollectivePlan, max_count: int) -> _EdgeSteps:
    """:func:`_edge_steps` worked out anew."""
    offset = 0
    if plan.reduce_trees and plan.broadcast_trees:
        offset = 1 + max(max(tree_levels(t), default=0) for t in plan.reduce_trees)
    n, chunks = len(plan.compute_nodes), chunks_per_root(plan)
    pairs: dict[tuple[str, str], int] = {}
    pair: list[int] = []
    step: list[int] = []
    per: list[int] = []
    terminal: list[bool] = []
    feeders: list[list[int]] = []
    for tree in plan.trees:
        at = len(pair)
        shift = 0 if tree.reduce else offset
        steps = math.ceil(tree.share * n * chunks / max_count)
        ends = [(e.child, e.parent) if tree.reduce else (e.parent, e.child) for e in tree.edges]
        into: dict[str, list[int]] = defaultdict(list)    # per node, its receives here
        for j, (_, receiver) in enumerate(ends):
            into[receiver].append(at + j)
        senders = {sender for sender, _ in ends}
        for (sender, receiver), level in zip(ends, tree_levels(tree), strict=True):
            pair.append(pairs.setdefault((sender, receiver), len(pairs)))
            step.append(level + shift)
            per.append(steps)
            terminal.append(receiver == tree.root and not plan.broadcast_trees if tree.reduce
                            else receiver not in senders)
            feeders.append(into.get(sender, []))
    of_gpu: dict[str, list[int]] = defaultdict(list)
    for (u, v), index in pairs.items():
        of_gpu[u].append(index)
        of_gpu[v].append(index)
    return _EdgeSteps(np.array([u for u, _ in pairs], dtype=object),
                      np.array([v for _, v in pairs], dtype=object), dict(of_gpu),
                      np.array(pair, dtype=np.int64),
                      np.array(step, dtype=np.int64), np.array(per, dtype=np.int64),
                      np.array(terminal, dtype=bool), feeders)


def threadblocks_per_gpu(plan: CollectivePlan) -> dict[str, int]:
    """Thread blocks each GPU needs for a plan whose edges name channels: one per
    connection end, one per pair of ``plan.paired`` instead of two, and one for its local
    copies."""
    return _threadblocks(connection_steps(plan), plan.paired)


def _threadblocks(conns: Iterable[Conn], paired: tuple[tuple[str, str, str, Any], ...]
                  ) -> dict[str, int]:
    """:func:`threadblocks_per_gpu` of connections ``conns`` and pairs ``paired``."""
    count: dict[str, int] = defaultdict(lambda: COPY_THREADBLOCKS)
    for u, v, _ in conns:
        count[u] += 1
        count[v] += 1
    for _, v, _, _ in paired:
        count[v] -= 1
    return dict(count)


ROUNDS = 6      # matchings tried, each avoiding the pairs the colouring had to drop


def pair_threadblocks(plan: CollectivePlan, limits: MscclLimits,
                      base: CollectivePlan | None = None,
                      servers: ServerPlaces | None = None) -> CollectivePlan | None:
    """``plan`` (edges with channels) with the fewest pairs that bring every GPU within
    ``limits.max_tbs_per_gpu`` thread blocks (module docstring), its channels renumbered
    so that paired connections share one; the plan itself when no GPU is over; None when
    no pairing fits (a GPU with too few receives before its sends, or channels). Pairs
    the channels cannot hold are dropped and the GPUs they served matched again without
    them, taking a few more pairs each round. ``base``: as :func:`connection_steps`'.

    With ``servers`` (:func:`~canopy.engine.msccl.connection_counts.server_places`),
    where a rotation π of the identical servers maps the plan's connections onto
    connections with the same steps (:func:`_symmetry`), one GPU per orbit of π is
    matched and its pairs moved to the others by π, and the chains of pairs are coloured
    an orbit at a time (all cut, or none): the pairs are then invariant under π, as the
    plan is, and the simulation runs the paired plan folded
    (:mod:`canopy.engine.execution.folding`), one send per orbit. Elsewhere every GPU is
    matched on its own."""
    found = pairing(base or plan, edge_channels(plan), limits, servers, plan.paired)
    return None if found is None else found.apply(plan)


@dataclass(frozen=True)
class Pairing:
    """What :func:`pairing` found for a layout: the pairs kept and every connection's new
    channel (None for both where no GPU is over its thread blocks: the layout as it is)."""

    kept: tuple[tuple[Conn, Conn], ...] | None
    channels: dict[Conn, int] | None

    def apply(self, plan: CollectivePlan) -> CollectivePlan:
        """``plan`` (the layout this pairing was found for) with its channels renumbered
        and its pairs."""
        if self.kept is None or self.channels is None:
            return plan
        channels = self.channels
        trees = [FlowTree(t.key, t.root,
                          tuple(FlowEdge(e.parent, e.child, e.path, e.priority,
                                         channels[(e.child, e.parent, e.channel) if t.reduce
                                                  else (e.parent, e.child, e.channel)])
                                for e in t.edges), t.share, t.reduce)
                 for t in plan.trees]
        cut = len(plan.reduce_trees)
        return replace(plan, reduce_trees=tuple(trees[:cut]),
                       broadcast_trees=tuple(trees[cut:]), paired=self.pairs())

    def pairs(self) -> tuple[tuple[str, str, str, int], ...]:
        """The thread blocks paired, as ``CollectivePlan.paired`` names them."""
        assert self.kept is not None and self.channels is not None
        channels = self.channels
        return tuple(sorted((r[0], r[1], s[1], channels[r]) for r, s in self.kept))

    def renumbered(self, trees: CollectivePlan, channels: Sequence[Hashable]) -> list[int]:
        """Every edge's new channel, of the layout that puts the edges of ``trees`` on
        ``channels`` (as :func:`edge_channels` lists them): the paired layout is then
        built once, with these."""
        assert self.channels is not None
        new = self.channels
        ends = ((e.child, e.parent) if t.reduce else (e.parent, e.child)
                for t in trees.trees for e in t.edges)
        return [new[(sender, receiver, channel)]
                for (sender, receiver), channel in zip(ends, channels, strict=True)]


def pairing(trees: CollectivePlan, channels: Sequence[Hashable], limits: MscclLimits,
            servers: ServerPlaces | None = None,
            paired: tuple[tuple[str, str, str, Any], ...] = ()) -> Pairing | None:
    """:func:`pair_threadblocks` of the layout that puts the edges of ``trees`` on
    ``channels`` (as :func:`edge_channels` lists them; ``paired``: the pairs it has
    already), found without building it: a bisection over layouts of one plan tries
    many and builds one."""
    layout = _connection_ends(trees, channels, limits.max_count)
    count = _threadblocks(layout.conns, paired)
    if all(n <= limits.max_tbs_per_gpu for n in count.values()):
        return Pairing(None, None)
    gpus = sorted(count)
    if count[gpus[0]] > limits.max_tbs_per_gpu and not _enough_pairs(layout, gpus[0], count,
                                                                      limits):
        return None     # (before the rotation and the other GPUs' ends are worked out)
    image = _symmetry(trees, layout, servers) if servers is not None else None
    over = [gpu for gpu in _representatives(gpus, image)
            if count[gpu] > limits.max_tbs_per_gpu]
    ends = layout.ends(over)
    receives: dict[str, list[Conn]] = defaultdict(list)
    sends: dict[str, list[Conn]] = defaultdict(list)
    for conn in ends:
        sends[conn[0]].append(conn)
        receives[conn[1]].append(conn)
    forbidden: set[tuple[Conn, Conn]] = set()
    for extra in range(ROUNDS):
        pairs: list[tuple[Conn, Conn]] = []
        for gpu in over:
            want = count[gpu] - limits.max_tbs_per_gpu
            found = _pairs(receives[gpu], sends[gpu], ends, limits.max_steps_per_tb,
                           forbidden, want + extra)
            if len(found) < want:
                return None
            pairs.extend(_orbit(found, image))
        renamed, dropped = _colour(layout.conns, pairs, limits, image)
        if renamed is None:
            return None
        kept = [p for p in pairs if p not in dropped]
        left = dict(count)
        for r, _ in kept:
            left[r[1]] -= 1
        if all(n <= limits.max_tbs_per_gpu for n in left.values()):
            return Pairing(tuple(kept), renamed)
        forbidden |= dropped
    return None


def _enough_pairs(layout: _Connections, gpu: str, count: dict[str, int],
                  limits: MscclLimits) -> bool:
    """Whether ``gpu`` (the first in sorted order, so matched first with or without a
    rotation) finds as many pairs as it is over its thread blocks in :func:`pairing`'s
    first round: where it does not, no pairing fits."""
    ends = layout.ends([gpu])
    want = count[gpu] - limits.max_tbs_per_gpu
    found = _pairs([c for c in ends if c[1] == gpu], [c for c in ends if c[0] == gpu], ends,
                   limits.max_steps_per_tb, set(), want)
    return len(found) >= want


@dataclass(frozen=True)
class _Image:
    """A rotation π of identical servers of order ``order``: its image of every GPU and
    of every connection of a plan."""

    gpu: dict[str, str]
    conn: dict[Conn, Conn]
    order: int


def _symmetry(trees: CollectivePlan, layout: _Connections, servers: ServerPlaces
              ) -> _Image | None:
    """The first of ``servers``' rotations π (most folding first, as the simulation
    tries them) that maps ``trees`` onto themselves
    (:func:`~canopy.engine.msccl.connection_counts.edge_images`, worked out once per
    plan and rotation) so that the edges of each connection of ``layout`` go to the edges of
    one connection, distinct connections to distinct ones: π on GPUs and connections. A
    tree goes to a tree of the same share whose edges are its edges moved, so each
    connection goes to one with the same steps, fed by the images of its feeders
    (:class:`_Ends`): the matching of one GPU, moved by π, is a matching at its image.
    None where no rotation does, or a GPU sits in no server (π would fix it)."""
    if any(gpu not in servers.where for gpu in trees.compute_nodes):
        return None
    for rotation, order in zip(servers.rotations, servers.orders, strict=True):
        perm = edge_images(trees, rotation)
        if perm is None:
            continue
        conns, conn_of = layout.conns, layout.conn_of
        moved = conn_of[perm]                  # per edge, its image's connection
        image = np.empty(len(conns), dtype=conn_of.dtype)
        image[conn_of] = moved
        if (image[conn_of] == moved).all() and len(np.unique(image)) == len(conns):
            return _Image(rotation, dict(zip(conns, [conns[c] for c in image.tolist()],
                                             strict=True)), order)
    return None


def _representatives(gpus: list[str], image: _Image | None) -> list[str]:
    """The GPUs to match: every one, or with a rotation the first of each orbit."""
    if image is None:
        return gpus
    seen: set[str] = set()
    out = []
    for gpu in gpus:
        if gpu not in seen:
            out.append(gpu)
            x = gpu
            while x not in seen:
                seen.add(x)
                x = image.gpu[x]
    return out


def _orbit(pairs: list[tuple[Conn, Conn]], image: _Image | None) -> list[tuple[Conn, Conn]]:
    """``pairs`` of one GPU and, with a rotation, their images at the rest of its orbit."""
    if image is None:
        return pairs
    out = list(pairs)
    for _ in range(image.order - 1):
        pairs = [(image.conn[r], image.conn[s]) for r, s in pairs]
        out.extend(pairs)
    return out


def _pairs(receives: list[Conn], sends: list[Conn], ends: dict[Conn, _Ends], max_steps: int,
           forbidden: set[tuple[Conn, Conn]], want: int) -> list[tuple[Conn, Conn]]:
    """Up to ``want`` pairs of one GPU (module docstring), not ``forbidden``: relays
    first, then ends with a later send, the most slack first (as many as any matching
    where the loosest do not reach ``want``)."""
    out: list[tuple[Conn, Conn]] = []
    used: set[Conn] = set()
    for send in sorted(sends):
        if len(out) == want:
            return out
        fed_by = ends[send].fed_by or set()
        for r in sorted(fed_by - used):
            if ends[r].last < ends[send].first and (r, send) not in forbidden and \
                    ends[r].edges == ends[send].edges == 1:
                out.append((r, send))
                used |= {r, send}
                break
    rest_r = [r for r in receives if r not in used and ends[r].terminal]
    rest_s = [s for s in sends if s not in used]
    more = _loosest(rest_r, rest_s, ends, max_steps, forbidden, want - len(out))
    if len(more) < want - len(out):
        more = _match(rest_r, rest_s, ends, max_steps, forbidden)
    return out + more[:want - len(out)]


def _loosest(receives: list[Conn], sends: list[Conn], ends: dict[Conn, _Ends],
             max_steps: int, forbidden: set[tuple[Conn, Conn]], want: int
             ) -> list[tuple[Conn, Conn]]:
    """Up to ``want`` pairs of one GPU with the most slack: its earliest receives with
    its latest sends, in turn, while the receive ends before the send begins."""
    early = sorted(receives, key=lambda c: (ends[c].last, c))
    late = sorted(sends, key=lambda c: (-ends[c].first, c))
    out: list[tuple[Conn, Conn]] = []
    for r, s in zip(early, late, strict=False):
        if len(out) == want or ends[r].last >= ends[s].first:
            break
        if ends[r].steps + ends[s].steps <= max_steps and (r, s) not in forbidden:
            out.append((r, s))
    return out


def _match(receives: list[Conn], sends: list[Conn], ends: dict[Conn, _Ends],
           max_steps: int, forbidden: set[tuple[Conn, Conn]]) -> list[tuple[Conn, Conn]]:
    """A largest set of (receive, send) pairs of one GPU whose receive's last step comes
    before the send's first (not ``forbidden``), most slack first. Sends taken earliest
    first each take the waiting receive that ends latest (a receive that fits one send
    fits every later one, so this pairs as many as any matching), then the pairs are
    sorted by slack."""
    order = sorted(receives, key=lambda c: (ends[c].last, c))
    waiting: list[Conn] = []
    i = 0
    out: list[tuple[Conn, Conn]] = []
    for send in sorted(sends, key=lambda c: (ends[c].first, c)):
        while i < len(order) and ends[order[i]].last < ends[send].first:
            waiting.append(order[i])
            i += 1
        for j in range(len(waiting) - 1, -1, -1):
            if ends[waiting[j]].steps + ends[send].steps <= max_steps and \
                    (waiting[j], send) not in forbidden:
                out.append((waiting.pop(j), send))
                break
    out.sort(key=lambda p: (ends[p[0]].last - ends[p[1]].first, p))
    return out


def _colour(conns: list[Conn], pairs: list[tuple[Conn, Conn]], limits: MscclLimits,
            image: _Image | None = None
            ) -> tuple[dict[Conn, int] | None, set[tuple[Conn, Conn]]]:
    """A channel per connection: paired connections alike, connections between the same
    two GPUs (one direction) apart, at most ``max_tbs_per_channel`` thread blocks per GPU
    and channel, channels below ``max_channels``; chains of pairs that find no channel are
    cut in two (the pair dropped), most constrained chains first (those through the
    pairs of GPUs with most connections). With a rotation (``image``, under which the
    pairs are invariant) the chains of one orbit are coloured together, each still the
    lowest channel it finds, and where one finds none all of them are cut alike, so
    the pairs kept stay invariant. Returns the channels (None when even single
    connections find none) and the pairs dropped."""
    after = dict(pairs)
    before = {s for _, s in pairs}
    per_pair: dict[tuple[str, str], int] = defaultdict(int)
    for u, v, _ in conns:
        per_pair[(u, v)] += 1
    chains: dict[Conn, list[Conn]] = {}         # by first connection
    ordered = sorted(conns)
    for conn in ordered:
        if conn in before:
            continue
        chain = [conn]
        following = after.get(conn)
        while following is not None:
            chain.append(following)
            following = after.get(following)
        chains[conn] = chain
    units: list[list[list[Conn]]] = []          # a chain, or with a rotation its orbit
    if image is None:
        units = [[chain] for chain in chains.values()]
    else:
        placed: set[Conn] = set()
        moved = image.conn
        for first, chain in chains.items():
            if first not in placed:
                unit, head = [chain], first
                for _ in range(image.order - 1):       # (back at ``first`` after them)
                    head = moved[head]
                    placed.add(head)
                    unit.append(chains[head])
                units.append(unit)

    # most constrained first: a heap keyed by (-most connections of a pair on the chain,
    # -length, the chain itself), the order in which sorting would take them
    # (chains never share a connection, so their first ones order them as the chains do;
    # the chains of an orbit are alike in both counts)
    position = {conn: i for i, conn in enumerate(ordered)}

    def urgency(unit: list[list[Conn]]) -> tuple:
        chain = unit[0]
        most = per_pair[chain[0][:2]] if len(chain) == 1 else \
            max(per_pair[c[:2]] for c in chain)
        return (-most, -len(chain), position[chain[0]], unit)

    heap = [urgency(unit) for unit in units]
    heapq.heapify(heap)
    board = _Board(limits)
    out: dict[Conn, int] = {}
    dropped: set[tuple[Conn, Conn]] = set()
    while heap:
        unit = heapq.heappop(heap)[-1]
        if len(unit[0]) == 1:       # connections alone (most are; an orbit's chains alike)
            for (conn,) in unit:
                channel = board.single(conn)
                if channel is None:
                    return None, dropped
                out[conn] = channel
            continue
        done: list[tuple[list[Conn], dict[str, int], int]] = []
        for chain in unit:
            tbs = _chain_threadblocks(chain)
            channel = board.free_channel(chain, tbs)
            if channel is None:
                break
            board.place(chain, tbs, channel, 1)
            done.append((chain, tbs, channel))
        if len(done) == len(unit):
            for chain, _, channel in done:
                for conn in chain:
                    out[conn] = channel
            continue
        for chain, tbs, channel in done:
            board.place(chain, tbs, channel, -1)
        cut = len(unit[0]) // 2
        dropped.update((chain[cut - 1], chain[cut]) for chain in unit)
        heapq.heappush(heap, urgency([chain[:cut] for chain in unit]))
        heapq.heappush(heap, urgency([chain[cut:] for chain in unit]))
    return out, dropped


def _chain_threadblocks(chain: list[Conn]) -> dict[str, int]:
    """Thread blocks a chain of pairs takes per GPU: one at its first sender and one at
    each receiver (the pairs' receivers send the next connection in the same one)."""
    if len(chain) == 1:
        return {chain[0][0]: 1, chain[0][1]: 1}
    tbs: dict[str, int] = defaultdict(int)
    tbs[chain[0][0]] += 1
    for conn in chain:
        tbs[conn[1]] += 1
    return tbs


class _Board:
    """The channels :func:`_colour` has given so far: per pair of GPUs (one direction) the
    channels its connections take, per GPU its thread blocks on each channel, and, as bits,
    the channels where a GPU has ``max_tbs_per_channel`` already (a chain taking one
    thread block there, as most do at every GPU, is ruled out by a mask)."""

    def __init__(self, limits: MscclLimits) -> None:
        self.channels = limits.max_channels
        self.per_channel = limits.max_tbs_per_channel
        self.used: dict[tuple[str, str], int] = defaultdict(int)
        self.load: dict[str, list[int]] = defaultdict(lambda: [0] * self.channels)
        every = (1 << self.channels) - 1
        self.full: dict[str, int] = defaultdict(int if self.per_channel >= 1
                                                else lambda: every)

    def place(self, chain: list[Conn], tbs: dict[str, int], channel: int, sign: int
              ) -> None:
        """Give ``chain`` (taking ``tbs`` thread blocks per GPU) ``channel`` (``sign``
        1) or take it back (-1)."""
        bit = 1 << channel
        for conn in chain:
            self.used[conn[:2]] ^= bit
        for g, n in tbs.items():
            row = self.load[g]
            row[channel] += sign * n
            if row[channel] >= self.per_channel:
                self.full[g] |= bit
            else:
                self.full[g] &= ~bit

    def single(self, conn: Conn) -> int | None:
        """:meth:`free_channel` and :meth:`place` for a chain of one connection."""
        u, v, _ = conn
        pair = (u, v)
        free = ~(self.used[pair] | self.full[u] | self.full[v]) & ((1 << self.channels) - 1)
        if not free:
            return None
        bit = free & -free
        channel = bit.bit_length() - 1
        self.used[pair] |= bit
        for g in (u, v):
            row = self.load[g]
            row[channel] += 1
            if row[channel] >= self.per_channel:
                self.full[g] |= bit
        return channel

    def free_channel(self, chain: list[Conn], tbs: dict[str, int]) -> int | None:
        """The lowest channel no connection of ``chain``'s pairs of GPUs takes where every
        GPU of the chain stays within ``max_tbs_per_channel`` thread blocks (``tbs`` more
        each), or None (also where the chain passes one pair of GPUs twice)."""
        blocked = 0
        if len(chain) == 1:
            blocked = self.used[chain[0][:2]]
        else:
            pairs_of = {c[:2] for c in chain}
            if len(pairs_of) != len(chain):
                return None
            for p in pairs_of:
                blocked |= self.used[p]
        heavy = []
        for g, n in tbs.items():
            if n == 1:
                blocked |= self.full[g]
            else:
                heavy.append((self.load[g], self.per_channel - n))
        free = ~blocked & ((1 << self.channels) - 1)
        while free:
            channel = (free & -free).bit_length() - 1
            if all(row[channel] <= room for row, room in heavy):
                return channel
            free &= free - 1
        return None
