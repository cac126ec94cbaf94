"""A collective plan compiled to a program: one loop iteration's template, then unrolled.

Every tree edge of a :class:`~canopy.engine.model.plan.CollectivePlan` becomes one
connection per hop between compute nodes (GPUs store and forward; switches cut through
unless asked to store and forward); allreduce's reductions wait for their children and its
broadcasts for the reduction of their part, as the MSCCL export runs them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace
from fractions import Fraction
from itertools import chain
from operator import attrgetter
from typing import Any

import numpy as np

from canopy.engine.execution.kernel import FlatProgram
from canopy.engine.execution.program import (
    CUT_THROUGH,
    STORE_AND_FORWARD,
    Connection,
    Program,
    Send,
    check_switch_mode,
)
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.memo import RecentMemo
from canopy.engine.model.plan import (
    CollectivePlan,
    FlowTree,
)
from canopy.engine.model.topology import Topology

CHUNK_BYTES = 2 << 20                 # MSCCL Simple: 4 MiB buffer / 8 steps x 4 chunk steps


_ONE = Fraction(1)                    # a shared connection's weight


def _hops(path: tuple[str, ...], switches: frozenset[str], switch_mode: str
          ) -> list[tuple[str, ...]]:
    """The routes one tree edge's data takes, one connection each: the path cut at every
    compute node in between (GPUs store and forward) and, under store-and-forward
    switches, at every switch."""
    cut = [i for i in range(1, len(path) - 1)
           if path[i] not in switches or switch_mode == STORE_AND_FORWARD]
    bounds = [0] + cut + [len(path) - 1]
    return [path[a:b + 1] for a, b in zip(bounds, bounds[1:], strict=False)]


@dataclass
class IterationTemplate:
    """One loop iteration of a plan's program as slots, one per send, in the order of the
    iteration's sends (edge order, then hop): per slot its connection, its tree, its hop
    within its tree edge and that edge's hop count; ``src``/``dst`` are the slot pairs
    of the within-iteration dependencies (``dst`` starts once ``src`` is delivered)."""

    connections: list[Connection]
    conn: Any
    tree: Any
    hop: Any
    hops: Any
    src: Any
    dst: Any
    shares: list[Fraction]
    ordered: bool
    edge: Any           # per slot its tree edge (index over all trees' edges, in order)


def allreduce_parts(plan: CollectivePlan) -> tuple[list[FlowTree], list[FlowTree]]:
    """The reduce and broadcast trees of ``plan`` as the MSCCL export runs them
    (:mod:`canopy.engine.msccl.lowering`): every root's shard is cut at the common
    refinement of its reduce trees' and its broadcast trees' shares (each phase's trees
    in plan order, one after the other), and the broadcast of each part waits for the
    reduction of that part only (key ``("part", root, start)``), not for every
    reduction with the tree's key. Where both phases cut a shard alike (rings, Blink,
    reduce-scatter + allgather) this pairs the same trees as their keys; the allreduce
    LP's separate trees (ForestColl (arXiv:2402.06787) App. E) are cut into parts. Plans with one
    phase, and timetables (``ordered_links``), keep their trees and keys."""
    reducing, broadcasting, _ = _parts(plan)
    return reducing, broadcasting


def _parts(plan: CollectivePlan) -> tuple[list[FlowTree], list[FlowTree], list[int]]:
    """:func:`allreduce_parts` and per part the index of the tree of ``plan.trees`` it
    cuts."""
    if plan.ordered_links or not plan.reduce_trees or not plan.broadcast_trees:
        return (list(plan.reduce_trees), list(plan.broadcast_trees),
                list(range(len(plan.trees))))
    # Exact integers over the shares' common denominator: summing and comparing
    # Fractions would cost a gcd or cross products at every tree of the plan.
    phases = (plan.reduce_trees, plan.broadcast_trees)
    unit = math.lcm(*{t.share.denominator for phase in phases for t in phase})
    spans: list[list[tuple[int, int]]] = []      # per phase, per tree: its part of the shard
    cuts: dict[str, set[int]] = {}
    for phase in phases:
        start: dict[str, int] = {}
        spans.append([])
        for tree in phase:
            lo = start.get(tree.root, 0)
            hi = start[tree.root] = lo + tree.share.numerator * (unit // tree.share.denominator)
            cuts.setdefault(tree.root, set()).add(hi)
            spans[-1].append((lo, hi))
    out: list[list[FlowTree]] = []
    sources: list[int] = []
    index = 0
    for phase, phase_spans in zip(phases, spans, strict=True):
        parts: list[FlowTree] = []
        for tree, (lo, hi) in zip(phase, phase_spans, strict=True):
            bounds = [lo, *sorted(c for c in cuts[tree.root] if lo < c < hi), hi]
            sources.extend([index] * (len(bounds) - 1))
            index += 1
            parts.extend(replace(tree, key=("part", tree.root, Fraction(a, unit)),
                                 share=Fraction(b - a, unit))
                         for a, b in zip(bounds, bounds[1:], strict=False))
        out.append(parts)
    return out[0], out[1], sources


def plan_template(plan: CollectivePlan, switches: frozenset[str], switch_mode: str
                  ) -> IterationTemplate:
    """The connections and the within-iteration order and dependencies of ``plan`` (see
    :func:`plan_program`). What the trees alone decide (:class:`_Frame`) is worked out
    once for every connection layout of them (:func:`tree_memo`); a layout adds its
    connections and its thread blocks' pairs. Python work per tree edge is kept small: on
    1024 GPUs a ring plan has 8 million.

    Connections are numbered in the order they are first used, tree edges (as run) and
    their hops in order: an edge without a channel gets one per hop, weighted by its
    tree's share (unless the plan is a timetable); the others one per (channel, hop),
    shared by every edge with that channel over that hop (a timetable's edges without a
    channel: one per hop)."""
    check_switch_mode(switch_mode)
    frame = _frame_of(plan, switches, switch_mode)
    trees = plan.trees
    channels = list(map(_CHANNEL, chain.from_iterable(trees[s].edges for s in frame.sources)))
    groups = _numbers(channels)
    # An ordered plan (a TACOS timetable) sends over each route on one connection, its
    # reduce-scatter's chunks and then its allgather's, in the timetable's order: a TACOS
    # link carries one chunk at a time (Won et al., "TACOS: Topology-Aware Collective
    # Algorithm Synthesizer for Distributed Machine Learning", arXiv:2304.05301, §IV-B).
    # A connection per phase would let an allgather chunk share the link with a
    # reduce-scatter chunk the timetable sends first, and delay the reduction waiting for
    # it. Elsewhere an edge without a channel has connections of its own, never shared.
    if not plan.ordered_links and None in groups:
        groups[None] = -1
    group = np.fromiter(map(groups.__getitem__, channels), dtype=np.int64,
                        count=len(channels))
    slot_group = np.repeat(group, frame.hops_of)       # per slot, tree edges in order
    width = len(slot_group)
    # one key per connection: (channel group, hop), or the slot itself for one of its own
    key = np.where(slot_group >= 0, slot_group * len(frame.hop_routes) + frame.flat_hop,
                   len(groups) * len(frame.hop_routes) + np.arange(width, dtype=np.int64))
    _, first_use, inverse = np.unique(key, return_index=True, return_inverse=True)
    made = np.argsort(first_use)
    number = np.empty(len(made), dtype=np.int64)
    number[made] = np.arange(len(made), dtype=np.int64)
    opened = first_use[made]
    connections = [Connection(frame.hop_routes[h], frame.weights[t] if g < 0 else _ONE)
                   for h, t, g in zip(frame.flat_hop[opened].tolist(),
                                      frame.flat_tree[opened].tolist(),
                                      slot_group[opened].tolist(), strict=True)]
    conn = number[inverse.reshape(-1)][frame.flat_slot]
    src, dst = frame.src, frame.dst
    if plan.paired:
        dep_from: list[int] = []
        dep_to: list[int] = []
        place = np.empty(len(frame.order), dtype=np.int64)  # flat edge -> its place in order
        place[frame.order] = np.arange(len(frame.order), dtype=np.int64)
        at = place.tolist()
        for received, sent, earlier in _paired_edges(plan, frame.sources, channels):
            last = max(received, key=at.__getitem__)
            for y in [last, *earlier]:
                dep_from.extend([y] * len(sent))
                dep_to.extend(sent)
        ys = np.array(dep_from, dtype=np.int64)
        xs = np.array(dep_to, dtype=np.int64)
        src = np.concatenate([src, frame.first[ys] + frame.hops_of[ys] - 1])
        dst = np.concatenate([dst, frame.first[xs]])
    return IterationTemplate(connections, conn, frame.tree, frame.hop, frame.hops,
                             src, dst, frame.shares, plan.ordered_links, frame.edge)


@dataclass(frozen=True)
class _Frame:
    """What a plan's iteration template takes from its trees alone, the same for every
    connection layout of them (:func:`plan_template`): the trees as run
    (:func:`allreduce_parts`), each as the index of the plan's tree it cuts
    (``sources``) with its connections' weight (its share over the smallest); every tree
    edge's hops (tree edges flat, trees in that order, each edge's hops in order:
    ``flat_hop`` numbers each hop's route in ``hop_routes``, ``flat_tree`` gives its
    tree); the edges' order in the iteration; per slot (edges' hops in that order) its
    tree, hop, hop count, edge and place among the flat hops (``flat_slot``); ``first``
    and ``hops_of`` give per edge its first slot and its hops; ``src``/``dst`` the
    within-iteration dependencies (thread blocks' pairs excepted); ``stages``, the
    pipeline's stages (:func:`pipeline_stages`)."""

    sources: list[int]
    weights: list[Fraction]
    shares: list[Fraction]
    hop_routes: list[tuple[str, ...]]
    flat_hop: Any
    flat_tree: Any
    order: Any
    first: Any
    hops_of: Any
    tree: Any
    hop: Any
    hops: Any
    edge: Any
    flat_slot: Any
    src: Any
    dst: Any
    stages: int


def _frame_of(plan: CollectivePlan, switches: frozenset[str], switch_mode: str) -> _Frame:
    """:func:`_frame` of ``plan``, kept with the facts of its trees (:func:`tree_memo`)."""
    frame: _Frame = tree_memo(plan, ("frame", switches, switch_mode),
                              lambda: _frame(plan, switches, switch_mode))
    return frame


def _frame(plan: CollectivePlan, switches: frozenset[str], switch_mode: str) -> _Frame:
    """:class:`_Frame` of ``plan``'s trees. Each edge is read once (its nodes, route and
    priority as integers); the rest is NumPy over all edges at once, as a ring plan on
    64 GPUs has 64,512 of them."""
    reducing, broadcasting, sources = _parts(plan)
    trees = [*reducing, *broadcasting]
    edges = list(chain.from_iterable(tree.edges for tree in trees))
    count = len(edges)
    sizes = np.array([len(t.edges) for t in trees], dtype=np.int64)
    tree_of = np.repeat(np.arange(len(trees), dtype=np.int64), sizes)
    # Routes: each distinct path cut into hops once, each distinct hop numbered.
    paths = list(map(_PATH, edges))
    path_id = _numbers(paths)
    path_of = np.fromiter(map(path_id.__getitem__, paths), dtype=np.int64, count=count)
    hop_id: dict[tuple[str, ...], int] = {}
    path_hops = [[hop_id.setdefault(h, len(hop_id)) for h in _hops(p, switches, switch_mode)]
                 for p in path_id]
    path_len = np.array([len(h) for h in path_hops], dtype=np.int64)
    hops_of = path_len[path_of]
    flat_first = np.zeros(count, dtype=np.int64)      # per edge: its first flat hop
    np.cumsum(hops_of[:-1], out=flat_first[1:])
    path_first = np.zeros(len(path_hops), dtype=np.int64)
    np.cumsum(path_len[:-1], out=path_first[1:])
    total = int(hops_of.sum())
    flat_hop = np.fromiter((h for hops in path_hops for h in hops), dtype=np.int64,
                           count=int(path_len.sum()))[
        np.repeat(path_first[path_of] - flat_first, hops_of)
        + np.arange(total, dtype=np.int64)]
    # Each edge's nodes as integers; ``up`` is the edge into its parent (-1 at the root).
    parents, children = list(map(_PARENT, edges)), list(map(_CHILD, edges))
    node = _numbers([*parents, *children, *(t.root for t in trees)])
    parent = np.fromiter(map(node.__getitem__, parents), dtype=np.int64, count=count)
    child = np.fromiter(map(node.__getitem__, children), dtype=np.int64, count=count)
    roots = np.array([node[t.root] for t in trees], dtype=np.int64)
    reduce = np.array([t.reduce for t in trees], dtype=bool)[tree_of]
    at_root = parent == roots[tree_of]
    up = _edges_up(tree_of * len(node) + parent, tree_of * len(node) + child)
    if np.any((up < 0) & ~at_root):
        raise ScheduleError("a tree edge leaves a node its tree does not reach first.")
    depth = _sums_up(up, np.ones(count, dtype=np.int64)) - 1    # per edge: edges above
    # Per tree edge its order key (phase, step, priority, tree) or, ordered, (phase,
    # priority, tree): a broadcast's step is its parent's depth, a reduction's the
    # height of its child's subtree (:func:`canopy.engine.model.plan.tree_levels`).
    priorities = list(map(_PRIORITY, edges))
    rank = _ranks(priorities)
    priority_of = np.fromiter(map(rank.__getitem__, map(id, priorities)), dtype=np.int64,
                              count=count)
    keys = [np.arange(count, dtype=np.int64), tree_of, priority_of]
    if not plan.ordered_links:
        keys.append(np.where(reduce, _heights(up, depth, reduce), depth))
    keys.append((tree_of >= len(reducing)).astype(np.int64))
    order = np.lexsort(keys)
    # Dependencies between tree edges: a reduction waits for every edge into its child,
    # a broadcast for the edge into its parent (pairs by tree, then waiting edge, then
    # edge waited for); then a key's broadcast leaves its root once the key's reduction
    # into it arrived (by broadcast edge, then reduction edge).
    below = np.nonzero(reduce & (up >= 0))[0]
    after = np.nonzero(~reduce & ~at_root)[0]
    dep_from = np.concatenate([below, up[after]])
    dep_to = np.concatenate([up[below], after])
    pairs = np.lexsort((dep_from, dep_to))
    key_id: dict[Hashable, int] = {}
    key_of = np.array([key_id.setdefault(t.key, len(key_id)) for t in trees],
                      dtype=np.int64)[tree_of]
    done_from, done_to = _joined(np.nonzero(reduce & at_root)[0],
                                 np.nonzero(~reduce & at_root)[0], key_of, len(key_id))
    ys = np.concatenate([dep_from[pairs], done_from])
    xs = np.concatenate([dep_to[pairs], done_to])
    # Slots: the edges' hops in that order.
    hops = hops_of[order]
    begin = np.zeros(count, dtype=np.int64)     # first slot of each edge, in order
    begin[1:] = np.cumsum(hops)[:-1]
    first = np.empty(count, dtype=np.int64)     # flat edge -> its first slot
    first[order] = begin
    slot_hop = np.arange(total, dtype=np.int64) - np.repeat(begin, hops)
    inner = np.nonzero(slot_hop > 0)[0]
    src = np.concatenate([inner - 1, first[ys] + hops_of[ys] - 1])
    dst = np.concatenate([inner, first[xs]])
    slot_edge = order.repeat(hops)
    smallest = min(t.share for t in trees)
    reach = _sums_up(up, hops_of)           # per edge: hops from its root to its receiver
    broadcast = tree_of >= len(reducing)
    stages = sum(int(reach[part].max(initial=0)) for part in (~broadcast, broadcast))
    return _Frame(sources, [t.share / smallest for t in trees], [t.share for t in trees],
                  list(hop_id), flat_hop, tree_of.repeat(hops_of), order, first, hops_of,
                  tree_of[order].repeat(hops), slot_hop, np.repeat(hops, hops), slot_edge,
                  flat_first[slot_edge] + slot_hop, src, dst, stages)


_PATH, _PARENT, _CHILD = attrgetter("path"), attrgetter("parent"), attrgetter("child")


_PRIORITY, _CHANNEL = attrgetter("priority"), attrgetter("channel")


def _numbers(values: list[Any]) -> dict[Any, int]:
    """Per distinct value its number, first seen first."""
    return {v: i for i, v in enumerate(dict.fromkeys(values))}


def _edges_up(parent: Any, child: Any) -> Any:
    """Per edge (codes of its tree and parent, its tree and child) the edge whose child
    is its parent, or -1."""
    if len(child) == 0:
        return np.zeros(0, dtype=np.int64)
    by_child = np.argsort(child, kind="stable")
    ordered = child[by_child]
    at = np.minimum(np.searchsorted(ordered, parent), len(child) - 1)
    return np.where(ordered[at] == parent, by_child[at], -1)


def _sums_up(up: Any, value: Any) -> Any:
    """Per edge the sum of ``value`` over it and every edge above it (``up`` followed to
    -1), by pointer jumping: each round doubles how far every edge has summed."""
    total = value.copy()
    step = up.copy()
    for _ in range(max(len(up), 1).bit_length() + 1):
        live = np.nonzero(step >= 0)[0]
        if len(live) == 0:
            return total
        total[live] += total[step[live]]
        step[live] = step[step[live]]
    raise ScheduleError("a tree's edges form a cycle.")


def _heights(up: Any, depth: Any, reduce: Any) -> Any:
    """Per edge of a reduce tree the height of its child's subtree (0 at a leaf), deepest
    edges first: each raises the edge above it to its own height plus one."""
    height = np.zeros(len(up), dtype=np.int64)
    inner = np.nonzero(reduce & (up >= 0))[0]
    inner = inner[np.argsort(-depth[inner], kind="stable")]
    levels = np.flatnonzero(np.diff(depth[inner])) + 1
    for part in np.split(inner, levels):
        np.maximum.at(height, up[part], height[part] + 1)
    return height


def _joined(done: Any, leaving: Any, key_of: Any, keys: int) -> tuple[Any, Any]:
    """The pairs (d, x) of reduction edges ``done`` and broadcast edges ``leaving`` whose
    trees have one key, by x then d (both given in ascending order)."""
    grouped = done[np.argsort(key_of[done], kind="stable")]
    per_key = np.bincount(key_of[done], minlength=keys)
    start = np.zeros(keys, dtype=np.int64)
    np.cumsum(per_key[:-1], out=start[1:])
    wanted = key_of[leaving]
    counts = per_key[wanted]
    offsets = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(
        np.cumsum(counts) - counts, counts)
    return grouped[np.repeat(start[wanted], counts) + offsets], np.repeat(leaving, counts)


def _ranks(priorities: list[Fraction]) -> dict[int, int]:
    """Per priority object (by id) the rank of its value among the distinct values.
    Ranked through the objects' ids, as edges share a few priority objects (the default,
    a timetable's ticks), and by exact integers over their common denominator: hashing
    and comparing Fractions costs a modular inverse and cross products each (a TACOS
    timetable at 64 GPUs has about 1,400 distinct ticks), unless that denominator is
    large."""
    distinct = dict(zip(map(id, priorities), priorities, strict=True))
    common = math.lcm(*{p.denominator for p in distinct.values()})
    if common.bit_length() > 256:
        value_rank = {v: i for i, v in enumerate(sorted(set(distinct.values())))}
        return {i: value_rank[p] for i, p in distinct.items()}
    scaled = {i: p.numerator * (common // p.denominator) for i, p in distinct.items()}
    order = {v: i for i, v in enumerate(sorted(set(scaled.values())))}
    return {i: order[v] for i, v in scaled.items()}


def _paired_edges(plan: CollectivePlan, sources: list[int], channels: list[Hashable]
                  ) -> list[tuple[list[int], list[int], list[int]]]:
    """Per thread block of ``plan.paired`` (receive peer p, GPU v, send peer w, channel c),
    the flat indices of the tree edges it receives (p -> v on c) and sends (v -> w on c),
    and the reductions' receives its receives wait for (:func:`_reduction_chains`): every
    send waits for the last of its receives in the iteration's order, as the thread block
    runs its receives before its sends, and for those. The trees as run are the plan's
    trees ``sources`` (:func:`_parts`), their edges' ``channels`` flat."""
    trees = plan.trees
    senders: list[str] = []
    receivers: list[str] = []
    for source in sources:
        tree = trees[source]
        parents, children = map(_PARENT, tree.edges), map(_CHILD, tree.edges)
        senders.extend(children if tree.reduce else parents)
        receivers.extend(parents if tree.reduce else children)
    # the edges over each (sender, receiver, channel), in order
    keys = list(zip(senders, receivers, channels, strict=True))
    number = _numbers(keys)
    ids = np.fromiter(map(number.__getitem__, keys), dtype=np.int64, count=len(keys))
    by_key = np.argsort(ids, kind="stable").tolist()
    bounds = [0, *np.cumsum(np.bincount(ids, minlength=len(number))).tolist()]
    # a reduction's receives earlier in its chain: the same for every layout of the trees
    # with these accumulation orders
    before: dict[int, list[int]] = tree_memo(
        plan, ("chains", plan.compute_nodes, tuple(t.accumulation for t in plan.reduce_trees)),
        lambda: _chains_before(plan, sources))
    out = []
    for p, v, w, c in plan.paired:
        into, onward = number.get((p, v, c)), number.get((v, w, c))
        if into is not None and onward is not None:
            received = by_key[bounds[into]:bounds[into + 1]]
            sent = by_key[bounds[onward]:bounds[onward + 1]]
            earlier = sorted({x for y in received for x in before.get(y, [])})
            out.append((received, sent, earlier))
    return out


def _chains_before(plan: CollectivePlan, sources: list[int]) -> dict[int, list[int]]:
    """:func:`_reduction_chains` of every reduce tree as run (the plan's trees
    ``sources``), by flat edge index."""
    rank = {x: i for i, x in enumerate(plan.compute_nodes)}
    before: dict[int, list[int]] = {}
    base = 0
    for source in sources:
        tree = plan.trees[source]
        if tree.reduce:
            before.update(_reduction_chains(tree, rank, base))
        base += len(tree.edges)
    return before


def _reduction_chains(tree: FlowTree, rank: dict[str, int], base: int) -> dict[int, list[int]]:
    """Per edge of a reduce tree (flat index from ``base``), the edges into the same node
    that its receive waits for: the MSCCL export accumulates a node's children in the
    tree's accumulation order, then shallow first (height, then rank;
    :mod:`canopy.engine.msccl.lowering`), each receive after the one before it into the
    same slot, so a thread block's receive, and the sends it runs after it, wait for those
    arrivals too."""
    height: dict[str, int] = {}
    for e in reversed(tree.edges):
        height.setdefault(e.child, 0)
        height[e.parent] = max(height.get(e.parent, 0), height[e.child] + 1)
    into: dict[str, list[tuple[int, int, int, int]]] = {}
    for ei, e in enumerate(tree.edges):
        added = tree.accumulation[ei] if tree.accumulation else 0
        into.setdefault(e.parent, []).append((added, height[e.child], rank[e.child],
                                              base + ei))
    out: dict[int, list[int]] = {}
    for kids in into.values():
        kids.sort()
        for j, kid in enumerate(kids):
            out[kid[3]] = [k[3] for k in kids[:j]]
    return out


def expand_template(template: IterationTemplate, size: Fraction, pieces: int) -> FlatProgram:
    """The sends of ``pieces`` loop iterations of ``template`` on ``size`` bytes, in the
    order (piece, slot) or, for ordered plans, (edge order, piece, hop). Trees of equal
    shares send equal amounts: each is worked out once."""
    width = len(template.conn)
    total = pieces * width
    # The dependencies sorted by (src, dst): one iteration's pairs sorted once, which in
    # (piece, slot) order keeps every piece's sends after the last piece's.
    pair = np.lexsort((template.dst, template.src))
    senders, waiting = template.src[pair], template.dst[pair]
    distinct: dict[Fraction, int] = {}
    amount_index = np.array([distinct.setdefault(share, len(distinct))
                             for share in template.shares], dtype=np.int64)
    amounts = [share * size / pieces for share in distinct]
    dep_ptr = np.zeros(total + 1, dtype=np.int64)
    if not template.ordered:
        # piece p's slot j is send p * width + j: every array repeats one iteration's
        start = np.arange(pieces, dtype=np.int64)[:, None] * width
        np.cumsum(np.tile(np.bincount(senders, minlength=width), pieces), out=dep_ptr[1:])
        return FlatProgram(template.connections, np.tile(template.conn, pieces),
                           np.tile(amount_index[template.tree], pieces), amounts,
                           np.tile(np.bincount(waiting, minlength=width), pieces), dep_ptr,
                           (start + waiting[None, :]).ravel(),
                           np.repeat(np.arange(pieces, dtype=np.int64), width))
    piece = np.arange(pieces, dtype=np.int64)[:, None]
    index = pieces * (np.arange(width, dtype=np.int64) - template.hop)[None, :] \
        + template.hop[None, :] + piece * template.hops[None, :]
    conn = np.empty(total, dtype=np.int64)
    conn[index] = template.conn[None, :]
    amount_of = np.empty(total, dtype=np.int64)
    amount_of[index] = amount_index[template.tree][None, :]
    iteration = np.empty(total, dtype=np.int64)
    iteration[index] = piece
    # An ordered plan's sends interleave the pieces, but a send's dependents (all of its
    # piece) still come in the order of their slots (an edge's sends are consecutive, its
    # pieces in order): each pair goes to its sender's place plus its rank among that
    # slot's pairs.
    src_all = index[:, senders].ravel()
    dst_all = index[:, waiting].ravel()
    np.cumsum(np.bincount(src_all, minlength=total), out=dep_ptr[1:])
    rank = np.arange(len(pair), dtype=np.int64) - np.searchsorted(senders, senders)
    dep_idx = np.empty(len(dst_all), dtype=np.int64)
    dep_idx[dep_ptr[src_all] + np.tile(rank, pieces)] = dst_all
    return FlatProgram(template.connections, conn, amount_of, amounts,
                       np.bincount(dst_all, minlength=total), dep_ptr, dep_idx, iteration)


def plan_program(plan: CollectivePlan, size: Fraction | int, pieces: int,
                 switches: frozenset[str] = frozenset(),
                 switch_mode: str = CUT_THROUGH) -> Program:
    """The program that runs ``plan`` on a message of ``size`` bytes in ``pieces``
    loop iterations.

    Connections: a tree edge whose :class:`~canopy.engine.model.plan.FlowEdge` names a
    ``channel`` uses that channel's connection (a ring hop carries every chain of its
    ring, in order); otherwise every tree edge has a connection of its own, weighted by
    the tree's share (a ForestColl tree of multiplicity m streams on m channels); an
    ``ordered_links`` plan (a TACOS timetable) has one connection per route for both its
    phases, as a TACOS link carries one chunk at a time. Sends
    on a shared connection go in the order (piece, phase, step within the piece, plan
    priority), or, for ``ordered_links`` plans (a TACOS timetable), (phase, priority,
    piece). Piece p of a tree edge waits for piece p at its sender: the parent's edge
    (broadcast) or all edges into the sender (reduce); allreduce's broadcast of a key
    waits for that key's reduction into its root. A thread block of ``plan.paired``
    runs its receives before its sends, so each of its sends also waits for its last
    receive of the piece. (The simulator builds the same sends as flat arrays, from one
    iteration's template, without this object.)
    """
    flat = expand_template(plan_template(plan, switches, switch_mode), Fraction(size), pieces)
    program = Program(list(flat.connections))
    conn, dep_ptr, dep_idx = flat.conn.tolist(), flat.dep_ptr.tolist(), flat.dep_idx.tolist()
    after: list[list[int]] = [[] for _ in conn]
    for s in range(len(conn)):
        for t in dep_idx[dep_ptr[s]:dep_ptr[s + 1]]:
            after[t].append(s)
    program.sends = [Send(c, flat.amounts[a], tuple(w))
                     for c, a, w in zip(conn, flat.amount_of.tolist(), after, strict=True)]
    program.iteration = flat.iteration.tolist()
    return program


_FACTS: RecentMemo[Any] = RecentMemo(16)


def plan_memo(plan: CollectivePlan, key: Hashable, compute: Callable[[], Any]) -> Any:
    """``compute()`` once per plan and ``key``, for the last 16 plans asked about that are
    still alive: a comparison times one plan at every size and depth, and on 1024 GPUs
    walking its millions of tree edges (template, stages, link loads) costs seconds; the
    runtime choice times each of up to 14 layouts at several depths and sizes, in turns."""
    return _FACTS.get(plan, key, compute)


SHAPED_EDGES = 50_000      # plans of up to this many tree edges share their trees' facts


def tree_memo(plan: CollectivePlan, key: Hashable, compute: Callable[[], Any]) -> Any:
    """:func:`plan_memo` for a fact of ``plan``'s trees alone, not of its edges' channels
    nor its thread blocks' pairs (a template's frame, link loads, pipeline stages, a
    rotation's image of the edges): computed once for every plan with equal trees, as the
    connection layouts of one schedule are (:class:`_Shape`), for the last SHAPES_KEPT
    such facts. Plans of more than SHAPED_EDGES tree edges keep theirs per plan: matching
    their trees would cost as much as the fact; so do timetables (:func:`_shape`)."""
    def shared() -> Any:
        shape = plan_memo(plan, ("shape",), lambda: _shape(plan))
        if shape is None:
            return compute()
        found = _BY_SHAPE.get((shape, key))
        if found is None:
            if len(_BY_SHAPE) >= SHAPES_KEPT:
                _BY_SHAPE.pop(next(iter(_BY_SHAPE)))
            found = _BY_SHAPE[(shape, key)] = (compute(),)
        return found[0]

    return plan_memo(plan, key, shared)


def _shape(plan: CollectivePlan) -> _Shape | None:
    """``plan``'s :class:`_Shape`, the one instance kept for equal trees (so the facts'
    keys compare by identity), or None past SHAPED_EDGES tree edges or for a timetable
    (``ordered_links``): TACOS makes one per message size, each with ticks of its own, and
    none is laid out anew (:func:`canopy.engine.msccl.connections.iter_layouts` runs it as
    built), so matching its trees against other plans' would find none."""
    if plan.ordered_links or sum(len(t.edges) for t in plan.trees) > SHAPED_EDGES:
        return None
    shape = _Shape(plan)
    known = _SHAPES.get(shape)
    if known is None:
        if len(_SHAPES) >= SHAPES_KEPT:
            _SHAPES.pop(next(iter(_SHAPES)))
        known = _SHAPES[shape] = shape
    return known


class _Shape:
    """A plan's trees as the facts of :func:`tree_memo` read them: per tree its key, root,
    share, direction and edges (parent, child, route, priority), the phases' sizes and
    whether it is a timetable; fractions as (numerator, denominator), compared as
    integers. Hashed once; plans with equal shapes have equal facts."""

    __slots__ = ("trees", "hash")

    def __init__(self, plan: CollectivePlan) -> None:
        # (edges share a few priority objects: each one's ratio read once, by its id)
        ratio = {id(p): p.as_integer_ratio()
                 for p in {id(e.priority): e.priority
                           for t in plan.trees for e in t.edges}.values()}
        self.trees = (plan.ordered_links, len(plan.reduce_trees),
                      tuple((t.key, t.root, t.share.as_integer_ratio(), t.reduce,
                             tuple((e.parent, e.child, e.path, ratio[id(e.priority)])
                                   for e in t.edges))
                            for t in plan.trees))
        self.hash = hash(self.trees)

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Shape) and (
            self is other or (self.hash == other.hash and self.trees == other.trees))


SHAPES_KEPT = 16


_SHAPES: dict[_Shape, _Shape] = {}


_BY_SHAPE: dict[tuple[_Shape, Hashable], tuple[Any]] = {}


def min_pieces(plan: CollectivePlan, size: Fraction | int, chunk_bytes: int | None = CHUNK_BYTES
               ) -> int:
    """The fewest loop iterations the protocol allows: the runtime walks every XML chunk
    (the smallest tree's share, one chunk) in iterations of at most ``chunk_bytes``
    (msccl's interpreter: ``sizePerMscclChunk = count / nchunksPerLoop``, one chunk size
    per iteration; a step of ``cnt`` chunks moves ``cnt`` such slices at once), as
    :func:`canopy.engine.msccl.timing.runtime_iterations` counts an XML's."""
    if chunk_bytes is None:
        return 1
    smallest = min(t.share for t in plan.trees)
    return max(1, math.ceil(smallest * Fraction(size) / chunk_bytes))


def pipeline_stages(topology: Topology, plan: CollectivePlan,
                    switch_mode: str = CUT_THROUGH) -> int:
    """The longest chain of sends one piece goes through: tree edges from root to leaf
    (reduce then broadcast for allreduce); every link under store-and-forward switches.
    Read from the template's frame (:class:`_Frame`), worked out once with it."""
    check_switch_mode(switch_mode)
    return _frame_of(plan, frozenset(topology.switch_nodes()), switch_mode).stages


def sends_per_piece(plan: CollectivePlan, switches: frozenset[str] = frozenset(),
                    switch_mode: str = CUT_THROUGH) -> int:
    """How many sends one loop iteration of ``plan`` has (one per connection crossed)."""
    counts: dict[tuple[str, ...], int] = {}
    total = 0
    for tree in plan.trees:
        for e in tree.edges:
            if e.path not in counts:
                counts[e.path] = len(_hops(e.path, switches, switch_mode))
            total += counts[e.path]
    return total
