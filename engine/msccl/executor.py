"""Executing an MSCCL XML algorithm symbolically to prove the collective's postcondition.

After :func:`~canopy.engine.msccl.checks.check_structure`, every thread block's steps run
with symbolic data (step semantics in :mod:`~canopy.engine.msccl.model`); every problem is
one sentence naming the rank, thread block and step (:class:`MscclXmlError`).

* **Data.** Each buffer slot (one chunk) holds ``(chunk, ranks)``: the chunk index and the
  set of ranks whose contribution it sums, or nothing. Initially rank r's input holds its
  own chunks. Reducing joins two sets of the same chunk; reducing different chunks or the
  same rank twice is an error, as is reading a slot that holds nothing. ``cnt``
  consecutive chunks move at once.
* **Connections.** A thread block sends to its ``send`` peer and receives from its
  ``recv`` peer on its channel. Messages of a (sender, receiver, channel) connection match
  in order and the connection buffers at most ``capacity`` messages (default 1, the
  strictest); a send waits for room. A step that receives and sends takes its message
  first and then waits for room, as the runtime's pipelined primitives let the receive
  lead the send (so rings of such steps do not lock up).
* **Dependencies.** A step with ``depid``/``deps`` waits until thread block ``depid`` of
  the same GPU has published a step index ≥ ``deps``; a thread block publishes the index
  of each finished non-``nop`` step that has ``hasdep="1"`` (the runtime's flags).
* **Races.** Program order, messages and dependencies define happens-before (vector
  clocks; a send that merely waits for room orders nothing). Two accesses to one slot, at
  least one a write, from different thread blocks must be ordered, or the result would
  depend on timing: the executor reports the missing dependency.
* **Buffers.** allgather: ``i`` has c = nchunksperloop/ngpus chunks, ``o`` all of them;
  in place, ``i`` is ``o`` from r·c. reduce_scatter (also spelled ``reducescatter``):
  ``i`` has all chunks, ``o`` c of them; in place, ``o`` is ``i`` from r·c. allreduce:
  ``i`` and ``o`` have all chunks; in place, ``o`` is ``i``. alltoall: ``i`` and ``o``
  have all chunks (block j of ``i`` goes to rank j). Out of place, the input must stay
  unchanged. ``s`` has ``s_chunks``.
* **Result.** allgather: every rank's ``o`` holds chunk x of rank x // c. reduce_scatter:
  rank r's result holds chunks r·c … r·c+c−1 summed over all ranks. allreduce: every
  rank's result holds every chunk summed over all ranks. alltoall: chunk j·c+q of rank
  r's ``o`` is chunk r·c+q of rank j's input. An XML that declares both
  ``inplace`` and ``outofplace`` is run both ways.

A run that cannot go on reports the cycle of waiting thread blocks, or the dependency
never signalled.
"""

from __future__ import annotations

import os
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import NoReturn

import numpy as np

from canopy.engine.msccl.checks import check_structure
from canopy.engine.msccl.model import (
    BUFFER_NAMES,
    MscclXmlError,
    XmlAlgo,
    XmlGpu,
    XmlStep,
    XmlThreadBlock,
    where,
)
from canopy.engine.msccl.reader import read_msccl, read_msccl_bytes
from canopy.engine.msccl.threadblocks import MscclLimits

Value = tuple[int, int] | None          # (chunk, bitmask of contributing ranks)


def _ranks_text(mask: int) -> str:
    ranks = [r for r in range(mask.bit_length()) if mask >> r & 1]
    shown = ", ".join(map(str, ranks[:6])) + (", …" if len(ranks) > 6 else "")
    return f"rank {shown}" if len(ranks) == 1 else f"ranks {shown}"


def describe(value: Value) -> str:
    if value is None:
        return "no data"
    chunk, mask = value
    if mask & (mask - 1):
        return f"chunk {chunk} summed over {_ranks_text(mask)}"
    return f"chunk {chunk} of {_ranks_text(mask)}"


class _Memory:
    """One physical buffer: per slot its value, its last write (global tb, epoch, step)
    and the reads since then (tb -> (epoch, step))."""

    def __init__(self, size: int) -> None:
        self.value: list[Value] = [None] * size
        self.writer: list[tuple[int, int, int] | None] = [None] * size
        self.readers: list[dict[int, tuple[int, int]] | None] = [None] * size


@dataclass
class _Buffers:
    """Physical buffers of one rank and the aliases of the in-place layouts."""

    phys: dict[str, _Memory]
    alias: dict[str, tuple[str, int, int]]            # name -> (physical, base, size)

    def resolve(self, buf: str, off: int, cnt: int) -> tuple[str, int] | None:
        name, base, size = self.alias[buf]
        if off < 0 or off + cnt > size:
            return None
        return name, base + off


