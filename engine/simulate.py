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
class _Transfer:
    path: tuple[str, ...]
    size: Fraction
    priority: tuple
    deps: int = 0
    ready: int = 0


def _build(plan: CollectivePlan, size: Fraction, pieces: int
           ) -> tuple[list[_Transfer], list[list[int]]]:
    """Transfers (one per tree edge and piece) and, for each, the transfers it enables."""
    transfers: list[_Transfer] = []
    enables: list[list[int]] = []
    root_done: dict[tuple, list[int]] = {}   # (key, piece) -> reduce transfers into root

    def add(path: tuple[str, ...], nbytes: Fraction, priority: tuple) -> int:
        transfers.append(_Transfer(path, nbytes, priority))
        enables.append([])
        return len(transfers) - 1

    def depend(tid: int, on: list[int]) -> None:
        transfers[tid].deps += len(on)
        for d in on:
            enables[d].append(tid)

    order = 0
    for phase_index, phase in enumerate((plan.reduce_trees, plan.broadcast_trees)):
        for tree in phase:
            order += 1
            nbytes = tree.share * size / pieces
            for p in range(pieces):
                if tree.reduce:
                    into: dict[str, list[int]] = {}
                    ids = []
                    for e in tree.edges:
                        tid = add(e.path, nbytes, (phase_index, p, e.priority, order))
                        ids.append(tid)
                        into.setdefault(e.parent, []).append(tid)
                    for e, tid in zip(tree.edges, ids, strict=True):
                        depend(tid, into.get(e.child, []))
                    root_done[(tree.key, p)] = into.get(tree.root, [])
                else:
                    received: dict[str, int] = {}
                    for e in tree.edges:
                        tid = add(e.path, nbytes, (phase_index, p, e.priority, order))
                        if e.parent == tree.root:
                            depend(tid, root_done.get((tree.key, p), []))
                        else:
                            depend(tid, [received[e.parent]])
                        received[e.child] = tid
    return transfers, enables


def simulate(topology: Topology, plan: CollectivePlan, message_size: Fraction | int,
             pieces: int = 1, default_latency: Fraction = DEFAULT_LATENCY_US
             ) -> SimulationResult:
    """Run ``plan`` for a message of ``message_size`` bytes; return the collective time."""
    if pieces < 1:
        raise ScheduleError(f"pieces must be at least 1, not {pieces}.")
    size = Fraction(message_size)
    caps = topology.capacities()
    lats = topology.latencies()
    transfers, enables = _build(plan, size, pieces)

    # Exact durations on a common integer time unit.
    durations: dict[tuple[tuple[str, str], Fraction], Fraction] = {}
    for t in transfers:
        for link in path_links(t.path):
            key = (link, t.size)
            if key not in durations:
                if link not in caps:
                    raise ScheduleError(f"the plan uses link {link[0]} -> {link[1]}, which is "
                                        "not in the topology.")
                durations[key] = link_time(t.size, caps[link], lats.get(link, default_latency))
    unit = math.lcm(*(d.denominator for d in durations.values())) if durations else 1
    ticks = {k: int(d * unit) for k, d in durations.items()}

    messages = sum(len(t.path) - 1 for t in transfers)
    end = (_run_ordered if plan.ordered_links else _run_fifo)(transfers, enables, ticks)
    return SimulationResult(Fraction(end, unit), size, pieces, messages)


def _complete(tid: int, now: int, transfers: list[_Transfer], enables: list[list[int]],
              finished: list[int]) -> list[int]:
    """Mark ``tid`` done at ``now``; return the transfers that became ready."""
    ready = []
    for nxt in enables[tid]:
        t = transfers[nxt]
        t.deps -= 1
        t.ready = max(t.ready, now)
        if t.deps == 0:
            ready.append(nxt)
    finished.append(tid)
    return ready


