"""Which data moves where: a schedule's plan as MSCCL steps, grouped into chains.

The input is the one schedule model, :class:`canopy.engine.model.plan.CollectivePlan` (what the
execution model simulates and ``canopy compare`` times): its trees, their shares and the
physical route of every tree edge, which the steps carry on to the thread blocks' ``via``.

Chunk layout (docs/formats.md, "MSCCL XML"): with N ranks and k unit trees per root, the
collective's full buffer has N·k chunks and rank r owns chunks r·k … r·k+k−1. A tree of
multiplicity m rooted at r carries m consecutive chunks of r's range (trees of a root in
``index`` order); each send or receive moves those m chunks at once (``cnt`` = m, split
when m exceeds the runtime's ``cnt`` limit). Pipelining is left to the runtime.

Slots follow the msccl-tools convention: a piece lives in the same slot on every rank, and
both steps of a transfer name it as their (src, dst) pair (the receiving step's src and the
sending step's dst are the peer's side, unused by the runtime). Allgather works in
``o[chunk]``; reductions accumulate in a *work slot* (:meth:`StepProgram.work`): ``s[chunk]`` for
reduce-scatter (the input stays untouched outside the rank's result), the result slot for
allreduce. Where the work slot is not the input slot, every rank first copies its input
into it with ``cpy`` steps (one per run of pieces, at most ``cnt`` chunks), and a piece's
first step depends on its copy. Out-of-place allgather likewise copies the root's chunks
from ``i`` to ``o`` and sends them from ``o``, so ``rcs`` steps name one slot.

* Allgather (ForestColl (arXiv:2402.06787) §3.2): each out-tree broadcasts its chunks from the root.
  A node with children receives and forwards to its first child in one ``rcs`` step and
  sends to the others with ``s`` steps that depend on it; a leaf receives with ``r``.
* Reduce-scatter (§4.6): the reduce trees run against their arrows. A leaf sends its
  work slot; a node with children accumulates every child but the last with ``rrc`` into
  its work slot and forwards the last with ``rrs`` (receive, reduce, send);
  the root ends with ``rrc`` into its result. Each reduction waits for the one before it
  into the same slot, so the children are taken in the order their data is expected:
  the tree's ``accumulation`` where the plan gives one (the order its simulation
  delivers them in, :mod:`canopy.engine.deploy.accumulation`), else shallow first, so
  the deepest branch, whose data comes last, is the one fused with the send.
* Allreduce: reduce-scatter then allgather in one program. The root's last reduction is
  an ``rrcs`` that also starts the broadcast. When the reduce trees and broadcast trees of
  a root split its k chunks differently, both phases use the common refinement so each
  broadcast piece waits on exactly one reduction.

A *chain* is a path of steps where each step receives what the previous one sent (a
fused step both receives and sends). :mod:`canopy.engine.msccl.threadblocks` orders whole
chains, which is what makes the exported program deadlock-free.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.plan import CollectivePlan, FlowTree, Path

Loc = tuple[str, int]                   # (buffer "i" | "o" | "s", chunk offset)

XML_COLLECTIVE = {"allgather": "allgather", "reduce-scatter": "reduce_scatter",
                  "allreduce": "allreduce"}


@dataclass(eq=False)
class Step:
    """One MSCCL step on ``rank``; ``src``/``dst`` of pure sends and receives describe the
    peer's side (as msccl-tools writes them), the others are read or written here."""

    rank: int
    kind: str
    cnt: int
    recv_peer: int = -1
    send_peer: int = -1
    src: Loc | None = None
    dst: Loc | None = None
    dep: Step | None = None
    chain: Chain | None = None
    route: tuple[str, ...] = ()           # physical route of what the step sends
    channel: int | None = None            # the plan's channel of what the step sends
    order: tuple = ()                     # the plan's order of what the step sends


@dataclass(eq=False)
class Chain:
    """Steps in path order; ``priority`` orders chains that do not depend on each other."""

    steps: list[Step] = field(default_factory=list)
    priority: tuple[int, ...] = ()

    def add(self, step: Step) -> Step:
        step.chain = self
        self.steps.append(step)
        return step


