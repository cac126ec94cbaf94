"""Canopy's lowered MSCCL programs as MSCCL++ execution plans (JSON).

The plan is a translation of the program Canopy already lowers and lays out for MSCCL
(:mod:`canopy.engine.msccl.lowering` and :mod:`canopy.engine.msccl.threadblocks`: the
chunking, the chains, the thread blocks and their step order), read back as an
:class:`~canopy.engine.msccl.model.XmlAlgo`. Every MSCCL thread block becomes an MSCCL++
thread block with the same steps in the same order, so the plan moves the same data in
the same order as the XML the execution model times. The rules the writer follows, each
with the runtime behaviour (microsoft/mscclpp ``execution_plan.cc``, ``executor.cc``,
``execution_kernel.hpp``) it mirrors:

1. **Channels.** Every MSCCL connection (sender, receiver, channel) becomes one channel
   pair: a memory channel when both GPUs sit in one server (the topology's node
   ``group``; peer-to-peer loads and stores), else a port channel (the proxy's RDMA through
   the NICs; the runtime uses IB between ranks of different nodes). Each GPU lists its
   channels of a type in one order of the connections, sorted by (lower rank, higher rank,
   sender, receiver, channel), so the j-th channel from a to b meets the j-th from b to a
   (the executor tags connections per peer in list order). Ranks must therefore be laid
   out with each server's GPUs consecutive, as the runtime's node of rank r is
   r / GPUs per node.
2. **Zero-copy receives.** A plain receive (``r``, ``rcs``) lands where the receiver keeps
   it: the sender puts straight into the receiver's slot (a remote buffer of the
   receiver's ``i``/``o``/``s``). A reducing receive (``rrc``, ``rrs``, ``rrcs``) lands in a
   scratch slot of its own on the receiver (after the program's own scratch), which the
   receiver then adds into its slot with ``re`` (``rrs`` adds into the scratch slot and
   sends from there). No slot is written twice, so no credit flows back.
3. **Signals and waits.** After its puts a sender does a ``nop`` and a ``signal`` on the
   connection's channel: the signal orders the thread block's earlier writes (memory
   channel) or follows the channel's puts through the proxy (port channel). The receiver's
   ``wait`` on its end returns once the data is there; semaphores count, so the n-th wait
   pairs with the n-th signal, which is the n-th message of the MSCCL connection.
4. **Thread synchronisation.** A ``nop`` (``__syncthreads``) follows every wait before data
   is touched, precedes every signal and semaphore release after data moved, and
   separates two data ops where the second touches what the first wrote (one thread waits
   or signals, all threads move data).
5. **Dependencies between thread blocks** (MSCCL's ``depid``/``deps``): the step depended
   on does ``sem_release`` on a semaphore of its own per dependent step, the dependent
   step ``sem_acquire`` s it first (device semaphores count, one per pipeline iteration).
6. **Pipelining.** Each thread block's steps are one ``pipeline`` op whose
   ``iter_context`` moves one chunk slice of ``unit_size`` bytes per iteration
   (``num_chunks`` 1); every data op names one chunk (a put pairs up to 8 of them), so the
   runtime cuts every chunk into the same slices and runs all steps once per slice, as the
   MSCCL interpreter loops over an XML and as the execution model pipelines a plan. Local
   copies that open a thread block and wait on nothing (the input copied into the work
   slots) run once before its pipeline, one op each over their whole range, and what
   depends on them acquires its semaphore before its own pipeline.
7. **Readiness across calls.** Before its pipeline a receiving thread block signals its
   senders that it is ready (``rlxsignal`` on memory channels, ``signal`` on port ones)
   and a sending one waits for that before its first put, so a call never writes into a
   peer still busy with the previous call.
8. **Limits.** At most 64 ops per thread block (``MAX_OPERATION``, a pipeline counting its
   inner ops), 16 semaphores per op, 8 puts per op; a larger program is refused with the
   limit it breaks. The runtime also needs every message size to be a multiple of 16
   bytes times the chunks of the input (``checkMessageSize``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from canopy.engine.model.errors import ScheduleError
from canopy.engine.msccl.model import (
    STEP_TYPES,
    XmlAlgo,
    XmlStep,
    XmlThreadBlock,
    connection_steps,
)
from canopy.engine.mscclpp.reader import MAX_CHANNEL_PER_OPERATION, MAX_OPERATION, UNBOUNDED

COLLECTIVE_NAMES = {"allgather": "allgather", "reduce_scatter": "reducescatter",
                    "allreduce": "allreduce", "alltoall": "alltoall"}
MAX_SEMAPHORES_PER_OP = 16
DEFAULT_UNIT = 2 << 20          # bytes of a chunk per pipeline iteration without a topology

Conn = tuple[int, int, int]


class MscclppLimitError(ScheduleError):
    """The program does not fit the MSCCL++ runtime's limits."""


