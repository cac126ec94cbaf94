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
   channel) or follows the channel's puts through the proxy (port channel, rule 9). The receiver's
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
8. **Limits, and thread blocks cut into parts.** At most 64 ops per thread block
   (``MAX_OPERATION``, a pipeline counting its inner ops), 16 semaphores per op, 8 puts
   per op. A thread block whose ops exceed 64 is cut into consecutive parts, each its own
   thread block running its steps' ops in its own pipeline: the n-th message of a
   connection then runs on a channel of its own per (sender's part, receiver's part), so
   every channel still pairs its n-th wait with its n-th signal, and each part but the
   first acquires, per iteration, a semaphore the previous part releases after its steps
   of that iteration, so an iteration's steps keep the order the one thread block gave
   them (slices of different iterations are disjoint, so parts may run iterations apart).
   In ``lockstep`` the first part also acquires, at the end of each iteration, a semaphore
   the last part releases after its steps of that iteration, so the parts run one
   iteration at a time as the one thread block did (parts running apart put messages of
   two iterations of one connection on its link at once, on two channels; the all-to-all
   plans ask for it, where relays wait on those messages). The cut is greedy by ops, with
   the budget lowered until every part fits; where the parts need more thread blocks than
   the GPU has (``--sms``: all are resident at
   once, since they spin on each other), the plan is refused with the limit it breaks.
   Each round counts the parts' ops by these rules without writing them (only the thread
   blocks the cut changes are recounted), and the plan is written once, for the cut
   found, its ops checked against the count.
   A thread block refers to at most 16 remote buffers per channel type (``MAX_CHANNEL``:
   the device plan's arrays, which the executor fills without a bound check). A part
   needs no count of them: it writes only into its thread block's one sending peer
   (rules 2, 9, 10: every lane of a connection names the same buffer), so it refers to
   at most that peer's input, output and scratch, three buffers, of the one channel type
   of that connection.
   The runtime also needs every message size to be a multiple of 16 bytes times the
   chunks of the input and output (``checkMessageSize`` throws otherwise): the launcher's
   selector claims only such sizes and leaves the others to NCCL.
9. **Fused ops.** A reduction whose result is sent on a memory channel is one ``res``
   (reduce and write to the peer, ``handleReduceSend``) per chunk; a message on a port
   channel ends with a ``pws`` (put with signal) of its last chunk instead of a ``nop``
   and a ``signal``: the proxy keeps a channel's requests in order, so that one signal
   follows all of the message (a ``pws`` signals once per destination, hence only the last
   chunk).
10. **Lanes.** A port connection may be given ``L`` lanes (``lanes``; at most 8, so a
   receive waits on all of a message's in one op): L port channels between the same two
   thread blocks, each a queue pair of its own that the NIC serves in turn, so the
   connection gets L shares of its links where a single channel would get one. Its chunks
   go to the lanes in turn (round robin over the connection's messages, so each lane
   carries 1/L of every loop); on each lane a message's chunks are puts ending with a
   ``pws``, and the receive waits on the lanes that carried some of it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from canopy.engine.model.errors import ScheduleError
from canopy.engine.msccl.model import (
    STEP_TYPES,
    XmlAlgo,
    XmlStep,
    XmlThreadBlock,
    connection_steps,
)
from canopy.engine.mscclpp.reader import (
    MAX_CHANNEL,
    MAX_CHANNEL_PER_OPERATION,
    MAX_OPERATION,
    UNBOUNDED,
)

if TYPE_CHECKING:
    from canopy.engine.msccl.threadblocks import ThreadBlockAssignment

COLLECTIVE_NAMES = {"allgather": "allgather", "reduce_scatter": "reducescatter",
                    "allreduce": "allreduce", "alltoall": "alltoall"}
MAX_SEMAPHORES_PER_OP = 16
MAX_LANES = MAX_CHANNEL_PER_OPERATION   # port channels of one connection (rule 10)
DEFAULT_UNIT = 2 << 20          # bytes of a chunk per pipeline iteration without a topology

Conn = tuple[int, int, int]
Sub = tuple[Conn, int, int]      # (connection, sender's part, receiver's part)


class MscclppLimitError(ScheduleError):
    """The program does not fit the MSCCL++ runtime's limits."""


class _Order:
    """Rule 4 on a part's pipeline: a ``nop`` where a data op would race, after a wait
    and before a signal; :meth:`emit` takes each op in turn."""

    written: set[tuple[str, int]]
    waited: bool
    dirty: bool

    def emit(self, op: Any) -> None:
        raise NotImplementedError

    def sync(self) -> None:
        self.emit({"name": "nop"})
        self.written.clear()
        self.waited = self.dirty = False

    def data(self, op: Any, reads: list[tuple[str, int]],
             writes: list[tuple[str, int]]) -> None:
        """A data op: a nop first where it would race (rule 4)."""
        written = self.written
        if self.waited or written and (any(x in written for x in reads) or
                                       any(x in written for x in writes)):
            self.sync()
        self.emit(op)
        self.written.update(writes)
        self.dirty = True

    def signal_like(self, op: Any) -> None:
        if self.dirty:
            self.sync()
        self.emit(op)

    def wait_like(self, op: Any) -> None:
        self.emit(op)
        self.waited = True


@dataclass
class _Tb(_Order):
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

    def emit(self, op: Any) -> None:
        self.body.append(op)


class _Counting(_Order):
    """A part's pipeline counted as :class:`_Tb` would write it: ``n`` ops."""

    def __init__(self) -> None:
        self.n = 0
        self.written = set()
        self.waited = self.dirty = False

    def emit(self, op: Any) -> None:
        self.n += 1

    def sync(self) -> None:
        self.n += 1
        self.written.clear()
        self.waited = self.dirty = False


class _Program:
    """What every cut of ``algo`` into parts shares: each connection's sending and
    receiving steps in message order (checked to match), the fresh scratch slot after the
    program's scratch where each reducing receive lands (rule 2),
    each connection's channel type and lanes (rules 1, 10), and the uncut program's
    sub-connections (:class:`_Cut`)."""

    def __init__(self, algo: XmlAlgo, servers: list[int],
                 lanes: dict[Conn, int] | None = None, lockstep: bool = False) -> None:
        if len(servers) != algo.ngpus:
            raise ScheduleError(f"the program has {algo.ngpus} GPUs but the topology "
                                f"{len(servers)} compute nodes.")
        self.algo, self.servers, self.lanes = algo, servers, lanes or {}
        self.lockstep = lockstep            # rule 8: parts of a thread block in lockstep
        self.send = connection_steps(algo, True)
        self.recv = connection_steps(algo, False)
        for conn in set(self.send) | set(self.recv):
            if len(self.send.get(conn, [])) != len(self.recv.get(conn, [])) or \
                    conn[0] == conn[1]:
                raise ScheduleError(f"connection {conn[0]} -> {conn[1]} (channel {conn[2]}) "
                                    "sends and receives different numbers of messages.")
        self.scratch = [g.s_chunks for g in algo.gpus]
        self.temps: dict[tuple[int, int, int], int] = {}
        for conn, steps in self.recv.items():
            h = conn[1]
            for tid, step in steps:
                if step.type not in ("r", "rcs"):
                    self.temps[(h, tid, step.s)] = self.scratch[h]
                    self.scratch[h] += step.cnt
        # the thread blocks holding each connection's steps, and those whose readiness
        # lists it (its first sending and receiving ones), in the connections' order
        self.conns: dict[tuple[int, int], list[Conn]] = defaultdict(list)
        self.listed: dict[tuple[int, int], list[Conn]] = defaultdict(list)
        self.ends: dict[Conn, set[tuple[int, int]]] = {}
        self.uncut: dict[Conn, list[Sub]] = {}
        for conn in sorted(self.send):
            ends = {(conn[0], tid) for tid, _ in self.send[conn]} | \
                {(conn[1], tid) for tid, _ in self.recv[conn]}
            self.ends[conn] = ends
            for key in ends:
                self.conns[key].append(conn)
            for key in {(conn[0], self.send[conn][0][0]), (conn[1], self.recv[conn][0][0])}:
                self.listed[key].append(conn)
            self.uncut[conn] = [(conn, 0, 0)]

    def kind(self, conn: Conn) -> str:
        return "memory" if self.servers[conn[0]] == self.servers[conn[1]] else "port"

    def lockstep_ends(self, parts: list[list[XmlStep]], first: int) -> tuple[int, int] | None:
        """In ``lockstep`` (rule 8), the first and last of a cut thread block's ``parts``
        that run pipelined steps (the first part's ``first`` steps are hoisted), between
        which the iteration's semaphore goes; None where they are fewer than two or the
        parts run freely."""
        piped = [p for p, steps in enumerate(parts) if steps[first if p == 0 else 0:]]
        return (piped[0], piped[-1]) if self.lockstep and len(piped) > 1 else None

    def width(self, conn: Conn) -> int:
        """The connection's lanes (rule 10): port channels between its thread blocks."""
        return self.lanes.get(conn, 1) if self.kind(conn) == "port" else 1


def _hoisted(tb: XmlThreadBlock) -> int:
    """How many of a thread block's first steps are copies that wait on nothing: they run
    once before its pipeline, each over its whole range (rule 6)."""
    n = 0
    while n < len(tb.steps) and tb.steps[n].type == "cpy" and tb.steps[n].depid < 0:
        n += 1
    return n


class _Cut:
    """The program's thread blocks cut into parts (rule 8): ``cuts[(gpu, tb)]`` lists the
    step positions where a new part starts. A connection's n-th message runs on the
    sub-connection (conn, sender's part, receiver's part), one channel each (per lane), so
    every channel keeps its messages in order; ``sends_of`` and ``recvs_of`` list each
    part's sub-connections (rule 7's readiness). Only what the cut changes is worked out:
    a connection between thread blocks that are not cut has the one sub-connection
    (conn, 0, 0); ``changed`` holds the thread blocks whose parts or lists differ from the
    uncut program's."""

    def __init__(self, program: _Program, cuts: dict[tuple[int, int], list[int]]) -> None:
        self.program, self.cuts = program, cuts
        algo, send, recv = program.algo, program.send, program.recv
        self.part: dict[tuple[int, int, int], int] = {}   # (gpu, tb, step.s) -> part, if cut
        self.parts: dict[tuple[int, int], list[list[XmlStep]]] = {}
        for g in algo.gpus:
            for tb in g.tbs:
                if not cuts.get((g.id, tb.id)):
                    self.parts[(g.id, tb.id)] = [tb.steps]
                    continue
                bounds = [0, *cuts[(g.id, tb.id)], len(tb.steps)]
                self.parts[(g.id, tb.id)] = [tb.steps[a:b] for a, b in
                                             zip(bounds, bounds[1:], strict=False)]
                for p, steps in enumerate(self.parts[(g.id, tb.id)]):
                    for st in steps:
                        self.part[(g.id, tb.id, st.s)] = p
        touched = sorted({conn for key, at in cuts.items() if at
                          for conn in program.conns.get(key, ())})
        self.sub: dict[Conn, list[Sub]] = {}     # per message, where the connection is cut
        self.subs = dict(program.uncut)         # each connection's, sorted
        for conn in touched:
            subs = self.sub[conn] = [
                (conn, self.part.get((conn[0], stb, sst.s), 0),
                 self.part.get((conn[1], rtb, rst.s), 0))
                for (stb, sst), (rtb, rst) in zip(send[conn], recv[conn], strict=True)]
            self.subs[conn] = sorted(set(subs))
        self.changed = {key for key, at in cuts.items() if at} | \
            {key for conn in touched for key in program.ends[conn]}
        self.sends_of: dict[tuple[int, int, int], list[Sub]] = {}
        self.recvs_of: dict[tuple[int, int, int], list[Sub]] = {}
        for (h, t), conns in program.listed.items():
            for conn in conns:
                stb, rtb = send[conn][0][0], recv[conn][0][0]
                for sub in self.subs[conn]:
                    if (h, t) == (conn[0], stb):
                        self.sends_of.setdefault((h, t, sub[1]), []).append(sub)
                    if (h, t) == (conn[1], rtb):
                        self.recvs_of.setdefault((h, t, sub[2]), []).append(sub)
        # rule 10: which of its connection's lanes carries each chunk of a message (where
        # a connection has more than one)
        self.spread: dict[tuple[Conn, int], list[list[int]]] = {}
        turn: dict[Sub, int] = defaultdict(int)
        for conn, sent in send.items():
            width = program.width(conn)
            if width == 1:
                continue
            for n, (_, st) in enumerate(sent):
                sub = self.sub_of(conn, n)
                spread: list[list[int]] = [[] for _ in range(width)]
                for c in range(st.cnt):
                    spread[(turn[sub] + c) % width].append(c)
                turn[sub] += st.cnt
                self.spread[(conn, n)] = spread

    def sub_of(self, conn: Conn, n: int) -> Sub:
        """The sub-connection message n of ``conn`` runs on."""
        return self.sub[conn][n] if conn in self.sub else (conn, 0, 0)

    def lanes(self, conn: Conn, n: int) -> list[list[int]]:
        """The chunks of message n of ``conn`` each of its lanes carries."""
        if (conn, n) in self.spread:
            return self.spread[(conn, n)]
        return [list(range(self.program.send[conn][n][1].cnt))]


class _Writer(_Cut):
    """One pass of the translation, for a given cut of each thread block into parts
    (rule 8)."""

    def __init__(self, program: _Program, cuts: dict[tuple[int, int], list[int]],
                 unit_size: int) -> None:
        super().__init__(program, cuts)
        algo = self.algo = program.algo
        self.unit = unit_size
        self.kind, self.width = program.kind, program.width
        self.send, self.recv = program.send, program.recv
        self.temps = program.temps
        # where each message lands (rule 2): the receiver's slot or its scratch slot
        self.targets: dict[tuple[Conn, int], tuple[str, int]] = {
            (conn, n): (step.dstbuf, step.dstoff) if step.type in ("r", "rcs")
            else ("s", self.temps[(conn[1], tid, step.s)])
            for conn, steps in self.recv.items() for n, (tid, step) in enumerate(steps)}
        self.tbs = {(g.id, tb.id, p): _Tb(g.id, tb.id)
                    for g in algo.gpus for tb in g.tbs
                    for p in range(len(self.parts[(g.id, tb.id)]))}
        self.peers: list[dict[str, list[int]]] = [{"memory": [], "port": []}
                                                  for _ in algo.gpus]
        self.index: dict[tuple[Sub, int], int] = {}
        subs = [sub for conn_subs in self.subs.values() for sub in conn_subs]
        for sub in sorted(subs, key=lambda c: (min(c[0][:2]), max(c[0][:2]), c)):
            a, b, _ = sub[0]
            kind = self.kind(sub[0])
            for me, other in ((a, b), (b, a)):
                self.index[(sub, me)] = len(self.peers[me][kind])
                self.peers[me][kind] += [other] * self.width(sub[0])
        self.remote: list[dict[tuple[int, str], set[str]]] = [{} for _ in algo.gpus]
        self.remote_order: list[list[tuple[int, str]]] = [[] for _ in algo.gpus]
        self.scratch = list(program.scratch)
        self.semaphores = [0] * algo.ngpus
        self.step_ops: dict[tuple[int, int, int], int] = {}    # ops each step wrote

    def remote_buffer(self, g: int, rank: int, buf: str, kind: str) -> int:
        key = (rank, buf)
        if key not in self.remote[g]:
            self.remote[g][key] = set()
            self.remote_order[g].append(key)
        self.remote[g][key].add(kind)
        return self.remote_order[g].index(key)

    def new_semaphore(self, g: int) -> int:
        self.semaphores[g] += 1
        return self.semaphores[g] - 1

    def readiness(self, out: _Tb, key: tuple[int, int, int]) -> bool:
        """Rule 7 for one part: ready signals on its receiving channels, then waits for its
        peers' on its sending ones (up to 8 channels an op)."""
        g = key[0]
        for subs, memory_op, port_op in ((self.recvs_of.get(key, []), "rlxsignal", "signal"),
                                         (self.sends_of.get(key, []), "rlxwait", "wait")):
            for kind, name in (("memory", memory_op), ("port", port_op)):
                ids = [out.channel(kind, self.index[(sub, g)] + lane) for sub in subs
                       if self.kind(sub[0]) == kind for lane in range(self.width(sub[0]))]
                for i in range(0, len(ids), MAX_CHANNEL_PER_OPERATION):
                    out.pre.append({"name": name, "channel_type": kind,
                                    "channel_ids": ids[i:i + MAX_CHANNEL_PER_OPERATION]})
        return bool(self.sends_of.get(key))

    def build(self) -> None:
        sent: dict[Conn, int] = defaultdict(int)
        got: dict[Conn, int] = defaultdict(int)
        releases: dict[tuple[int, int, int], list[int]] = defaultdict(list)
        acquires: dict[tuple[int, int, int], int] = {}
        early: set[tuple[int, int, int]] = set()          # steps run before the pipeline
        for gpu in self.algo.gpus:
            for tb in gpu.tbs:
                early.update((gpu.id, tb.id, st.s) for st in tb.steps[:_hoisted(tb)])
        for gpu in self.algo.gpus:
            for tb in gpu.tbs:
                for step in tb.steps:
                    if step.depid >= 0:
                        sem = self.new_semaphore(gpu.id)
                        releases[(gpu.id, step.depid, step.deps)].append(sem)
                        acquires[(gpu.id, tb.id, step.s)] = sem
        for gpu in self.algo.gpus:
            for tb in gpu.tbs:
                first = _hoisted(tb)
                parts = self.parts[(gpu.id, tb.id)]
                chain = -1                     # the semaphore the previous part releases
                ends = self.program.lockstep_ends(parts, first)
                loop = self.new_semaphore(gpu.id) if ends is not None else -1
                for p, steps in enumerate(parts):
                    out = self.tbs[(gpu.id, tb.id, p)]
                    pre = steps[:first] if p == 0 else []
                    piped = steps[len(pre):]
                    for step in pre:
                        out.pre.append({"name": "copy",
                                        "src_buff": [_local(step.srcbuf, step.srcoff, step.cnt)],
                                        "dst_buff": [_local(step.dstbuf, step.dstoff, step.cnt)]})
                    sems = [sem for st in pre for sem in releases.get((gpu.id, tb.id, st.s), [])]
                    if pre:
                        out.pre.append({"name": "nop"})
                    for i in range(0, len(sems), MAX_SEMAPHORES_PER_OP):
                        out.pre.append({"name": "sem_release",
                                        "semaphore_ids": sems[i:i + MAX_SEMAPHORES_PER_OP]})
                    waits = [acquires[(gpu.id, tb.id, st.s)] for st in piped
                             if st.depid >= 0 and (gpu.id, st.depid, st.deps) in early]
                    for i in range(0, len(waits), MAX_SEMAPHORES_PER_OP):
                        out.pre.append({"name": "sem_acquire",
                                        "semaphore_ids": waits[i:i + MAX_SEMAPHORES_PER_OP]})
                    sends = self.readiness(out, (gpu.id, tb.id, p))
                    if waits or sends:
                        out.pre.append({"name": "nop"})
                    if chain >= 0 and piped:
                        out.wait_like({"name": "sem_acquire", "semaphore_ids": [chain]})
                    for step in piped:
                        key = (gpu.id, tb.id, step.s)
                        before = len(out.body)
                        if key in acquires and (gpu.id, step.depid, step.deps) not in early:
                            out.wait_like({"name": "sem_acquire",
                                           "semaphore_ids": [acquires[key]]})
                        self.step(out, tb, step, sent, got)
                        sems = releases.get(key, [])
                        for i in range(0, len(sems), MAX_SEMAPHORES_PER_OP):
                            out.signal_like({"name": "sem_release",
                                             "semaphore_ids": sems[i:i + MAX_SEMAPHORES_PER_OP]})
                        self.step_ops[key] = len(out.body) - before
                    if p + 1 < len(parts) and piped:
                        # the next part runs an iteration's steps after this part's, as
                        # the thread block ran them in order
                        chain = self.new_semaphore(gpu.id)
                        out.signal_like({"name": "sem_release", "semaphore_ids": [chain]})
                    if ends is not None and p == ends[1]:
                        out.signal_like({"name": "sem_release", "semaphore_ids": [loop]})
                    if ends is not None and p == ends[0]:
                        out.wait_like({"name": "sem_acquire", "semaphore_ids": [loop]})
                    if out.dirty or out.waited:
                        out.sync()

    def step(self, out: _Tb, tb: XmlThreadBlock, step: XmlStep, sent: dict[Conn, int],
             got: dict[Conn, int]) -> None:
        kind = STEP_TYPES[step.type]
        g, cnt = out.gpu, step.cnt
        here: tuple[str, int] = (step.srcbuf, step.srcoff)        # what a send sends
        send_conn = (g, tb.send, tb.chan)
        send_kind = self.kind(send_conn) if kind.sends else ""
        fused = False                  # the reduction's op also sends (rule 9: res)
        if kind.receives:
            recv_conn = (tb.recv, g, tb.chan)
            n = got[recv_conn]
            got[recv_conn] += 1
            sub = self.sub_of(recv_conn, n)
            ckind = self.kind(recv_conn)
            base = self.index[(sub, g)]
            cids = [out.channel(ckind, base + lane)
                    for lane, chunks in enumerate(self.lanes(recv_conn, n)) if chunks]
            out.wait_like({"name": "wait", "channel_ids": cids, "channel_type": ckind})
            if step.type in ("r", "rcs"):
                here = (step.dstbuf, step.dstoff)
            else:
                temp = ("s", self.temps[(g, out.id, step.s)])
                result = temp if step.type == "rrs" else (step.dstbuf, step.dstoff)
                fused = send_kind == "memory"
                target = self.send_target(out, send_conn, sent) if fused else None
                for c in range(cnt):
                    a, b, d = ((step.srcbuf, step.srcoff + c), (temp[0], temp[1] + c),
                               (result[0], result[1] + c))
                    op: dict[str, Any] = {"name": "re", "src_buff": [_local(*a), _local(*b)],
                                          "dst_buff": [_local(*d)], "reduce_op": "sum"}
                    if target is not None:
                        bid, toff = target
                        op["name"] = "res"
                        op["dst_buff"].append({"buffer_id": bid, "index": toff + c, "size": 1})
                        op["channel_type"] = "memory"
                    out.data(op, [a, b], [d])
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
        if not kind.sends:
            return
        n = sent[send_conn] - 1 if fused else sent[send_conn]
        if not fused:
            sent[send_conn] += 1
        sub = self.sub_of(send_conn, n)
        cid = out.channel(send_kind, self.index[(sub, g)])
        if fused:
            out.signal_like({"name": "signal", "channel_ids": [cid], "channel_type": "memory"})
            return
        bid, toff = self.target_of(out, send_conn, n)
        if send_kind == "port":
            # each lane's last chunk of the message goes alone as a put with signal: the
            # proxy keeps a channel's requests in order, so one signal follows the lane's
            # part of the message (rules 9, 10)
            base = self.index[(sub, g)]
            for lane, chunks in enumerate(self.lanes(send_conn, n)):
                if not chunks:
                    continue
                lcid = out.channel("port", base + lane)
                for first in range(0, len(chunks) - 1, MAX_CHANNEL_PER_OPERATION):
                    self.put(out, "put", "port", lcid, here, bid, toff,
                             chunks[first:min(len(chunks) - 1,
                                              first + MAX_CHANNEL_PER_OPERATION)])
                self.put(out, "pws", "port", lcid, here, bid, toff, chunks[-1:])
            return
        for first in range(0, cnt, MAX_CHANNEL_PER_OPERATION):
            self.put(out, "put", send_kind, cid, here, bid, toff,
                     range(first, min(cnt, first + MAX_CHANNEL_PER_OPERATION)))
        out.signal_like({"name": "signal", "channel_ids": [cid], "channel_type": send_kind})

    def target_of(self, out: _Tb, conn: Conn, n: int) -> tuple[int, int]:
        """(the thread block's remote buffer, first chunk) where message n of conn lands."""
        tbuf, toff = self.targets[(conn, n)]
        kind = self.kind(conn)
        return out.buffer(kind, self.remote_buffer(out.gpu, conn[1], tbuf, kind)), toff

    def send_target(self, out: _Tb, conn: Conn, sent: dict[Conn, int]) -> tuple[int, int]:
        """As :meth:`target_of` for the next message of conn, counting it as sent."""
        n = sent[conn]
        sent[conn] += 1
        return self.target_of(out, conn, n)

    def put(self, out: _Tb, name: str, kind: str, cid: int, here: tuple[str, int], bid: int,
            toff: int, part: range | list[int]) -> None:
        if not part:
            return
        op: dict[str, Any] = {
            "name": name,
            "src_buff": [_local(here[0], here[1] + c) for c in part],
            "dst_buff": [{"buffer_id": bid, "index": toff + c, "size": 1} for c in part],
            "channel_type": kind}
        if kind == "port":
            op["channel_ids"] = [cid] * len(part)
        out.data(op, [(here[0], here[1] + c) for c in part], [])

    def part_sizes(self) -> dict[tuple[int, int, int], int]:
        """Operations of each part's thread block (a pipeline counting with its ops)."""
        out = {}
        for key, tb in self.tbs.items():
            ops = len(tb.pre) + (len(tb.body) + 1 if tb.body else 0)
            out[key] = ops
        return out

    def document(self, name: str, min_bytes: int, max_bytes: int,
                 routes: bool) -> dict[str, Any]:
        algo = self.algo
        gpus = []
        for gpu in algo.gpus:
            tbs: list[dict[str, Any]] = []
            for tb in gpu.tbs:
                for p in range(len(self.parts[(gpu.id, tb.id)])):
                    out = self.tbs[(gpu.id, tb.id, p)]
                    if not out.body and not out.pre:
                        continue
                    ops = list(out.pre)
                    if out.body:
                        ops.append({"name": "pipeline",
                                    "iter_context": {"unit_size": self.unit, "num_chunks": 1},
                                    "ops": out.body})
                    entry: dict[str, Any] = {
                        "id": len(tbs), "ops": ops,
                        "channels": [{"channel_type": k, "channel_ids": ids}
                                     for k, ids in out.channels.items() if ids],
                        "remote_buffer_refs": [{"access_channel_type": k,
                                                "remote_buffer_ids": ids}
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
              routes: bool = True, max_tbs: int | None = None,
              lanes: dict[Conn, int] | None = None, lockstep: bool = False) -> dict[str, Any]:
    """The execution plan (a JSON object) of the MSCCL program ``algo``; ``servers[r]`` is
    rank r's server (memory channels within one, port channels between), ``unit_size``
    the bytes of a chunk each pipeline iteration moves (a multiple of 16). ``routes``
    keeps Canopy's route of each sending thread block as ``canopy_route`` (the runtime
    ignores keys it does not read; :mod:`canopy.engine.mscclpp.timing` follows them).
    A thread block whose ops exceed the runtime's 64 is cut into parts (rule 8) while the
    GPU has thread blocks left (``max_tbs``, the GPU's SMs; None: no bound).
    ``lanes`` gives port connections (sender, receiver, MSCCL channel) parallel port
    channels (rule 10); ``lockstep`` runs the parts of a cut thread block one iteration at
    a time (rule 8). Raises :class:`MscclppLimitError` beyond the runtime's limits."""
    if unit_size < 16 or unit_size % 16:
        raise ScheduleError(f"the pipeline unit must be a positive multiple of 16 bytes, not "
                            f"{unit_size}.")
    program = _Program(algo, servers, lanes, lockstep)
    fitting = _fitting_cut(program, max_tbs)
    writer = _Writer(program, fitting.cuts, unit_size)
    writer.build()
    if writer.part_sizes() != fitting.sizes:
        raise ScheduleError("the MSCCL++ plan writer and its count of the plan's operations "
                            "disagree (a bug in Canopy).")
    _check_limits(_Fitting(algo.ngpus, fitting.cuts, fitting.sizes,
                           {key: {kind: len(ids) for kind, ids in tb.channels.items()}
                            for key, tb in writer.tbs.items()}), max_tbs)
    coll = COLLECTIVE_NAMES[algo.coll]
    name = name or (f"canopy-{coll}-{algo.ngpus}gpus-"
                    f"{'inplace' if algo.inplace else 'outofplace'}")
    return writer.document(name, min_bytes, max_bytes, routes)


def check_fits(algo: XmlAlgo, servers: list[int], max_tbs: int | None,
               lanes: dict[Conn, int] | None = None) -> None:
    """Raise :class:`MscclppLimitError` where :func:`algo_plan` would (the runtime's ops
    and channels per thread block, ``max_tbs`` thread blocks per GPU; remote buffers stay
    within the runtime's by rule 8), without writing the plan: its parts counted
    (:class:`_Counter`), as the runtime choice asks of a layout it simulated to the end."""
    _check_limits(_fitting_cut(_Program(algo, servers, lanes), max_tbs), max_tbs)


CHUNKWISE = frozenset({"rrs", "rrc", "rrcs", "cpy", "re"})   # a data op per chunk here


def fits_uncut(assignment: ThreadBlockAssignment) -> bool:
    """Whether no thread block of the MSCCL program ``assignment`` lays out (without lanes)
    can need more than MAX_OPERATION ops (:func:`operation_bounds`): then
    :func:`check_fits` cuts none."""
    return all(n <= MAX_OPERATION for rank in operation_bounds(assignment) for n in rank)


def operation_bounds(assignment: ThreadBlockAssignment) -> list[list[int]]:
    """Per rank and thread block of the MSCCL program ``assignment`` lays out (without
    lanes), at least the ops :class:`_Counter` counts of it uncut, found from its steps
    alone, without the program :func:`check_fits` reads: each step's ops at their most (a
    data op may take a ``nop`` before it, rule 4; so may a signal or semaphore release
    after data moved):

    * a wait on another thread block's step: its ``sem_acquire`` (rule 5; or one op for
      16 acquired before the pipeline, rule 6);
    * a receive: its ``wait`` (rule 3);
    * a reduction or a copy (:data:`CHUNKWISE`): a data op per chunk, with a ``nop``;
    * a send: its puts, 8 chunks an op, each with a ``nop``, and its ``signal`` with a
      ``nop`` (rules 3, 9; a port channel's last put carries the signal, and a reduction
      sent on a memory channel is written by its ``res`` ops and signalled: fewer);
    * its dependents in other thread blocks: a ``sem_release`` per 16, with a ``nop``;

    and per thread block the pipeline op and its closing ``nop``, rule 7's readiness (an
    op for its one receiving connection, one for its one sending connection, one for the
    wait before its first put) and the acquires before the pipeline. Copies hoisted
    before the pipeline (rule 6) take an op each and one more, at most what they count
    here (each moves a chunk or more)."""
    out = []
    for rank_tbs in assignment.tbs:
        home = {step: i for i, tb in enumerate(rank_tbs) for step in tb.steps}
        dependents: dict[object, int] = defaultdict(int)    # in other thread blocks
        for step, i in home.items():
            if step.dep is not None and home[step.dep] != i:
                dependents[step.dep] += 1
        bounds = []
        for i, tb in enumerate(rank_tbs):
            ops, waits = 5, 0
            for step in tb.steps:
                cnt, kind = step.cnt, STEP_TYPES[step.kind]
                if step.dep is not None and home[step.dep] != i:
                    waits += 1
                if kind.receives:
                    ops += 1
                if step.kind in CHUNKWISE:
                    ops += 2 * cnt
                if kind.sends:
                    ops += 2 * (-(-cnt // MAX_CHANNEL_PER_OPERATION) + 1)
                released = dependents.get(step, 0)
                if released:
                    ops += 2 * -(-released // MAX_SEMAPHORES_PER_OP)
            bounds.append(ops + waits + -(-waits // MAX_SEMAPHORES_PER_OP))
        out.append(bounds)
    return out


@dataclass
class _Fitting:
    """A cut of every thread block into parts within MAX_OPERATION: the cut, each part's
    operations, and the channels of each type of the parts that may hold more than
    MAX_CHANNEL (as :class:`_Writer` writes them)."""

    ngpus: int
    cuts: dict[tuple[int, int], list[int]]
    sizes: dict[tuple[int, int, int], int]
    channels: dict[tuple[int, int, int], dict[str, int]]


def _check_limits(fitting: _Fitting, max_tbs: int | None) -> None:
    for (g, t, _), kinds in fitting.channels.items():
        for kind, n in kinds.items():
            if n > MAX_CHANNEL:
                raise MscclppLimitError(
                    f"the MSCCL++ plan does not fit the runtime's limits: GPU {g}'s thread "
                    f"block {t} needs {n} {kind} channels, but the runtime holds "
                    f"{MAX_CHANNEL} per thread block (MAX_CHANNEL).")
    if max_tbs is not None:
        used = [0] * fitting.ngpus
        for (g, _, _), n in fitting.sizes.items():
            used[g] += 1 if n else 0
        for g in range(fitting.ngpus):
            if used[g] > max_tbs:
                raise MscclppLimitError(
                    f"the MSCCL++ plan does not fit the runtime's limits: GPU {g} needs "
                    f"{used[g]} thread blocks of at most {MAX_OPERATION} operations, but has "
                    f"{max_tbs} (--sms).")


class _Counter:
    """What :class:`_Writer` writes for a cut, counted without writing it: each part's
    operations (a pipeline counting with its ops) and each step's, by the writer's rules
    (4 to 10) step by step, and the channels of the parts that may hold more than
    MAX_CHANNEL. The uncut program is counted once; a cut recounts only the thread blocks
    it changes (:attr:`_Cut.changed`)."""

    def __init__(self, uncut: _Cut) -> None:
        program = self.program = uncut.program
        algo = program.algo
        self.tbs = {(g.id, tb.id): tb for g in algo.gpus for tb in g.tbs}
        self.early: set[tuple[int, int, int]] = set()      # steps run before the pipeline
        self.releases: dict[tuple[int, int, int], int] = defaultdict(int)   # dependents
        self.message: dict[tuple[int, int, int], int] = {}  # a sending step's message
        for gpu in algo.gpus:
            for tb in gpu.tbs:
                self.early.update((gpu.id, tb.id, st.s) for st in tb.steps[:_hoisted(tb)])
                for step in tb.steps:
                    if step.depid >= 0:
                        self.releases[(gpu.id, step.depid, step.deps)] += 1
        for conn, sent in program.send.items():
            for n, (tid, st) in enumerate(sent):
                self.message[(conn[0], tid, st.s)] = n
        self.sizes: dict[tuple[int, int, int], int] = {}
        self.step_ops: dict[tuple[int, int, int], int] = {}
        for (g, _), tb in self.tbs.items():
            self.thread_block(g, tb, uncut, self.sizes, self.step_ops)

    def count(self, cut: _Cut) -> tuple[dict[tuple[int, int, int], int],
                                        dict[tuple[int, int, int], int]]:
        """(operations of each part's thread block, operations of each pipelined step)."""
        sizes, step_ops = dict(self.sizes), dict(self.step_ops)
        for g, t in cut.changed:
            del sizes[(g, t, 0)]
            self.thread_block(g, self.tbs[(g, t)], cut, sizes, step_ops)
        return sizes, step_ops

    def readiness(self, cut: _Cut, key: tuple[int, int, int]) -> int:
        """Rule 7's ops of one part (up to 8 channels an op)."""
        n = 0
        for subs in (cut.recvs_of.get(key), cut.sends_of.get(key)):
            memory = port = 0
            for sub in subs or ():
                if self.program.kind(sub[0]) == "memory":
                    memory += 1
                else:
                    port += self.program.width(sub[0])
            n += -(-memory // MAX_CHANNEL_PER_OPERATION) - (-port // MAX_CHANNEL_PER_OPERATION)
        return n

    def thread_block(self, g: int, tb: XmlThreadBlock, cut: _Cut,
                     sizes: dict[tuple[int, int, int], int],
                     step_ops: dict[tuple[int, int, int], int]) -> None:
        """The ops of each part of ``tb`` into ``sizes``, of each pipelined step into
        ``step_ops`` (:meth:`_Writer.build`)."""
        first = _hoisted(tb)
        t = tb.id
        parts = cut.parts[(g, t)]
        early, releases, count = self.early, self.releases, self.step
        send_conn = (g, tb.send, tb.chan)
        send_kind = self.program.kind(send_conn)    # (what a sending step sends over)
        chain = False
        ends = self.program.lockstep_ends(parts, first)
        for p, steps in enumerate(parts):
            pre = steps[:first] if p == 0 else []
            piped = steps[len(pre):]
            key = (g, t, p)
            ops = _Counting()
            if chain and piped:
                ops.wait_like(None)
            waits = 0                   # acquired before the pipeline
            for step in piped:
                before = ops.n
                if step.depid >= 0:
                    if (g, step.depid, step.deps) in early:
                        waits += 1
                    else:
                        ops.wait_like(None)
                count(ops, g, t, step, send_conn, send_kind, cut)
                released = releases.get((g, t, step.s), 0)
                for _ in range(-(-released // MAX_SEMAPHORES_PER_OP) if released else 0):
                    ops.signal_like(None)
                step_ops[(g, t, step.s)] = ops.n - before
            if p + 1 < len(parts) and piped:
                chain = True
                ops.signal_like(None)
            if ends is not None and p == ends[1]:
                ops.signal_like(None)
            if ends is not None and p == ends[0]:
                ops.wait_like(None)
            if ops.dirty or ops.waited:
                ops.sync()
            n = ops.n + 1 if ops.n else 0
            if pre:
                sems = sum(releases.get((g, t, st.s), 0) for st in pre)
                n += len(pre) + 1 + -(-sems // MAX_SEMAPHORES_PER_OP)
            sizes[key] = n + -(-waits // MAX_SEMAPHORES_PER_OP) + self.readiness(cut, key) + \
                (1 if waits or cut.sends_of.get(key) else 0)

    def step(self, ops: _Counting, g: int, t: int, step: XmlStep, send_conn: Conn,
             send_kind: str, cut: _Cut) -> None:
        """The ops :meth:`_Writer.step` writes for ``step`` of thread block ``t`` (which
        sends over ``send_conn``, of ``send_kind``), counted."""
        kind = STEP_TYPES[step.type]
        cnt = step.cnt
        here: tuple[str, int] = (step.srcbuf, step.srcoff)
        fused = False
        if kind.receives:
            ops.wait_like(None)
            if step.type in ("r", "rcs"):
                here = (step.dstbuf, step.dstoff)
            else:
                temp = self.program.temps[(g, t, step.s)]
                result = ("s", temp) if step.type == "rrs" else (step.dstbuf, step.dstoff)
                fused = kind.sends and send_kind == "memory"
                for c in range(cnt):
                    ops.data(None, [(step.srcbuf, step.srcoff + c), ("s", temp + c)],
                             [(result[0], result[1] + c)])
                here = result
        elif step.type in ("cpy", "re"):
            for c in range(cnt):
                a, d = (step.srcbuf, step.srcoff + c), (step.dstbuf, step.dstoff + c)
                ops.data(None, [a] if step.type == "cpy" else [a, d], [d])
        if not kind.sends:
            return
        if fused:
            ops.signal_like(None)
            return
        if send_kind == "port":
            for chunks in cut.lanes(send_conn, self.message[(g, t, step.s)]):
                for first in range(0, len(chunks) - 1, MAX_CHANNEL_PER_OPERATION):
                    ops.data(None, [(here[0], here[1] + c) for c in
                                    chunks[first:min(len(chunks) - 1,
                                                     first + MAX_CHANNEL_PER_OPERATION)]], [])
                if chunks:
                    ops.data(None, [(here[0], here[1] + chunks[-1])], [])
            return
        for first in range(0, cnt, MAX_CHANNEL_PER_OPERATION):
            ops.data(None, [(here[0], here[1] + c)
                            for c in range(first, min(cnt, first + MAX_CHANNEL_PER_OPERATION))],
                     [])
        ops.signal_like(None)

    def channels(self, cut: _Cut) -> dict[tuple[int, int, int], dict[str, int]]:
        """The channels of each type of each part of a thread block whose connections'
        sub-connections and lanes add up to more than MAX_CHANNEL (the others cannot hold
        more): its sub-connections' lanes (rules 7, 10), and those its steps wait on or
        send over."""
        program = self.program
        out: dict[tuple[int, int, int], dict[str, int]] = {}
        for g, t in self.tbs:
            conns = program.conns.get((g, t), [])
            if sum(len(cut.subs[conn]) * program.width(conn) for conn in conns) <= MAX_CHANNEL:
                continue
            used: list[dict[str, set[tuple[Sub, int]]]] = [
                {"memory": set(), "port": set()} for _ in cut.parts[(g, t)]]
            ids: set[tuple[Sub, int]]
            for p, kinds in enumerate(used):
                for sub in cut.recvs_of.get((g, t, p), []) + cut.sends_of.get((g, t, p), []):
                    ids = kinds[program.kind(sub[0])]
                    ids.update((sub, lane) for lane in range(program.width(sub[0])))
            for conn in conns:
                kind = program.kind(conn)
                for sending, messages in ((False, program.recv[conn]),
                                          (True, program.send[conn])):
                    if (conn[0] if sending else conn[1]) != g:
                        continue
                    for n, (tid, st) in enumerate(messages):
                        if tid != t:
                            continue
                        lanes = {lane for lane, chunks in enumerate(cut.lanes(conn, n))
                                 if chunks}
                        if sending:
                            lanes = {0} | (lanes if kind == "port" else set())
                        ids = used[cut.part.get((g, t, st.s), 0)][kind]
                        ids.update((cut.sub_of(conn, n), lane) for lane in lanes)
            for p, kinds in enumerate(used):
                out[(g, t, p)] = {kind: len(ids) for kind, ids in kinds.items()}
        return out


PART_OVERHEAD = 8          # ops of a part besides its steps: readiness, semaphores, nops


def _fitting_cut(program: _Program, max_tbs: int | None = None) -> _Fitting:
    """The cut whose parts fit MAX_OPERATION (rule 8): thread blocks that do not are cut
    into consecutive parts of at most a budget of steps' ops, the budget lowered until
    every part fits (each round counted, :class:`_Counter`). Raises
    :class:`MscclppLimitError` at once where a GPU would need more than ``max_tbs``
    thread blocks even if every thread block over the limit were cut in two."""
    algo = program.algo
    cut = _Cut(program, {})
    counter = _Counter(cut)
    cuts: dict[tuple[int, int], list[int]] = {}
    budget: dict[tuple[int, int], int] = {}
    tbs = counter.tbs
    for _ in range(12):
        sizes, step_ops = counter.count(cut)
        over = {(g, t) for (g, t, _), n in sizes.items() if n > MAX_OPERATION}
        if not over:
            return _Fitting(algo.ngpus, cut.cuts, sizes, counter.channels(cut))
        gpu, fewest = _fewest_parts(sizes)
        if max_tbs is not None and fewest > max_tbs:
            raise MscclppLimitError(
                f"the MSCCL++ plan does not fit the runtime's limits: GPU {gpu} needs at "
                f"least {fewest} thread blocks of at most {MAX_OPERATION} operations, but "
                f"has {max_tbs} (--sms).")
        for g, t in sorted(over):
            tb = tbs[(g, t)]
            budget[(g, t)] = budget.get((g, t), MAX_OPERATION - PART_OVERHEAD + 4) - 4
            cuts[(g, t)] = _cut(tb, _hoisted(tb), budget[(g, t)],
                                lambda st, g=g, t=t, ops=step_ops: ops.get((g, t, st.s), 1))
        if min(budget.values()) < 8:
            break
        cut = _Cut(program, dict(cuts))
    g, t = min(over)
    worst = max(n for (h, u, _), n in sizes.items() if (h, u) == (g, t))
    raise MscclppLimitError(
        f"the MSCCL++ plan does not fit the runtime's limits: GPU {g}'s thread block {t} "
        f"needs {worst} operations (its {len(tbs[(g, t)].steps)} steps), but the runtime "
        f"holds {MAX_OPERATION} per thread block.")


def _fewest_parts(sizes: dict[tuple[int, int, int], int]) -> tuple[int, int]:
    """(GPU, a lower bound on its thread blocks) for the GPU with the highest bound once
    every thread block fits MAX_OPERATION ops: one that does not needs at least two."""
    per: dict[int, int] = defaultdict(int)
    for (g, _, _), n in sizes.items():
        if n:
            per[g] += 1 if n <= MAX_OPERATION else 2
    return max(per.items(), key=lambda gn: (gn[1], -gn[0]), default=(0, 0))


def _cut(tb: XmlThreadBlock, first: int, budget: int, ops: Any) -> list[int]:
    """Step positions starting new parts: greedy, each part's steps within ``budget`` ops
    (the first ``first`` steps run before the pipeline, in the first part)."""
    cuts, used = [], 0
    for pos in range(first, len(tb.steps)):
        w = ops(tb.steps[pos])
        if used and used + w > budget:
            cuts.append(pos)
            used = 0
        used += w
    return cuts