@dataclass
class StepProgram:
    """Every step of the program, by chain, with the buffer sizes it needs."""

    collective: str                      # the schedule's name: allgather, reduce-scatter, ...
    ngpus: int
    k: int
    inplace: bool
    chains: list[Chain] = field(default_factory=list)
    scratch: list[int] = field(default_factory=list)   # s_chunks per rank
    # thread blocks that pair a receive and a send of different trees: (rank, receive
    # peer, send peer, channel), from the plan's ``paired`` (canopy.engine.msccl.pairing)
    paired: set[tuple[int, int, int, int]] = field(default_factory=set)

    @property
    def nchunks(self) -> int:
        return self.ngpus * self.k

    def buffer_sizes(self, rank: int) -> tuple[int, int, int]:
        """(i_chunks, o_chunks, s_chunks): the buffers the collective really has."""
        n, k = self.nchunks, self.k
        sizes = {"allgather": (k, n), "reduce-scatter": (n, k), "allreduce": (n, n)}
        return (*sizes[self.collective], self.scratch[rank])

    @property
    def out(self) -> str:
        """Where results live: allreduce in place works in the input buffer (MSCCL
        aliases o to i); the other results are in the output buffer."""
        return "i" if self.collective == "allreduce" and self.inplace else "o"

    def result(self, root: int, chunk: int) -> Loc:
        """Where a reduced chunk ends on its root."""
        if self.collective == "reduce-scatter":
            return ("i", chunk) if self.inplace else ("o", chunk - root * self.k)
        return (self.out, chunk)

    def work(self, chunk: int) -> Loc:
        """Where every rank keeps the partial sums of ``chunk`` (the same slot on every rank,
        as the msccl-tools convention needs): scratch for reduce-scatter (the input stays
        untouched outside the rank's own result), the result slot for allreduce."""
        if self.collective == "reduce-scatter":
            return ("s", chunk)
        return (self.out, chunk)

    @property
    def copies_input(self) -> bool:
        """Whether reductions start by copying each rank's input into its work slots."""
        return self.collective != "allgather" and self.work(0) != ("i", 0)

    def split(self, step: Step) -> tuple[Step, Step]:
        """A fused step as a receive that keeps the data and a send that depends on it.
        The data stays in the step's work slot (``rcs`` and ``rrcs``: dst, ``rrs``: src), so
        the receive's transfer is labelled (slot, slot) and the send keeps the fused step's
        label; :func:`relabel` fixes the steps that feed the receive."""
        assert step.kind in ("rcs", "rrs", "rrcs") and step.src is not None
        keep = step.src if step.kind == "rrs" else step.dst
        recv = Step(step.rank, "r" if step.kind == "rcs" else "rrc", step.cnt,
                    recv_peer=step.recv_peer, src=step.src, dst=keep, dep=step.dep)
        send = Step(step.rank, "s", step.cnt, send_peer=step.send_peer, src=keep, dst=step.dst,
                    dep=recv, route=step.route, channel=step.channel, order=step.order)
        return recv, send


def relabel(steps: list[Step], dst: Loc | None) -> None:
    """Give the transfers of a chain the destination slot of the step that ends it: the
    ``dst`` of ``s`` and ``rrs`` steps names the receiver's side (msccl-tools convention)."""
    for step in steps:
        if step.kind in ("s", "rrs"):
            step.dst = dst