@dataclass
class _Tb:
    """A thread block being written: its channels, remote buffers and ops."""

    gpu: int
    id: int
    channels: dict[str, list[int]] = field(default_factory=lambda: {"memory": [], "port": []})
    buffers: dict[str, list[int]] = field(default_factory=lambda: {"memory": [], "port": []})
    pre: list[dict] = field(default_factory=list)
    body: list[dict] = field(default_factory=list)
    written: set[tuple[str, int]] = field(default_factory=set)
    waited: bool = False
    dirty: bool = False

    def channel(self, kind: str, index: int) -> int:
        ids = self.channels[kind]
        if index not in ids:
            ids.append(index)
        return ids.index(index)

    def buffer(self, kind: str, index: int) -> int:
        ids = self.buffers[kind]
        if index not in ids:
            ids.append(index)
        return ids.index(index)

    def sync(self) -> None:
        self.body.append({"name": "nop"})
        self.written.clear()
        self.waited = self.dirty = False

    def data(self, op: dict, reads: list[tuple[str, int]], writes: list[tuple[str, int]]
             ) -> None:
        """A data op: a nop first where it would race (rule 4)."""
        if self.waited or any(x in self.written for x in reads + writes):
            self.sync()
        self.body.append(op)
        self.written.update(writes)
        self.dirty = True

    def signal_like(self, op: dict) -> None:
        if self.dirty:
            self.sync()
        self.body.append(op)

    def wait_like(self, op: dict) -> None:
        self.body.append(op)
        self.waited = True


