"""Canopy's own MSCCL XML simulator: execute an algorithm and check its result.

The simulator reads an MSCCL XML file (through :mod:`canopy.engine.safe_xml`), checks what the
runtime's parser checks plus the runtime's limits, then runs every thread block's steps
with symbolic data and checks the collective's postcondition. Every problem is reported
as one sentence naming the rank, thread block and step (:class:`MscclXmlError`).

Semantics (those of the MSCCL interpreter, microsoft/msccl and RCCL):

* **Data.** Each buffer slot (one chunk) holds ``(chunk, ranks)``: the chunk index and the
  set of ranks whose contribution it sums, or nothing. Initially rank r's input holds its
  own chunks. Reducing joins two sets of the same chunk; reducing different chunks or the
  same rank twice is an error, as is reading a slot that holds nothing.
* **Steps.** ``s`` sends ``src``; ``r`` receives into ``dst``; ``rcs`` receives into
  ``dst`` and sends it on; ``rrs`` receives, adds ``src`` and sends the sum; ``rrc``
  receives and writes the sum with ``src`` to ``dst``; ``rrcs`` does both; ``cpy`` copies
  ``src`` to ``dst``; ``re`` adds ``src`` into ``dst``; ``nop`` only waits. The ``dst`` of
  a send and the ``src`` of a receive name the peer's side and are not used. ``cnt``
  consecutive chunks move at once.
* **Connections.** A thread block sends to its ``send`` peer and receives from its
  ``recv`` peer on its channel. Messages of a (sender, receiver, channel) connection match
  in order and the connection buffers at most ``capacity`` messages (default 1, the
  strictest); a send waits for room. A step that receives and sends takes its message
  first and then waits for room, as the runtime's pipelined primitives let the receive
  lead the send (so rings of such steps do not lock up). Counts of matched messages must
  agree.
* **Dependencies.** A step with ``depid``/``deps`` waits until thread block ``depid`` of
  the same GPU has published a step index ≥ ``deps``; a thread block publishes the index
  of each finished non-``nop`` step that has ``hasdep="1"`` (the runtime's flags).
* **Races.** Program order, messages and dependencies define happens-before (vector
  clocks; a send that merely waits for room orders nothing). Two accesses to one slot, at
  least one a write, from different thread blocks must be ordered, or the result would
  depend on timing: the simulator reports the missing dependency.
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

Before the run, each connection must carry as many sends as receives (messages match in
order, so the first step past the other side's count is unmatched). A run that cannot go
on reports the cycle of waiting thread blocks, or the dependency never signalled.
"""

from __future__ import annotations

import os
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from lxml import etree

from canopy.engine.errors import CanopyError
from canopy.engine.msccl.threadblocks import MscclLimits
from canopy.engine.safe_xml import parse_xml_file

COLLECTIVES = {"allgather": "allgather", "reduce_scatter": "reduce_scatter",
               "reducescatter": "reduce_scatter", "allreduce": "allreduce",
               "alltoall": "alltoall"}
PROTOCOLS = ("Simple", "LL128", "LL")
# step type -> (receives, sends, reads src, reads dst, writes dst)
STEP_TYPES = {
    "s": (False, True, True, False, False),
    "r": (True, False, False, False, True),
    "rcs": (True, True, False, False, True),
    "rrs": (True, True, True, False, False),
    "rrc": (True, False, True, False, True),
    "rrcs": (True, True, True, False, True),
    "cpy": (False, False, True, False, True),
    "re": (False, False, True, True, True),
    "nop": (False, False, False, False, False),
}
BUFFER_NAMES = {"i": "input", "o": "output", "s": "scratch"}


class MscclXmlError(CanopyError):
    """An MSCCL XML algorithm that the runtime rejects or that computes a wrong result."""


# ---------------------------------------------------------------------- the program


@dataclass(frozen=True)
class XmlStep:
    s: int
    type: str
    srcbuf: str
    srcoff: int
    dstbuf: str
    dstoff: int
    cnt: int
    depid: int
    deps: int
    hasdep: bool


@dataclass
class XmlThreadBlock:
    id: int
    send: int
    recv: int
    chan: int
    steps: list[XmlStep] = field(default_factory=list)


