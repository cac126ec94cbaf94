"""Reading an MSCCL++ execution plan, with every structural rule of the runtime's parser.

The rules are those of microsoft/mscclpp's ``ExecutionPlan::Impl`` (the JSON parser,
``src/core/executor/execution_plan.cc``), the executor that builds channels and device
plans from it (``executor.cc``) and the limits of the device plan
(``execution_common.hpp``). Each check below names the runtime behaviour it mirrors:

* top level: ``name``, ``collective``, ``protocol`` and ``inplace`` are read with
  ``obj[...]`` (missing ones fail); ``buffer_alignment`` (16), ``min_message_size`` (0),
  ``max_message_size`` (unbounded), ``reuse_resources`` and ``use_double_scratch_buffer``
  are optional. ``protocol`` "LL" turns on packets, anything else is Simple.
* ``gpus[r]["id"]`` must equal r ("GPU rank does not match"); ``input_chunks``,
  ``output_chunks`` and ``scratch_chunks`` are required, and input and output chunks may
  not both be 0 (``getSizeAndChunks``); where both are set, a chunk of input and of output
  has the same size, which is what the collective's buffer ratio must give.
* channel types are ``memory``, ``port``, ``switch`` (``none`` only in ops); buffer types
  ``i``, ``o``, ``s``. A GPU's channels of one type are flattened in file order: the
  j-th ``connected_to`` entry of a type is channel j of that type. Connections are made
  per peer with a tag counter, memory entries first, so the j-th memory (port) channel
  from a to b pairs with the j-th memory (port) channel from b to a (``setupConnections``).
* a thread block's ``channels`` list GPU channel indices; an op's ``channel_ids`` index
  the thread block's own list of the op's ``channel_type`` (``channelIndexes``). At most
  ``MAX_CHANNEL`` = 16 channels of a type per thread block, ``MAX_CHANNEL_PER_OPERATION``
  = 8 per op.
* ``remote_buffers`` of a GPU list (rank, type, access channel types); a thread block's
  ``remote_buffer_refs`` name them per access type, and an op's ``buffer_id`` indexes the
  thread block's list for the op's channel type (``getRemoteBufferTypeWithId``). A
  buffer referenced for an access type it does not list has no registered handle. A
  thread block refers to at most ``MAX_CHANNEL`` = 16 remote buffers per access type
  (every entry of its refs of that type counts; per GPU and per peer there is no bound):
  the executor copies them into the device plan's arrays of 16 per type
  (``RemoteBuffers`` in ``execution_common.hpp``, filled by ``setupDeviceExecutionPlan``)
  without checking, so a 17th would overwrite the next array rather than be refused; the
  same holds for channels.
* an op's buffers: ``type`` (local) or ``buffer_id`` (remote) or ``switch_channel_id``,
  with ``index`` and ``size`` in chunks, inside the buffer's chunks (the runtime computes
  the byte offset without a bound); at most 10 per side (``MAX_LOCAL_BUFFER_PER_OPERATION``
  + ``MAX_CHANNEL_PER_OPERATION``).
* op names are the parser's (``getOpType``); a thread block holds at most
  ``MAX_OPERATION`` = 64 ops, a ``pipeline`` counting with its inner ops (they are
  flattened after it); pipelines do not nest; a pipeline's ``iter_context`` gives
  ``unit_size`` (bytes per iteration) and ``num_chunks``.
* ``barrier_id`` < ``MAX_DEVICE_SYNCERS`` = 16; ``semaphore_ids`` index the GPU's
  ``semaphores`` (at most 16 per op); ``tbg_info`` has ``tb_id`` < ``tbg_size``.
* reductions: the kernels are instantiated with ``SUM`` only, so a ``reduce_op`` other than
  ``sum`` would silently add.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from canopy.engine.model.errors import CanopyError
from canopy.engine.model.limits import MAX_FILE_BYTES

OP_NAMES = frozenset({
    "nop", "barrier", "put", "pws", "pwsf", "get", "copy", "signal", "wait", "flush", "re",
    "res", "rre", "rres", "ppkt", "rppkt", "respkt", "cpkt", "upkt", "repkt", "recpkt",
    "recspkt", "glres", "gstore", "gstorepkt", "rlxsignal", "rlxwait", "pipeline",
    "sem_acquire", "sem_release"})
CHANNEL_TYPES = ("memory", "port", "switch")
BUFFER_TYPES = ("i", "o", "s")
MAX_CHANNEL = 16
MAX_CHANNEL_PER_OPERATION = 8
MAX_BUFFERS_PER_OPERATION = 10
MAX_OPERATION = 64
MAX_DEVICE_SYNCERS = 16
MAX_DEVICE_SEMAPHORES = 16
UNBOUNDED = 2**64 - 1
SYNC_OPS = frozenset({"signal", "wait", "rlxsignal", "rlxwait", "flush"})
COLLECTIVES = ("allgather", "reducescatter", "allreduce", "alltoall")
MAX_TBG_SIZE = 1024
"""Thread blocks one ``tbg_info`` group may span (a GPU runs at most ~1000 at once)."""


class MscclppPlanError(CanopyError):
    """An execution plan the runtime rejects, or that deadlocks or computes a wrong result."""


@dataclass
class Ref:
    """One buffer an op names: local (``buf``), remote (``buffer_id``) or a switch channel."""

    index: int
    size: int
    buf: str | None = None          # local buffer type
    buffer_id: int | None = None    # the thread block's remote buffer, for the op's channel type
    switch: int | None = None       # the thread block's switch channel


@dataclass
class Op:
    name: str
    where: str                      # "op 4" or "op 4.2"
    channel_type: str = "none"
    channel_ids: list[int] = field(default_factory=list)
    src: list[Ref] = field(default_factory=list)
    dst: list[Ref] = field(default_factory=list)
    semaphores: list[int] = field(default_factory=list)
    barrier: int = -1
    nblocks: int = 0
    tbg: tuple[int, int] = (0, 1)
    unit_size: int = 0
    num_chunks: int = 0
    ops: list[Op] = field(default_factory=list)


@dataclass
class ThreadBlock:
    id: int
    ops: list[Op]
    channels: dict[str, list[int]]          # type -> GPU channel indices
    buffers: dict[str, list[int]]           # access type -> GPU remote buffer indices
    route: tuple[str, ...] = ()              # Canopy's ``canopy_route`` (ignored by the runtime)


@dataclass
class Gpu:
    id: int
    input_chunks: int
    output_chunks: int
    scratch_chunks: int
    peers: dict[str, list[int]]                       # memory/port -> flattened peers
    switches: list[tuple[str, tuple[int, ...]]]       # (buffer type, ranks) per switch channel
    remote: list[tuple[int, str, tuple[str, ...]]]    # (rank, type, access types)
    semaphores: list[int]
    tbs: list[ThreadBlock] = field(default_factory=list)

    def chunks(self, buf: str) -> int:
        return {"i": self.input_chunks, "o": self.output_chunks, "s": self.scratch_chunks}[buf]


@dataclass
class PlanModel:
    name: str
    collective: str
    protocol: str
    inplace: bool
    gpus: list[Gpu]
    alignment: int = 16
    min_size: int = 0
    max_size: int = UNBOUNDED
    reuse_resources: bool = False
    double_scratch: bool = False
    source: str = "plan"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ngpus(self) -> int:
        return len(self.gpus)


def at(source: str, gpu: int, tb: int | None = None, op: Op | str | None = None) -> str:
    """'PLAN: GPU 3 thread block 1 op 4 (put)', as far as known."""
    text = f"{source}: GPU {gpu}"
    if tb is not None:
        text += f" thread block {tb}"
    if isinstance(op, Op):
        text += f" {op.where} ({op.name})"
    elif op is not None:
        text += f" {op}"
    return text


class LazyAt:
    """:func:`at`'s text, formatted only when a sentence needs it (a plan has many ops)."""

    __slots__ = ("args",)

    def __init__(self, *args: Any) -> None:
        self.args = args

    def __str__(self) -> str:
        return at(*self.args)


