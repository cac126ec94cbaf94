"""A symbolic run of an MSCCL++ execution plan on every GPU, proving the collective's result.

Every chunk is cut into ``cells`` (enough for each thread-block group's share, and for a
pipeline's two iterations); a cell holds (position, ranks): which element of the
collective it carries and whose contributions it sums (``None``: nothing yet). Thread
blocks run their ops in order, as the kernel does (``executionKernel``); an op that
cannot complete blocks its thread block, the others go on, and a plan whose blocked
thread blocks can never go on is reported as a deadlock naming the op that waits.

What each op does mirrors its handler in ``execution_kernel.hpp``:

* **Remote writes and signals.** A put's data (``put``/``pws``/``pwsf``, the remote
  outputs of ``res``/``rres``) is guaranteed at the peer only after the peer's ``wait``
  returns for a signal sent after the put: on a memory channel the writer's ``signal``
  (not ``rlxsignal``, which does not order earlier writes) to that peer; on a port channel
  a ``signal`` on the same channel (the proxy keeps a channel's requests in order) or the
  put's own signal (``pws``/``pwsf``, one per destination; on memory channels these are
  plain puts). The run delivers the data exactly then, so a plan that reads before its
  wait, or whose signal comes before its put, reads nothing.
* **Channels pair** as the executor connects them: the j-th channel of a type from GPU a
  to b with the j-th of that type from b to a. A ``wait`` returns once its peer channel
  has signalled one more time than the waits before (the semaphores count).
* **Packets** (``ppkt``, ``rppkt``, ``cpkt`` and the packet outputs of reductions) carry
  their own flags: they are visible at once, and the ops that read packets (``upkt``,
  ``rppkt``, the scratch inputs of ``repkt``/``respkt``/``recpkt``/``recspkt``) block until
  every packet they read has been written.
* ``copy``, ``re``/``res`` (local inputs), ``rre``/``rres`` and ``get`` (reading peers'
  buffers directly), switch-channel ``glres``/``gstore`` (the group's buffers), semaphores
  (``sem_release`` adds one, ``sem_acquire`` waits for a positive count and takes one),
  ``barrier`` (all ``num_threadblocks`` arrive) and ``pipeline`` (its ops once per
  iteration, each op on its slice of its buffers; the run takes two iterations).

Thread synchronisation within a thread block (:func:`thread_sync_problem`): a wait is done
by one thread per channel and a signal by one thread, while data ops use all threads, so
the runtime needs a ``nop`` (``__syncthreads``) between a wait and the next data op,
between a data op and the next signal or semaphore release, and between two data ops of
which one writes what the other touches (the DSL inserts these ``nop`` s).

In-place buffers alias as the collective's API does: allgather's input is the rank's
block of the output, reduce-scatter's output the rank's block of the input, allreduce's
and all-to-all's input the output.
"""

from __future__ import annotations

import math
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass

from canopy.engine.mscclpp.reader import (
    COLLECTIVES,
    Gpu,
    LazyAt,
    MscclppPlanError,
    Op,
    PlanModel,
    Ref,
    ThreadBlock,
    at,
)

Value = tuple[int, int] | None          # (position in the collective, mask of ranks)
SIGNALS = ("signal", "rlxsignal")
WAITS = ("wait", "rlxwait", "sem_acquire")
DATA_FREE = frozenset({"nop", "barrier", "signal", "wait", "rlxsignal", "rlxwait", "flush",
                       "sem_acquire", "sem_release", "pipeline"})
PACKET_WRITERS = frozenset({"ppkt", "rppkt", "cpkt", "respkt", "recpkt", "recspkt",
                            "gstorepkt"})


@dataclass(frozen=True)
class ExecutionReport:
    gpus: int
    threadblocks: int
    ops: int
    collective: str
    checked: bool           # whether the result was compared with the collective's

    def summary(self) -> str:
        what = f"{self.collective} result correct" if self.checked else \
            f"runs to completion ({self.collective}: no result to check)"
        return (f"{self.gpus} GPUs, {self.threadblocks} thread blocks, {self.ops} ops "
                f"executed, no deadlock, {what}")