@dataclass
class XmlGpu:
    id: int
    i_chunks: int
    o_chunks: int
    s_chunks: int
    tbs: list[XmlThreadBlock] = field(default_factory=list)


@dataclass
class XmlAlgo:
    name: str
    proto: str
    nchannels: int
    nchunksperloop: int
    ngpus: int
    coll: str                    # canonical: allgather, reduce_scatter or allreduce
    inplace: bool
    outofplace: bool
    gpus: list[XmlGpu]

    @property
    def chunks_per_rank(self) -> int:
        return self.nchunksperloop // self.ngpus

    def modes(self) -> list[bool]:
        """The in-place flags to run: True for in place, False for out of place."""
        return [m for m, on in ((True, self.inplace), (False, self.outofplace)) if on]


def _where(gpu: int, tb: int | None = None, step: int | None = None) -> str:
    text = f"rank {gpu}"
    if tb is not None:
        text += f" tb {tb}"
    if step is not None:
        text += f" step {step}"
    return text


def _int(elem: etree._Element, key: str, where: str) -> int:
    value = elem.get(key)
    if value is None:
        raise MscclXmlError(f"{where}: <{elem.tag}> has no '{key}' attribute.")
    try:
        return int(value)
    except ValueError:
        raise MscclXmlError(f"{where}: '{key}' is '{value}', not an integer.") from None


def _str(elem: etree._Element, key: str, where: str) -> str:
    value = elem.get(key)
    if value is None:
        raise MscclXmlError(f"{where}: <{elem.tag}> has no '{key}' attribute.")
    return value


def parse_msccl(root: etree._Element, source: str = "MSCCL XML") -> XmlAlgo:
    """The algorithm of an ``<algo>`` element (attributes as the runtime reads them)."""
    if root.tag != "algo":
        raise MscclXmlError(f"{source}: the top element is <{root.tag}>, not <algo>.")
    coll = _str(root, "coll", source)
    if coll not in COLLECTIVES:
        raise MscclXmlError(f"{source}: coll '{coll}' is not allgather, reduce_scatter, "
                            "allreduce or alltoall.")
    algo = XmlAlgo(_str(root, "name", source), _str(root, "proto", source),
                   _int(root, "nchannels", source), _int(root, "nchunksperloop", source),
                   _int(root, "ngpus", source), COLLECTIVES[coll],
                   bool(_int(root, "inplace", source)), bool(_int(root, "outofplace", source)),
                   [])
    for key in ("minBytes", "maxBytes"):
        _int(root, key, source)
    for gpu_elem in root.iter("gpu"):
        gid = _int(gpu_elem, "id", source)
        where = f"{source}: {_where(gid)}"
        gpu = XmlGpu(gid, _int(gpu_elem, "i_chunks", where), _int(gpu_elem, "o_chunks", where),
                     _int(gpu_elem, "s_chunks", where))
        for tb_elem in gpu_elem.iter("tb"):
            tid = _int(tb_elem, "id", where)
            tb_where = f"{source}: {_where(gid, tid)}"
            tb = XmlThreadBlock(tid, _int(tb_elem, "send", tb_where),
                                _int(tb_elem, "recv", tb_where), _int(tb_elem, "chan", tb_where))
            for pos, st in enumerate(tb_elem.iter("step")):
                w = f"{source}: {_where(gid, tid, pos)}"
                tb.steps.append(XmlStep(
                    _int(st, "s", w), _str(st, "type", w), _str(st, "srcbuf", w),
                    _int(st, "srcoff", w), _str(st, "dstbuf", w), _int(st, "dstoff", w),
                    _int(st, "cnt", w), _int(st, "depid", w), _int(st, "deps", w),
                    _int(st, "hasdep", w) == 1))
                if _int(st, "hasdep", w) not in (0, 1):
                    raise MscclXmlError(f"{w}: hasdep must be 0 or 1.")
            gpu.tbs.append(tb)
        algo.gpus.append(gpu)
    return algo


def read_msccl(path: str | os.PathLike[str]) -> XmlAlgo:
    """Parse an MSCCL XML file safely (no entities, no DTD, size limit)."""
    return parse_msccl(parse_xml_file(path), str(path))


# ---------------------------------------------------------------------- static checks


