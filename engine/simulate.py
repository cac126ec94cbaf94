"""An α-β event simulator for collective plans on the physical network.

The model (the link model of the TACOS paper, tacos.txt §IV-F and §V-C):

* Every directed physical link has a bandwidth B (GB/s = 10^9 bytes/s, the topology's
  unit) and a latency α in µs (the link's ``latency``, default 1 µs).
* A message of n bytes occupies a link for exactly ``α + n/B``; a link sends one message
  at a time. Ready messages go first come, first served; ties go by the plan's priority.
  Plans with ``ordered_links`` (a TACOS timetable) send each link's messages strictly in
  the plan's order, as a compiled schedule would.
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
PIECE_CHOICES = (1, 2, 4, 8, 16, 32, 64, 128)
MAX_MESSAGES = 400_000                # bound on link-messages per simulation
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
            edge_hops = [link_ids(e.path) for e in tree.edges]
            edge_prio = [prio_rank[e.priority] for e in tree.edges]
            for p in range(pieces):
                base = len(out.hops)
                for hops, prio in zip(edge_hops, edge_prio, strict=True):
                    out.hops.append(hops)
                    out.size_class.append(cls)
                    out.rank.append(((phase_index * pieces + p) * len(prios) + prio)
                                    * ntrees + order)
                    out.deps.append(0)
                    out.enables.append([])
                into: dict[str, list[int]] = {}
                if tree.reduce:
                    for i, e in enumerate(tree.edges):
                        into.setdefault(e.parent, []).append(base + i)
                    for i, e in enumerate(tree.edges):
                        _depend(out, base + i, into.get(e.child, []))
                    root_done.setdefault((tree.key, p), []).extend(into.get(tree.root, []))
                else:
                    received: dict[str, int] = {}
                    for i, e in enumerate(tree.edges):
                        if e.parent == tree.root:
                            _depend(out, base + i, root_done.get((tree.key, p), []))
                        else:
                            _depend(out, base + i, [received[e.parent]])
                        received[e.child] = base + i
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
    run = _run_ordered if plan.ordered_links else _run_fifo
    end = run(tr.hops, costs, tr.rank, tr.deps, tr.enables, len(link_id))
    return SimulationResult(Fraction(end, unit), size, pieces, sum(len(h) for h in tr.hops))


def _run_fifo(hops: list[list[int]], costs: list[list[int]], rank: list[int],
              deps: list[int], enables: list[list[int]], links: int) -> int:
    """Each link serves ready messages first come, first served (ties by rank)."""
    free = [0] * links
    ready = [0] * len(hops)
    heap = [(0, rank[t], t, 0) for t in range(len(hops)) if deps[t] == 0]
    heapq.heapify(heap)
    pop, push = heapq.heappop, heapq.heappush
    finished = 0
    end = 0
    while heap:
        now, r, t, h = pop(heap)
        lid = hops[t][h]
        begin = now if now > free[lid] else free[lid]
        done = begin + costs[t][h]
        free[lid] = done
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
                push(heap, (ready[nxt], rank[nxt], nxt, 0))
    if finished != len(hops):
        raise ScheduleError("the plan deadlocks: some transfers wait on each other.")
    return end


def _run_ordered(hops: list[list[int]], costs: list[list[int]], rank: list[int],
                 deps: list[int], enables: list[list[int]], links: int) -> int:
    """Each link sends its messages strictly in rank order (a compiled schedule)."""
    queue: list[list[tuple[int, int, int]]] = [[] for _ in range(links)]
    for t, ids in enumerate(hops):
        for h, lid in enumerate(ids):
            queue[lid].append((rank[t], t, h))
    for q in queue:
        q.sort()
    head = [0] * links
    free = [0] * links
    arrived: dict[tuple[int, int], int] = {}
    ready = [0] * len(hops)
    heap: list[tuple[int, int, int, int]] = []   # (time, rank, transfer, hop finished)
    finished = 0
    end = 0

    def arrive(t: int, h: int, now: int) -> None:
        lid = hops[t][h]
        arrived[(t, h)] = now
        q = queue[lid]
        while head[lid] < len(q):
            _, ht, hh = q[head[lid]]
            if (ht, hh) not in arrived:
                break
            at = arrived.pop((ht, hh))
            done = (at if at > free[lid] else free[lid]) + costs[ht][hh]
            free[lid] = done
            head[lid] += 1
            heapq.heappush(heap, (done, rank[ht], ht, hh))

    for t in range(len(hops)):
        if deps[t] == 0:
            arrive(t, 0, 0)
    while heap:
        now, _, t, h = heapq.heappop(heap)
        if h + 1 < len(hops[t]):
            arrive(t, h + 1, now)
            continue
        finished += 1
        end = max(end, now)
        for nxt in enables[t]:
            deps[nxt] -= 1
            ready[nxt] = max(ready[nxt], now)
            if deps[nxt] == 0:
                arrive(nxt, 0, ready[nxt])
    if finished != len(hops):
        raise ScheduleError("the plan deadlocks: a link's order waits on a later message.")
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
    for step in (2, Fraction(1, 2)):
        p = pieces
        while True:
            p = int(p * step)
            if p < 1 or p > limit or p > PIECE_CHOICES[-1]:
                break
            result = run(p)
            if result.time_us >= best.time_us:
                break
            best = result
        if best.pieces != pieces:
            break
    return best
