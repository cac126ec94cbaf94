"""A lower bound on a loop's time without running it: its longest chain of sends.

In the execution model (:mod:`canopy.engine.execution.simulate`) a send starts no earlier
than the deliveries it waits for and the end of its connection's previous send, streams no
faster than the smallest capacity on its route (a link's share never exceeds its
capacity), and is delivered its connection's α after its last byte left. Without the
sharing, that is a longest-path problem on the program's dependencies and connection
orders, and the path's length is a lower bound on the time of the program's last delivery.

:func:`simulate` uses it for a depth run that only matters if it ends before a deadline
(:func:`canopy.engine.execution.simulate.best_depth`): where the bound is already past the
deadline the run is not built (a ring's deepest run at 64 GPUs: two million sends), and
the answer is the one the event loop's own deadline check would have given. Rings are
where it rules runs out: each connection carries every step of its ring in turn, so an
iteration's first step waits for the iteration before to come round, and every further
iteration adds latency.

The loop's iterations are identical (one template, :class:`~canopy.engine.execution.
compiler.IterationTemplate`, in the order (piece, slot) on every connection), so the
longest path is computed piece by piece over the template's topological levels, as numpy
operations on a level's slots at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from canopy.engine.execution.compiler import IterationTemplate
from canopy.engine.model.errors import ScheduleError


@dataclass
class _Level:
    """The slots of one topological level of an iteration: ``slots``; per slot the
    index of the finish time its connection waits for (``after``: an earlier slot of the
    same iteration, or width + c for connection c's last send of the previous iteration);
    its dependencies grouped by slot (``src`` in runs starting at ``starts``, each run
    waiting slot ``into``, a position in ``slots``)."""

    slots: Any
    after: Any
    src: Any
    starts: Any
    into: Any


@dataclass
class Chains:
    """An iteration's levels and, per connection, its last slot (the one the next
    iteration's first send on that connection waits for)."""

    levels: list[_Level]
    last: Any
    conns: Any


def chains(template: IterationTemplate) -> Chains:
    """The topological levels of one iteration of ``template`` (dependencies and each
    connection's order of slots) for :func:`chain_bound`. Raises ScheduleError where the
    sends wait on each other, as the event loop would."""
    width = len(template.conn)
    conn = np.asarray(template.conn, dtype=np.int64)
    nconn = int(conn.max()) + 1 if width else 0
    order = np.argsort(conn, kind="stable")
    same = conn[order[1:]] == conn[order[:-1]]
    after = width + conn                      # the first slot of a connection: the carry
    after[order[1:][same]] = order[:-1][same]
    last = np.full(nconn, -1, dtype=np.int64)
    last[conn[order]] = order                  # the last write per connection wins
    src = np.asarray(template.src, dtype=np.int64)
    dst = np.asarray(template.dst, dtype=np.int64)
    # predecessors in one iteration: dependencies and the connection's previous slot
    inner = after < width
    pred_src = np.concatenate([src, after[inner]])
    pred_dst = np.concatenate([dst, np.nonzero(inner)[0]])
    waiting = np.bincount(pred_dst, minlength=width)
    by_src = np.argsort(pred_src, kind="stable")
    succ = pred_dst[by_src]
    succ_ptr = np.zeros(width + 1, dtype=np.int64)
    np.cumsum(np.bincount(pred_src, minlength=width), out=succ_ptr[1:])
    by_dst = np.argsort(dst, kind="stable")
    dep_ptr = np.zeros(width + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=width), out=dep_ptr[1:])
    levels: list[_Level] = []
    frontier = np.nonzero(waiting == 0)[0]
    placed = 0
    while len(frontier):
        placed += len(frontier)
        counts = dep_ptr[frontier + 1] - dep_ptr[frontier]
        has = counts > 0
        lo, n = dep_ptr[frontier][has], counts[has]
        starts = np.zeros(len(n), dtype=np.int64)
        np.cumsum(n[:-1], out=starts[1:])
        run = np.repeat(lo - starts, n) + np.arange(int(n.sum()), dtype=np.int64)
        levels.append(_Level(frontier, after[frontier], src[by_dst[run]], starts,
                             np.nonzero(has)[0]))
        lo, hi = succ_ptr[frontier], succ_ptr[frontier + 1]
        n = hi - lo
        nexts = succ[np.repeat(lo - np.cumsum(n) + n, n) + np.arange(int(n.sum()),
                                                                      dtype=np.int64)]
        waiting = waiting - np.bincount(nexts, minlength=width)
        ready = np.zeros(width, dtype=bool)
        ready[nexts] = True
        frontier = np.nonzero(ready & (waiting == 0))[0]
    if placed != width:
        raise ScheduleError("the schedule deadlocks: some sends wait on each other.")
    return Chains(levels, last, np.nonzero(last >= 0)[0])