def _used(step: XmlStep) -> list[tuple[str, str, int]]:
    """(role, buffer, offset) of the buffer ranges a step really touches."""
    _, _, reads_src, _, writes_dst = STEP_TYPES[step.type]
    out = []
    if reads_src:
        out.append(("src", step.srcbuf, step.srcoff))
    if writes_dst:
        out.append(("dst", step.dstbuf, step.dstoff))
    return out


def check_structure(algo: XmlAlgo, limits: MscclLimits | None = None,
                    source: str = "MSCCL XML") -> None:
    """What the runtime's parser rejects, and its limits (:class:`MscclLimits`)."""
    limits = limits or MscclLimits()

    def fail(text: str) -> None:
        raise MscclXmlError(f"{source}: {text}")

    if algo.proto not in PROTOCOLS:
        fail(f"proto '{algo.proto}' is not one of {', '.join(PROTOCOLS)}.")
    if algo.ngpus < 1 or algo.nchunksperloop < 1:
        fail("ngpus and nchunksperloop must be positive.")
    if algo.coll != "allreduce" and algo.nchunksperloop % algo.ngpus:
        fail(f"nchunksperloop {algo.nchunksperloop} is not a multiple of ngpus {algo.ngpus}.")
    if not algo.modes():
        fail("neither inplace nor outofplace is 1.")
    if not 1 <= algo.nchannels <= limits.max_channels:
        fail(f"nchannels is {algo.nchannels}; MSCCL allows 1 to {limits.max_channels}.")
    ids = sorted(g.id for g in algo.gpus)
    if ids != list(range(algo.ngpus)):
        fail(f"the <gpu> ids are {ids[:8]}{'…' if len(ids) > 8 else ''}, not 0 to "
             f"{algo.ngpus - 1} once each.")
    algo.gpus.sort(key=lambda g: g.id)
    for gpu in algo.gpus:
        _check_gpu(gpu, algo, limits, fail)
    _check_connections(algo, fail)


def _check_connections(algo: XmlAlgo, fail: Callable[[str], None]) -> None:
    """Every (sender, receiver, channel) connection carries as many sends as receives;
    messages match in order, so the first step beyond the other side's count is unmatched."""
    sends: dict[tuple[int, int, int], list[tuple[int, XmlStep]]] = defaultdict(list)
    recvs: dict[tuple[int, int, int], list[tuple[int, XmlStep]]] = defaultdict(list)
    for gpu in algo.gpus:
        for tb in gpu.tbs:
            for step in tb.steps:
                receives, sending, _, _, _ = STEP_TYPES[step.type]
                if sending:
                    sends[(gpu.id, tb.send, tb.chan)].append((tb.id, step))
                if receives:
                    recvs[(tb.recv, gpu.id, tb.chan)].append((tb.id, step))
    for conn in sorted(set(sends) | set(recvs)):
        u, v, ch = conn
        out, into = sends[conn], recvs[conn]
        if len(out) == len(into):
            continue
        if len(into) > len(out):
            tb, step = into[len(out)]
            fail(f"{_where(v, tb, step.s)} ({step.type}) receives message {len(out) + 1} from "
                 f"rank {u} on channel {ch}, but rank {u} sends only {len(out)} on that "
                 "connection, so it is unmatched.")
        tb, step = out[len(into)]
        fail(f"{_where(u, tb, step.s)} ({step.type}) sends message {len(into) + 1} to rank {v} "
             f"on channel {ch}, but rank {v} receives only {len(into)} on that connection, so "
             "it is unmatched.")