@dataclass
class SimulationReport:
    """What a successful run did, for the one-line summary."""

    coll: str
    ngpus: int
    modes: list[str]
    threadblocks: int
    max_threadblocks: int                # on one GPU
    channels: int
    steps: int
    messages: int

    def summary(self) -> str:
        return (f"{self.coll}, {self.ngpus} GPUs, {' and '.join(self.modes)}: "
                f"{self.steps} steps in {self.threadblocks} thread blocks (at most "
                f"{self.max_threadblocks} per GPU) on {self.channels} "
                f"channel{'s' if self.channels != 1 else ''}, {self.messages} messages; "
                "the result is correct")


class _Run:
    """One execution of ``algo`` in one mode."""

    def __init__(self, algo: XmlAlgo, inplace: bool, capacity: int) -> None:
        self.algo, self.inplace, self.capacity = algo, inplace, capacity
        self.mode = "in place" if inplace else "out of place"
        self.tbs: list[tuple[XmlGpu, XmlThreadBlock]] = [
            (gpu, tb) for gpu in algo.gpus for tb in gpu.tbs]
        self.gid = {(gpu.id, tb.id): g for g, (gpu, tb) in enumerate(self.tbs)}
        n = len(self.tbs)
        self.clock = np.zeros((n, n), dtype=np.int32)
        self.pc = [0] * n
        self.flag = [-1] * n
        self.queues: dict[tuple[int, int, int], deque] = defaultdict(deque)
        self.pending: dict[int, tuple[list[Value], np.ndarray]] = {}   # received, not sent
        self.sender: dict[tuple[int, int, int], int] = {}
        self.receiver: dict[tuple[int, int, int], int] = {}
        for g, (gpu, tb) in enumerate(self.tbs):
            if tb.send >= 0:
                self.sender[(gpu.id, tb.send, tb.chan)] = g
            if tb.recv >= 0:
                self.receiver[(tb.recv, gpu.id, tb.chan)] = g
        self._plan_flags()
        self.buffers = [self._buffers(gpu) for gpu in algo.gpus]
        self.messages = 0

    # -------------------------------------------------------------- setup
    def _plan_flags(self) -> None:
        """For every dependency, the first step whose published index satisfies it; the
        waiter is ordered after that step (later flags may not be seen in time)."""
        self.signal_of: dict[tuple[int, int], int | None] = {}
        self.snap_refs: dict[tuple[int, int], int] = defaultdict(int)
        for gpu, tb in self.tbs:
            for step in tb.steps:
                if step.depid < 0:
                    continue
                target = self.gid[(gpu.id, step.depid)]
                key = (target, step.deps)
                if key not in self.signal_of:
                    steps = self.tbs[target][1].steps
                    self.signal_of[key] = next(
                        (j for j in range(step.deps, len(steps))
                         if steps[j].hasdep and steps[j].type != "nop"), None)
                first = self.signal_of[key]
                if first is not None:
                    self.snap_refs[(target, first)] += 1
        self.snaps: dict[tuple[int, int], np.ndarray] = {}

    def _buffers(self, gpu: XmlGpu) -> _Buffers:
        a, r = self.algo, gpu.id
        n, c = a.nchunksperloop, a.chunks_per_rank
        size = {"allgather": {"i": c, "o": n}, "reduce_scatter": {"i": n, "o": c},
                "allreduce": {"i": n, "o": n}, "alltoall": {"i": n, "o": n}}[a.coll]
        size["s"] = gpu.s_chunks
        phys = {name: _Memory(s) for name, s in size.items()}
        alias = {name: (name, 0, s) for name, s in size.items()}
        if self.inplace:
            if a.coll == "allgather":
                alias["i"] = ("o", r * c, c)
            elif a.coll == "reduce_scatter":
                alias["o"] = ("i", r * c, c)
            else:
                alias["o"] = ("i", 0, n)
            del phys["o" if a.coll != "allgather" else "i"]
        bit = 1 << r
        if a.coll == "allgather":
            start = r * c if self.inplace else 0
            phys["o" if self.inplace else "i"].value[start:start + c] = \
                [(r * c + j, bit) for j in range(c)]
        else:
            phys["i"].value[:] = [(x, bit) for x in range(n)]
        return _Buffers(phys, alias)

    # -------------------------------------------------------------- helpers
    def fail(self, g: int, text: str) -> NoReturn:
        gpu, tb = self.tbs[g]
        step = tb.steps[self.pc[g]]
        raise MscclXmlError(f"{where(gpu.id, tb.id, step.s)} ({step.type}, {self.mode}) "
                            f"{text}")

    def slots(self, g: int, buf: str, off: int, cnt: int, role: str
              ) -> tuple[_Memory, range]:
        gpu = self.tbs[g][0]
        bufs = self.buffers[gpu.id]
        where = bufs.resolve(buf, off, cnt)
        if where is None:
            _, _, size = bufs.alias[buf]
            self.fail(g, f"{role} {buf}[{off}:{off + cnt}], beyond the {size} chunks of the "
                         f"{BUFFER_NAMES[buf]} buffer.")
        name, start = where
        if name == "i" and not self.inplace and role == "writes":
            self.fail(g, f"writes the input buffer i[{off}:{off + cnt}], which an "
                         "out-of-place collective must leave unchanged.")
        return bufs.phys[name], range(start, start + cnt)

    def _describe_tb(self, g: int, step: int | None = None) -> str:
        gpu, tb = self.tbs[g]
        return where(gpu.id, tb.id, step)

    def read(self, g: int, buf: str, off: int, cnt: int, epoch: int) -> list[Value]:
        step = self.pc[g]
        memory, where_range = self.slots(g, buf, off, cnt, "reads")
        clock = self.clock[g]
        values, writers, readers = memory.value, memory.writer, memory.readers
        for x in where_range:
            w = writers[x]
            if w is not None and w[0] != g and clock[w[0]] < w[1]:
                self.fail(g, f"reads {buf}[{off + x - where_range.start}], which "
                             f"{self._describe_tb(w[0], w[2])} writes with no dependency "
                             "ordering the two (a dependency is missing).")
            if values[x] is None:
                self.fail(g, f"reads {buf}[{off + x - where_range.start}] before anything "
                             "is written there; "
                             f"{self._pending_writer(g, buf, off + x - where_range.start)}")
            seen = readers[x]
            if seen is None:
                readers[x] = {g: (epoch, step)}
            else:
                seen[g] = (epoch, step)
        return values[where_range.start:where_range.stop]

    def _pending_writer(self, g: int, buf: str, off: int) -> str:
        """Why a slot is empty: a later write another thread block will do (a missing
        dependency), or none at all (a wrong offset or a dropped step)."""
        gpu = self.tbs[g][0]
        bufs = self.buffers[gpu.id]
        target = bufs.resolve(buf, off, 1)
        for tb in gpu.tbs:
            h = self.gid[(gpu.id, tb.id)]
            for step in tb.steps[self.pc[h]:]:
                if h == g or not step.kind.writes_dst:
                    continue
                if any(bufs.resolve(step.dstbuf, step.dstoff + j, 1) == target
                       for j in range(step.cnt)):
                    return (f"{where(gpu.id, tb.id, step.s)} writes it later with no "
                            "dependency ordering the two (a dependency is missing or an "
                            "offset is wrong).")
        return "no other step writes it (an offset is wrong or a step is missing)."

    def write(self, g: int, buf: str, off: int, values: list[Value], epoch: int) -> None:
        step = self.pc[g]
        memory, where_range = self.slots(g, buf, off, len(values), "writes")
        clock = self.clock[g]
        writers, readers = memory.writer, memory.readers
        for x in where_range:
            w = writers[x]
            if w is not None and w[0] != g and clock[w[0]] < w[1]:
                self.fail(g, f"writes {buf}[{off + x - where_range.start}], which "
                             f"{self._describe_tb(w[0], w[2])} also writes, with no "
                             "dependency ordering the two (a dependency is missing or an "
                             "offset is wrong).")
            for h, (e, s) in (readers[x] or {}).items():
                if h != g and clock[h] < e:
                    self.fail(g, f"overwrites {buf}[{off + x - where_range.start}] while "
                                 f"{self._describe_tb(h, s)} may still be reading it (a "
                                 "dependency is missing).")
            writers[x] = (g, epoch, step)
            readers[x] = None
        memory.value[where_range.start:where_range.stop] = values

    def reduce(self, g: int, a: list[Value], b: list[Value]) -> list[Value]:
        out: list[Value] = []
        for x, y in zip(a, b, strict=True):
            assert x is not None and y is not None
            if x[0] != y[0]:
                self.fail(g, f"adds chunk {y[0]} to chunk {x[0]}; reductions must combine the "
                             "same chunk.")
            if x[1] & y[1]:
                self.fail(g, f"adds the contribution of {_ranks_text(x[1] & y[1])} to chunk "
                             f"{x[0]} twice.")
            out.append((x[0], x[1] | y[1]))
        return out

    # -------------------------------------------------------------- execution
    def blocked_on(self, g: int) -> tuple | None:
        """What stops tb ``g``'s next step, or None when it can run."""
        gpu, tb = self.tbs[g]
        step = tb.steps[self.pc[g]]
        if step.depid >= 0:
            target = self.gid[(gpu.id, step.depid)]
            if self.flag[target] < step.deps:
                return ("flag", target)
        kind = step.kind
        receives, sends = kind.receives, kind.sends
        room = sends and len(self.queues[(gpu.id, tb.send, tb.chan)]) < self.capacity
        if g in self.pending:
            return None if room else ("room", (gpu.id, tb.send, tb.chan))
        if receives and not self.queues[(tb.recv, gpu.id, tb.chan)]:
            return ("msg", (tb.recv, gpu.id, tb.chan))
        if sends and not receives and not room:
            return ("room", (gpu.id, tb.send, tb.chan))
        return None

    def execute(self, g: int) -> list[tuple]:
        """Run tb ``g``'s next step, or its receiving half when its send has no room yet;
        return the conditions it may have changed."""
        gpu, tb = self.tbs[g]
        step = tb.steps[self.pc[g]]
        kind = step.kind
        receives, sends = kind.receives, kind.sends
        woke: list[tuple] = []
        if g in self.pending:
            return self.finish(g, step, self.pending.pop(g))
        if step.depid >= 0:
            target = self.gid[(gpu.id, step.depid)]
            first = self.signal_of[(target, step.deps)]
            assert first is not None, "a step ran before its dependency was signalled"
            key = (target, first)
            np.maximum(self.clock[g], self.snaps[key], out=self.clock[g])
            self.snap_refs[key] -= 1
            if self.snap_refs[key] == 0:
                del self.snaps[key]
        incoming = None
        if receives:
            conn = (tb.recv, gpu.id, tb.chan)
            incoming = self.queues[conn].popleft()
            woke.append(("room", conn))
            np.maximum(self.clock[g], incoming[1], out=self.clock[g])
            if len(incoming[0]) != step.cnt:
                sg, ss = incoming[2]
                self.fail(g, f"receives {step.cnt} chunk(s) but {self._describe_tb(sg, ss)} "
                             f"sent {len(incoming[0])}.")
        self.clock[g, g] += 1
        epoch = int(self.clock[g, g])
        data: list[Value] | None = incoming[0] if incoming else None
        if kind.reads_src:
            src = self.read(g, step.srcbuf, step.srcoff, step.cnt, epoch)
            data = src if data is None else self.reduce(g, data, src)
        if kind.reads_dst:
            assert data is not None
            data = self.reduce(g, self.read(g, step.dstbuf, step.dstoff, step.cnt, epoch), data)
        if kind.writes_dst:
            assert data is not None
            self.write(g, step.dstbuf, step.dstoff, data, epoch)
        if not sends:
            return woke + self.finish(g, step, None)
        assert data is not None, "every sending step reads or receives its data"
        if len(self.queues[(gpu.id, tb.send, tb.chan)]) >= self.capacity:
            self.pending[g] = (data, self.clock[g].copy())
            return woke
        return woke + self.finish(g, step, (data, self.clock[g]))

    def finish(self, g: int, step: XmlStep,
               outgoing: tuple[list[Value], np.ndarray] | None) -> list[tuple]:
        """Send what the step sends, publish its completion and move on."""
        gpu, tb = self.tbs[g]
        woke: list[tuple] = []
        if outgoing is not None:
            conn = (gpu.id, tb.send, tb.chan)
            self.queues[conn].append((outgoing[0], outgoing[1].copy(), (g, self.pc[g])))
            self.messages += 1
            woke.append(("msg", conn))
        if step.hasdep and step.type != "nop":
            self.flag[g] = self.pc[g]
            if self.snap_refs.get((g, self.pc[g])):
                self.snaps[(g, self.pc[g])] = self.clock[g].copy()
            woke.append(("flag", g))
        self.pc[g] += 1
        return woke

    def run(self) -> int:
        waiting: dict[tuple, list[int]] = defaultdict(list)
        ready = deque(g for g in range(len(self.tbs)) if self.tbs[g][1].steps)
        while ready:
            g = ready.popleft()
            steps = self.tbs[g][1].steps
            while self.pc[g] < len(steps):
                cond = self.blocked_on(g)
                if cond is not None:
                    waiting[cond].append(g)
                    break
                for changed in self.execute(g):
                    ready.extend(waiting.pop(changed, []))
        stuck = [g for g in range(len(self.tbs)) if self.pc[g] < len(self.tbs[g][1].steps)]
        if stuck:
            self.explain_stuck(stuck)
        assert not any(self.queues.values()), "matched counts leave no message behind"
        self.check_result()
        return sum(len(tb.steps) for _, tb in self.tbs)

    def explain_stuck(self, stuck: list[int]) -> None:
        """Name the dependency that is never signalled, or the cycle of waiting thread
        blocks (send and receive counts agree, checked before the run)."""
        seen: list[int] = []
        g = stuck[0]
        while g not in seen:
            seen.append(g)
            cond = self.blocked_on(g)
            assert cond is not None, "a runnable thread block was left waiting"
            kind, what = cond
            nxt = what if kind == "flag" else \
                (self.sender if kind == "msg" else self.receiver)[what]
            if self.pc[nxt] >= len(self.tbs[nxt][1].steps):
                assert kind == "flag", "a finished thread block owes a message"
                deps = self.tbs[g][1].steps[self.pc[g]].deps
                self.fail(g, f"waits for {self._describe_tb(nxt, deps)}, which never signals "
                             "its completion (no hasdep at or after it).")
            g = nxt
        cycle = seen[seen.index(g):]
        names = [self._describe_tb(h, self.tbs[h][1].steps[self.pc[h]].s) for h in cycle]
        shown = " waits for ".join(names[:5]) + (" … " if len(names) > 5 else "")
        raise MscclXmlError(f"deadlock ({self.mode}): {shown} waits for {names[0]}.")

    def check_result(self) -> None:
        """Compare every rank's result (``o``, through the in-place alias) with the
        collective's postcondition."""
        a = self.algo
        c, full = a.chunks_per_rank, (1 << a.ngpus) - 1
        gathered = [(x, 1 << (x // c)) for x in range(a.nchunksperloop)] \
            if a.coll == "allgather" else None
        reduced = [(x, full) for x in range(a.nchunksperloop)]
        for gpu in a.gpus:
            r = gpu.id
            bufs = self.buffers[r]
            if a.coll == "alltoall":
                # block j of rank r's output is block r of rank j's input
                expect = [(r * c + q, 1 << j) for j in range(a.ngpus) for q in range(c)]
            elif gathered is not None:
                expect = gathered
            elif a.coll == "reduce_scatter":
                expect = reduced[r * c:(r + 1) * c]
            else:
                expect = reduced
            phys, base, _ = bufs.alias["o"]
            got = bufs.phys[phys].value[base:base + len(expect)]
            if got == expect:
                continue
            off = next(i for i, (x, y) in enumerate(zip(got, expect, strict=True)) if x != y)
            raise MscclXmlError(
                f"after the {a.coll} ({self.mode}), rank {r}'s {phys}[{base + off}] holds "
                f"{describe(got[off])} instead of {describe(expect[off])}.")


def simulate(algo: XmlAlgo, capacity: int = 1, limits: MscclLimits | None = None,
             source: str = "MSCCL XML") -> SimulationReport:
    """Check ``algo`` statically, run it in every mode it declares, check the result."""
    if capacity < 1:
        raise ValueError("a connection must hold at least one message")
    check_structure(algo, limits, source)
    steps = messages = 0
    modes = []
    for inplace in algo.modes():
        run = _Run(algo, inplace, capacity)
        try:
            steps = run.run()
        except MscclXmlError as exc:
            raise MscclXmlError(f"{source}: {exc}") from None
        messages = run.messages
        modes.append(run.mode)
    tbs = [len(g.tbs) for g in algo.gpus]
    channels = len({tb.chan for g in algo.gpus for tb in g.tbs})
    return SimulationReport(algo.coll, algo.ngpus, modes, sum(tbs), max(tbs), channels, steps,
                            messages)


def simulate_file(path: str | os.PathLike[str], capacity: int = 1,
                  limits: MscclLimits | None = None) -> SimulationReport:
    """Read, check and run an MSCCL XML file (``canopy check-xml``)."""
    return simulate(read_msccl(path), capacity, limits, str(path))


def simulate_bytes(data: bytes, capacity: int = 1, limits: MscclLimits | None = None,
                   source: str = "MSCCL XML") -> SimulationReport:
    """Parse (safely) and run an MSCCL XML document held in memory."""
    return simulate(read_msccl_bytes(data, source), capacity, limits, source)