class _Writer:
    def __init__(self, algo: XmlAlgo, servers: list[int], unit_size: int) -> None:
        self.algo, self.servers, self.unit = algo, servers, unit_size
        if len(servers) != algo.ngpus:
            raise ScheduleError(f"the program has {algo.ngpus} GPUs but the topology "
                                f"{len(servers)} compute nodes.")
        self.tbs = {(g.id, tb.id): _Tb(g.id, tb.id) for g in algo.gpus for tb in g.tbs}
        self.conns: dict[Conn, tuple[int, int]] = {}         # conn -> (send tb, recv tb)
        send = connection_steps(algo, True)
        recv = connection_steps(algo, False)
        for conn in set(send) | set(recv):
            if len(send.get(conn, [])) != len(recv.get(conn, [])) or conn[0] == conn[1]:
                raise ScheduleError(f"connection {conn[0]} -> {conn[1]} (channel {conn[2]}) "
                                    "sends and receives different numbers of messages.")
            self.conns[conn] = (send[conn][0][0], recv[conn][0][0])
        self.send, self.recv = send, recv
        self.peers: list[dict[str, list[int]]] = [{"memory": [], "port": []}
                                                  for _ in algo.gpus]
        self.index: dict[tuple[Conn, int], int] = {}
        for conn in sorted(self.conns, key=lambda c: (min(c[:2]), max(c[:2]), c)):
            a, b, _ = conn
            kind = self.kind(conn)
            for me, other in ((a, b), (b, a)):
                self.index[(conn, me)] = len(self.peers[me][kind])
                self.peers[me][kind].append(other)
        self.remote: list[dict[tuple[int, str], set[str]]] = [{} for _ in algo.gpus]
        self.remote_order: list[list[tuple[int, str]]] = [[] for _ in algo.gpus]
        self.scratch = [g.s_chunks for g in algo.gpus]
        self.semaphores = [0] * algo.ngpus
        self.targets: dict[tuple[Conn, int], tuple[str, int]] = {}
        self.temps: dict[tuple[int, int, int], int] = {}

    def kind(self, conn: Conn) -> str:
        return "memory" if self.servers[conn[0]] == self.servers[conn[1]] else "port"

    def remote_buffer(self, g: int, rank: int, buf: str, kind: str) -> int:
        key = (rank, buf)
        if key not in self.remote[g]:
            self.remote[g][key] = set()
            self.remote_order[g].append(key)
        self.remote[g][key].add(kind)
        return self.remote_order[g].index(key)

    def place_receives(self) -> None:
        """Where each message lands (rule 2): the receiver's slot or a fresh scratch slot."""
        for conn, steps in self.recv.items():
            h = conn[1]
            for n, (tid, step) in enumerate(steps):
                if step.type in ("r", "rcs"):
                    self.targets[(conn, n)] = (step.dstbuf, step.dstoff)
                else:
                    self.targets[(conn, n)] = ("s", self.scratch[h])
                    self.temps[(h, tid, step.s)] = self.scratch[h]
                    self.scratch[h] += step.cnt

    def hoisted(self, tb: XmlThreadBlock) -> int:
        """How many of a thread block's first steps are copies that wait on nothing: they
        run once before its pipeline, each over its whole range (rule 6)."""
        n = 0
        while n < len(tb.steps) and tb.steps[n].type == "cpy" and tb.steps[n].depid < 0:
            n += 1
        return n

    def build(self) -> None:
        self.place_receives()
        sent: dict[Conn, int] = defaultdict(int)
        got: dict[Conn, int] = defaultdict(int)
        releases: dict[tuple[int, int, int], list[int]] = defaultdict(list)
        acquires: dict[tuple[int, int, int], int] = {}
        early: set[tuple[int, int, int]] = set()          # steps run before the pipeline
        for gpu in self.algo.gpus:
            for tb in gpu.tbs:
                early.update((gpu.id, tb.id, st.s) for st in tb.steps[:self.hoisted(tb)])
        for gpu in self.algo.gpus:
            for tb in gpu.tbs:
                for step in tb.steps:
                    if step.depid >= 0:
                        sem = self.semaphores[gpu.id]
                        self.semaphores[gpu.id] += 1
                        releases[(gpu.id, step.depid, step.deps)].append(sem)
                        acquires[(gpu.id, tb.id, step.s)] = sem
        for gpu in self.algo.gpus:
            for tb in gpu.tbs:
                out = self.tbs[(gpu.id, tb.id)]
                first = self.hoisted(tb)
                for step in tb.steps[:first]:
                    out.pre.append({"name": "copy",
                                    "src_buff": [_local(step.srcbuf, step.srcoff, step.cnt)],
                                    "dst_buff": [_local(step.dstbuf, step.dstoff, step.cnt)]})
                sems = [sem for st in tb.steps[:first]
                        for sem in releases.get((gpu.id, tb.id, st.s), [])]
                if first:
                    out.pre.append({"name": "nop"})
                for i in range(0, len(sems), MAX_SEMAPHORES_PER_OP):
                    out.pre.append({"name": "sem_release",
                                    "semaphore_ids": sems[i:i + MAX_SEMAPHORES_PER_OP]})
                waits = [acquires[(gpu.id, tb.id, st.s)] for st in tb.steps[first:]
                         if st.depid >= 0 and (gpu.id, st.depid, st.deps) in early]
                for i in range(0, len(waits), MAX_SEMAPHORES_PER_OP):
                    out.pre.append({"name": "sem_acquire",
                                    "semaphore_ids": waits[i:i + MAX_SEMAPHORES_PER_OP]})
                send_conn = (gpu.id, tb.send, tb.chan) if tb.send >= 0 else None
                recv_conn = (tb.recv, gpu.id, tb.chan) if tb.recv >= 0 else None
                if recv_conn in self.conns:
                    kind = self.kind(recv_conn)
                    cid = out.channel(kind, self.index[(recv_conn, gpu.id)])
                    out.pre.append({"name": "rlxsignal" if kind == "memory" else "signal",
                                    "channel_ids": [cid], "channel_type": kind})
                if send_conn in self.conns:
                    kind = self.kind(send_conn)
                    cid = out.channel(kind, self.index[(send_conn, gpu.id)])
                    out.pre.append({"name": "rlxwait" if kind == "memory" else "wait",
                                    "channel_ids": [cid], "channel_type": kind})
                if waits or send_conn in self.conns:
                    out.pre.append({"name": "nop"})
                for step in tb.steps[first:]:
                    key = (gpu.id, tb.id, step.s)
                    if key in acquires and (gpu.id, step.depid, step.deps) not in early:
                        out.wait_like({"name": "sem_acquire", "semaphore_ids": [acquires[key]]})
                    self.step(out, step, send_conn, recv_conn, sent, got)
                    sems = releases.get(key, [])
                    for i in range(0, len(sems), MAX_SEMAPHORES_PER_OP):
                        out.signal_like({"name": "sem_release",
                                         "semaphore_ids": sems[i:i + MAX_SEMAPHORES_PER_OP]})
                if out.dirty or out.waited:
                    out.sync()

    def step(self, out: _Tb, step: XmlStep, send_conn: Conn | None, recv_conn: Conn | None,
             sent: dict[Conn, int], got: dict[Conn, int]) -> None:
        kind = STEP_TYPES[step.type]
        g, cnt = out.gpu, step.cnt
        here: tuple[str, int] = (step.srcbuf, step.srcoff)        # what a send sends
        if kind.receives:
            assert recv_conn is not None
            got[recv_conn] += 1
            ckind = self.kind(recv_conn)
            cid = out.channel(ckind, self.index[(recv_conn, g)])
            out.wait_like({"name": "wait", "channel_ids": [cid], "channel_type": ckind})
            if step.type in ("r", "rcs"):
                here = (step.dstbuf, step.dstoff)
            else:
                temp = ("s", self.temps[(g, out.id, step.s)])
                result = temp if step.type == "rrs" else (step.dstbuf, step.dstoff)
                for c in range(cnt):
                    a, b, d = ((step.srcbuf, step.srcoff + c), (temp[0], temp[1] + c),
                               (result[0], result[1] + c))
                    out.data({"name": "re", "src_buff": [_local(*a), _local(*b)],
                              "dst_buff": [_local(*d)], "reduce_op": "sum"}, [a, b], [d])
                here = result
        elif step.type in ("cpy", "re"):
            for c in range(cnt):
                a, d = (step.srcbuf, step.srcoff + c), (step.dstbuf, step.dstoff + c)
                if step.type == "cpy":
                    out.data({"name": "copy", "src_buff": [_local(*a)],
                              "dst_buff": [_local(*d)]}, [a], [d])
                else:
                    out.data({"name": "re", "src_buff": [_local(*d), _local(*a)],
                              "dst_buff": [_local(*d)], "reduce_op": "sum"}, [a, d], [d])
        if kind.sends:
            assert send_conn is not None
            n = sent[send_conn]
            sent[send_conn] += 1
            h = send_conn[1]
            ckind = self.kind(send_conn)
            cid = out.channel(ckind, self.index[(send_conn, g)])
            tbuf, toff = self.targets[(send_conn, n)]
            bid = out.buffer(ckind, self.remote_buffer(g, h, tbuf, ckind))
            for first in range(0, cnt, MAX_CHANNEL_PER_OPERATION):
                part = range(first, min(cnt, first + MAX_CHANNEL_PER_OPERATION))
                op: dict[str, Any] = {
                    "name": "put",
                    "src_buff": [_local(here[0], here[1] + c) for c in part],
                    "dst_buff": [{"buffer_id": bid, "index": toff + c, "size": 1}
                                 for c in part],
                    "channel_type": ckind}
                if ckind == "port":
                    op["channel_ids"] = [cid] * len(part)
                out.data(op, [(here[0], here[1] + c) for c in part], [])
            out.signal_like({"name": "signal", "channel_ids": [cid], "channel_type": ckind})

    def document(self, name: str, min_bytes: int, max_bytes: int,
                 routes: bool) -> dict[str, Any]:
        algo = self.algo
        gpus = []
        for gpu in algo.gpus:
            tbs: list[dict[str, Any]] = []
            for tb in gpu.tbs:
                out = self.tbs[(gpu.id, tb.id)]
                if not out.body and not out.pre:
                    continue
                ops = list(out.pre)
                if out.body:
                    ops.append({"name": "pipeline",
                                "iter_context": {"unit_size": self.unit, "num_chunks": 1},
                                "ops": out.body})
                total = len(ops) - 1 + len(out.body) + (1 if out.body else 0)
                if total > MAX_OPERATION:
                    raise MscclppLimitError(
                        f"the MSCCL++ plan does not fit the runtime's limits: GPU {gpu.id}'s "
                        f"thread block {tb.id} needs {total} operations (its {len(tb.steps)} "
                        f"steps), but the runtime holds {MAX_OPERATION} per thread block.")
                entry: dict[str, Any] = {
                    "id": len(tbs), "ops": ops,
                    "channels": [{"channel_type": k, "channel_ids": ids}
                                 for k, ids in out.channels.items() if ids],
                    "remote_buffer_refs": [{"access_channel_type": k, "remote_buffer_ids": ids}
                                           for k, ids in out.buffers.items() if ids]}
                if routes and tb.via:
                    entry["canopy_route"] = list(tb.via)
                tbs.append(entry)
            channels = [{"channel_type": k, "connected_to": peers}
                        for k, peers in self.peers[gpu.id].items() if peers]
            gpus.append({
                "id": gpu.id, "input_chunks": gpu.i_chunks, "output_chunks": gpu.o_chunks,
                "scratch_chunks": self.scratch[gpu.id], "threadblocks": tbs,
                "channels": channels,
                "remote_buffers": [{"rank": r, "type": b,
                                    "access_channel_types": sorted(self.remote[gpu.id][(r, b)])}
                                   for r, b in self.remote_order[gpu.id]],
                "semaphores": [{"init_value": 0}] * self.semaphores[gpu.id]})
        return {"name": name, "collective": COLLECTIVE_NAMES[algo.coll], "protocol": "Simple",
                "inplace": algo.inplace, "reuse_resources": False, "gpus": gpus,
                "num_threads_per_block": 1024, "use_double_scratch_buffer": False,
                "buffer_alignment": 16, "min_message_size": min_bytes,
                "max_message_size": max_bytes}