def cells_per_chunk(plan: PlanModel) -> int:
    sizes = [op.tbg[1] for g in plan.gpus for tb in g.tbs for top in tb.ops
             for op in (top, *top.ops)]
    piped = any(op.name == "pipeline" for g in plan.gpus for tb in g.tbs for op in tb.ops)
    return math.lcm(1, *sizes) * (2 if piped else 1)


def _data_refs(op: Op) -> tuple[list[Ref], list[Ref]]:
    return [r for r in op.src if r.buf is not None], [r for r in op.dst if r.buf is not None]


def _overlap(a: list[tuple[str, int, int]], buf: str, lo: int, hi: int) -> bool:
    return any(b == buf and lo < h and l_ < hi for b, l_, h in a)


def thread_sync_problem(plan: PlanModel) -> str | None:
    """The first missing ``nop`` (see the module docstring), as a sentence, or None."""
    for gpu in plan.gpus:
        for tb in gpu.tbs:
            seq: list[Op] = []
            for op in tb.ops:
                seq += [op] if op.name != "pipeline" else op.ops * 2
            waited: Op | None = None
            dirty: Op | None = None
            writes: list[tuple[str, int, int]] = []
            for op in seq:
                if op.name in ("nop", "barrier"):
                    waited = dirty = None
                    writes = []
                    continue
                if op.name in ("wait", "rlxwait", "sem_acquire"):
                    waited = op
                    continue
                if op.name in ("signal", "rlxsignal", "sem_release", "flush"):
                    if dirty is not None and op.name != "rlxsignal":
                        return (f"{at(plan.source, gpu.id, tb.id, op)} follows "
                                f"{dirty.where} ({dirty.name}) without a nop, so it may "
                                "signal before every thread has moved its data")
                    continue
                if op.name in DATA_FREE:
                    continue
                if waited is not None:
                    return (f"{at(plan.source, gpu.id, tb.id, op)} follows {waited.where} "
                            f"({waited.name}) without a nop, so its threads may move data "
                            "before the wait has returned")
                src, dst = _data_refs(op)
                if op.name in ("upkt", "repkt", "respkt", "recpkt", "recspkt"):
                    src = src[:1]                # packet inputs synchronise themselves
                if op.name in PACKET_WRITERS:
                    dst = dst[:1] if op.name not in ("cpkt",) else []
                mine_r = [(r.buf or "", r.index, r.index + r.size) for r in src]
                mine_w = [(r.buf or "", r.index, r.index + r.size) for r in dst]
                clash = any(_overlap(writes, *x) for x in mine_r + mine_w)
                if clash and dirty is not None:
                    return (f"{at(plan.source, gpu.id, tb.id, op)} touches data that "
                            f"{dirty.where} ({dirty.name}) of the same thread block moves, "
                            "without a nop between them")
                writes += mine_w
                dirty = op
    return None


class _Blocked(Exception):
    def __init__(self, why: str) -> None:
        self.why = why