Where = str | LazyAt


class _Reader:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: Where, text: str) -> MscclppPlanError:
        return MscclppPlanError(f"{where}: {text}.")

    def get(self, obj: Any, key: str, kind: type | tuple, where: Where) -> Any:
        if not isinstance(obj, dict) or key not in obj:
            raise self.fail(where, f"the field '{key}' is missing")
        value = obj[key]
        ok = isinstance(value, kind) and not (kind in (int, (int,)) and isinstance(value, bool))
        if not ok:
            raise self.fail(where, f"'{key}' is {json.dumps(value)[:40]}, not "
                                   f"{_kind_text(kind)}")
        return value

    def items(self, obj: dict, key: str, where: Where) -> list:
        """The list ``obj[key]``, or [] when the key is missing or null."""
        value = obj.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(where, f"'{key}' is {json.dumps(value)[:40]}, not a list")
        return value

    def count(self, obj: Any, key: str, where: Where, default: int | None = None) -> int:
        if default is not None and (not isinstance(obj, dict) or key not in obj):
            return default
        value = self.get(obj, key, int, where)
        if value < 0:
            raise self.fail(where, f"'{key}' is negative ({value})")
        return value

    def plan(self, obj: Any) -> PlanModel:
        src = self.source
        if not isinstance(obj, dict):
            raise self.fail(src, "the file is JSON but not an object, so not an execution plan")
        if "gpus" not in obj and "collective" not in obj:
            raise self.fail(src, "this JSON has no 'gpus' or 'collective', so it is not an "
                                 "MSCCL++ execution plan")
        plan = PlanModel(self.get(obj, "name", str, src), self.get(obj, "collective", str, src),
                         self.get(obj, "protocol", str, src), self.get(obj, "inplace", bool, src),
                         [], source=src)
        plan.alignment = self.count(obj, "buffer_alignment", src, 16)
        if plan.alignment == 0:
            raise self.fail(src, "'buffer_alignment' is 0")
        plan.min_size = self.count(obj, "min_message_size", src, 0)
        plan.max_size = self.count(obj, "max_message_size", src, UNBOUNDED)
        if plan.min_size > plan.max_size:
            raise self.fail(src, f"min_message_size {plan.min_size} is above "
                                 f"max_message_size {plan.max_size}")
        for key in ("reuse_resources", "use_double_scratch_buffer"):
            if key in obj and not isinstance(obj[key], bool):
                raise self.fail(src, f"'{key}' is not true or false")
        plan.reuse_resources = bool(obj.get("reuse_resources", False))
        plan.double_scratch = bool(obj.get("use_double_scratch_buffer", False))
        gpus = self.get(obj, "gpus", list, src)
        if not gpus:
            raise self.fail(src, "'gpus' is empty")
        plan.gpus = [self.gpu(g, rank, len(gpus)) for rank, g in enumerate(gpus)]
        for gpu in plan.gpus:
            for rank, _, _ in gpu.remote:
                if rank >= len(gpus):
                    raise self.fail(at(src, gpu.id), f"a remote buffer is on GPU {rank}, "
                                                     f"but the plan has {len(gpus)} GPUs")
        for gpu, g in zip(plan.gpus, gpus, strict=True):
            gpu.tbs = [self.threadblock(t, pos, gpu, plan)
                       for pos, t in enumerate(self.get(g, "threadblocks", list,
                                                        at(src, gpu.id)))]
        return plan

    def gpu(self, g: Any, rank: int, ngpus: int) -> Gpu:
        where = at(self.source, rank)
        gid = self.count(g, "id", where)
        if gid != rank:
            raise self.fail(where, f"its id is {gid}; gpus[r] must have id r, as the runtime "
                                   "checks ('GPU rank does not match')")
        chunks = [self.count(g, key, where) for key in ("input_chunks", "output_chunks",
                                                         "scratch_chunks")]
        if chunks[0] == 0 and chunks[1] == 0:
            raise self.fail(where, "input_chunks and output_chunks are both 0, so the runtime "
                                   "cannot size a chunk")
        peers: dict[str, list[int]] = {"memory": [], "port": []}
        switches: list[tuple[str, tuple[int, ...]]] = []
        for n, ch in enumerate(self.get(g, "channels", list, where)):
            cw = f"{where} channel entry {n}"
            kind = self.get(ch, "channel_type", str, cw)
            if kind not in CHANNEL_TYPES:
                raise self.fail(cw, f"channel type '{kind}' is not memory, port or switch")
            if kind == "switch":
                buf = self.get(ch, "buffer_type" if "buffer_type" in ch else "buff", str, cw)
                if buf not in BUFFER_TYPES:
                    raise self.fail(cw, f"buffer type '{buf}' is not i, o or s")
                for group in self.get(ch, "rank_groups", list, cw):
                    ranks = tuple(self.get(group, "ranks", list, cw))
                    if any(not isinstance(r, int) or not 0 <= r < ngpus for r in ranks) \
                            or rank not in ranks:
                        raise self.fail(cw, f"rank group {list(ranks)} is not a set of GPUs "
                                            "of the plan holding this GPU")
                    switches.append((buf, ranks))
                continue
            for peer in self.get(ch, "connected_to", list, cw):
                if not isinstance(peer, int) or isinstance(peer, bool) or not 0 <= peer < ngpus \
                        or peer == rank:
                    raise self.fail(cw, f"it connects to {json.dumps(peer)}, which is not "
                                        f"another GPU of the {ngpus}")
                peers[kind].append(peer)
        remote = []
        for n, rb in enumerate(self.items(g, "remote_buffers", where)):
            rw = f"{where} remote buffer {n}"
            rrank = self.count(rb, "rank", rw)
            buf = self.get(rb, "type", str, rw)
            if buf not in BUFFER_TYPES:
                raise self.fail(rw, f"buffer type '{buf}' is not i, o or s")
            access = self.get(rb, "access_channel_types", list, rw)
            if any(a not in ("memory", "port") for a in access):
                raise self.fail(rw, f"access channel types {access} are not memory or port")
            remote.append((rrank, buf, tuple(access)))
        sems = [self.count(s, "init_value", f"{where} semaphore {n}")
                for n, s in enumerate(self.items(g, "semaphores", where))]
        return Gpu(rank, chunks[0], chunks[1], chunks[2], peers, switches, remote, sems)

    def threadblock(self, t: Any, pos: int, gpu: Gpu, plan: PlanModel) -> ThreadBlock:
        where = at(self.source, gpu.id, pos)
        tid = self.count(t, "id", where)
        if tid != pos:
            raise self.fail(where, f"its id is {tid}; thread blocks must be listed by id "
                                   "from 0 (the runtime indexes its tables by id)")
        channels: dict[str, list[int]] = {"memory": [], "port": [], "switch": []}
        for ch in self.items(t, "channels", where):
            kind = self.get(ch, "channel_type", str, where)
            if kind not in CHANNEL_TYPES:
                raise self.fail(where, f"channel type '{kind}' is not memory, port or switch")
            have = len(gpu.switches) if kind == "switch" else len(gpu.peers[kind])
            for cid in self.get(ch, "channel_ids", list, where):
                if not isinstance(cid, int) or not 0 <= cid < have:
                    raise self.fail(where, f"it uses {kind} channel {cid}, but GPU {gpu.id} "
                                           f"has {have} {kind} channels")
                channels[kind].append(cid)
        for kind, ids in channels.items():
            if len(ids) > MAX_CHANNEL:
                raise self.fail(where, f"it holds {len(ids)} {kind} channels; a thread block "
                                       f"holds at most {MAX_CHANNEL} (MAX_CHANNEL)")
        buffers: dict[str, list[int]] = {"memory": [], "port": []}
        for ref in self.items(t, "remote_buffer_refs", where):
            kind = self.get(ref, "access_channel_type", str, where)
            if kind not in buffers:
                raise self.fail(where, f"remote buffers accessed by '{kind}' channels: only "
                                       "memory and port channels access remote buffers")
            for bid in self.get(ref, "remote_buffer_ids", list, where):
                if not isinstance(bid, int) or not 0 <= bid < len(gpu.remote):
                    raise self.fail(where, f"it refers to remote buffer {bid}, but GPU "
                                           f"{gpu.id} has {len(gpu.remote)}")
                if kind not in gpu.remote[bid][2]:
                    raise self.fail(where, f"it reaches remote buffer {bid} through {kind} "
                                           f"channels, which that buffer does not list in "
                                           "its access_channel_types")
                buffers[kind].append(bid)
            if len(buffers[kind]) > MAX_CHANNEL:
                raise self.fail(where, f"it refers to {len(buffers[kind])} remote buffers "
                                       f"through {kind} channels; a thread block refers to "
                                       f"at most {MAX_CHANNEL} per channel type (MAX_CHANNEL)")
        route = t.get("canopy_route", [])
        tb = ThreadBlock(tid, [], channels, buffers,
                         tuple(route) if isinstance(route, list) and
                         all(isinstance(x, str) for x in route) else ())
        total = 0
        for n, o in enumerate(self.get(t, "ops", list, where)):
            op = self.op(o, f"op {n}", gpu, tb, plan, nested=False)
            tb.ops.append(op)
            total += 1 + len(op.ops)
        if total > MAX_OPERATION:
            raise self.fail(where, f"it has {total} operations (a pipeline counts with its "
                                   f"inner ops); the runtime's device plan holds "
                                   f"{MAX_OPERATION} (MAX_OPERATION)")
        return tb

    def op(self, o: Any, name: str, gpu: Gpu, tb: ThreadBlock, plan: PlanModel,
           nested: bool) -> Op:
        where: Where = LazyAt(self.source, gpu.id, tb.id, name)
        kind = self.get(o, "name", str, where)
        if kind not in OP_NAMES:
            raise self.fail(where, f"'{kind}' is not an operation of the runtime "
                                   "(execution_plan.cc getOpType)")
        op = Op(kind, name)
        where = LazyAt(self.source, gpu.id, tb.id, op)
        if "channel_type" in o:
            op.channel_type = self.get(o, "channel_type", str, where)
            if op.channel_type not in (*CHANNEL_TYPES, "none"):
                raise self.fail(where, f"channel type '{op.channel_type}' is not memory, port, "
                                       "switch or none")
        if "channel_ids" in o:
            op.channel_ids = self.get(o, "channel_ids", list, where)
            if len(op.channel_ids) > MAX_CHANNEL_PER_OPERATION:
                raise self.fail(where, f"it names {len(op.channel_ids)} channels; an op "
                                       f"names at most {MAX_CHANNEL_PER_OPERATION}")
            have = tb.channels.get(op.channel_type, [])
            for cid in op.channel_ids:
                if not isinstance(cid, int) or not 0 <= cid < len(have):
                    raise self.fail(where, f"{op.channel_type} channel {cid} does not exist: "
                                           f"the thread block holds {len(have)} "
                                           f"{op.channel_type} channels")
        if kind in SYNC_OPS:
            if op.channel_type not in ("memory", "port") or not op.channel_ids:
                raise self.fail(where, "it needs channel_ids of memory or port channels")
            if kind == "flush" and op.channel_type != "port":
                raise self.fail(where, "flush applies to port channels only (the kernel "
                                       "flushes portChannels_)")
        for side in ("src_buff", "dst_buff"):
            refs = [self.ref(b, gpu, tb, op, where, side) for b in self.items(o, side, where)]
            if len(refs) > MAX_BUFFERS_PER_OPERATION:
                raise self.fail(where, f"{side} has {len(refs)} buffers; at most "
                                       f"{MAX_BUFFERS_PER_OPERATION}")
            setattr(op, "src" if side == "src_buff" else "dst", refs)
        if "tbg_info" in o:
            info = o["tbg_info"]
            op.tbg = (self.count(info, "tb_id", where), self.count(info, "tbg_size", where))
            if not op.tbg[0] < op.tbg[1]:
                raise self.fail(where, f"tbg_info tb_id {op.tbg[0]} is not below tbg_size "
                                       f"{op.tbg[1]}")
            if op.tbg[1] > MAX_TBG_SIZE:
                raise self.fail(where, f"tbg_info tbg_size {op.tbg[1]} is past the "
                                       f"{MAX_TBG_SIZE} thread blocks Canopy checks a group of")
        if "semaphore_ids" in o:
            op.semaphores = self.get(o, "semaphore_ids", list, where)
            if len(op.semaphores) > MAX_DEVICE_SEMAPHORES or any(
                    not isinstance(s, int) or not 0 <= s < len(gpu.semaphores)
                    for s in op.semaphores):
                raise self.fail(where, f"semaphores {op.semaphores} are not among GPU "
                                       f"{gpu.id}'s {len(gpu.semaphores)}")
        if kind in ("sem_acquire", "sem_release") and not op.semaphores:
            raise self.fail(where, "it names no semaphore_ids")
        if kind == "barrier":
            op.barrier = self.count(o, "barrier_id", where)
            op.nblocks = self.count(o, "num_threadblocks", where)
            if op.barrier >= MAX_DEVICE_SYNCERS or op.nblocks < 1:
                raise self.fail(where, f"barrier {op.barrier} of {op.nblocks} thread blocks: "
                                       f"ids go below {MAX_DEVICE_SYNCERS} and a barrier "
                                       "joins at least one thread block")
        if "reduce_op" in o and o["reduce_op"] != "sum":
            raise self.fail(where, f"reduce_op '{o['reduce_op']}': the runtime's kernels "
                                   "always add (they are instantiated with SUM)")
        if kind == "pipeline":
            if nested:
                raise self.fail(where, "pipelines do not nest")
            ctx = self.get(o, "iter_context", dict, where)
            op.unit_size = self.count(ctx, "unit_size", where)
            op.num_chunks = self.count(ctx, "num_chunks", where)
            if op.unit_size == 0 or op.num_chunks == 0:
                raise self.fail(where, "its iter_context needs a positive unit_size and "
                                       "num_chunks")
            op.ops = [self.op(inner, f"{name}.{n}", gpu, tb, plan, nested=True)
                      for n, inner in enumerate(self.get(o, "ops", list, where))]
        self.shape(op, where)
        return op

    def ref(self, b: Any, gpu: Gpu, tb: ThreadBlock, op: Op, where: Where, side: str) -> Ref:
        index, size = self.count(b, "index", where), self.count(b, "size", where)
        if size == 0:
            raise self.fail(where, f"a {side} entry has size 0")
        if "buffer_id" in b:
            bid = self.count(b, "buffer_id", where)
            refs = tb.buffers.get(op.channel_type, [])
            if bid >= len(refs):
                raise self.fail(where, f"remote buffer {bid} through {op.channel_type} channels "
                                       f"does not exist: the thread block refers to "
                                       f"{len(refs)}")
            return Ref(index, size, buffer_id=bid)
        if "switch_channel_id" in b:
            sid = self.count(b, "switch_channel_id", where)
            if sid >= len(tb.channels["switch"]):
                raise self.fail(where, f"switch channel {sid} does not exist in the thread "
                                       "block")
            return Ref(index, size, switch=sid)
        buf = self.get(b, "type", str, where)
        if buf not in BUFFER_TYPES:
            raise self.fail(where, f"buffer type '{buf}' is not i, o or s")
        if index + size > gpu.chunks(buf):
            raise self.fail(where, f"{buf}[{index}:{index + size}] runs past the {gpu.chunks(buf)} "
                                   f"chunks of GPU {gpu.id}'s {buf} buffer")
        return Ref(index, size, buf=buf)

    def shape(self, op: Op, where: Where) -> None:
        """The buffers each kind of op reads: what the kernel's handler indexes."""
        name = op.name
        local = [r.buf is not None for r in op.src], [r.buf is not None for r in op.dst]
        remote = [r.buffer_id is not None for r in op.src], \
            [r.buffer_id is not None for r in op.dst]
        if name in ("put", "pws", "pwsf", "ppkt"):
            if not op.src or len(op.src) != len(op.dst) or not all(local[0]) or \
                    not all(remote[1]):
                raise self.fail(where, "a put pairs each local src_buff with a remote dst_buff")
            if op.channel_type == "port" and len(op.channel_ids) != len(op.dst):
                raise self.fail(where, "a port put names one channel per destination")
            if op.channel_type not in ("memory", "port"):
                raise self.fail(where, "a put goes through memory or port channels")
        elif name in ("copy", "cpkt", "upkt"):
            if len(op.src) != 1 or len(op.dst) != 1 or not (local[0][0] and local[1][0]):
                raise self.fail(where, "a copy takes one local src_buff and one local dst_buff")
        elif name in ("re", "res", "rre", "rres", "repkt", "respkt", "recpkt", "recspkt"):
            if len(op.src) < 2 or not op.dst or not local[0][0] or not local[1][0]:
                raise self.fail(where, "a reduction reads a local src_buff and more, and writes "
                                       "a local dst_buff first")
            remote_src = name in ("rre", "rres")
            if not all(remote[0][1:] if remote_src else local[0][1:]):
                raise self.fail(where, "its further src_buff entries must be "
                                       f"{'remote' if remote_src else 'local'}")
            packets = name in ("recpkt", "recspkt")     # the second dst: local packets
            if packets and (len(op.dst) < 2 or not local[1][1]):
                raise self.fail(where, "it writes packets to a second, local dst_buff")
            if not all(remote[1][2 if packets else 1:]):
                raise self.fail(where, "its further dst_buff entries must be remote")
        elif name == "get":
            if len(op.src) != len(op.dst) or not op.src or not all(remote[0]) or \
                    not all(local[1]):
                raise self.fail(where, "a get pairs each remote src_buff with a local dst_buff")
        elif name == "rppkt":
            if len(op.src) != 1 or not op.dst or not local[0][0] or not all(remote[1]):
                raise self.fail(where, "a read-put of packets takes one local src_buff and "
                                       "remote dst_buff entries")
        elif name in ("glres", "gstore", "gstorepkt"):
            source_ok = op.src and (op.src[0].switch is not None if name == "glres"
                                    else local[0][0] or name == "gstorepkt")
            if not source_ok or not op.dst or remote[1][0]:
                raise self.fail(where, "a switch op reads " + (
                    "a switch channel" if name == "glres" else "a local src_buff")
                    + " and writes a switch channel or a local dst_buff")
        if op.src and op.dst and name not in ("glres", "gstore", "gstorepkt") and \
                len({r.size for r in op.src + op.dst}) > 1:
            raise self.fail(where, "its buffers differ in size (the kernel moves the size "
                                   "of the first)")