@dataclass
class _Shape:
    """A tree over ranks: parent, children and the height of every subtree."""

    root: int
    index: int
    parent: dict[int, int]
    children: dict[int, list[int]]
    depth: dict[int, int]
    height: dict[int, int]
    path_to: dict[int, tuple[str, ...]]    # physical route of the edge parent -> child
    channel_to: dict[int, int | None]      # the plan's channel of the edge parent -> child
    priority_to: dict[int, int]            # the rank of the plan's priority of that edge
    position: int                          # the tree's index in the plan's trees
    reduce: bool
    added_at: dict[int, int]               # the tree's accumulation of the edge to each node
    # what send_info, by_height and accumulating worked out, asked again for every piece
    sends: dict[tuple[int, bool], dict] = field(default_factory=dict)
    kids: dict[tuple[int, bool], list[int]] = field(default_factory=dict)

    def down(self, child: int) -> tuple[str, ...]:
        """The route data takes from ``child``'s parent to ``child``."""
        return self.path_to[child]

    def order(self, child: int) -> tuple:
        """Where the plan puts the transfer over ``child``'s edge among the sends of a
        shared connection (:func:`canopy.engine.execution.compiler.plan_program`: phase, step within
        the piece, priority, tree): the parent's depth when broadcasting, the child's
        height when reducing."""
        level = self.height[child] if self.reduce else self.depth[self.parent[child]]
        return (0 if self.reduce else 1, level, self.priority_to[child], self.position)

    def send_info(self, child: int, up: bool = False) -> dict:
        """Route, channel and order of the transfer over ``child``'s edge (``up``: from the
        child to its parent, as reductions send)."""
        if (child, up) not in self.sends:
            self.sends[(child, up)] = {"route": self.up(child) if up else self.down(child),
                                       "channel": self.channel_to[child],
                                       "order": self.order(child)}
        return self.sends[(child, up)]

    def up(self, child: int) -> tuple[str, ...]:
        """The route data takes from ``child`` to its parent (reductions run against the
        arrows, over the reversed route, as :func:`canopy.engine.model.plan.trees_plan` does)."""
        return tuple(reversed(self.path_to[child]))

    def by_height(self, v: int) -> list[int]:
        """``v``'s children deepest first (a list of the caller's own)."""
        if (v, True) not in self.kids:
            self.kids[(v, True)] = sorted(self.children.get(v, []),
                                          key=lambda c: (self.height[c], c), reverse=True)
        return list(self.kids[(v, True)])

    def accumulating(self, v: int) -> list[int]:
        """``v``'s children in the order ``v`` adds their data: by the tree's accumulation,
        then shallow first (a list of the caller's own)."""
        if (v, False) not in self.kids:
            self.kids[(v, False)] = sorted(
                self.children.get(v, []), key=lambda c: (self.added_at[c], self.height[c], c))
        return list(self.kids[(v, False)])

    def bottom_up(self) -> list[int]:
        return sorted(self.depth, key=lambda v: -self.depth[v])


@dataclass(frozen=True, eq=False)
class LoweredTree:
    """A tree of the plan as the lowering reads it: its root, its place among its root's
    trees, the chunks it carries and its edges (parent, child, route parent -> child)."""

    root: str
    index: int
    multiplicity: int
    edges: tuple[tuple[str, str, Path], ...]
    channels: tuple[int | None, ...] = ()      # per edge, the plan's channel (None: own)
    priorities: tuple[int, ...] = ()           # per edge, the plan's priority's rank
    position: int = 0                          # index among the plan's trees
    reduce: bool = False
    accumulation: tuple[int, ...] = ()         # per edge, the plan's (FlowTree.accumulation)


def lowered_trees(phase: tuple[FlowTree, ...], n: int, chunks: int, ranks: dict[int, int],
                  start: int = 0, accumulate: bool = True) -> list[LoweredTree]:
    """The trees of one phase of a plan, each carrying ``share · n · chunks`` chunks (a
    whole number: the chunk layout must hold every tree's share exactly). Reduce trees
    carry their data against the arrows, so their routes are turned back to run from
    parent to child. ``start`` is the index of the phase's first tree in the plan's
    trees (reduce trees first). An edge's priority is kept as its place in ``ranks``
    (:func:`priority_ranks`); its accumulation only with ``accumulate``."""
    out: list[LoweredTree] = []
    per_root: dict[str, int] = {}
    for t in phase:
        m = t.share * n * chunks
        if m.denominator != 1 or m < 1:
            raise ScheduleError(f"tree {t.key!r} carries {t.share} of the message, not a "
                                f"whole number of the {n * chunks} chunks.")
        index = per_root.get(t.root, 0)
        per_root[t.root] = index + 1
        edges = tuple((e.parent, e.child, tuple(reversed(e.path)) if t.reduce else e.path)
                      for e in t.edges)
        channels = tuple(e.channel if isinstance(e.channel, int) else None for e in t.edges)
        out.append(LoweredTree(t.root, index, int(m), edges, channels,
                        tuple(ranks[id(e.priority)] for e in t.edges), start + len(out),
                        t.reduce, t.accumulation if accumulate else ()))
    return out


