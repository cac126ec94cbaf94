"""The plan model: what every schedule runs, whatever algorithm made it, and its bound.

A collective schedule, whatever algorithm made it, is a set of **flow trees** over the
compute nodes (:class:`FlowTree`): a ring's allgather is N chains (one per origin), a
TACOS schedule is one tree per chunk, ForestColl and Blink are trees. Each tree carries
a ``share`` of the message size M. A broadcast tree copies its data from the root down
the edges; a reduce tree sums data up the edges into the root. Allreduce is a reduce
phase followed by a broadcast phase: the broadcast tree with a given ``key`` starts from
its root once the reduce tree with the same key has finished there.

Every tree edge has a physical path (the route through switches, or over a direct link),
in the direction the data moves. :func:`link_loads` adds up, for each directed physical
link, the bytes it carries per byte of message; the bandwidth-only throughput of the plan
is then ``algbw = 1 / max_e(load_e / b_e)`` (nccl-tests algbw: message size over time,
in GB/s), with the exact :class:`fractions.Fraction` capacities of
:meth:`canopy.engine.model.topology.Topology.capacities`. This is the congestion argument of
ForestColl (arXiv:2402.06787) §5.3 ("computed based on the congestion of links in the schedule").

Used by the execution model (:mod:`canopy.engine.execution.simulate`), the baselines, the link-load
overlay (:mod:`canopy.engine.model.link_load`) and verification, which all sum link loads with
:func:`add_path_load`. Physical routing lives in :mod:`canopy.engine.network.routing`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, TypeVar

from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.schedule import Schedule, Tree

Edge = tuple[str, str]
Path = tuple[str, ...]
Load = TypeVar("Load", int, Fraction)

ALGORITHMS = ("forestcoll", "ring", "blink", "tacos", "lr1", "lr3")


def path_links(path: Path) -> list[Edge]:
    """The directed physical links of a path of node names."""
    return list(zip(path, path[1:], strict=False))


@dataclass(frozen=True)
class FlowEdge:
    """One tree edge; ``path`` runs from the sender to the receiver of its data.

    For a broadcast tree the sender is ``parent``; for a reduce tree it is ``child``.
    ``priority`` orders the sends of a shared connection within one step (and, for plans
    with ``ordered_links``, fixes the order in which a connection sends them). Edges
    with the same ``channel`` and route share one connection (a ring hop carries every
    chain of its ring); edges without one get a connection each
    (:func:`canopy.engine.execution.compiler.plan_program`).
    """

    parent: str
    child: str
    path: Path
    priority: Fraction = Fraction(0)
    channel: Hashable | None = None


@dataclass(frozen=True)
class FlowTree:
    """A ``share`` of the message moving over a tree of compute nodes rooted at ``root``.

    ``edges`` list parents before children. ``reduce`` trees move data from the leaves
    into the root (reduce-scatter's in-trees, ForestColl (arXiv:2402.06787) §4.6).
    ``accumulation`` (reduce trees; empty: shallow subtrees first) gives, per edge, the
    place at which the parent adds that edge's data among the edges into it, lowest first:
    the order of the MSCCL export's chain of reductions into one slot
    (:mod:`canopy.engine.msccl.lowering`, :mod:`canopy.engine.deploy.accumulation`).
    """

    key: Hashable
    root: str
    edges: tuple[FlowEdge, ...]
    share: Fraction
    reduce: bool = False
    accumulation: tuple[int, ...] = ()


ThreadBlockPair = tuple[str, str, str, int]    # (receive peer, GPU, send peer, channel)


@dataclass(frozen=True)
class CollectivePlan:
    """The trees a schedule runs for one collective (reduce phase, then broadcast).

    ``paired`` names thread blocks that carry two connections of different trees
    (:func:`canopy.engine.msccl.pairing.pair_threadblocks`): (p, v, w, c) is the thread
    block of GPU v on channel c that receives from p and sends to w. It runs, in every loop
    iteration, its receives before its sends, so each send over (v, w, c) also waits for
    the last receive over (p, v, c) of its iteration (:func:`canopy.engine.execution.simulate
    .plan_program`); only edges with an integer ``channel`` are paired."""

    collective: str
    compute_nodes: tuple[str, ...]
    reduce_trees: tuple[FlowTree, ...] = ()
    broadcast_trees: tuple[FlowTree, ...] = ()
    ordered_links: bool = False
    paired: tuple[ThreadBlockPair, ...] = ()

    @property
    def trees(self) -> tuple[FlowTree, ...]:
        return self.reduce_trees + self.broadcast_trees


def add_path_load(loads: dict[Edge, Load], path: Path, weight: Load) -> None:
    """Add ``weight`` to every directed link of ``path`` in ``loads``: the one place link
    loads are summed (plans, the link-load overlay, verification, routing searches)."""
    for e in path_links(path):
        loads[e] = loads.get(e, 0) + weight


def path_loads(items: Iterable[tuple[Path, Load]]) -> dict[Edge, Load]:
    """Summed weight per directed link over (path, weight) pairs (see :func:`add_path_load`)."""
    loads: dict[Edge, Load] = {}
    for path, weight in items:
        add_path_load(loads, path, weight)
    return loads


def link_loads(plan: CollectivePlan) -> dict[Edge, Fraction]:
    """Bytes each directed physical link carries per byte of message, all phases added.

    Phases overlap when pipelined (the reduce of one piece runs while an earlier piece is
    broadcast), so their loads add on every link, as in the allreduce model of
    ForestColl (arXiv:2402.06787) App. E.
    """
    # Each distinct route and share once, with its count: a ring plan on 1024 GPUs has
    # 8 million tree edges over 8 thousand routes (the same exact sums).
    counts: dict[Fraction, dict[Path, int]] = {}
    for tree in plan.trees:
        paths = counts.setdefault(tree.share, {})
        for e in tree.edges:
            paths[e.path] = paths.get(e.path, 0) + 1
    return path_loads((path, share * count) for share, paths in counts.items()
                      for path, count in paths.items())


def bandwidth_bound(plan: CollectivePlan, capacities: Mapping[Edge, Fraction]
                    ) -> tuple[Fraction, Edge]:
    """(algbw in GB/s, the most congested link): message size over bandwidth-only time."""
    return loads_bound(link_loads(plan), capacities)


def loads_bound(loads: Mapping[Edge, Fraction], capacities: Mapping[Edge, Fraction]
                ) -> tuple[Fraction, Edge]:
    """:func:`bandwidth_bound` of a plan whose :func:`link_loads` are ``loads`` (of the
    links equally congested, the first in sorted order)."""
    worst: tuple[Fraction, Edge] | None = None
    for link, load in loads.items():
        if link not in capacities:
            raise ScheduleError(f"internal error: the plan uses link {link[0]} -> {link[1]}, "
                                "which is not in the topology.")
        ratio = load / capacities[link]
        if worst is None or ratio > worst[0] or (ratio == worst[0] and link < worst[1]):
            worst = (ratio, link)
    if worst is None:
        raise ScheduleError("internal error: the plan moves no data.")
    return 1 / worst[0], worst[1]


def check_coverage(plan: CollectivePlan, whole: bool = False) -> None:
    """Raise ScheduleError unless every node gets every root's data exactly once.

    Each tree must span all compute nodes, and the shares of the trees rooted at each
    node must add up to 1/N (or to 1 for single-root plans, ``whole``).
    """
    nodes = set(plan.compute_nodes)
    n = len(nodes)
    for phase in (plan.reduce_trees, plan.broadcast_trees):
        if not phase:
            continue
        per_root: dict[str, Fraction] = {}
        for tree in phase:
            reached = {tree.root}
            for e in tree.edges:
                if e.parent not in reached or e.child in reached:
                    raise ScheduleError(f"tree {tree.key!r} is not an out-tree of "
                                        f"{tree.root} at edge {e.parent} -> {e.child}.")
                reached.add(e.child)
            if reached != nodes:
                missing = sorted(nodes - reached)
                raise ScheduleError(f"tree {tree.key!r} rooted at {tree.root} does not "
                                    f"reach {missing[0]}.")
            per_root[tree.root] = per_root.get(tree.root, Fraction(0)) + tree.share
        if whole:
            if sum(per_root.values()) != 1:
                raise ScheduleError("the trees do not carry the whole message.")
        else:
            for node in nodes:
                if per_root.get(node, Fraction(0)) != Fraction(1, n):
                    raise ScheduleError(f"the trees rooted at {node} carry "
                                        f"{per_root.get(node, 0)} of the message, "
                                        f"not 1/{n}.")


def chain_trees(order: list[str], hops: Mapping[Edge, Path], share: Fraction,
                key: Hashable, reduce: bool = False) -> list[FlowTree]:
    """The N chains a ring runs: for each origin, the ring's hops from it (allgather) or
    into it (reduce-scatter), each carrying ``share`` of the message.

    The ring is ``order`` closed into a cycle; ``hops[(a, b)]`` is the route of the hop
    a -> b. A reduce-scatter chain for node j starts at j+1 and ends at j. Every chain
    crossing a hop holds the same (immutable) edge object: N edges per ring, not N·(N-1).
    """
    n = len(order)
    if n < 2:
        return [FlowTree((key, root), root, (), share, reduce) for root in order]
    if reduce:
        # chunk j: j+1 -> j+2 -> ... -> j; as a tree rooted at j, parents first. Edge i
        # has parent order[i] and child order[i-1]; its data crosses the hop into order[i].
        edge = [FlowEdge(order[i], order[i - 1], hops[(order[i - 1], order[i])], channel=key)
                for i in range(n)]
        step = -1
    else:
        edge = [FlowEdge(order[i], order[(i + 1) % n], hops[(order[i], order[(i + 1) % n])],
                         channel=key) for i in range(n)]
        step = 1
    return [FlowTree((key, order[j]), order[j],
                     tuple(edge[(j + step * i) % n] for i in range(n - 1)), share, reduce)
            for j in range(n)]


def ring_plan(collective: str, compute: list[str], rings: list[tuple[list[str], dict[Edge, Path]]]
              ) -> CollectivePlan:
    """NCCL's ring algorithms over several rings (channels), data split evenly.

    Allgather: N-1 steps forwarding each node's piece around the ring. Reduce-scatter:
    piece j starts at j+1 and is summed on its way to j. Allreduce: both, the piece's
    allgather leaving j once its reduction has arrived there.
    """
    share = Fraction(1, len(compute) * len(rings))
    reduce_trees: list[FlowTree] = []
    broadcast_trees: list[FlowTree] = []
    for index, (order, hops) in enumerate(rings):
        if collective in ("reduce-scatter", "allreduce"):
            reduce_trees += chain_trees(order, hops, share, index, reduce=True)
        if collective in ("allgather", "allreduce"):
            broadcast_trees += chain_trees(order, hops, share, index)
    return CollectivePlan(collective, tuple(compute), tuple(reduce_trees),
                          tuple(broadcast_trees))


@dataclass
class BaselineResult:
    """One algorithm's schedule on a topology, or why it does not apply.

    ``algbw`` is the bandwidth-only throughput (GB/s, exact) of the schedule the
    algorithm would run; ``schedule`` is its native form (rings, trees, a TACOS
    timetable); ``plan_at(size)`` gives the :class:`CollectivePlan` to simulate at a
    message size in bytes (TACOS synthesizes for each chunk size; the others ignore it).
    """

    algorithm: str
    collective: str
    algbw: Fraction | None = None
    schedule: Any = None
    not_applicable_reason: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    plan_at: Callable[[Fraction], CollectivePlan] | None = None

    @property
    def applicable(self) -> bool:
        return self.not_applicable_reason is None

    @classmethod
    def not_applicable(cls, algorithm: str, collective: str, reason: str) -> BaselineResult:
        return cls(algorithm, collective, not_applicable_reason=reason)


# ------------------------------------------------------------------ tree schedules


def trees_plan(collective: str, compute: list[str], trees: list[Tree], total: int,
               reduce_trees: list[Tree] | None = None, whole: bool = False) -> CollectivePlan:
    """The plan of a forest of :class:`canopy.engine.model.schedule.Tree` (ForestColl, Blink).

    A tree of multiplicity m carries m/total of its root's data: its root's shard (1/N of
    the message) or, for single-root forests (``whole``), the whole message. Reduce
    phases run the trees against their arrows (ForestColl (arXiv:2402.06787) §4.6), or run
    ``reduce_trees`` (out-trees of the transposed network) backwards when given.
    Allreduce's broadcast of a tree's data waits for that tree's reduction (same trees)
    or, with separate reduce trees, for the reduction of its root's whole shard.
    """
    n = 1 if whole else len(compute)
    separate = reduce_trees is not None

    def flow(tree: Tree, reduce: bool) -> FlowTree:
        key = ("tree", tree.root) if separate else ("tree", tree.root, tree.index)
        edges = tuple(FlowEdge(e.src, e.dst, tuple(reversed(e.path)) if reduce else e.path)
                      for e in tree.edges)
        return FlowTree(key, tree.root, edges, Fraction(tree.multiplicity, total * n), reduce)

    reduce_phase: tuple[FlowTree, ...] = ()
    broadcast_phase: tuple[FlowTree, ...] = ()
    if collective in ("reduce-scatter", "allreduce"):
        reduce_phase = tuple(flow(t, True) for t in (reduce_trees or trees))
    if collective in ("allgather", "allreduce"):
        broadcast_phase = tuple(flow(t, False) for t in trees)
    return CollectivePlan(collective, tuple(compute), reduce_phase, broadcast_phase)


def schedule_plan(schedule: Schedule) -> CollectivePlan:
    """The plan of a ForestColl :class:`~canopy.engine.model.schedule.Schedule` (k unit trees
    per node)."""
    return trees_plan(schedule.collective, schedule.compute_nodes, schedule.trees, schedule.k,
                      schedule.reduce_trees)


def tree_levels(tree: FlowTree) -> list[int]:
    """Per edge, the step at which its data moves within one piece: the parent's depth
    (broadcast) or the height of the child's subtree (reduce, data flows up). The
    simulator (:func:`canopy.engine.execution.compiler.plan_program`) and the MSCCL connection
    layout order a connection's sends by it."""
    if not tree.reduce:
        depth = {tree.root: 0}
        for e in tree.edges:
            depth[e.child] = depth[e.parent] + 1
        return [depth[e.parent] for e in tree.edges]
    height: dict[str, int] = {}
    for e in reversed(tree.edges):
        height.setdefault(e.child, 0)
        height[e.parent] = max(height.get(e.parent, 0), height[e.child] + 1)
    return [height[e.child] for e in tree.edges]
