"""An α-β event simulator for collective plans on the physical network.

The model (the link model of the TACOS paper, tacos.txt §IV-F and §V-C):

* Every directed physical link has a bandwidth B (GB/s = 10^9 bytes/s, the topology's
  unit) and a latency α in µs (the link's ``latency``, default 1 µs).
* A message of n bytes occupies a link for exactly ``α + n/B``; a link sends one message
  at a time. Ready messages go first come, first served; ties go by the plan's priority.
  Plans with ``ordered_links`` (a TACOS timetable) issue the messages of each connection
  (same route) strictly in the plan's order, as a compiled schedule's sender would.
* Multi-link routes are **store-and-forward per link**: a message crosses a switch only
  after it has fully arrived there. Pipelining (below) recovers most of what cut-through
  switching would give, and it is the model the contention-free rings of
  allgather-switched-clusters.txt §3.2 are designed for.
* A tree's data is split into ``pieces`` equal pipeline chunks. A node forwards a chunk
  after receiving it (broadcast), or after receiving it from all its children (reduce).
  In allreduce a broadcast chunk leaves the root once its reduction has arrived there.

Time is exact: every duration is a :class:`fractions.Fraction` of a µs, and the event
loop runs on integers in a common unit (the lcm of the denominators), so a single
message over a single link takes exactly ``α + n/B``.

algbw follows nccl-tests: message size over collective time (GB/s = 10^9 bytes/s).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from fractions import Fraction

from engine.baselines.common import CollectivePlan, path_links
from engine.errors import ScheduleError
from engine.topology import Topology

DEFAULT_LATENCY_US = Fraction(1)
BYTES_PER_US_PER_GBPS = 1000          # 1 GB/s = 10^9 B/s = 10^3 B/µs
MAX_PIECES = 128                      # deepest pipeline tried
MAX_MESSAGES = 250_000                # bound on link-messages per simulation
REPORT_SIZES = (1 << 20, 16 << 20, 128 << 20, 1 << 30)


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


@dataclass
class _Transfers:
    """The transfers of a plan at one size: one per tree edge and pipeline piece."""

    hops: list[list[int]]           # link ids along each transfer's path
    size_class: list[int]           # index into ``sizes``
    sizes: list[Fraction]
    rank: list[int]                 # ties on a link go to the smaller rank
    deps: list[int]
    enables: list[list[int]]


def _build(plan: CollectivePlan, size: Fraction, pieces: int,
           link_id: dict[tuple[str, str], int]) -> _Transfers:
    """Build the transfers; dependencies follow the trees (see the module docstring)."""
    prios = sorted({e.priority for tree in plan.trees for e in tree.edges})
    prio_rank = {p: i for i, p in enumerate(prios)}
    ntrees = len(plan.trees) + 1
    out = _Transfers([], [], [], [], [], [])
    root_done: dict[tuple, list[int]] = {}   # (key, piece) -> reduce transfers into root

    def link_ids(path: tuple[str, ...]) -> list[int]:
        ids = []
        for link in path_links(path):
            if link not in link_id:
                link_id[link] = len(link_id)
            ids.append(link_id[link])
        return ids

    classes: dict[Fraction, int] = {}
    order = 0
    for phase_index, phase in enumerate((plan.reduce_trees, plan.broadcast_trees)):
        for tree in phase:
            order += 1
            cls = classes.setdefault(tree.share, len(classes))
            if cls == len(out.sizes):
                out.sizes.append(tree.share * size / pieces)
            count = len(tree.edges)
            edge_hops = [link_ids(e.path) for e in tree.edges]
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
             pieces: int = 1, default_latency: Fraction = DEFAULT_LATENCY_US
             ) -> SimulationResult:
    """Run ``plan`` for a message of ``message_size`` bytes; return the collective time."""
    if pieces < 1:
        raise ScheduleError(f"pieces must be at least 1, not {pieces}.")
    size = Fraction(message_size)
    caps = topology.capacities()
    lats = topology.latencies()
    link_id: dict[tuple[str, str], int] = {}
    tr = _build(plan, size, pieces, link_id)
    links = [None] * len(link_id)
    for link, lid in link_id.items():
        if link not in caps:
            raise ScheduleError(f"the plan uses link {link[0]} -> {link[1]}, which is not in "
                                "the topology.")
        links[lid] = link
    # Exact durations α + n/B on a common integer time unit.
    used = {(lid, cls) for hops, cls in zip(tr.hops, tr.size_class, strict=True)
            for lid in hops}
    durations = {(lid, cls): link_time(tr.sizes[cls], caps[links[lid]],
                                       lats.get(links[lid], default_latency))
                 for lid, cls in used}
    unit = math.lcm(*(d.denominator for d in durations.values())) if used else 1
    ticks = {k: int(d * unit) for k, d in durations.items()}
    costs = [[ticks[(lid, cls)] for lid in hops]
             for hops, cls in zip(tr.hops, tr.size_class, strict=True)]
    connections = None
    if plan.ordered_links:
        # The sender issues each connection's messages in the plan's order.
        by_path: dict[tuple[int, ...], list[int]] = {}
        for t, hops in enumerate(tr.hops):
            by_path.setdefault(tuple(hops), []).append(t)
        connections = [sorted(ts, key=tr.rank.__getitem__) for ts in by_path.values()]
    end = _run(tr.hops, costs, tr.rank, tr.deps, tr.enables, len(link_id), connections)
    return SimulationResult(Fraction(end, unit), size, pieces, sum(len(h) for h in tr.hops))


def _run(hops: list[list[int]], costs: list[list[int]], rank: list[int], deps: list[int],
         enables: list[list[int]], links: int, connections: list[list[int]] | None) -> int:
    """The event loop: links serve ready messages first come, first served (ties by
    rank). With ``connections``, a transfer also waits until the transfers before it on
    its connection (same route) have started."""
    free = [0] * links
    ready = [0] * len(hops)
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
    while heap:
        now, r, t, h = pop(heap)
        lid = hops[t][h]
        begin = now if now > free[lid] else free[lid]
        done = begin + costs[t][h]
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
            push(heap, (done, r, t, h + 1))
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


def fastest(topology: Topology, plan: CollectivePlan, message_size: Fraction | int,
            default_latency: Fraction = DEFAULT_LATENCY_US, start: int = 1
            ) -> SimulationResult:
    """The best time over pipeline depths 1, 2, 4, ... (as a tuned library would pick).

    A hill climb from ``start`` (the best depth of a smaller size, say): deeper while it
    helps, else shallower. Depths whose message count would exceed MAX_MESSAGES are
    not tried.
    """
    per_piece = sum(len(e.path) - 1 for tree in plan.trees for e in tree.edges)
    limit = max(1, MAX_MESSAGES // max(per_piece, 1))
    tried: dict[int, SimulationResult] = {}

    def run(pieces: int) -> SimulationResult:
        if pieces not in tried:
            tried[pieces] = simulate(topology, plan, message_size, pieces, default_latency)
        return tried[pieces]

    pieces = min(max(1, start), limit)
    best = run(pieces)
    # Deeper first; shallower only from the default start (a larger message never wants
    # a shallower pipeline than a smaller one, so callers pass the last best depth).
    for step in (2, Fraction(1, 2)) if start == 1 else (2,):
        p = pieces
        while True:
            p = int(p * step)
            if p < 1 or p > limit or p > MAX_PIECES:
                break
            result = run(p)
            if result.time_us >= best.time_us:
                break
            best = result
        if best.pieces != pieces:
            break
    return best