def priority_ranks(trees: tuple[FlowTree, ...]) -> dict[int, int]:
    """Each priority of the trees' edges (by the identity of its object) by its value's
    place among theirs: the steps' order (:meth:`_Shape.order`) compares these integers in
    the priorities' exact order, as thread blocks sort thousands of transfers by it (and
    edges share few priority objects, so few Fractions are hashed)."""
    objects = {id(e.priority): e.priority for t in trees for e in t.edges}
    place = {p: i for i, p in enumerate(sorted(set(objects.values())))}
    return {key: place[p] for key, p in objects.items()}


def chunks_per_root(plan: CollectivePlan) -> int:
    """The fewest chunks per root in which every tree of ``plan`` carries whole chunks."""
    n = len(plan.compute_nodes)
    k = 1
    for t in plan.trees:
        d = t.share.denominator // math.gcd(t.share.denominator, n)   # of share * n
        k = k * d // math.gcd(k, d)
    return k


def _shape(tree: LoweredTree, rank: dict[str, int], n: int) -> _Shape:
    label = f"tree {tree.index} of root '{tree.root}'"
    if tree.root not in rank:
        raise ScheduleError(f"{label}: the root is not one of the schedule's compute nodes.")
    root = rank[tree.root]
    parent: dict[int, int] = {}
    children: dict[int, list[int]] = {}
    path_to: dict[int, tuple[str, ...]] = {}
    channel_to: dict[int, int | None] = {}
    priority_to: dict[int, int] = {}
    added_at: dict[int, int] = {}
    depth = {root: 0}
    for i, (src, dst, path) in enumerate(tree.edges):
        if src not in rank or dst not in rank:
            raise ScheduleError(f"{label}: edge {src} -> {dst} joins a node that is not "
                                "a compute node of the schedule.")
        u, v = rank[src], rank[dst]
        if u not in depth or v in depth:
            raise ScheduleError(f"{label}: edge {src} -> {dst} does not grow an out-tree "
                                "from the root (parents must come before children).")
        parent[v] = u
        path_to[v] = tuple(path) or (src, dst)
        channel_to[v] = tree.channels[i] if tree.channels else None
        priority_to[v] = tree.priorities[i] if tree.priorities else 0
        added_at[v] = tree.accumulation[i] if tree.accumulation else 0
        children.setdefault(u, []).append(v)
        depth[v] = depth[u] + 1
    if len(depth) != n:
        raise ScheduleError(f"{label} reaches {len(depth)} of the {n} compute nodes.")
    height = dict.fromkeys(depth, 0)
    for v in sorted(depth, key=lambda x: -depth[x]):
        if v in parent:
            height[parent[v]] = max(height[parent[v]], height[v] + 1)
    return _Shape(root, tree.index, parent, children, depth, height, path_to, channel_to,
                  priority_to, tree.position, tree.reduce, added_at)


def _pieces(trees: list[LoweredTree], k: int, where: str) -> list[tuple[int, int, LoweredTree]]:
    """(first chunk offset within the root's k, count, tree) in tree index order."""
    out = []
    offset = 0
    for tree in sorted(trees, key=lambda t: t.index):
        if tree.multiplicity < 1:
            raise ScheduleError(f"tree {tree.index} of root '{tree.root}' has multiplicity "
                                f"{tree.multiplicity}.")
        out.append((offset, tree.multiplicity, tree))
        offset += tree.multiplicity
    if offset != k:
        raise ScheduleError(f"{where} has {offset} unit trees, but k = {k}.")
    return out


Piece = tuple[int, int, LoweredTree]