def _kind_text(kind: type | tuple) -> str:
    names = {str: "a string", int: "an integer", bool: "true or false", list: "a list",
             dict: "an object"}
    return names.get(kind, "of the right type") if isinstance(kind, type) else "valid"


def parse_plan(obj: Any, source: str = "plan") -> PlanModel:
    """The plan of a parsed JSON value; raises :class:`MscclppPlanError` (one sentence)."""
    plan = _Reader(source).plan(obj)
    _check_collective(plan)
    return plan


def _check_collective(plan: PlanModel) -> None:
    """The chunk ratios of the collective's buffers (the runtime sizes every chunk from the
    input, or the output where the input has none, so these must hold for the data to
    land where the collective needs it)."""
    n = plan.ngpus
    for gpu in plan.gpus:
        i, o = gpu.input_chunks, gpu.output_chunks
        if plan.inplace and o == 0 and plan.collective in ("allreduce", "alltoall"):
            o = i                       # the output is the input: nothing else to size
        need = {"allgather": o == n * i, "reducescatter": i == n * o,
                "allreduce": i == o, "alltoall": i == o and i % n == 0}.get(plan.collective)
        if need is False:
            raise MscclppPlanError(f"{at(plan.source, gpu.id)}: {i} input and {o} output "
                                   f"chunks do not fit a {plan.collective} of {n} GPUs.")


def read_plan_bytes(data: bytes, source: str = "plan") -> PlanModel:
    if len(data) > MAX_FILE_BYTES:
        raise MscclppPlanError(f"{source} is larger than the {MAX_FILE_BYTES // 2**20} MiB "
                               "Canopy reads for an execution plan.")
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MscclppPlanError(f"{source}: not JSON ({exc}), so not an execution plan.") \
            from None
    except RecursionError:
        raise MscclppPlanError(f"{source} nests arrays or objects too deeply for Canopy to "
                               "read.") from None
    return parse_plan(obj, source)


def read_plan(path: str | os.PathLike[str]) -> PlanModel:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise MscclppPlanError(f"{path}: cannot read it ({exc.strerror}).") from None
    return read_plan_bytes(data, str(path))