class _Run:
    def __init__(self, plan: PlanModel) -> None:
        self.plan = plan
        self.L = cells_per_chunk(plan)
        n = plan.ngpus
        self.mem: list[dict[str, list[Value]]] = []
        self.who: list[dict[str, list[object]]] = []
        self.alias: dict[tuple[int, str], tuple[str, int]] = {}
        coll = plan.collective
        for gpu in plan.gpus:
            bufs: dict[str, list[Value]] = {b: [None] * (gpu.chunks(b) * self.L)
                                            for b in ("i", "o", "s")}
            self.mem.append(bufs)
            self.who.append({b: [None] * len(v) for b, v in bufs.items()})
        for gpu in plan.gpus:
            r, ic, oc = gpu.id, gpu.input_chunks * self.L, gpu.output_chunks * self.L
            for c in range(ic):
                pos = r * ic + c if coll in ("allgather", "alltoall") else c
                self.mem[r]["i"][c] = (pos, 1 << r)
            if plan.inplace and coll in COLLECTIVES:
                self._alias(gpu, coll, ic, oc)
        self.packets: list[dict[int, Value]] = [{} for _ in range(n)]
        self.queues: dict[tuple, deque] = defaultdict(deque)
        self.pending_mem: dict[tuple[int, int, int], list] = defaultdict(list)
        self.pending_port: dict[tuple[int, int, int], list] = defaultdict(list)
        self.sems = [list(g.semaphores) for g in plan.gpus]
        self.barriers: dict[tuple[int, int, int], list[int]] = defaultdict(list)
        self.passed: dict[tuple[int, int, int], int] = defaultdict(int)
        self.executed = 0

    def _alias(self, gpu: Gpu, coll: str, ic: int, oc: int) -> None:
        """In place: one buffer is a view of the other (see the module docstring)."""
        r = gpu.id
        mem = self.mem[r]
        if coll == "reducescatter":
            view, base, off = "o", "i", r * oc
        elif coll == "allgather":
            view, base, off = "i", "o", r * ic
        else:
            view, base, off = ("i", "o", 0) if oc else ("o", "i", 0)
        for c in range(len(mem[view])):
            if mem[view][c] is not None:
                mem[base][off + c] = mem[view][c]
        self.alias[(r, view)] = (base, off)

    def out_cells(self, gpu: Gpu) -> int:
        chunks = gpu.output_chunks
        if not chunks and self.plan.inplace and self.plan.collective in ("allreduce",
                                                                          "alltoall"):
            chunks = gpu.input_chunks
        return chunks * self.L

    # -- addressing ------------------------------------------------------------------
    def place(self, g: int, buf: str, cell: int) -> tuple[str, int]:
        base = self.alias.get((g, buf))
        return (base[0], base[1] + cell) if base else (buf, cell)

    def cells(self, ref: Ref, op: Op, it: int, piped: Op | None) -> range:
        start, end = ref.index * self.L, (ref.index + ref.size) * self.L
        if op.tbg[1] > 1:
            part = (end - start) // op.tbg[1]
            start += op.tbg[0] * part
            end = start + part
        if piped is not None:
            unit = -(-piped.num_chunks * self.L // 2)
            lo = start + it * unit
            return range(min(lo, end), min(lo + unit, end))
        return range(start, end)

    def remote(self, g: int, tb: ThreadBlock, op: Op, ref: Ref, kind: str | None = None
               ) -> tuple[int, str]:
        ids = tb.buffers[kind or op.channel_type]
        assert ref.buffer_id is not None
        rank, buf, _ = self.plan.gpus[g].remote[ids[ref.buffer_id]]
        return rank, buf

    def read(self, g: int, buf: str | None, cells: range, op: Op, tb: int) -> list[Value]:
        assert buf is not None
        out = []
        mem = self.mem[g]
        for c in cells:
            b, p = self.place(g, buf, c)
            if p >= len(mem[b]):
                raise self.fail(g, tb, op, f"reads past the end of {b}")
            out.append(mem[b][p])
        return out

    def write(self, g: int, buf: str | None, cells: range, values: list[Value] | None,
              label: object) -> None:
        assert buf is not None and values is not None
        mem, who = self.mem[g], self.who[g]
        for c, v in zip(cells, values, strict=True):
            b, p = self.place(g, buf, c)
            if p < len(mem[b]):
                mem[b][p], who[b][p] = v, label

    def fail(self, g: int, tb: int, op: Op, text: str) -> MscclppPlanError:
        return MscclppPlanError(f"{at(self.plan.source, g, tb, op)} {text}.")

    def need_data(self, g: int, tb: int, op: Op, buf: str | None, cells: range,
                  values: list[Value], on: int | None = None) -> None:
        for c, v in zip(cells, values, strict=True):
            if v is None:
                where = f"GPU {on}'s " if on is not None and on != g else ""
                raise self.fail(g, tb, op, f"reads {where}{buf}[chunk {c // self.L}], which "
                                           "holds no data yet (a wait or signal missing "
                                           "before it, or data sent to another slot)")

    def add(self, g: int, tb: int, op: Op, a: list[Value], b: list[Value]) -> list[Value]:
        out: list[Value] = []
        for x, y in zip(a, b, strict=True):
            assert x is not None and y is not None
            if x[0] != y[0]:
                raise self.fail(g, tb, op, "adds two different elements of the collective "
                                           "together (data from the wrong slot)")
            if x[1] & y[1]:
                twice = (x[1] & y[1]).bit_length() - 1
                raise self.fail(g, tb, op, f"adds GPU {twice}'s contribution twice")
            out.append((x[0], x[1] | y[1]))
        return out

    # -- channels ----------------------------------------------------------------------
    def endpoint(self, g: int, kind: str, index: int) -> tuple[int, tuple]:
        """The peer and the key of the peer's paired channel end for GPU g's channel."""
        peers = self.plan.gpus[g].peers[kind]
        h = peers[index]
        ordinal = peers[:index].count(h)
        return h, (h, kind, g, ordinal)

    def signal(self, g: int, tbid: int, kind: str, index: int, release: bool,
               label: object = "") -> None:
        h, key = self.endpoint(g, kind, index)
        payload: list = []
        if release:
            if kind == "memory":
                payload = self.pending_mem.pop((g, tbid, h), [])
            else:
                payload = self.pending_port.pop((g, tbid, index), [])
        self.queues[key].append((label, payload))

    def my_end(self, g: int, kind: str, index: int) -> tuple:
        h = self.plan.gpus[g].peers[kind][index]
        ordinal = self.plan.gpus[g].peers[kind][:index].count(h)
        return (g, kind, h, ordinal)

    # -- ops ----------------------------------------------------------------------------
    def execute(self, g: int, tb: ThreadBlock, op: Op, it: int, piped: Op | None) -> None:
        name, t = op.name, tb.id
        label = LazyAt(self.plan.source, g, t, op)

        def cells(ref: Ref) -> range:
            return self.cells(ref, op, it, piped)

        if name in ("nop", "flush", "pipeline"):
            return
        if name == "barrier":
            gen = self.passed[(g, t, op.barrier)]
            arrived = self.barriers[(g, op.barrier, gen)]
            if t not in arrived:
                arrived.append(t)
            if len(arrived) < op.nblocks:
                raise _Blocked(f"waits at barrier {op.barrier} for {op.nblocks} thread "
                               f"blocks; {len(arrived)} arrive")
            self.passed[(g, t, op.barrier)] += 1
            return
        if name in SIGNALS:
            for cid in op.channel_ids:
                index = tb.channels[op.channel_type][cid]
                release = name == "signal" or op.channel_type == "port"
                self.signal(g, t, op.channel_type, index, release, label)
            return
        if name in ("wait", "rlxwait"):
            keys = [self.my_end(g, op.channel_type, tb.channels[op.channel_type][cid])
                    for cid in op.channel_ids]
            for key in keys:     # a channel named twice waits for two signals
                if len(self.queues[key]) < keys.count(key):
                    raise _Blocked(f"waits on its {op.channel_type} channel to GPU {key[2]} "
                                   "for a signal that never comes")
            for key in keys:
                for h, buf, cs, values, who in self.queues[key].popleft()[1]:
                    self.write(h, buf, cs, values, who)
            return
        if name == "sem_acquire":
            if any(self.sems[g][sem] <= 0 for sem in op.semaphores):
                raise _Blocked(f"waits on semaphore(s) {op.semaphores}, which are never "
                               "released")
            for sem in op.semaphores:
                self.sems[g][sem] -= 1
            return
        if name == "sem_release":
            for sem in op.semaphores:
                self.sems[g][sem] += 1
            return
        if name in ("put", "pws", "pwsf"):
            for n, (s, d) in enumerate(zip(op.src, op.dst, strict=True)):
                values = self.read(g, s.buf, cells(s), op, t)
                self.need_data(g, t, op, s.buf, cells(s), values)
                h, buf = self.remote(g, tb, op, d)
                entry = (h, buf, cells(d), values, label)
                if op.channel_type == "memory":
                    self.pending_mem[(g, t, h)].append(entry)
                    continue
                index = tb.channels["port"][op.channel_ids[n]]
                peer = self.plan.gpus[g].peers["port"][index]
                if peer != h:
                    raise self.fail(g, t, op, f"puts into GPU {h}'s buffer through a port "
                                              f"channel to GPU {peer}")
                self.pending_port[(g, t, index)].append(entry)
                if name != "put":
                    self.signal(g, t, "port", index, True, label)
            return
        if name in ("copy", "get"):
            for s, d in zip(op.src, op.dst, strict=True):
                on = g if s.buf else self.remote(g, tb, op, s, "memory")[0]
                sbuf = s.buf or self.remote(g, tb, op, s, "memory")[1]
                values = self.read(on, sbuf, cells(s), op, t)
                self.need_data(g, t, op, sbuf, cells(s), values, on)
                self.write(g, d.buf, cells(d), values, label)
            return
        if name in ("re", "res", "rre", "rres", "repkt", "respkt", "recpkt", "recspkt"):
            self.reduce(g, tb, op, cells, label)
            return
        if name in ("ppkt", "cpkt"):
            for s, d in zip(op.src, op.dst, strict=True):
                values = self.read(g, s.buf, cells(s), op, t)
                self.need_data(g, t, op, s.buf, cells(s), values)
                h = g if d.buf else self.remote(g, tb, op, d)[0]
                self.put_packets(h, cells(d), values)
            return
        if name in ("upkt", "rppkt"):
            values = self.get_packets(g, cells(op.src[0]))
            if name == "upkt":
                self.write(g, op.dst[0].buf, cells(op.dst[0]), values, label)
            else:
                for d in op.dst:
                    self.put_packets(self.remote(g, tb, op, d)[0], cells(d), values)
            return
        if name in ("glres", "gstore", "gstorepkt"):
            self.switch(g, tb, op, cells, label)
            return
        raise self.fail(g, t, op, "is not run by Canopy's symbolic executor")

    def put_packets(self, h: int, cells: range, values: list[Value] | None) -> None:
        assert values is not None
        for c, v in zip(cells, values, strict=True):
            self.packets[h][c] = v

    def get_packets(self, g: int, cells: range) -> list[Value]:
        values: list[Value] = [self.packets[g].get(c) for c in cells]
        if any(v is None for v in values):
            raise _Blocked("waits for packets in its scratch buffer that are never written")
        return values

    def reduce(self, g: int, tb: ThreadBlock, op: Op, cells: Callable[[Ref], range],
               label: object) -> None:
        t, name = tb.id, op.name
        first = op.src[0]
        acc = self.read(g, first.buf, cells(first), op, t)
        self.need_data(g, t, op, first.buf, cells(first), acc)
        for s in op.src[1:]:
            if name in ("repkt", "respkt", "recpkt", "recspkt"):
                values = self.get_packets(g, cells(s))
            elif s.buf is not None:
                values = self.read(g, s.buf, cells(s), op, t)
                self.need_data(g, t, op, s.buf, cells(s), values)
            else:
                on, buf = self.remote(g, tb, op, s, "memory")
                values = self.read(on, buf, cells(s), op, t)
                self.need_data(g, t, op, buf, cells(s), values, on)
            acc = self.add(g, t, op, acc, values)
        d0 = op.dst[0]
        self.write(g, d0.buf, cells(d0), acc, label)
        rest = op.dst[1:]
        if name in ("recpkt", "recspkt"):
            self.put_packets(g, cells(rest[0]), acc)
            rest = rest[1:]
        for d in rest:
            h, buf = self.remote(g, tb, op, d, "memory")
            if name in ("respkt", "recspkt"):
                self.put_packets(h, cells(d), acc)
            else:
                self.pending_mem[(g, t, h)].append((h, buf, cells(d), acc, label))

    def switch(self, g: int, tb: ThreadBlock, op: Op, cells: Callable[[Ref], range],
               label: object) -> None:
        gpu = self.plan.gpus[g]

        def group(ref: Ref) -> tuple[str, tuple[int, ...]]:
            assert ref.switch is not None
            return gpu.switches[tb.channels["switch"][ref.switch]]

        d = op.dst[0]
        dbuf, ranks = group(d) if d.switch is not None else (d.buf, (g,))
        if op.name == "glres":
            s = op.src[0]
            sbuf, sranks = group(s)
            acc: list[Value] | None = None
            for r in sranks:
                values = self.read(r, sbuf, cells(s), op, tb.id)
                self.need_data(g, tb.id, op, sbuf, cells(s), values, r)
                acc = values if acc is None else self.add(g, tb.id, op, acc, values)
        else:
            s = op.src[0]
            if op.name == "gstorepkt":
                acc = self.get_packets(g, cells(s))
            else:
                acc = self.read(g, s.buf, cells(s), op, tb.id)
                self.need_data(g, tb.id, op, s.buf, cells(s), acc)
        for r in ranks:
            if op.name == "gstorepkt":
                self.put_packets(r, cells(d), acc)
            else:
                self.write(r, dbuf, cells(d), acc, label)

    # -- the run -------------------------------------------------------------------------
    def run(self) -> int:
        plan = self.plan
        progs: dict[tuple[int, int], list[tuple[Op, int, Op | None]]] = {}
        for gpu in plan.gpus:
            for tb in gpu.tbs:
                seq: list[tuple[Op, int, Op | None]] = []
                for op in tb.ops:
                    if op.name == "pipeline":
                        seq += [(inner, it, op) for it in range(2) for inner in op.ops]
                    else:
                        seq.append((op, 0, None))
                progs[(gpu.id, tb.id)] = seq
        pc = dict.fromkeys(progs, 0)
        why: dict[tuple[int, int], str] = {}
        live = [k for k in progs if progs[k]]
        while live:
            moved = False
            still = []
            for key in live:
                g, t = key
                tb = plan.gpus[g].tbs[t]
                seq = progs[key]
                while pc[key] < len(seq):
                    op, it, piped = seq[pc[key]]
                    try:
                        self.execute(g, tb, op, it, piped)
                    except _Blocked as blocked:
                        why[key] = blocked.why
                        break
                    why.pop(key, None)
                    pc[key] += 1
                    self.executed += 1
                    moved = True
                if pc[key] < len(seq):
                    still.append(key)
            live = still
            if live and not moved:
                g, t = live[0]
                op = progs[(g, t)][pc[(g, t)]][0]
                others = f" ({len(live) - 1} more thread blocks are stuck)" if len(live) > 1 \
                    else ""
                raise MscclppPlanError(f"{at(plan.source, g, t, op)} {why[(g, t)]}: the plan "
                                       f"deadlocks{others}.")
        return self.executed

    def check_undelivered(self) -> None:
        for key, queue in self.queues.items():
            for label, payload in queue:
                if payload:
                    raise MscclppPlanError(
                        f"{label} signals data to GPU {key[0]}, but GPU {key[0]} never waits "
                        f"for that signal on its {key[1]} channel to GPU {key[2]}, so the data "
                        "is never known to arrive.")
        for pending in (self.pending_mem, self.pending_port):
            for entries in pending.values():
                if entries:
                    h, _, _, _, label = entries[0]
                    raise MscclppPlanError(f"{label} writes to GPU {h}, but no signal after it "
                                           f"reaches GPU {h}, so GPU {h} never knows the "
                                           "data arrived.")

    def expected(self, gpu: Gpu, cell: int) -> Value:
        coll, n = self.plan.collective, self.plan.ngpus
        full = (1 << n) - 1
        ic = gpu.input_chunks * self.L
        oc = self.out_cells(gpu)
        if coll == "allgather":
            return (cell, 1 << (cell // ic))
        if coll == "allreduce":
            return (cell, full)
        if coll == "reducescatter":
            return (gpu.id * oc + cell, full)
        blk = ic // n
        s, x = divmod(cell, blk)
        return (s * ic + gpu.id * blk + x, 1 << s)

    def check_result(self) -> bool:
        plan = self.plan
        if plan.collective not in COLLECTIVES:
            return False
        for gpu in plan.gpus:
            for cell in range(self.out_cells(gpu)):
                b, p = self.place(gpu.id, "o", cell)
                got, want = self.mem[gpu.id][b][p], self.expected(gpu, cell)
                if got != want:
                    writer = self.who[gpu.id][b][p]
                    by = f"; {writer} wrote it last" if writer else \
                        "; nothing of the plan wrote it"
                    raise MscclppPlanError(
                        f"{plan.source}: GPU {gpu.id} ends with o[chunk {cell // self.L}] "
                        f"holding {self.describe(got)}, where {plan.collective} needs "
                        f"{self.describe(want)}{by}.")
        return True

    def describe(self, v: Value) -> str:
        if v is None:
            return "nothing"
        ranks = [r for r in range(self.plan.ngpus) if v[1] >> r & 1]
        text = ", ".join(map(str, ranks[:6])) + (", ..." if len(ranks) > 6 else "")
        return f"element {v[0] // self.L} from GPU{'s' if len(ranks) > 1 else ''} {text}"


MAX_CELLS = 1 << 23
"""Chunk parts (cells) of all buffers of all GPUs the symbolic run holds (about 1 GB)."""
MAX_CELL_STEPS = 1 << 26
"""Cells all ops together move in the symbolic run (about a minute)."""


def _check_size(plan: PlanModel) -> None:
    """Refuse a plan whose symbolic run would pass the memory or time it is bounded by:
    its buffers are held cell by cell, and each op moves its buffers' cells."""
    per_chunk = cells_per_chunk(plan)
    cells = per_chunk * sum(g.input_chunks + g.output_chunks + g.scratch_chunks
                            for g in plan.gpus)
    if cells > MAX_CELLS:
        raise MscclppPlanError(f"{plan.source}: its buffers hold {_many(cells)} chunk parts "
                               f"(chunks times {per_chunk} parts, from tbg_size and "
                               f"pipelines); Canopy's symbolic run holds at most {MAX_CELLS:,}.")
    steps = per_chunk * sum(r.size for g in plan.gpus for tb in g.tbs for top in tb.ops
                            for op in (top, *top.ops) for r in op.src + op.dst)
    if steps > MAX_CELL_STEPS:
        raise MscclppPlanError(f"{plan.source}: its ops move {_many(steps)} chunk parts in "
                               f"all; Canopy's symbolic run moves at most {MAX_CELL_STEPS:,}.")


def _many(n: int) -> str:
    return f"{n:,}" if n < 10**15 else f"about 1e{len(str(n)) - 1}"


def execute(plan: PlanModel) -> ExecutionReport:
    """Run ``plan`` symbolically; raises :class:`MscclppPlanError` naming the GPU, thread
    block and op at fault (a missing nop, a deadlock, data read before it arrives, data
    never signalled, a wrong result)."""
    problem = thread_sync_problem(plan)
    if problem is not None:
        raise MscclppPlanError(problem + ".")
    _check_size(plan)
    run = _Run(plan)
    executed = run.run()
    run.check_undelivered()
    checked = run.check_result()
    return ExecutionReport(plan.ngpus, sum(len(g.tbs) for g in plan.gpus), executed,
                           plan.collective, checked)
