"""Which connections a tree schedule's transfers take, within the MSCCL runtime's limits.

One decision, used twice: ``canopy compare`` simulates the plan this returns
(:func:`canopy.engine.execution.simulate.plan_program` reads every
:class:`~canopy.engine.model.plan.FlowEdge`'s ``channel``), and the MSCCL export writes the
same connections (:func:`canopy.engine.msccl.writer.plan_threadblocks`: a transfer on the
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
   needs fewer thread blocks (:func:`unit_threadblocks`; rail-leaf-spine-4x8
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

import math
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import replace
from fractions import Fraction

from canopy.engine.model.plan import (
    CollectivePlan,
    bandwidth_bound,
    link_loads,
    path_links,
)
from canopy.engine.model.topology import Topology
from canopy.engine.msccl.connection_counts import (
    COPY_THREADBLOCKS,
    Descent,
    Group,
    Key,
    ServerPlaces,
    channel_plan,
    connection_members,
    fits,
    layout_channels,
    multiplicities,
    sender_receiver,
    server_places,
    shared_counts,
    split_counts,
    split_trees,
    steps_fit,
    unit_fits,
    unit_threadblocks,
)
from canopy.engine.msccl.pairing import (
    Pairing,
    pair_threadblocks,
    pairing,
    threadblocks_per_gpu,
)
from canopy.engine.msccl.threadblocks import (
    MscclLimitError,
    MscclLimits,
)

STEP_BANDS = 3                         # most steps of a piece one connection may carry


UNIT_SHARE_FACTOR = Fraction(5, 2)      # unit connections per thread block still worth merging


SLACK_GRAINS = (1, 2, 0)                # layout 7's unit chunks per connection (0: one per key)


SLACK_DETAIL = 3                        # layout 7's keys: by phase and band of 2 steps


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
    if unit_fits(plan, mult, limits):
        yield ("unit", plan)
        return
    servers = server_places(topology) if topology is not None else None
    unit = _unit_paired(plan, mult, limits, servers)
    if unit is not None:
        yield ("unit, paired", unit)
        return
    fitting = [q for q in range(2, max(mult) + 1)
               if fits(split_counts(plan, mult, q), limits)][:1]
    if fitting and fitting[0] < max(mult):
        fitting.append(max(mult))
    for q in fitting:
        split = split_trees(plan, mult, q)
        if not steps_fit(split, limits):
            break
        yield (f"q = {q}", channel_plan(split, split_counts(split, [1] * len(split.trees), 1),
                                         servers=servers))
    banded = False
    whole: list[tuple[str, CollectivePlan]] = []        # detail 0's layouts, by suffix
    for detail in range(STEP_BANDS + 2):
        if detail == 1 and not (plan.reduce_trees and plan.broadcast_trees) or banded:
            continue
        if detail == 1 and not _phases_share_keys(plan):
            # every key of detail 0 holds one phase: the same keys, counts and channels
            yield from ((f"shared by phase{suffix}", laid) for suffix, laid in whole)
            continue
        name = ("shared", "shared by phase", "shared by step")[min(detail, 2)]
        name = name if detail <= 2 else f"shared by {detail - 1} steps"
        # reductions: the bands weighted (early steps share first), and equal counts,
        # which run faster where the joins are few (mi250-8plus8 allreduce)
        for weighted in (True, False) if detail >= 2 and plan.reduce_trees else (True,):
            descent = Descent(plan, limits.max_channels, detail, None, weighted)
            try:
                counts = descent.counts(limits)
            except MscclLimitError:
                continue
            if fits(counts, limits):
                banded = detail >= 2
                laid = channel_plan(plan, counts, detail, servers)
                if detail == 0:
                    whole.append(("", laid))
                yield (name if weighted else f"{name}, equal counts", laid)
            paired = _paired_shared(plan, limits, detail, None, weighted, servers, descent)
            if paired is not None:
                if detail == 0:
                    whole.append((", paired", paired))
                yield (f"{name if weighted else f'{name}, equal counts'}, paired", paired)
    if topology is not None:
        yield from _unit_shared(plan, mult, limits, topology)
    yield from _even_unit(plan, mult, limits, servers)
    if topology is not None:
        yield from slack_tiers(plan, mult, limits, topology, servers)


def _phases_share_keys(plan: CollectivePlan) -> bool:
    """Whether a connection key of layout 3 (:func:`connection_members`, detail 0) holds
    tree edges of both of an allreduce's phases; where none does, keying by phase
    (detail 1) gives the same keys, so the same counts at every budget (ties go by key,
    and a key and its phase-extended key compare alike) and the same layouts."""
    return any(len({member[0][0] for member in items}) > 1
               for items in connection_members(plan, 0).values())


def _even_unit(plan: CollectivePlan, mult: list[int], limits: MscclLimits,
               servers: ServerPlaces | None = None) -> list[tuple[str, CollectivePlan]]:
    """Layout 6: ``plan`` cut into unit trees (q = 1), and the unit tree edges between two
    GPUs over one route on ceil(chunks / T) connections, for the smallest T that fits, in
    runs of neighbouring steps (:func:`channel_plan`): every connection of a link then
    carries nearly the same chunks. A link is shared equally among its connections, so one
    carrying fewer chunks than its neighbours runs ahead at their expense and the heavy ones
    drain last. Equal chunks per connection keep them draining together: on the punctured
    torus's allgather and mi250-8plus8's allreduce (App. E) this runs closer to the optimum
    than whole trees shared by step (docs/performance.md, "MSCCL connection layouts")."""
    split = split_trees(plan, mult, 1) if max(mult) > 1 else plan
    if not steps_fit(split, limits):
        return []
    chunks = {key: len(items) for key, items in connection_members(split).items()}
    for most in range(1, max(chunks.values(), default=0) + 1):
        counts = {key: -(-n // most) for key, n in chunks.items()}
        if fits(counts, limits):
            return [("shared evenly, unit trees", channel_plan(split, counts, 0, servers))]
    return []


def _unit_split_to_share(plan: CollectivePlan, mult: list[int], limits: MscclLimits
                         ) -> CollectivePlan | None:
    """``plan`` cut into unit trees (q = 1) for layouts that merge its connections, or
    None where a connection per unit tree edge would need more than UNIT_SHARE_FACTOR
    times a GPU's thread blocks (most would be shared anyway) or the steps do not fit."""
    per_gpu: dict[str, int] = defaultdict(int)
    for (u, v, _), n in split_counts(plan, mult, 1).items():
        per_gpu[u] += n
        per_gpu[v] += n
    if max(per_gpu.values()) > UNIT_SHARE_FACTOR * (limits.max_tbs_per_gpu - COPY_THREADBLOCKS):
        return None
    split = split_trees(plan, mult, 1) if max(mult) > 1 else plan
    return split if steps_fit(split, limits) else None