def _refine(a: list[Piece], b: list[Piece], max_count: int
            ) -> Iterator[tuple[int, int, LoweredTree, LoweredTree]]:
    """Common refinement of two partitions of 0..k-1, cut further to ``max_count``."""
    cuts = sorted({off for off, _, _ in a} | {off for off, _, _ in b}
                  | {a[-1][0] + a[-1][1]})
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        ta = next(t for off, m, t in a if off <= lo < off + m)
        tb = next(t for off, m, t in b if off <= lo < off + m)
        for start in range(lo, hi, max_count):
            yield start, min(max_count, hi - start), ta, tb


class _Builder:
    """Emits the steps of one collective, chain by chain."""

    def __init__(self, collective: str, compute_nodes: tuple[str, ...], chunks: int,
                 inplace: bool, max_count: int, piece: int, fuse_fanout: bool) -> None:
        self.n = len(compute_nodes)
        self.k = chunks
        self.inplace = inplace
        self.max_count = max_count
        self.piece = min(piece, max_count)
        self.fuse_fanout = fuse_fanout
        self.collective = collective
        self.rank = {name: r for r, name in enumerate(compute_nodes)}
        if len(self.rank) != self.n:
            raise ScheduleError("the schedule lists a compute node twice.")
        self.plan = StepProgram(self.collective, self.n, self.k, inplace, [], [0] * self.n)
        if self.collective == "reduce-scatter":
            self.plan.scratch = [self.n * self.k] * self.n
        self.chains = self.plan.chains
        self.out = self.plan.out
        self.result = self.plan.result
        self.work = self.plan.work
        self._shapes: dict[int, _Shape] = {}

    def shape(self, tree: LoweredTree) -> _Shape:
        key = id(tree)
        if key not in self._shapes:
            self._shapes[key] = _shape(tree, self.rank, self.n)
        return self._shapes[key]

    def new_chain(self, priority: tuple[int, ...] = ()) -> Chain:
        chain = Chain(priority=priority)
        self.chains.append(chain)
        return chain

    # ------------------------------------------------------------------ phases
    def broadcast(self, shape: _Shape, chunk: int, cnt: int, source: Loc,
                  ready: Step | None = None, fused: Chain | None = None) -> None:
        """Allgather one piece down ``shape``. ``ready`` is the root step after which the
        data is complete; ``fused`` is a chain whose last step already sends it to the
        root's first (deepest) child."""
        root, base = shape.root, (shape.root, shape.index, chunk)
        loc = (self.out, chunk)
        work: list[tuple[Chain, int, int, Loc]] = []
        for i, child in enumerate(shape.by_height(root)):
            if i == 0 and fused is not None:
                chain = fused
            else:
                chain = self.new_chain((1, 0, *base))
                chain.add(Step(root, "s", cnt, send_peer=child, src=source, dst=loc,
                               dep=ready, **shape.send_info(child)))
            work.append((chain, child, root, source))
        while work:
            chain, v, parent, parent_loc = work.pop()
            kids = shape.by_height(v)
            if not kids:
                chain.add(Step(v, "r", cnt, recv_peer=parent, src=parent_loc, dst=loc))
                continue
            if len(kids) > 1 and not self.fuse_fanout:
                first = chain.add(Step(v, "r", cnt, recv_peer=parent, src=parent_loc,
                                       dst=loc))
                kids.insert(0, -1)          # every child gets a send of its own
            else:
                first = chain.add(Step(v, "rcs", cnt, recv_peer=parent, send_peer=kids[0],
                                       src=parent_loc, dst=loc, **shape.send_info(kids[0])))
            for child in kids[1:]:
                branch = self.new_chain((1, shape.depth[v], *base))
                branch.add(Step(v, "s", cnt, send_peer=child, src=loc, dst=loc, dep=first,
                                **shape.send_info(child)))
                work.append((branch, child, v, loc))
            if kids[0] >= 0:
                work.append((chain, kids[0], v, loc))

    def reduce(self, shape: _Shape, chunk: int, cnt: int, then: _Shape | None = None,
               copies: list[Step] | None = None) -> tuple[Step | None, Chain | None]:
        """Reduce one piece up ``shape`` into its root, accumulating in the work slot on
        every rank (after that rank's ``copies[rank]`` of its input, when given). With
        ``then`` (allreduce), the root's last reduction also sends to the first child of
        the broadcast tree. Returns the root's final step and, when fused, its chain."""
        root = shape.root
        work = self.work(chunk)
        final = self.result(root, chunk)
        up: dict[int, Chain] = {}

        def add(chain: Chain, step: Step) -> Step:
            chain.priority = (0, shape.height[step.rank], root, shape.index, chunk)
            return chain.add(step)

        for v in shape.bottom_up():
            kids = shape.accumulating(v)
            prev = copies[v] if copies else None
            for child in kids[:-1]:
                prev = add(up.pop(child), Step(v, "rrc", cnt, recv_peer=child, src=work,
                                               dst=work, dep=prev))
            if v == root:
                if not kids:
                    return (prev if final == work else
                            self._local_copy(root, work, final, cnt, prev)), None
                chain = up.pop(kids[-1])
                relabel(chain.steps, final)
                fanout = then.by_height(root) if then is not None else []
                if then is not None and (len(fanout) == 1 or (fanout and self.fuse_fanout)):
                    first = fanout[0]
                    step = Step(v, "rrcs", cnt, recv_peer=kids[-1], send_peer=first,
                                src=work, dst=final, dep=prev, **then.send_info(first))
                    return add(chain, step), chain
                return add(chain, Step(v, "rrc", cnt, recv_peer=kids[-1], src=work,
                                       dst=final, dep=prev)), None
            parent = shape.parent[v]
            if kids:
                chain = up.pop(kids[-1])
                add(chain, Step(v, "rrs", cnt, recv_peer=kids[-1], send_peer=parent,
                                src=work, dst=work, dep=prev, **shape.send_info(v, up=True)))
            else:
                chain = self.new_chain()
                add(chain, Step(v, "s", cnt, send_peer=parent, src=work, dst=work, dep=prev,
                                **shape.send_info(v, up=True)))
            up[v] = chain
        raise AssertionError("the bottom-up order ends at the root")

    def _local_copy(self, rank: int, src: Loc, dst: Loc, cnt: int,
                    dep: Step | None = None) -> Step:
        chain = self.new_chain((-1, rank))
        return chain.add(Step(rank, "cpy", cnt, src=src, dst=dst, dep=dep))

    def copy_runs(self, rank: int, pieces: list[tuple[int, int]], src_base: int,
                  dst: Callable[[int], Loc]) -> dict[int, Step]:
        """Copy ``rank``'s input into place for ``pieces`` ((chunk, count), in chunk order):
        consecutive pieces share one ``cpy`` of at most ``max_count`` chunks. Returns the
        copy of each piece's first chunk."""
        runs: list[list[tuple[int, int]]] = []
        for chunk, cnt in pieces:
            run = runs[-1] if runs else None
            if run and run[-1][0] + run[-1][1] == chunk and \
                    sum(c for _, c in run) + cnt <= self.max_count:
                run.append((chunk, cnt))
            else:
                runs.append([(chunk, cnt)])
        out: dict[int, Step] = {}
        for run in runs:
            start, total = run[0][0], sum(c for _, c in run)
            step = self._local_copy(rank, ("i", start - src_base), dst(start), total)
            out.update((chunk, step) for chunk, _ in run)
        return out

    # ------------------------------------------------------------------ collectives
    def build(self, broadcast: list[LoweredTree], reduce: list[LoweredTree]) -> StepProgram:
        if self.collective == "allgather":
            self.build_allgather(broadcast)
        else:
            self.build_reduction(broadcast, reduce)
        return self.plan

    def build_allgather(self, trees: list[LoweredTree]) -> None:
        """Broadcast every piece from ``o[chunk]`` (out of place, after copying it there)."""
        for root_name, r in self.rank.items():
            base = r * self.k
            pieces = []
            for off, m, tree in _pieces([t for t in trees if t.root == root_name], self.k,
                                        f"root '{root_name}'"):
                for start in range(off, off + m, self.piece):
                    pieces.append((base + start, min(self.piece, off + m - start), tree))
            copies = {} if self.inplace else self.copy_runs(
                r, [(c, n) for c, n, _ in pieces], base, lambda c: ("o", c))
            for chunk, cnt, tree in pieces:
                self.broadcast(self.shape(tree), chunk, cnt, (self.out, chunk),
                               ready=copies.get(chunk))

    def build_reduction(self, trees: list[LoweredTree], reduce_trees: list[LoweredTree]) -> None:
        """Reduce every piece into its root; allreduce then broadcasts it, cut into the
        common refinement of the reduce and broadcast pieces."""
        pieces: list[tuple[int, int, LoweredTree, LoweredTree | None]] = []
        for root_name, r in self.rank.items():
            where = f"root '{root_name}'"
            base = r * self.k
            reducing = _pieces([t for t in reduce_trees if t.root == root_name], self.k,
                               f"{where} (reduce trees)")
            if self.collective == "reduce-scatter":
                for off, m, tree in reducing:
                    for start in range(off, off + m, self.piece):
                        pieces.append((base + start, min(self.piece, off + m - start),
                                       tree, None))
                continue
            gathering = _pieces([t for t in trees if t.root == root_name], self.k, where)
            for start, cnt, rtree, gtree in _refine(reducing, gathering, self.piece):
                pieces.append((base + start, cnt, rtree, gtree))
        copies: list[dict[int, Step]] = []
        if self.plan.copies_input:
            copies = [self.copy_runs(v, [(c, n) for c, n, _, _ in pieces], 0, self.work)
                      for v in range(self.n)]
        for chunk, cnt, reducing_tree, gathering_tree in pieces:
            first = [copies[v][chunk] for v in range(self.n)] if copies else None
            rshape = self.shape(reducing_tree)
            if gathering_tree is None:
                self.reduce(rshape, chunk, cnt, copies=first)
                continue
            gshape = self.shape(gathering_tree)
            final, fused = self.reduce(rshape, chunk, cnt, then=gshape, copies=first)
            root = gshape.root
            self.broadcast(gshape, chunk, cnt, self.result(root, chunk), ready=final,
                           fused=fused)