def _local(buf: str, index: int, size: int = 1) -> dict[str, Any]:
    return {"type": buf, "index": index, "size": size}


def algo_plan(algo: XmlAlgo, servers: list[int], unit_size: int = DEFAULT_UNIT,
              name: str | None = None, min_bytes: int = 0, max_bytes: int = UNBOUNDED,
              routes: bool = True) -> dict[str, Any]:
    """The execution plan (a JSON object) of the MSCCL program ``algo``; ``servers[r]`` is
    rank r's server (memory channels within one, port channels between), ``unit_size``
    the bytes of a chunk each pipeline iteration moves (a multiple of 16). ``routes``
    keeps Canopy's route of each sending thread block as ``canopy_route`` (the runtime
    ignores keys it does not read; :mod:`canopy.engine.mscclpp.timing` follows them).
    Raises :class:`MscclppLimitError` beyond the runtime's limits."""
    if unit_size < 16 or unit_size % 16:
        raise ScheduleError(f"the pipeline unit must be a positive multiple of 16 bytes, not "
                            f"{unit_size}.")
    writer = _Writer(algo, servers, unit_size)
    writer.build()
    coll = COLLECTIVE_NAMES[algo.coll]
    name = name or (f"canopy-{coll}-{algo.ngpus}gpus-"
                    f"{'inplace' if algo.inplace else 'outofplace'}")
    return writer.document(name, min_bytes, max_bytes, routes)