def slack_tiers(plan: CollectivePlan, mult: list[int], limits: MscclLimits,
                 topology: Topology, servers: ServerPlaces | None = None
                 ) -> Iterator[tuple[str, CollectivePlan]]:
    """Layout 7: ``plan`` cut into unit trees (q = 1), its tree edges keyed by phase and
    band of 2 steps (:func:`connection_members`), and every key's connections set by the slack
    of the busiest link on its route (that link's load at the plan's bound over its capacity,
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
    congestion = {link: load * bound / caps[link] for link, load in link_loads(plan).items()}
    chunks: dict[Key, int] = {}
    tier: dict[Key, int] = {}
    for key, items in connection_members(split, SLACK_DETAIL).items():
        route = key[2] if key[2][0] == key[0] else tuple(reversed(key[2]))
        chunks[key] = len(items)
        tier[key] = math.floor(max(congestion[link] for link in path_links(route)) * 100)
    grain = dict.fromkeys(sorted(set(tier.values())), 0)   # index into SLACK_GRAINS
    while True:
        counts = {key: -(-n // SLACK_GRAINS[grain[tier[key]]]) if SLACK_GRAINS[grain[tier[key]]]
                  else 1 for key, n in chunks.items()}
        if fits(counts, limits):
            yield ("shared by link slack, unit trees",
                   channel_plan(split, counts, SLACK_DETAIL, servers))
            return
        coarser = next((t for t, g in grain.items() if g < len(SLACK_GRAINS) - 1), None)
        if coarser is None:
            return
        grain[coarser] += 1


def _unit_paired(plan: CollectivePlan, mult: list[int], limits: MscclLimits,
                 servers: ServerPlaces | None = None
                 ) -> CollectivePlan | None:
    """Unit connections (a connection per unit tree edge, as layout 2 with q = 1) with
    receive-only and send-only connection ends paired in thread blocks
    (:func:`canopy.engine.msccl.pairing.pair_threadblocks`), or None when that does not
    fit: mi250-2x16 allgather at k = 2 needs 123 thread blocks per GPU with relays fused,
    87 paired."""
    counts = split_counts(plan, mult, 1)
    per_pair: dict[tuple[str, str], int] = defaultdict(int)
    for (u, v, _), n in counts.items():
        per_pair[(u, v)] += n
    if any(n > limits.max_channels for n in per_pair.values()):
        return None
    split = split_trees(plan, mult, 1)
    if not steps_fit(split, limits):
        return None
    laid = channel_plan(split, split_counts(split, [1] * len(split.trees), 1),
                         servers=servers)
    return pair_threadblocks(laid, limits, split, servers)


def _paired_shared(plan: CollectivePlan, limits: MscclLimits, detail: int,
                   topology: Topology | None, weighted: bool = True,
                   servers: ServerPlaces | None = None, descent: Descent | None = None
                   ) -> CollectivePlan | None:
    """Layout 3 with more connections than a thread block per connection end allows, the
    ends paired in thread blocks (:func:`canopy.engine.msccl.pairing.pair_threadblocks`):
    the most connection ends per GPU (up to twice its thread blocks, by bisection) whose
    pairing fits ``limits``; None when even the unpaired budget's does not pair.
    ``descent``: the plan's :class:`Descent` where the caller has it (same arguments)."""
    descent = descent or Descent(plan, limits.max_channels, detail, topology, weighted)
    found: tuple[dict[Key, int], list[int], Pairing] | None = None
    low, high = limits.max_tbs_per_gpu + 1, 2 * limits.max_tbs_per_gpu
    known: dict[frozenset[tuple[Key, int]], tuple[list[int], Pairing] | None] = {}
    while low <= high:
        budget = (low + high) // 2
        wider = replace(limits, max_tbs_per_gpu=budget)
        try:
            counts = descent.counts(wider)
        except MscclLimitError:
            high = budget - 1
            continue
        # (each budget's layout paired from its edges' channels alone; the plan is built
        # for the budget found. Budgets past the connections' largest counts give the
        # same counts, so the same pairing)
        key = frozenset(counts.items())         # (by counts)
        if key not in known:
            known[key] = None
            if _pairs_fit(counts, limits):
                channels = layout_channels(plan, counts, detail, servers)
                paired = pairing(plan, channels, limits, servers, plan.paired)
                known[key] = None if paired is None else (channels, paired)
        fitting = known[key]
        if fitting is None:
            high = budget - 1
        else:
            found, low = (counts, *fitting), budget + 1
    if found is None or not found[2].kept:      # (none over their thread blocks: unpaired)
        return None
    counts, channels, paired = found
    return replace(channel_plan(plan, counts, detail, servers,
                                paired.renumbered(plan, channels)), paired=paired.pairs())


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
    have slack (:func:`shared_counts` with the topology), shared by phase and by 2 steps:
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
    servers = server_places(topology)
    for detail in (1, 3):
        if detail == 1 and not (plan.reduce_trees and plan.broadcast_trees):
            continue
        descent = Descent(split, limits.max_channels, detail, topology, True)
        try:
            counts = descent.counts(limits)
        except MscclLimitError:
            continue
        name = "shared by phase" if detail == 1 else "shared by 2 steps"
        if fits(counts, limits):
            yield (f"{name}, unit trees", channel_plan(split, counts, detail, servers))
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
        shared_counts(plan, limits or MscclLimits())   # names the GPU with too many peers
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
        counts = split_counts(original, mult, 1)
        name, most = "unit connections", 1
    else:
        load: dict[tuple[Group, object], int] = defaultdict(int)
        edges: dict[tuple[Group, object], int] = defaultdict(int)
        for tree, m in zip(laid_out.trees, multiplicities(laid_out), strict=True):
            for e in tree.edges:
                load[(sender_receiver(tree, e), e.channel)] += m
                edges[(sender_receiver(tree, e), e.channel)] += 1
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
        threadblocks = unit_threadblocks(original, limits) or threadblocks
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