def plan_steps(plan: CollectivePlan, chunks: int | None = None, inplace: bool = True,
               max_count: int = 71, piece: int | None = None, fuse_fanout: bool = True,
               accumulate: bool = True) -> StepProgram:
    """All MSCCL steps of ``plan`` (the schedule model of :mod:`canopy.engine.model.plan`: its
    reduce trees, then its broadcast trees), grouped into chains, with ``chunks`` chunks
    per root (default :func:`chunks_per_root`; a ForestColl schedule's k). A tree carrying
    m chunks moves them in steps of at most ``piece`` chunks (default ``max_count``):
    ``piece=1`` gives every unit tree chains of its own. Without ``fuse_fanout``, a node
    that forwards to several children receives first and then sends to each child in a
    step of its own (no child waits for another's send). Without ``accumulate``, every
    node adds its children's data shallow first, whatever the reduce trees'
    ``accumulation``."""
    if plan.collective not in XML_COLLECTIVE:
        raise ScheduleError(f"cannot export collective '{plan.collective}' to MSCCL.")
    chunks = chunks_per_root(plan) if chunks is None else chunks
    if chunks < 1:
        raise ScheduleError(f"the schedule's k must be positive, not {chunks}.")
    n = len(plan.compute_nodes)
    if plan.collective != "allgather" and not plan.reduce_trees or \
            plan.collective != "reduce-scatter" and not plan.broadcast_trees:
        raise ScheduleError(f"the {plan.collective} plan lacks the trees of one of its phases.")
    builder = _Builder(plan.collective, plan.compute_nodes, chunks, inplace, max_count,
                       piece or max_count, fuse_fanout)
    rank = {name: r for r, name in enumerate(plan.compute_nodes)}
    builder.plan.paired = {(rank[v], rank[p], rank[w], c) for p, v, w, c in plan.paired}
    ranks = priority_ranks(plan.trees)
    return builder.build(lowered_trees(plan.broadcast_trees, n, chunks, ranks,
                                       len(plan.reduce_trees)),
                         lowered_trees(plan.reduce_trees, n, chunks, ranks,
                                       accumulate=accumulate))