def _run_fifo(transfers: list[_Transfer], enables: list[list[int]],
              ticks: dict[tuple[tuple[str, str], Fraction], int]) -> int:
    free: dict[tuple[str, str], int] = {}
    heap: list[tuple] = []
    seq = 0
    for tid, t in enumerate(transfers):
        if t.deps == 0:
            heap.append((0, t.priority, seq, tid, 0))
            seq += 1
    heapq.heapify(heap)
    finished: list[int] = []
    end = 0
    while heap:
        now, prio, _, tid, hop = heapq.heappop(heap)
        t = transfers[tid]
        link = (t.path[hop], t.path[hop + 1])
        begin = max(now, free.get(link, 0))
        done = begin + ticks[(link, t.size)]
        free[link] = done
        if hop + 2 < len(t.path):
            heapq.heappush(heap, (done, prio, seq, tid, hop + 1))
            seq += 1
            continue
        end = max(end, done)
        for nxt in _complete(tid, done, transfers, enables, finished):
            heapq.heappush(heap, (transfers[nxt].ready, transfers[nxt].priority, seq, nxt, 0))
            seq += 1
    if len(finished) != len(transfers):
        raise ScheduleError("the plan deadlocks: some transfers wait on each other.")
    return end


def _run_ordered(transfers: list[_Transfer], enables: list[list[int]],
                 ticks: dict[tuple[tuple[str, str], Fraction], int]) -> int:
    """Each link sends its messages in priority order (a compiled schedule)."""
    queue: dict[tuple[str, str], list[tuple[tuple, int, int]]] = {}
    for tid, t in enumerate(transfers):
        for hop, link in enumerate(path_links(t.path)):
            queue.setdefault(link, []).append((t.priority, tid, hop))
    for q in queue.values():
        q.sort()
    head = dict.fromkeys(queue, 0)
    free: dict[tuple[str, str], int] = {}
    arrived: dict[tuple[int, int], int] = {}
    heap: list[tuple[int, int, int, int]] = []   # (time, seq, tid, hop finished)
    seq = 0
    finished: list[int] = []
    end = 0

    def arrive(tid: int, hop: int, now: int) -> None:
        nonlocal seq
        t = transfers[tid]
        link = (t.path[hop], t.path[hop + 1])
        arrived[(tid, hop)] = now
        q = queue[link]
        while head[link] < len(q):
            _, htid, hhop = q[head[link]]
            if (htid, hhop) not in arrived:
                break
            begin = max(arrived.pop((htid, hhop)), free.get(link, 0))
            done = begin + ticks[(link, transfers[htid].size)]
            free[link] = done
            head[link] += 1
            heapq.heappush(heap, (done, seq, htid, hhop))
            seq += 1

    for tid, t in enumerate(transfers):
        if t.deps == 0:
            arrive(tid, 0, 0)
    while heap:
        now, _, tid, hop = heapq.heappop(heap)
        t = transfers[tid]
        if hop + 2 < len(t.path):
            arrive(tid, hop + 1, now)
            continue
        end = max(end, now)
        for nxt in _complete(tid, now, transfers, enables, finished):
            arrive(nxt, 0, transfers[nxt].ready)
    if len(finished) != len(transfers):
        raise ScheduleError("the plan deadlocks: a link's order waits on a later message.")
    return end


def fastest(topology: Topology, plan: CollectivePlan, message_size: Fraction | int,
            default_latency: Fraction = DEFAULT_LATENCY_US,
            choices: tuple[int, ...] = PIECE_CHOICES) -> SimulationResult:
    """The best time over pipeline depths in ``choices`` (as a tuned library would pick).

    Stops once two deeper pipelines in a row are slower, or the message count would
    exceed MAX_MESSAGES.
    """
    per_piece = sum(len(e.path) - 1 for tree in plan.trees for e in tree.edges)
    best: SimulationResult | None = None
    worse = 0
    for pieces in choices:
        if best is not None and per_piece * pieces > MAX_MESSAGES:
            break
        result = simulate(topology, plan, message_size, pieces, default_latency)
        if best is None or result.time_us < best.time_us:
            best, worse = result, 0
        else:
            worse += 1
            if worse == 2:
                break
    assert best is not None
    return best