def _check_gpu(gpu: XmlGpu, algo: XmlAlgo, limits: MscclLimits,
               fail: Callable[[str], None]) -> None:
    sizes = {"i": gpu.i_chunks, "o": gpu.o_chunks, "s": gpu.s_chunks}
    if min(sizes.values()) < 0:
        fail(f"{_where(gpu.id)} declares a negative buffer size.")
    tids = sorted(tb.id for tb in gpu.tbs)
    if tids != list(range(len(tids))):
        fail(f"{_where(gpu.id)}: thread block ids are {tids[:8]}, not 0, 1, 2, … once each.")
    gpu.tbs.sort(key=lambda tb: tb.id)
    elements = 2 + len(gpu.tbs) + sum(len(tb.steps) for tb in gpu.tbs)
    if elements > limits.max_elements_per_gpu:
        fail(f"{_where(gpu.id)} has {elements} XML elements; RCCL's parser holds "
             f"{limits.max_elements_per_gpu} per GPU.")
    per_channel: dict[int, int] = defaultdict(int)
    seen: dict[tuple[int, str, int], int] = {}
    for tb in gpu.tbs:
        w = _where(gpu.id, tb.id)
        for peer, direction in ((tb.send, "send"), (tb.recv, "recv")):
            if peer == gpu.id or not -1 <= peer < algo.ngpus:
                fail(f"{w}: {direction} peer {peer} is not another rank or -1.")
            if peer >= 0:
                key = (peer, direction, tb.chan)
                if key in seen:
                    fail(f"{w} and tb {seen[key]} both {direction} "
                         f"{'to' if direction == 'send' else 'from'} rank {peer} on channel "
                         f"{tb.chan}; a connection belongs to one thread block.")
                seen[key] = tb.id
        if not 0 <= tb.chan < algo.nchannels:
            fail(f"{w}: channel {tb.chan} is outside 0 to nchannels-1 = {algo.nchannels - 1}.")
        per_channel[tb.chan] += 1
        if per_channel[tb.chan] > limits.max_tbs_per_channel:
            fail(f"{_where(gpu.id)} has more than {limits.max_tbs_per_channel} thread blocks "
                 f"on channel {tb.chan}.")
        if len(tb.steps) > limits.max_steps_per_tb:
            fail(f"{w} has {len(tb.steps)} steps; MSCCL allows {limits.max_steps_per_tb}.")
        pending_nop_dep = False
        for pos, step in enumerate(tb.steps):
            ws = _where(gpu.id, tb.id, pos)
            if step.s != pos:
                fail(f"{ws} is numbered s={step.s}; steps must be numbered 0, 1, 2, … in "
                     "order.")
            if step.type not in STEP_TYPES:
                fail(f"{ws}: step type '{step.type}' is not one of "
                     f"{', '.join(STEP_TYPES)}.")
            receives, sends, _, _, _ = STEP_TYPES[step.type]
            if sends and tb.send < 0:
                fail(f"{ws} ({step.type}) sends, but its thread block has no send peer.")
            if receives and tb.recv < 0:
                fail(f"{ws} ({step.type}) receives, but its thread block has no recv peer.")
            for buf in (step.srcbuf, step.dstbuf):
                if buf not in BUFFER_NAMES:
                    fail(f"{ws}: buffer '{buf}' is not i, o or s.")
            if step.type != "nop":
                if not 1 <= step.cnt <= limits.max_count:
                    fail(f"{ws}: cnt is {step.cnt}; MSCCL allows 1 to {limits.max_count}.")
                for role, buf, off in _used(step):
                    if off < 0 or off + step.cnt > sizes[buf]:
                        fail(f"{ws} ({step.type}) {role} {buf}[{off}:{off + step.cnt}] is out "
                             f"of range of the {sizes[buf]} chunks {buf}_chunks declares.")
            if step.depid >= 0:
                if step.depid >= len(gpu.tbs):
                    fail(f"{ws} depends on tb {step.depid}, which rank {gpu.id} does not "
                         "have.")
                if not 0 <= step.deps < len(gpu.tbs[step.depid].steps):
                    fail(f"{ws} depends on step {step.deps} of tb {step.depid}, which has no "
                         "such step.")
            elif step.depid != -1:
                fail(f"{ws}: depid {step.depid} is neither -1 nor a thread block id.")
            if step.type == "nop":
                pending_nop_dep = pending_nop_dep or step.depid >= 0
            else:
                if pending_nop_dep and step.depid < 0:
                    fail(f"{ws} follows nop steps with dependencies but has none itself, "
                         "which the runtime rejects.")
                pending_nop_dep = False


