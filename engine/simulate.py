"""An α-β event simulator for collective plans on the physical network.

The link model (the α-β model of the TACOS paper, tacos.txt §IV-F and §V-C):

* Every directed physical link has a bandwidth B (GB/s = 10^9 bytes/s, the topology's
  unit) and a latency α in µs (the link's ``latency``, default 1 µs).
* A message of n bytes holds a link for at least ``α + n/B``: α is a per-message cost
  (start-up, synchronisation), not only wire delay, as in TACOS's cost model, which its
  synthesizer schedules with. A link sends one message at a time, in the order messages
  become ready there (first come, first served; ties go by the plan's priority). Plans
  with ``ordered_links`` (a TACOS timetable) issue the messages of each connection (same
  route) strictly in the plan's order, as a compiled schedule's sender would.
* A tree's data is split into ``pieces`` equal pipeline chunks; one message is one piece
  crossing one tree edge, over that edge's physical path. **Compute nodes store and
  forward**: a GPU forwards a piece only after receiving it whole (broadcast), or after
  receiving it from all its children (reduce). In allreduce a broadcast piece leaves the
  root once its reduction has arrived there.
* **Switches forward cut-through** (``switch_mode="cut-through"``, the default, as
  NVSwitch and InfiniBand switches do). On a path ``GPU -l1-> s1 -l2-> ... -> GPU``
  through switches, with link k holding the piece during ``[start_k, end_k]``::

      start_1 = max(ready, free_1)
      start_k = max(start_{k-1} + α_{k-1}, free_k)      the header has crossed link k-1
      end_k   = max(start_k + α_k + n/B_k,              link k's own α + n/B
                    end_{k-1} + α_k)                     the tail arrives, then crosses

  and ``free_k`` becomes ``end_k``: the link is held until the piece's tail has passed,
  so one message at a time and first come, first served still hold on every link. When
  the next link is busy the switch buffers the piece (virtual cut-through), so upstream
  links are never blocked by downstream ones. Over idle links a path costs
  ``Σα + n/min(B)`` instead of store-and-forward's ``Σ(α + n/B)``; over one link both
  are exactly ``α + n/B``.
* ``switch_mode="store-and-forward"`` makes switches behave like GPUs:
  ``start_k = max(end_{k-1}, free_k)`` and ``end_k = start_k + α_k + n/B_k``.

Pipeline depth (:func:`fastest`): a tuned library picks the chunk count per message
size; we try 1, 2, 4, ... pieces and keep the fastest. Pipeline fill and drain cost about
``(pieces + stages - 1) / pieces`` of the bandwidth time, ``stages`` being the longest
chain of store-and-forward steps a piece takes (:func:`pipeline_stages`: tree edges from
root to leaf, reduce then broadcast for allreduce; every link for store-and-forward
switches). So the search always includes ``pieces = PIECES_PER_STAGE * stages`` (and
deeper while it helps) whenever the message cap MAX_MESSAGES and MAX_PIECES allow it,
even when a shallower depth looked best on the way. Since every message pays α on
every link, deeper is not always faster; depths whose busiest link alone would need
longer than the best time found (:func:`busiest_link_floor`) are skipped.

Known limit: first come, first served lets one tree's later pieces take a shared link
ahead of another tree's earlier ones. Schedules that load every link to capacity (as
ForestColl's optimal forests do) then lose time to links that idle while the data they
need waits elsewhere, more so for reductions, which wait for all children; runtimes
whose per-connection buffers keep trees in step lose less.

Time is exact: every duration is a :class:`fractions.Fraction` of a µs, and the event
loop runs on integers in a common unit (the lcm of the denominators), so a single
message over a single link takes exactly ``α + n/B``.

algbw follows nccl-tests: message size over collective time (GB/s = 10^9 bytes/s).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from canopy.engine.errors import ScheduleError
from canopy.engine.plan import CollectivePlan, FlowTree, path_links
from canopy.engine.topology import Topology

DEFAULT_LATENCY_US = Fraction(1)
BYTES_PER_US_PER_GBPS = 1000          # 1 GB/s = 10^9 B/s = 10^3 B/µs
MAX_PIECES = 128                      # deepest pipeline tried
MAX_MESSAGES = 250_000                # bound on link-messages per simulation
PIECES_PER_STAGE = 4                  # the depth search reaches pieces >= 4 x stages
REPORT_SIZES = (1 << 20, 16 << 20, 128 << 20, 1 << 30)
CHECK_EVERY = 1 << 13                 # events between calls of a simulation's ``check``
CUT_THROUGH = "cut-through"
STORE_AND_FORWARD = "store-and-forward"
SWITCH_MODES = (CUT_THROUGH, STORE_AND_FORWARD)


@dataclass(frozen=True)
class SimulationResult:
    """Collective time (µs, exact) of a plan at ``message_size`` bytes."""

    time_us: Fraction
    message_size: Fraction
    pieces: int
    messages: int          # link-messages sent (one per link crossed per chunk)

    @property
    def algbw(self) -> Fraction:
        """nccl-tests algbw in GB/s."""
        return algbw_gbps(self.message_size, self.time_us)


def algbw_gbps(size_bytes: Fraction | int, time_us: Fraction) -> Fraction:
    return Fraction(size_bytes) / (time_us * BYTES_PER_US_PER_GBPS)


def link_time(size_bytes: Fraction, bandwidth: Fraction, latency: Fraction) -> Fraction:
    """α + n/B in µs for n bytes over a link of B GB/s and α µs."""
    return latency + Fraction(size_bytes) / (bandwidth * BYTES_PER_US_PER_GBPS)


def _check_mode(switch_mode: str) -> None:
    if switch_mode not in SWITCH_MODES:
        raise ScheduleError(f"unknown switch mode '{switch_mode}'; use "
                            f"{' or '.join(SWITCH_MODES)}.")


def _cut_through_at(path: tuple[str, ...], switches: frozenset[str], switch_mode: str
                    ) -> list[bool]:
    """For each link of ``path``: may it start on the previous link's header (it leaves a
    switch that forwards cut-through) rather than on its tail?"""
    cut = switch_mode == CUT_THROUGH
    return [h > 0 and cut and path[h] in switches for h in range(len(path) - 1)]


def _tree_depth(tree: FlowTree, steps: dict[tuple[str, ...], int]) -> int:
    """Store-and-forward steps from the root to the deepest node (``steps`` per path)."""
    depth = {tree.root: 0}
    for e in tree.edges:
        depth[e.child] = depth[e.parent] + steps[e.path]
    return max(depth.values())


def pipeline_stages(topology: Topology, plan: CollectivePlan,
                    switch_mode: str = CUT_THROUGH) -> int:
    """The longest chain of store-and-forward steps a pipeline piece goes through.

    A tree edge is one step, or one per link of its path when switches store and
    forward. Allreduce chains its deepest reduce tree and its deepest broadcast tree.
    """
    _check_mode(switch_mode)
    switches = frozenset(topology.switch_nodes())
    steps: dict[tuple[str, ...], int] = {}
    for tree in plan.trees:
        for e in tree.edges:
            if e.path not in steps:
                # Links that wait for the previous link's tail start a new step.
                steps[e.path] = _cut_through_at(e.path, switches, switch_mode).count(False)
    return sum(max((_tree_depth(t, steps) for t in phase), default=0)
               for phase in (plan.reduce_trees, plan.broadcast_trees))


@dataclass
class _Transfers:
    """The transfers of a plan at one size: one per tree edge and pipeline piece."""

    hops: list[list[int]]           # link ids along each transfer's path
    cut: list[list[bool]]           # per link: starts on the previous link's header
    size_class: list[int]           # index into ``sizes``
    sizes: list[Fraction]
    rank: list[int]                 # ties on a link go to the smaller rank
    deps: list[int]
    enables: list[list[int]]


def _build(plan: CollectivePlan, size: Fraction, pieces: int,
           link_id: dict[tuple[str, str], int], switches: frozenset[str],
           switch_mode: str) -> _Transfers:
    """Build the transfers; dependencies follow the trees (see the module docstring)."""
    prios = sorted({e.priority for tree in plan.trees for e in tree.edges})
    prio_rank = {p: i for i, p in enumerate(prios)}
    ntrees = len(plan.trees) + 1
    out = _Transfers([], [], [], [], [], [], [])
    root_done: dict[tuple, list[int]] = {}   # (key, piece) -> reduce transfers into root
    routes: dict[tuple[str, ...], tuple[list[int], list[bool]]] = {}

    def route(path: tuple[str, ...]) -> tuple[list[int], list[bool]]:
        if path not in routes:
            ids = []
            for link in path_links(path):
                if link not in link_id:
                    link_id[link] = len(link_id)
                ids.append(link_id[link])
            routes[path] = (ids, _cut_through_at(path, switches, switch_mode))
        return routes[path]

    classes: dict[Fraction, int] = {}
    order = 0
    for phase_index, phase in enumerate((plan.reduce_trees, plan.broadcast_trees)):
        for tree in phase:
            order += 1
            cls = classes.setdefault(tree.share, len(classes))
            if cls == len(out.sizes):
                out.sizes.append(tree.share * size / pieces)
            count = len(tree.edges)
            edge_hops = [route(e.path)[0] for e in tree.edges]
            edge_cut = [route(e.path)[1] for e in tree.edges]
            edge_prio = [prio_rank[e.priority] for e in tree.edges]
            # Dependencies inside one piece, the same for every piece: local[k] lists
            # the edges edge k enables (broadcast: its child's outgoing edges) or waits
            # for (reduce: the edges into its sender).
            position = {e.child: i for i, e in enumerate(tree.edges)}
            local: list[list[int]] = [[] for _ in range(count)]
            at_root: list[int] = []
            for i, e in enumerate(tree.edges):
                if tree.reduce:
                    if e.parent == tree.root:
                        at_root.append(i)
                    else:
                        local[position[e.parent]].append(i)   # parent's edge waits for i
                elif e.parent == tree.root:
                    at_root.append(i)
                else:
                    local[position[e.parent]].append(i)       # i waits for parent's edge
            for p in range(pieces):
                base = len(out.hops)
                out.hops.extend(edge_hops)
                out.cut.extend(edge_cut)
                out.size_class.extend([cls] * count)
                if plan.ordered_links:
                    # A compiled schedule: its order first, the pieces of a chunk together.
                    out.rank.extend(((phase_index * len(prios) + q) * pieces + p) * ntrees
                                    + order for q in edge_prio)
                else:
                    # Ties: earlier pieces first (pipelining), then the plan's order.
                    out.rank.extend(((phase_index * pieces + p) * len(prios) + q) * ntrees
                                    + order for q in edge_prio)
                out.deps.extend([0] * count)
                out.enables.extend([] for _ in range(count))
                for i, related in enumerate(local):
                    for j in related:
                        first, then = (j, i) if tree.reduce else (i, j)
                        out.enables[base + first].append(base + then)
                        out.deps[base + then] += 1
                if tree.reduce:
                    root_done.setdefault((tree.key, p), []).extend(base + i for i in at_root)
                else:
                    for i in at_root:
                        _depend(out, base + i, root_done.get((tree.key, p), []))
    return out


def _depend(out: _Transfers, tid: int, on: list[int]) -> None:
    out.deps[tid] += len(on)
    for d in on:
        out.enables[d].append(tid)


def simulate(topology: Topology, plan: CollectivePlan, message_size: Fraction | int,
             pieces: int = 1, default_latency: Fraction = DEFAULT_LATENCY_US,
             switch_mode: str = CUT_THROUGH, check: Callable[[], None] | None = None
             ) -> SimulationResult:
    """Run ``plan`` for a message of ``message_size`` bytes; return the collective time.

    ``switch_mode`` is ``"cut-through"`` (default) or ``"store-and-forward"`` (see the
    module docstring); compute nodes always store and forward. ``check`` is called every
    CHECK_EVERY events; it may raise (say :class:`canopy.engine.progress.Cancelled`) to stop.
    """
    if pieces < 1:
        raise ScheduleError(f"pieces must be at least 1, not {pieces}.")
    _check_mode(switch_mode)
    size = Fraction(message_size)
    caps = topology.capacities()
    lats = topology.latencies()
    link_id: dict[tuple[str, str], int] = {}
    tr = _build(plan, size, pieces, link_id, frozenset(topology.switch_nodes()), switch_mode)
    links = [None] * len(link_id)
    for link, lid in link_id.items():
        if link not in caps:
            raise ScheduleError(f"the plan uses link {link[0]} -> {link[1]}, which is not in "
                                "the topology.")
        links[lid] = link
    # Exact durations α + n/B and latencies α on a common integer time unit.
    used = {(lid, cls) for hops, cls in zip(tr.hops, tr.size_class, strict=True)
            for lid in hops}
    alphas = [lats.get(link, default_latency) for link in links]
    durations = {(lid, cls): link_time(tr.sizes[cls], caps[links[lid]], alphas[lid])
                 for lid, cls in used}
    unit = math.lcm(*(d.denominator for d in (*durations.values(), *alphas))) if used else 1
    ticks = {k: int(d * unit) for k, d in durations.items()}
    alpha_ticks = [int(a * unit) for a in alphas]
    costs = [[ticks[(lid, cls)] for lid in hops]
             for hops, cls in zip(tr.hops, tr.size_class, strict=True)]
    connections = None
    if plan.ordered_links:
        # The sender issues each connection's messages in the plan's order.
        by_path: dict[tuple[int, ...], list[int]] = {}
        for t, hops in enumerate(tr.hops):
            by_path.setdefault(tuple(hops), []).append(t)
        connections = [sorted(ts, key=tr.rank.__getitem__) for ts in by_path.values()]
    end = _run(tr, costs, alpha_ticks, len(link_id), connections, check)
    return SimulationResult(Fraction(end, unit), size, pieces, sum(len(h) for h in tr.hops))


def _run(tr: _Transfers, costs: list[list[int]], alpha: list[int], links: int,
         connections: list[list[int]] | None, check: Callable[[], None] | None) -> int:
    """The event loop: links serve ready messages first come, first served (ties by
    rank). With ``connections``, a transfer also waits until the transfers before it on
    its connection (same route) have started. Times in integer ticks."""
    hops, cut, rank, deps, enables = tr.hops, tr.cut, tr.rank, tr.deps, tr.enables
    free = [0] * links
    ready = [0] * len(hops)
    tail = [0] * len(hops)         # when the transfer's piece left its previous link
    turn: list[int] = []           # for each transfer, its place in its connection
    conn_of: list[int] = []
    head: list[int] = []
    if connections is not None:
        turn = [0] * len(hops)
        conn_of = [0] * len(hops)
        head = [0] * len(connections)
        for c, members in enumerate(connections):
            for place, t in enumerate(members):
                turn[t] = place
                conn_of[t] = c
    waiting = [False] * len(hops)  # dependencies met, waiting for its turn
    heap: list[tuple[int, int, int, int]] = []

    def release(t: int, now: int) -> None:
        if connections is None or turn[t] == head[conn_of[t]]:
            heapq.heappush(heap, (max(ready[t], now), rank[t], t, 0))
        else:
            waiting[t] = True

    for t in range(len(hops)):
        if deps[t] == 0:
            release(t, 0)
    pop, push = heapq.heappop, heapq.heappush
    finished = 0
    end = 0
    events = 0
    while heap:
        events += 1
        if check is not None and events % CHECK_EVERY == 0:
            check()
        now, r, t, h = pop(heap)
        lid = hops[t][h]
        begin = now if now > free[lid] else free[lid]
        done = begin + costs[t][h]
        if cut[t][h]:
            # Cut-through: the tail reaches this link at ``tail`` and crosses it in α.
            behind = tail[t] + alpha[lid]
            if behind > done:
                done = behind
        free[lid] = done
        if h == 0 and connections is not None:
            c = conn_of[t]
            head[c] += 1
            if head[c] < len(connections[c]):
                nxt = connections[c][head[c]]
                if waiting[nxt]:
                    waiting[nxt] = False
                    push(heap, (max(ready[nxt], begin), rank[nxt], nxt, 0))
        if h + 1 < len(hops[t]):
            tail[t] = done
            # The next link may start once the header is across this one (cut-through).
            push(heap, (begin + alpha[lid] if cut[t][h + 1] else done, r, t, h + 1))
            continue
        finished += 1
        if done > end:
            end = done
        for nxt in enables[t]:
            deps[nxt] -= 1
            if done > ready[nxt]:
                ready[nxt] = done
            if deps[nxt] == 0:
                release(nxt, done)
    if finished != len(hops):
        raise ScheduleError("the plan deadlocks: some transfers wait on each other.")
    return end


def busiest_link_floor(topology: Topology, plan: CollectivePlan, message_size: Fraction | int,
                       pieces: int, default_latency: Fraction = DEFAULT_LATENCY_US) -> Fraction:
    """A lower bound on the collective time at ``pieces``: the link whose messages need
    the longest in total, ``Σ (α + n/B)`` over everything it carries, one at a time."""
    caps = topology.capacities()
    lats = topology.latencies()
    count: dict[tuple[str, str], int] = {}
    load: dict[tuple[str, str], Fraction] = {}
    for tree in plan.trees:
        for e in tree.edges:
            for link in path_links(e.path):
                count[link] = count.get(link, 0) + 1
                load[link] = load.get(link, Fraction(0)) + tree.share
    size = Fraction(message_size)
    return max((pieces * count[link] * lats.get(link, default_latency)
                + load[link] * size / (caps[link] * BYTES_PER_US_PER_GBPS)
                for link in count if link in caps), default=Fraction(0))


def fastest(topology: Topology, plan: CollectivePlan, message_size: Fraction | int,
            default_latency: Fraction = DEFAULT_LATENCY_US, start: int = 1,
            switch_mode: str = CUT_THROUGH, check: Callable[[], None] | None = None
            ) -> SimulationResult:
    """The best time over pipeline depths (as a tuned library would pick).

    A climb from ``start`` (the best depth of a smaller size, say) through 2x, 4x, ...
    while it helps; then, if not tried yet, the depth reaching ``PIECES_PER_STAGE *
    pipeline_stages`` and deeper ones while they help, so that pipeline fill and drain
    are small wherever α allows. Depths whose message count would exceed MAX_MESSAGES,
    deeper than MAX_PIECES, or whose :func:`busiest_link_floor` is already no faster than
    the best time found are not simulated. ``check`` is passed to :func:`simulate`.
    """
    per_piece = sum(len(e.path) - 1 for tree in plan.trees for e in tree.edges)
    limit = min(MAX_PIECES, max(1, MAX_MESSAGES // max(per_piece, 1)))
    tried: dict[int, SimulationResult] = {}

    def hopeless(pieces: int, best: SimulationResult) -> bool:
        return busiest_link_floor(topology, plan, message_size, pieces,
                                  default_latency) >= best.time_us

    def run(pieces: int) -> SimulationResult:
        if pieces not in tried:
            tried[pieces] = simulate(topology, plan, message_size, pieces, default_latency,
                                     switch_mode, check)
        return tried[pieces]

    def deeper(best: SimulationResult, pieces: int) -> SimulationResult:
        # The floor grows with depth: once it reaches the best time, deeper cannot help.
        while pieces <= limit and not hopeless(pieces, best):
            result = run(pieces)
            if result.time_us >= best.time_us:
                break
            best = result
            pieces *= 2
        return best

    pieces = min(max(1, start), limit)
    best = deeper(run(pieces), 2 * pieces)
    target = min(limit, PIECES_PER_STAGE * pipeline_stages(topology, plan, switch_mode))
    if target > best.pieces and target not in tried and not hopeless(target, best):
        result = run(target)
        if result.time_us < best.time_us:
            best = deeper(result, 2 * target)
    return best
