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
from canopy.engine.model.memo import RecentMemo
from canopy.engine.model.plan import (
    CollectivePlan,
    FlowTree,
    tree_levels,
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
    1024 GPUs a ring plan has 8 million."""
    check_switch_mode(switch_mode)
    frame: _Frame = tree_memo(plan, ("frame", switches, switch_mode),
                              lambda: _frame(plan, switches, switch_mode))
    program = Program()
    conns: dict[Hashable, int] = {}
    shared: dict[Hashable, list[int]] = {}
    edge_conns: list[list[int]] = []     # per tree edge (flat, trees as run) its connections
    routes = iter(frame.routes)
    for source, weight in zip(frame.sources, frame.weights, strict=True):
        for e in plan.trees[source].edges:
            hops = next(routes)
            if e.channel is None and not plan.ordered_links:
                # a connection of its own per hop, never shared.
                edge_conns.append([program.connect(hop, weight) for hop in hops])
                continue
            # An ordered plan (a TACOS timetable) sends over each route on one connection,
            # its reduce-scatter's chunks and then its allgather's, in the timetable's
            # order: a TACOS link carries one chunk at a time (Won et al., "TACOS:
            # Topology-Aware Collective Algorithm Synthesizer for Distributed Machine
            # Learning", arXiv:2304.05301, §IV-B). A connection per phase would let an
            # allgather chunk share the link with a reduce-scatter chunk the timetable
            # sends first, and delay the reduction waiting for it.
            group = ("channel", e.channel) if e.channel is not None else ("route",)
            ids = shared.get((group, e.path))
            if ids is None:
                ids = []
                for hop in hops:
                    ckey: Hashable = (*group, hop)
                    if ckey not in conns:
                        conns[ckey] = program.connect(hop, _ONE)
                    ids.append(conns[ckey])
                shared[(group, e.path)] = ids
            edge_conns.append(ids)
    order = frame.order
    conn = np.fromiter((c for x in order.tolist() for c in edge_conns[x]), dtype=np.int64,
                       count=len(frame.hop))
    src, dst = frame.src, frame.dst
    if plan.paired:
        dep_from: list[int] = []
        dep_to: list[int] = []
        place = np.empty(len(order), dtype=np.int64)    # flat edge -> its place in the order
        place[order] = np.arange(len(order), dtype=np.int64)
        reducing, broadcasting = allreduce_parts(plan)
        for received, sent, earlier in _paired_edges(plan, [*reducing, *broadcasting]):
            last = max(received, key=lambda x: place[x])
            for y in [last, *earlier]:
                dep_from.extend([y] * len(sent))
                dep_to.extend(sent)
        ys = np.array(dep_from, dtype=np.int64)
        xs = np.array(dep_to, dtype=np.int64)
        src = np.concatenate([src, frame.first[ys] + frame.hops_of[ys] - 1])
        dst = np.concatenate([dst, frame.first[xs]])
    return IterationTemplate(program.connections, conn, frame.tree, frame.hop, frame.hops,
                             src, dst, frame.shares, plan.ordered_links, frame.edge)


@dataclass(frozen=True)
class _Frame:
    """What a plan's iteration template takes from its trees alone, the same for every
    connection layout of them (:func:`plan_template`): the trees as run
    (:func:`allreduce_parts`), each as the index of the plan's tree it cuts
    (``sources``) with its connections' weight (its share over the smallest), every tree
    edge's hops (flat, trees in that order), the edges' order in the iteration, and
    per slot (edges' hops in that order) its tree, hop, hop count and edge; ``first``
    and ``hops_of`` give per edge its first slot and its hops; ``src``/``dst`` the
    within-iteration dependencies (thread blocks' pairs excepted)."""

    sources: list[int]
    weights: list[Fraction]
    shares: list[Fraction]
    routes: list[list[tuple[str, ...]]]
    order: Any
    first: Any
    hops_of: Any
    tree: Any
    hop: Any
    hops: Any
    edge: Any
    src: Any
    dst: Any


def _frame(plan: CollectivePlan, switches: frozenset[str], switch_mode: str) -> _Frame:
    """:class:`_Frame` of ``plan``'s trees."""
    reducing, broadcasting, sources = _parts(plan)
    trees = [*reducing, *broadcasting]
    smallest = min(t.share for t in trees)
    nphase = len(reducing)
    hop_cache: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    routes: list[list[tuple[str, ...]]] = []
    # Per tree edge (in one flat list, trees in order): its order key (phase, step,
    # priority, tree) or, ordered, (phase, priority, tree).
    steps: list[int] = []
    priorities: list[Fraction] = []
    dep_from: list[int] = []          # x's first hop waits for the last hop of y:
    dep_to: list[int] = []            # pairs (y, x) of flat edge indices
    root_done: dict[Hashable, list[int]] = {}
    base = 0
    for tree in trees:
        for e in tree.edges:
            found = hop_cache.get(e.path)
            if found is None:
                found = hop_cache[e.path] = _hops(e.path, switches, switch_mode)
            routes.append(found)
        if not plan.ordered_links:
            steps.extend(tree_levels(tree))
        priorities.extend(e.priority for e in tree.edges)
        # Dependencies between tree edges (same piece).
        if tree.reduce:
            # Child -> parent: waits for everything from the child's children.
            children: dict[str, list[int]] = {}
            for ei, e in enumerate(tree.edges):
                children.setdefault(e.parent, []).append(base + ei)
            for ei, e in enumerate(tree.edges):
                below = children.get(e.child)
                if below:
                    dep_from.extend(below)
                    dep_to.extend([base + ei] * len(below))
                if e.parent == tree.root:
                    root_done.setdefault(tree.key, []).append(base + ei)
        else:
            into = {e.child: base + ei for ei, e in enumerate(tree.edges)}
            for ei, e in enumerate(tree.edges):
                if e.parent != tree.root:
                    dep_from.append(into[e.parent])
                    dep_to.append(base + ei)
        base += len(tree.edges)
    # Allreduce: a key's broadcast leaves its root once the key's reduction arrived.
    base = 0
    for tree in trees:
        if not tree.reduce:
            for ei, e in enumerate(tree.edges):
                if e.parent == tree.root:
                    done = root_done.get(tree.key, [])
                    dep_from.extend(done)
                    dep_to.extend([base + ei] * len(done))
        base += len(tree.edges)
    count = len(routes)
    sizes = np.array([len(t.edges) for t in trees], dtype=np.int64)
    tree_of = np.repeat(np.arange(len(trees), dtype=np.int64), sizes)
    phase_of = (tree_of >= nphase).astype(np.int64)
    rank = _ranks(priorities)
    priority_of = np.fromiter((rank[id(p)] for p in priorities), dtype=np.int64,
                              count=len(priorities))
    keys = [np.arange(count, dtype=np.int64), tree_of, priority_of]
    if not plan.ordered_links:
        keys.append(np.array(steps, dtype=np.int64))
    keys.append(phase_of)
    order = np.lexsort(keys)
    # Slots: the edges' hops in that order.
    hops_of = np.array([len(r) for r in routes], dtype=np.int64)
    hops = hops_of[order]
    begin = np.zeros(count, dtype=np.int64)     # first slot of each edge, in order
    begin[1:] = np.cumsum(hops)[:-1]
    first = np.empty(count, dtype=np.int64)     # flat edge -> its first slot
    first[order] = begin
    width = int(hops.sum())
    slot_hop = np.arange(width, dtype=np.int64) - np.repeat(begin, hops)
    chain = np.nonzero(slot_hop > 0)[0]
    ys = np.array(dep_from, dtype=np.int64)
    xs = np.array(dep_to, dtype=np.int64)
    src = np.concatenate([chain - 1, first[ys] + hops_of[ys] - 1])
    dst = np.concatenate([chain, first[xs]])
    return _Frame(sources, [t.share / smallest for t in trees], [t.share for t in trees],
                  routes, order, first, hops_of, tree_of[order].repeat(hops), slot_hop,
                  np.repeat(hops, hops), order.repeat(hops), src, dst)


def _ranks(priorities: list[Fraction]) -> dict[int, int]:
    """Per priority object (by id) the rank of its value among the distinct values.
    Ranked through the objects' ids, as edges share a few priority objects (the default,
    a timetable's ticks), and by exact integers over their common denominator: hashing
    and comparing Fractions costs a modular inverse and cross products each (a TACOS
    timetable at 64 GPUs has about 1,400 distinct ticks), unless that denominator is
    large."""
    distinct = {id(p): p for p in priorities}
    common = math.lcm(*{p.denominator for p in distinct.values()})
    if common.bit_length() > 256:
        value_rank = {v: i for i, v in enumerate(sorted(set(distinct.values())))}
        return {i: value_rank[p] for i, p in distinct.items()}
    scaled = {i: p.numerator * (common // p.denominator) for i, p in distinct.items()}
    order = {v: i for i, v in enumerate(sorted(set(scaled.values())))}
    return {i: order[v] for i, v in scaled.items()}


def _paired_edges(plan: CollectivePlan, trees: list[FlowTree]
                  ) -> list[tuple[list[int], list[int], list[int]]]:
    """Per thread block of ``plan.paired`` (receive peer p, GPU v, send peer w, channel c),
    the flat indices of the tree edges it receives (p -> v on c) and sends (v -> w on c),
    and the reductions' receives its receives wait for (:func:`_reduction_chains`): every
    send waits for the last of its receives in the iteration's order, as the thread block
    runs its receives before its sends, and for those."""
    receives: dict[tuple[str, str, Hashable], list[int]] = {}
    before: dict[int, list[int]] = {}       # a reduction's receives earlier in its chain
    rank = {x: i for i, x in enumerate(plan.compute_nodes)}
    base = 0
    for tree in trees:
        for ei, e in enumerate(tree.edges):
            if e.channel is not None:
                sender, receiver = (e.child, e.parent) if tree.reduce else (e.parent, e.child)
                receives.setdefault((sender, receiver, e.channel), []).append(base + ei)
        if tree.reduce:
            before.update(_reduction_chains(tree, rank, base))
        base += len(tree.edges)
    out = []
    for p, v, w, c in plan.paired:
        received, sent = receives.get((p, v, c)), receives.get((v, w, c))
        if received and sent:
            earlier = sorted({x for y in received for x in before.get(y, [])})
            out.append((received, sent, earlier))
    return out


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
    order (piece, slot) or, for ordered plans, (edge order, piece, hop)."""
    width = len(template.conn)
    piece = np.arange(pieces, dtype=np.int64)[:, None]
    if template.ordered:
        index = pieces * (np.arange(width, dtype=np.int64) - template.hop)[None, :] \
            + template.hop[None, :] + piece * template.hops[None, :]
    else:
        index = piece * width + np.arange(width, dtype=np.int64)[None, :]
    total = pieces * width
    conn = np.empty(total, dtype=np.int64)
    conn[index] = template.conn[None, :]
    amount_of = np.empty(total, dtype=np.int64)
    amount_of[index] = template.tree[None, :]
    iteration = np.empty(total, dtype=np.int64)
    iteration[index] = piece
    # The dependencies sorted by (src, dst): one iteration's pairs sorted once, which in
    # (piece, slot) order keeps every piece's sends after the last piece's. An ordered
    # plan's sends interleave the pieces, but a send's dependents (all of its piece) still
    # come in the order of their slots (an edge's sends are consecutive, its pieces in
    # order): each pair goes to its sender's place plus its rank among that slot's pairs.
    pair = np.lexsort((template.dst, template.src))
    src_all = index[:, template.src[pair]].ravel()
    dst_all = index[:, template.dst[pair]].ravel()
    dep_ptr = np.zeros(total + 1, dtype=np.int64)
    np.cumsum(np.bincount(src_all, minlength=total), out=dep_ptr[1:])
    if template.ordered:
        senders = template.src[pair]
        rank = np.arange(len(pair), dtype=np.int64) - np.searchsorted(senders, senders)
        dep_idx = np.empty(len(dst_all), dtype=np.int64)
        dep_idx[dep_ptr[src_all] + np.tile(rank, pieces)] = dst_all
    else:
        dep_idx = dst_all
    pending = np.bincount(dst_all, minlength=total)
    amounts = [share * size / pieces for share in template.shares]
    return FlatProgram(template.connections, conn, amount_of, amounts, pending, dep_ptr,
                 dep_idx, iteration)


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
    (reduce then broadcast for allreduce); every link under store-and-forward switches."""
    check_switch_mode(switch_mode)
    switches = frozenset(topology.switch_nodes())
    return tree_memo(plan, ("stages", switches, switch_mode),
                     lambda: _stages(plan, switches, switch_mode))


def _stages(plan: CollectivePlan, switches: frozenset[str], switch_mode: str) -> int:
    total = 0
    hops: dict[tuple[str, ...], int] = {}     # per route (a ring plan repeats each one)
    for phase in (plan.reduce_trees, plan.broadcast_trees):
        deepest = 0
        for tree in phase:
            depth = {tree.root: 0}
            for e in tree.edges:
                n = hops.get(e.path)
                if n is None:
                    n = hops[e.path] = len(_hops(e.path, switches, switch_mode))
                depth[e.child] = depth[e.parent] + n
            deepest = max(deepest, max(depth.values()))
        total += deepest
    return total


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