# ---------------------------------------------------------------------- execution

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
    def fail(self, g: int, text: str) -> None:
        gpu, tb = self.tbs[g]
        step = tb.steps[self.pc[g]]
        raise MscclXmlError(f"{_where(gpu.id, tb.id, step.s)} ({step.type}, {self.mode}) "
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
        return _where(gpu.id, tb.id, step)

    def read(self, g: int, buf: str, off: int, cnt: int, epoch: int) -> list[tuple[int, int]]:
        out = []
        step = self.pc[g]
        memory, where_range = self.slots(g, buf, off, cnt, "reads")
        for i, x in enumerate(where_range):
            where = f"{buf}[{off + i}]"
            w = memory.writer[x]
            if w is not None and w[0] != g and self.clock[g, w[0]] < w[1]:
                self.fail(g, f"reads {where}, which {self._describe_tb(w[0], w[2])} writes "
                             "with no dependency ordering the two (a dependency is missing).")
            value = memory.value[x]
            if value is None:
                self.fail(g, f"reads {where} before anything is written there; "
                             f"{self._pending_writer(g, buf, off + i)}")
            readers = memory.readers[x]
            if readers is None:
                readers = memory.readers[x] = {}
            readers[g] = (epoch, step)
            out.append(value)
        return out

    def _pending_writer(self, g: int, buf: str, off: int) -> str:
        """Why a slot is empty: a later write another thread block will do (a missing
        dependency), or none at all (a wrong offset or a dropped step)."""
        gpu = self.tbs[g][0]
        bufs = self.buffers[gpu.id]
        target = bufs.resolve(buf, off, 1)
        for tb in gpu.tbs:
            h = self.gid[(gpu.id, tb.id)]
            for step in tb.steps[self.pc[h]:]:
                if h == g or not STEP_TYPES[step.type][4]:
                    continue
                if any(bufs.resolve(step.dstbuf, step.dstoff + j, 1) == target
                       for j in range(step.cnt)):
                    return (f"{_where(gpu.id, tb.id, step.s)} writes it later with no "
                            "dependency ordering the two (a dependency is missing or an "
                            "offset is wrong).")
        return "no other step writes it (an offset is wrong or a step is missing)."

    def write(self, g: int, buf: str, off: int, values: list[Value], epoch: int) -> None:
        step = self.pc[g]
        memory, where_range = self.slots(g, buf, off, len(values), "writes")
        for i, x in enumerate(where_range):
            where = f"{buf}[{off + i}]"
            w = memory.writer[x]
            if w is not None and w[0] != g and self.clock[g, w[0]] < w[1]:
                self.fail(g, f"writes {where}, which {self._describe_tb(w[0], w[2])} also "
                             "writes, with no dependency ordering the two (a dependency is "
                             "missing or an offset is wrong).")
            for h, (e, s) in (memory.readers[x] or {}).items():
                if h != g and self.clock[g, h] < e:
                    self.fail(g, f"overwrites {where} while {self._describe_tb(h, s)} may "
                                 "still be reading it (a dependency is missing).")
            memory.value[x] = values[i]
            memory.writer[x] = (g, epoch, step)
            memory.readers[x] = None

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
        receives, sends, _, _, _ = STEP_TYPES[step.type]
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
        receives, sends, reads_src, reads_dst, writes_dst = STEP_TYPES[step.type]
        woke: list[tuple] = []
        if g in self.pending:
            return self.finish(g, step, self.pending.pop(g))
        if step.depid >= 0:
            target = self.gid[(gpu.id, step.depid)]
            first = self.signal_of[(target, step.deps)]
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
        if reads_src:
            src = self.read(g, step.srcbuf, step.srcoff, step.cnt, epoch)
            data = src if data is None else self.reduce(g, data, src)
        if reads_dst:
            assert data is not None
            data = self.reduce(g, self.read(g, step.dstbuf, step.dstoff, step.cnt, epoch), data)
        if writes_dst:
            assert data is not None
            self.write(g, step.dstbuf, step.dstoff, data, epoch)
        if sends and len(self.queues[(gpu.id, tb.send, tb.chan)]) >= self.capacity:
            self.pending[g] = (data, self.clock[g].copy())
            return woke
        return woke + self.finish(g, step, (data, self.clock[g]) if sends else None)

    def finish(self, g: int, step: XmlStep,
               outgoing: tuple[list[Value], np.ndarray] | None) -> list[tuple]:
        """Send what the step sends, publish its completion and move on."""
        gpu, tb = self.tbs[g]
        woke = []
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
    from canopy.engine.safe_xml import parse_xml_bytes
    return simulate(parse_msccl(parse_xml_bytes(data, source), source), capacity, limits,
                    source)