def chain_bound(found: Chains, width: int, stream_us: Any, alpha_us: Any, pieces: int,
                beyond: float | None = None) -> float:
    """A lower bound (µs) on the last delivery of ``pieces`` iterations: the longest
    chain, each send taking ``stream_us`` (per slot: its bytes at its route's smallest
    capacity) and its delivery ``alpha_us`` more, over the iterations computed: all of
    them without ``beyond``. With it, stops once an iteration's sends are delivered after
    ``beyond`` (the bound is then past it), and after the first PROBE_SHARE of the
    iterations where the bound's growth over their second half, continued to the last
    iteration, would not pass ``beyond`` (a tree's pipeline, whose chain grows by its
    busiest edge's time per iteration: the rest would be computed for nothing)."""
    finish = np.zeros(width + len(found.last))        # slots, then each connection's carry
    deliver = np.zeros(width)
    best = 0.0
    probe = max(2, pieces // PROBE_SHARE // 2 * 2)
    half = 0.0
    for piece in range(1, pieces + 1):
        _iteration(found, finish, deliver, stream_us, alpha_us)
        finish[width + found.conns] = finish[found.last[found.conns]]
        best = max(best, float(deliver.max()))
        if beyond is None:
            continue
        if best > beyond:
            break
        if piece == probe // 2:
            half = best
        elif piece == probe < pieces and \
                best + (best - half) * (pieces - probe) / (probe // 2) <= beyond:
            break
    return best


PROBE_SHARE = 8       # the share of a loop's iterations that shows whether its bound will do


def _iteration(found: Chains, finish: Any, deliver: Any, stream_us: Any, alpha_us: Any,
               starts: Any = None) -> None:
    """One iteration of :func:`chain_bound`'s longest path, level by level: each slot's
    finish and delivery (and, given ``starts``, its start) from the finishes and
    deliveries it waits for."""
    for level in found.levels:
        start = finish[level.after]
        if len(level.into):
            ready = np.maximum.reduceat(deliver[level.src], level.starts)
            start[level.into] = np.maximum(start[level.into], ready)
        if starts is not None:
            starts[level.slots] = start
        done = start + stream_us[level.slots]
        finish[level.slots] = done
        deliver[level.slots] = done + alpha_us[level.slots]


@dataclass
class Crossings:
    """The links an iteration's slots cross: per (slot, link) pair the slot and the link
    (each slot with every link of its connection's route); per link its capacity."""

    slot: Any
    link: Any
    cap: Any


def link_bound(found: Chains, width: int, stream_us: Any, alpha_us: Any,
               bytes_per_piece: Any, pieces: int, crossings: Crossings) -> float:
    """A lower bound (µs) on the last delivery of ``pieces`` iterations from each link l
    (``crossings``): no byte crosses l before the earliest a send over it can start, the
    busiest share of l never exceeds its capacity, so its bytes (``bytes_per_piece`` per
    slot, times ``pieces``) take at least their time at that capacity, and the send that
    crosses it last is followed by at least the shortest chain after any send over l:

        T >= min start over l + bytes over l / capacity + min tail over l,

    the largest over the links. A slot's earliest start is the first iteration's longest
    path to it (:func:`chain_bound`'s, later iterations only start later); its tail, the
    longest chain from its finish to the end within its own iteration (its delivery and
    the sends waiting for it, the next send of its connection), a lower bound on what
    follows it in any iteration. Where pieces drain through a pipeline of many sends the
    bound exceeds the busiest link's time by the fill before and the drain after that
    link, which the longest chain alone does not see."""
    starts = np.zeros(width)
    _iteration(found, np.zeros(width + len(found.last)), np.zeros(width), stream_us,
               alpha_us, starts)
    tail = np.zeros(width)
    waited = np.zeros(width)         # per slot: the longest chain after its delivery
    queued = np.zeros(width)         # per slot: the next send of its connection and after
    for level in reversed(found.levels):
        slots = level.slots
        tail[slots] = np.maximum(alpha_us[slots] + waited[slots], queued[slots])
        onward = stream_us[slots] + tail[slots]
        if len(level.into):
            runs = np.diff(np.append(level.starts, len(level.src)))
            np.maximum.at(waited, level.src, np.repeat(onward[level.into], runs))
        inner = level.after < width
        np.maximum.at(queued, level.after[inner], onward[inner])
    links = len(crossings.cap)
    head = np.full(links, np.inf)
    np.minimum.at(head, crossings.link, starts[crossings.slot])
    after = np.full(links, np.inf)
    np.minimum.at(after, crossings.link, tail[crossings.slot])
    load = np.bincount(crossings.link, weights=bytes_per_piece[crossings.slot],
                       minlength=links) * pieces
    used = load > 0
    if not used.any():
        return 0.0
    return float(np.max(head[used] + load[used] / crossings.cap[used] + after[used]))
