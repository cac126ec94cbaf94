"""Which connections a tree schedule's transfers take, within the MSCCL runtime's limits.

One decision, used twice: ``canopy compare`` simulates the plan this returns
(:func:`canopy.engine.simulate.plan_program` reads every
:class:`~canopy.engine.plan.FlowEdge`'s ``channel``), and the MSCCL export writes the
same connections (:func:`canopy.engine.msccl.writer.plan_layout`: a transfer on the
channel its edge names, one thread block per connection, each connection's transfers in
the order the simulation sends them). So the XML that ``canopy check-xml`` times and the
schedule ``canopy compare`` times are the same program.

A *connection* is (sender, receiver, channel) with one physical route. In the execution
model a link shared by several connections is shared among them equally, so a tree of
multiplicity m (m unit trees of forestcoll.txt Prop. 3, m chunks of the XML) keeps its
share of a link only if it streams on m connections. The runtime bounds connections: at
most ``max_channels`` channels per pair of GPUs, one thread block per connection end and
``max_tbs_per_gpu`` thread blocks per GPU (its SMs), ``max_tbs_per_channel`` per channel.
:func:`runtime_layout` takes, in this order, the first layout that fits:

1. **Unit connections**: every unit tree edge its own connection. The plan is returned
   unchanged (its edges name no channel: the simulation gives each tree edge one
   connection of weight m; the export writes the ``pipelined`` layout, m connections).
2. **q chunks per connection**, for the smallest q that fits: every tree of multiplicity
   m is cut into ceil(m/q) trees of at most q chunks (as equal as whole chunks allow),
   and every edge of those gets a channel of its own. Trees keep their links' shares in
   proportion to their data up to rounding; q = the largest multiplicity is one
   connection per tree edge.
3. **Shared connections**: where even one connection per tree edge needs more thread
   blocks than the GPU has, the tree edges between two GPUs over one route share
   ``n`` connections. Starting from one per tree edge, the group with most connections
   at the GPU furthest over its budget gives one up until every GPU fits. A group's
   tree edges, sorted by (phase, step within the piece, tree), go to its connections in
   runs of nearly equal chunks, so a connection carries transfers of neighbouring steps
   only: a transfer on a shared connection waits behind the earlier ones of its loop
   iteration, and one far down its tree would hold back those near the root. Within a
   loop iteration every shared connection sends in that same order (the one
   :func:`canopy.engine.simulate.plan_program` uses), successive iterations follow each
   other, and the order only grows along the steps a transfer waits on, so the program
   cannot deadlock.

Where a layout must share connections, :func:`runtime_schedule` takes the fewest-trees
schedule within FALLBACK_TOLERANCE percent of the optimum instead if that one gets unit
connections (``canopy compare`` and ``canopy solve --msccl`` both call it).

Thread blocks are counted without fusing receive and send (what the export writes for
layouts 2 and 3): one per (peer, direction, channel) a GPU uses, plus one for its local
copies.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, replace

from canopy.engine.msccl.lowering import chunks_per_root
from canopy.engine.msccl.threadblocks import MscclLimitError, MscclLimits, parser_elements
from canopy.engine.plan import (
    CollectivePlan,
    FlowEdge,
    FlowTree,
    Path,
    schedule_plan,
    tree_levels,
)
from canopy.engine.schedule import Schedule
from canopy.engine.topology import Topology

Group = tuple[str, str, Path]          # (sender, receiver, route): one kind of connection
COPY_THREADBLOCKS = 1                  # a GPU's local copies share one thread block


def _sender_receiver(tree: FlowTree, edge: FlowEdge) -> Group:
    """Who sends over ``edge`` and over which route (reduce trees send child to parent)."""
    if tree.reduce:
        return edge.child, edge.parent, edge.path
    return edge.parent, edge.child, edge.path


def _fits(counts: dict[Group, int], limits: MscclLimits) -> bool:
    """Whether ``counts`` connections per group fit the runtime's limits (see the module
    docstring): channels per pair, thread blocks per GPU and per channel."""
    per_pair: dict[tuple[str, str], int] = defaultdict(int)
    per_gpu: dict[str, int] = defaultdict(int)
    for (u, v, _), n in counts.items():
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


def _multiplicities(plan: CollectivePlan) -> list[int]:
    n, chunks = len(plan.compute_nodes), chunks_per_root(plan)
    return [int(t.share * n * chunks) for t in plan.trees]


def _split_counts(plan: CollectivePlan, mult: list[int], q: int) -> dict[Group, int]:
    counts: dict[Group, int] = defaultdict(int)
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
        self.first: dict[Group, int] = {}

    def ids(self, group: Group, count: int) -> list[int]:
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


def _shared_counts(plan: CollectivePlan, limits: MscclLimits) -> dict[Group, int]:
    """Layout 3's connections per group: from one per tree edge, the group with most
    connections at the GPU furthest over its budget gives one up, until all fit."""
    counts = _split_counts(plan, [1] * len(plan.trees), 1)
    budget = limits.max_tbs_per_gpu - COPY_THREADBLOCKS
    at: dict[str, list[Group]] = defaultdict(list)
    for group in counts:
        at[group[0]].append(group)
        at[group[1]].append(group)
    per_gpu = {gpu: sum(counts[g] for g in groups) for gpu, groups in at.items()}
    while True:
        gpu = max(per_gpu, key=lambda g: (per_gpu[g], g))
        per_pair: dict[tuple[str, str], int] = defaultdict(int)
        for group, n in counts.items():
            per_pair[group[:2]] += n
        crowded = [g for g in counts if per_pair[g[:2]] > limits.max_channels and counts[g] > 1]
        if per_gpu[gpu] <= budget and not crowded:
            return counts
        choices = crowded or [g for g in at[gpu] if counts[g] > 1]
        if not choices:
            raise MscclLimitError(
                f"the MSCCL program does not fit the runtime's limits: GPU {gpu} talks to "
                f"more peers than its {limits.max_tbs_per_gpu} thread blocks can serve.")
        group = max(choices, key=lambda g: (counts[g], g))
        counts[group] -= 1
        per_gpu[group[0]] -= 1
        per_gpu[group[1]] -= 1


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


def _channel_plan(plan: CollectivePlan, counts: dict[Group, int]) -> CollectivePlan:
    """``plan`` with each group's tree edges on its ``counts[group]`` connections, in runs
    of consecutive steps within the piece (phase, then step, then tree) of nearly equal
    chunks: a connection then carries transfers of neighbouring steps only, so a piece's
    late step holds back little (one connection per tree edge where counts allow)."""
    mult = _multiplicities(plan)
    channels = _Channels()
    members: dict[Group, list[tuple[tuple[int, int], int, int]]] = defaultdict(list)
    cut = len(plan.reduce_trees)
    for ti, tree in enumerate(plan.trees):
        for ei, (e, level) in enumerate(zip(tree.edges, tree_levels(tree), strict=True)):
            members[_sender_receiver(tree, e)].append(((0 if ti < cut else 1, level), ti, ei))
    chosen: dict[tuple[int, int], int] = {}
    for group, items in members.items():
        ids = channels.ids(group, counts[group])
        items.sort()
        runs = _contiguous([mult[ti] for _, ti, _ in items], len(ids))
        for (_, ti, ei), run in zip(items, runs, strict=True):
            chosen[(ti, ei)] = ids[run]
    trees = [replace(t, edges=tuple(replace(e, channel=chosen[(ti, ei)])
                                    for ei, e in enumerate(t.edges)))
             for ti, t in enumerate(plan.trees)]
    return replace(plan, reduce_trees=tuple(trees[:cut]), broadcast_trees=tuple(trees[cut:]))


def _steps_fit(plan: CollectivePlan, limits: MscclLimits) -> bool:
    """Whether every GPU's steps, with as many thread blocks as it may have, stay within
    the parser's elements (:func:`~canopy.engine.msccl.threadblocks.parser_elements`):
    a step per transfer end (per ``max_count`` chunks) and at most one input copy per tree
    rooted there (reductions copy every tree's chunks on every GPU)."""
    mult = _multiplicities(plan)
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


def runtime_layout(plan: CollectivePlan, limits: MscclLimits | None = None) -> CollectivePlan:
    """``plan`` with the connections the MSCCL export gives it (module docstring): the plan
    itself where every unit tree edge fits a connection of its own; else its trees cut
    into parts of at most q chunks with a connection per edge, for the smallest q that
    fits (and whose steps the parser holds); else shared connections. Plans whose edges
    already name channels (rings) or keep a timetable (TACOS) are returned as they are.
    Raises :class:`MscclLimitError` when no layout fits."""
    limits = limits or MscclLimits()
    if plan.ordered_links or any(e.channel is not None for t in plan.trees for e in t.edges):
        return plan
    mult = _multiplicities(plan)
    if _fits(_split_counts(plan, mult, 1), limits):
        return plan
    for q in range(2, max(mult) + 1):
        if _fits(_split_counts(plan, mult, q), limits):
            split = _split_trees(plan, mult, q)
            if _steps_fit(split, limits):
                return _channel_plan(split, _split_counts(split, [1] * len(split.trees), 1))
            break
    counts = _shared_counts(plan, limits)
    if not _fits(counts, limits):
        raise MscclLimitError("the MSCCL program does not fit the runtime's limits: its GPUs "
                              "need more thread blocks per channel than the runtime allows.")
    return _channel_plan(plan, counts)


def describe_layout(original: CollectivePlan, laid_out: CollectivePlan) -> dict[str, object]:
    """What :func:`runtime_layout` chose, for reports: the layout, its connections, the
    most chunks one carries per loop iteration and the most thread blocks one GPU needs
    for them (counted as in :func:`runtime_layout`)."""
    mult = _multiplicities(original)
    if laid_out is original:
        counts = _split_counts(original, mult, 1)
        name, most = "unit connections", 1
    else:
        load: dict[tuple[Group, object], int] = defaultdict(int)
        edges: dict[tuple[Group, object], int] = defaultdict(int)
        for tree, m in zip(laid_out.trees, _multiplicities(laid_out), strict=True):
            for e in tree.edges:
                load[(_sender_receiver(tree, e), e.channel)] += m
                edges[(_sender_receiver(tree, e), e.channel)] += 1
        counts = defaultdict(int)
        for group, _ in load:
            counts[group] += 1
        most = max(load.values())
        name = ("a connection per tree edge" if max(edges.values()) == 1
                else "connections shared by tree edges")
        largest = max(_multiplicities(laid_out))
        name += f" (trees of at most {largest} chunk{'s' if largest > 1 else ''})"
    per_gpu: dict[str, int] = defaultdict(int)
    for (u, v, _), n in counts.items():
        per_gpu[u] += n
        per_gpu[v] += n
    return {"layout": name, "connections": sum(counts.values()),
            "chunks_per_connection": most,
            "unit_tree_edges": sum(m * len(t.edges) for m, t in zip(mult, original.trees,
                                                                        strict=True)),
            "threadblocks_per_gpu": max(per_gpu.values(), default=0) + COPY_THREADBLOCKS}


FALLBACK_TOLERANCE = 1            # percent of the optimum a fewer-trees schedule may give up


@dataclass
class RuntimeChoice:
    """The schedule to run, its plan (``base``) and that plan laid out (``plan``); ``note``
    says why it is not the schedule asked for (None when it is)."""

    schedule: Schedule
    base: CollectivePlan
    plan: CollectivePlan
    note: str | None = None

    def describe(self) -> dict[str, object]:
        """:func:`describe_layout` of the choice, with its note."""
        out = describe_layout(self.base, self.plan)
        if self.note is not None:
            out["note"] = self.note
        return out


def _shares_connections(base: CollectivePlan, laid: CollectivePlan) -> bool:
    return laid is not base and sum(len(t.edges) for t in laid.trees) > len(
        {(_sender_receiver(t, e), e.channel) for t in laid.trees for e in t.edges})


def runtime_schedule(topology: Topology, schedule: Schedule, limits: MscclLimits | None = None
                     ) -> RuntimeChoice:
    """The schedule to export and simulate: ``schedule`` with its :func:`runtime_layout`;
    but where that layout must share connections (the trees need more of them than the
    GPUs' thread blocks serve) and the fewest-trees schedule within FALLBACK_TOLERANCE
    percent of the optimum (``canopy solve --tolerance``, :mod:`canopy.engine.fewest`)
    gives every unit tree edge a connection of its own, that schedule: it runs as the
    bound says, where shared connections hold pieces back (rail-leaf-spine-4x8: k = 1 at
    99.6 % of the optimum runs at 98 % of it, k = 10 shared at 62 %). A schedule with a
    fixed k is kept. Deterministic (no simulation), so ``canopy compare`` and the
    command line's export take the same schedule."""
    from canopy.engine.forest import solve

    plan = schedule_plan(schedule)
    laid = runtime_layout(plan, limits)
    if schedule.fixed_k or not _shares_connections(plan, laid):
        return RuntimeChoice(schedule, plan, laid)
    other = solve(topology, schedule.collective, tolerance=FALLBACK_TOLERANCE)
    if other.k >= schedule.k:
        return RuntimeChoice(schedule, plan, laid)
    other_plan = schedule_plan(other)
    try:
        other_laid = runtime_layout(other_plan, limits)
    except MscclLimitError:
        return RuntimeChoice(schedule, plan, laid)
    if other_laid is not other_plan:
        return RuntimeChoice(schedule, plan, laid)
    share = float(other.algbw / schedule.algbw) * 100
    return RuntimeChoice(other, other_plan, other_laid, (
        f"runs the fewest-trees schedule within {FALLBACK_TOLERANCE} % of the optimum "
        f"(k = {other.k}, {share:.2f} % of k = {schedule.k}'s algbw): k = {schedule.k} needs "
        f"more connections than {(limits or MscclLimits()).max_tbs_per_gpu} thread blocks "
        "per GPU serve, and shared connections hold pieces back"))
