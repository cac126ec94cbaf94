"""What the MSCCL runtime rejects, one named rule per check.

:func:`check_structure` runs the rules in order and stops at the first broken one, which
reports one :class:`MscclXmlError` sentence naming the rank, thread block and step. The
rules come from three places:

* **The runtime's parser** (microsoft/msccl ``mscclGetAlgoFromXmlFile``, RCCL's
  ``msccl_parser``): known protocol, step types and buffers; ids numbered 0, 1, 2, …;
  peers that are other ranks; one thread block per (peer, direction, channel); a step
  that follows ``nop`` steps with dependencies must have one itself.
* **The runtime's limits** (:class:`~canopy.engine.msccl.threadblocks.MscclLimits`):
  channels, thread blocks per channel and per GPU (its SM count), steps per thread block,
  ``cnt``, XML elements per GPU.
* **The msccl-tools convention** (msccl-tools ``msccl/language/ir.py``: a transfer is one
  operation whose source slot is on the sender and destination slot on the receiver, and
  the sending and receiving steps are both written with that pair; ``rcs`` comes from fusing
  a receive with a send of the same slot, so its src and dst name one slot). Independent
  verifiers of MSCCL XML check this; :func:`rcs_names_one_slot` and
  :func:`transfers_agree_on_slots` are those rules.

Before the symbolic run (:mod:`~canopy.engine.msccl.executor`), every connection must
also carry as many sends as receives (:func:`connections_balance`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

from canopy.engine.msccl.model import (
    BUFFER_NAMES,
    PROTOCOLS,
    STEP_TYPES,
    MscclXmlError,
    XmlAlgo,
    XmlGpu,
    XmlStep,
    XmlThreadBlock,
    connection_steps,
    where,
)
from canopy.engine.msccl.threadblocks import MscclLimits, parser_elements


@dataclass
class Context:
    """What every rule sees: the algorithm, the limits and how to fail."""

    algo: XmlAlgo
    limits: MscclLimits
    source: str

    def fail(self, text: str) -> NoReturn:
        raise MscclXmlError(f"{self.source}: {text}")


# ---------------------------------------------------------------------- the algorithm


def known_protocol(ctx: Context) -> None:
    if ctx.algo.proto not in PROTOCOLS:
        ctx.fail(f"proto '{ctx.algo.proto}' is not one of {', '.join(PROTOCOLS)}.")


def positive_sizes(ctx: Context) -> None:
    if ctx.algo.ngpus < 1 or ctx.algo.nchunksperloop < 1:
        ctx.fail("ngpus and nchunksperloop must be positive.")


def chunks_divide_among_ranks(ctx: Context) -> None:
    a = ctx.algo
    if a.coll != "allreduce" and a.nchunksperloop % a.ngpus:
        ctx.fail(f"nchunksperloop {a.nchunksperloop} is not a multiple of ngpus {a.ngpus}.")


def some_mode(ctx: Context) -> None:
    if not ctx.algo.modes():
        ctx.fail("neither inplace nor outofplace is 1.")


def channel_count(ctx: Context) -> None:
    n, most = ctx.algo.nchannels, ctx.limits.max_channels
    if not 1 <= n <= most:
        ctx.fail(f"nchannels is {n}; MSCCL allows 1 to {most}.")


def gpu_ids(ctx: Context) -> None:
    """The <gpu> ids are 0 … ngpus−1 once each (the GPUs are then kept in id order)."""
    ids = sorted(g.id for g in ctx.algo.gpus)
    if ids != list(range(ctx.algo.ngpus)):
        ctx.fail(f"the <gpu> ids are {ids[:8]}{'…' if len(ids) > 8 else ''}, not 0 to "
                 f"{ctx.algo.ngpus - 1} once each.")
    ctx.algo.gpus.sort(key=lambda g: g.id)


# ---------------------------------------------------------------------- one GPU


def buffer_sizes_not_negative(ctx: Context, gpu: XmlGpu) -> None:
    if min(gpu.i_chunks, gpu.o_chunks, gpu.s_chunks) < 0:
        ctx.fail(f"{where(gpu.id)} declares a negative buffer size.")


def threadblock_ids(ctx: Context, gpu: XmlGpu) -> None:
    """Thread block ids are 0, 1, 2, … once each (kept in id order afterwards)."""
    tids = sorted(tb.id for tb in gpu.tbs)
    if tids != list(range(len(tids))):
        ctx.fail(f"{where(gpu.id)}: thread block ids are {tids[:8]}, not 0, 1, 2, … once "
                 "each.")
    gpu.tbs.sort(key=lambda tb: tb.id)


def elements_per_gpu(ctx: Context, gpu: XmlGpu) -> None:
    """The runtime's parser holds at most ``max_elements_per_gpu`` XML elements of one
    rank's view of the file: ``<algo>``, every ``<gpu>``, the rank's thread blocks and
    steps (:func:`~canopy.engine.msccl.threadblocks.parser_elements`)."""
    elements = parser_elements(ctx.algo.ngpus, len(gpu.tbs),
                               sum(len(tb.steps) for tb in gpu.tbs))
    if elements > ctx.limits.max_elements_per_gpu:
        ctx.fail(f"{where(gpu.id)} has {elements} XML elements (with the <algo> and all "
                 f"{ctx.algo.ngpus} <gpu> elements); the runtime's parser holds "
                 f"{ctx.limits.max_elements_per_gpu} per GPU.")


def peers_are_other_ranks(ctx: Context, gpu: XmlGpu) -> None:
    for tb in gpu.tbs:
        for peer, direction in ((tb.send, "send"), (tb.recv, "recv")):
            if peer == gpu.id or not -1 <= peer < ctx.algo.ngpus:
                ctx.fail(f"{where(gpu.id, tb.id)}: {direction} peer {peer} is not another "
                         "rank or -1.")


def one_threadblock_per_connection(ctx: Context, gpu: XmlGpu) -> None:
    seen: dict[tuple[int, str, int], int] = {}
    for tb in gpu.tbs:
        for peer, direction in ((tb.send, "send"), (tb.recv, "recv")):
            if peer < 0:
                continue
            key = (peer, direction, tb.chan)
            if key in seen:
                ctx.fail(f"{where(gpu.id, tb.id)} and tb {seen[key]} both {direction} "
                         f"{'to' if direction == 'send' else 'from'} rank {peer} on channel "
                         f"{tb.chan}; a connection belongs to one thread block.")
            seen[key] = tb.id


def channels_in_range(ctx: Context, gpu: XmlGpu) -> None:
    for tb in gpu.tbs:
        if not 0 <= tb.chan < ctx.algo.nchannels:
            ctx.fail(f"{where(gpu.id, tb.id)}: channel {tb.chan} is outside 0 to "
                     f"nchannels-1 = {ctx.algo.nchannels - 1}.")


def threadblocks_per_channel(ctx: Context, gpu: XmlGpu) -> None:
    count: dict[int, int] = defaultdict(int)
    for tb in gpu.tbs:
        count[tb.chan] += 1
        if count[tb.chan] > ctx.limits.max_tbs_per_channel:
            ctx.fail(f"{where(gpu.id)} has more than {ctx.limits.max_tbs_per_channel} thread "
                     f"blocks on channel {tb.chan}.")


def threadblocks_per_gpu(ctx: Context, gpu: XmlGpu) -> None:
    """At most ``max_tbs_per_gpu`` thread blocks (one resident block per SM, see
    :class:`~canopy.engine.msccl.threadblocks.MscclLimits`)."""
    if len(gpu.tbs) > ctx.limits.max_tbs_per_gpu:
        ctx.fail(f"{where(gpu.id)} has {len(gpu.tbs)} thread blocks; they must all be "
                 f"resident at once, and the GPU has {ctx.limits.max_tbs_per_gpu} SMs.")


def steps_per_threadblock(ctx: Context, gpu: XmlGpu) -> None:
    for tb in gpu.tbs:
        if len(tb.steps) > ctx.limits.max_steps_per_tb:
            ctx.fail(f"{where(gpu.id, tb.id)} has {len(tb.steps)} steps; MSCCL allows "
                     f"{ctx.limits.max_steps_per_tb}.")


def nops_pass_on_dependencies(ctx: Context, gpu: XmlGpu) -> None:
    """A step after ``nop`` steps with dependencies must have a dependency itself (the
    runtime folds such nops into the next step's dependency list)."""
    for tb in gpu.tbs:
        pending = False
        for pos, step in enumerate(tb.steps):
            if step.type == "nop":
                pending = pending or step.depid >= 0
                continue
            if pending and step.depid < 0:
                ctx.fail(f"{where(gpu.id, tb.id, pos)} follows nop steps with dependencies "
                         "but has none itself, which the runtime rejects.")
            pending = False


# ---------------------------------------------------------------------- one step

StepRule = Callable[[Context, XmlGpu, XmlThreadBlock, int, XmlStep], None]


def numbered_in_order(ctx: Context, gpu: XmlGpu, tb: XmlThreadBlock, pos: int,
                      step: XmlStep) -> None:
    if step.s != pos:
        ctx.fail(f"{where(gpu.id, tb.id, pos)} is numbered s={step.s}; steps must be numbered "
                 "0, 1, 2, … in order.")


def known_step_type(ctx: Context, gpu: XmlGpu, tb: XmlThreadBlock, pos: int,
                    step: XmlStep) -> None:
    if step.type not in STEP_TYPES:
        ctx.fail(f"{where(gpu.id, tb.id, pos)}: step type '{step.type}' is not one of "
                 f"{', '.join(STEP_TYPES)}.")


def transfers_have_peers(ctx: Context, gpu: XmlGpu, tb: XmlThreadBlock, pos: int,
                         step: XmlStep) -> None:
    ws = where(gpu.id, tb.id, pos)
    if step.kind.sends and tb.send < 0:
        ctx.fail(f"{ws} ({step.type}) sends, but its thread block has no send peer.")
    if step.kind.receives and tb.recv < 0:
        ctx.fail(f"{ws} ({step.type}) receives, but its thread block has no recv peer.")


def known_buffers(ctx: Context, gpu: XmlGpu, tb: XmlThreadBlock, pos: int,
                  step: XmlStep) -> None:
    for buf in (step.srcbuf, step.dstbuf):
        if buf not in BUFFER_NAMES:
            ctx.fail(f"{where(gpu.id, tb.id, pos)}: buffer '{buf}' is not i, o or s.")


def count_in_range(ctx: Context, gpu: XmlGpu, tb: XmlThreadBlock, pos: int,
                   step: XmlStep) -> None:
    """The parser rejects ``cnt >= MSCCL_MAX_COUNT`` (72) and non-positive counts."""
    if step.type != "nop" and not 1 <= step.cnt <= ctx.limits.max_count:
        ctx.fail(f"{where(gpu.id, tb.id, pos)}: cnt is {step.cnt}; MSCCL allows 1 to "
                 f"{ctx.limits.max_count}.")


def slots_in_range(ctx: Context, gpu: XmlGpu, tb: XmlThreadBlock, pos: int,
                   step: XmlStep) -> None:
    """The slots a step really reads or writes lie inside the declared buffers."""
    sizes = {"i": gpu.i_chunks, "o": gpu.o_chunks, "s": gpu.s_chunks}
    used = []
    if step.kind.reads_src:
        used.append(("src", step.srcbuf, step.srcoff))
    if step.kind.writes_dst:
        used.append(("dst", step.dstbuf, step.dstoff))
    for role, buf, off in used:
        if off < 0 or off + step.cnt > sizes[buf]:
            ctx.fail(f"{where(gpu.id, tb.id, pos)} ({step.type}) {role} "
                     f"{buf}[{off}:{off + step.cnt}] is out of range of the {sizes[buf]} "
                     f"chunks {buf}_chunks declares.")


def dependency_exists(ctx: Context, gpu: XmlGpu, tb: XmlThreadBlock, pos: int,
                      step: XmlStep) -> None:
    ws = where(gpu.id, tb.id, pos)
    if step.depid >= 0:
        if step.depid >= len(gpu.tbs):
            ctx.fail(f"{ws} depends on tb {step.depid}, which rank {gpu.id} does not have.")
        if not 0 <= step.deps < len(gpu.tbs[step.depid].steps):
            ctx.fail(f"{ws} depends on step {step.deps} of tb {step.depid}, which has no such "
                     "step.")
    elif step.depid != -1:
        ctx.fail(f"{ws}: depid {step.depid} is neither -1 nor a thread block id.")


def dependency_named_whole(ctx: Context, gpu: XmlGpu, tb: XmlThreadBlock, pos: int,
                           step: XmlStep) -> None:
    """``depid`` and ``deps`` are both -1 (no dependency) or both name a step, as
    msccl-tools writes them; a lone ``deps`` is a half-written dependency (the runtime
    ignores it, MSCCL XML verifiers reject it)."""
    if (step.depid < 0) != (step.deps < 0):
        ctx.fail(f"{where(gpu.id, tb.id, pos)} has depid {step.depid} but deps {step.deps}; "
                 "a dependency names both its thread block and its step, or neither.")


def rcs_names_one_slot(ctx: Context, gpu: XmlGpu, tb: XmlThreadBlock, pos: int,
                       step: XmlStep) -> None:
    """msccl-tools writes ``rcs`` only where a receive and the send of the same slot fuse,
    so its src and dst are that one slot (MSCCL XML verifiers reject anything else)."""
    if step.type == "rcs" and (step.srcbuf, step.srcoff) != (step.dstbuf, step.dstoff):
        ctx.fail(f"{where(gpu.id, tb.id, pos)} (rcs) names src {step.srcbuf}[{step.srcoff}] "
                 f"and dst {step.dstbuf}[{step.dstoff}]; an rcs step receives and forwards "
                 "one slot, so src and dst must be the same buffer and offset.")


STEP_RULES: tuple[StepRule, ...] = (
    numbered_in_order, known_step_type, transfers_have_peers, known_buffers, count_in_range,
    slots_in_range, dependency_exists, dependency_named_whole, rcs_names_one_slot)

GPU_RULES: tuple[Callable[[Context, XmlGpu], None], ...] = (
    buffer_sizes_not_negative, threadblock_ids, elements_per_gpu, peers_are_other_ranks,
    one_threadblock_per_connection, channels_in_range, threadblocks_per_channel,
    threadblocks_per_gpu, steps_per_threadblock)

ALGO_RULES: tuple[Callable[[Context], None], ...] = (
    known_protocol, positive_sizes, chunks_divide_among_ranks, some_mode, channel_count,
    gpu_ids)


# ---------------------------------------------------------------------- connections


def connections_balance(ctx: Context) -> None:
    """Every (sender, receiver, channel) connection carries as many sends as receives;
    messages match in order, so the first step beyond the other side's count is unmatched."""
    sends = connection_steps(ctx.algo, sending=True)
    recvs = connection_steps(ctx.algo, sending=False)
    for conn in sorted(set(sends) | set(recvs)):
        u, v, ch = conn
        out, into = sends.get(conn, []), recvs.get(conn, [])
        if len(into) > len(out):
            tb, step = into[len(out)]
            ctx.fail(f"{where(v, tb, step.s)} ({step.type}) receives message {len(out) + 1} "
                     f"from rank {u} on channel {ch}, but rank {u} sends only {len(out)} on "
                     "that connection, so it is unmatched.")
        if len(out) > len(into):
            tb, step = out[len(into)]
            ctx.fail(f"{where(u, tb, step.s)} ({step.type}) sends message {len(into) + 1} to "
                     f"rank {v} on channel {ch}, but rank {v} receives only {len(into)} on "
                     "that connection, so it is unmatched.")


def _slot_text(step: XmlStep) -> str:
    return f"src {step.srcbuf}[{step.srcoff}] dst {step.dstbuf}[{step.dstoff}]"


def transfers_agree_on_slots(ctx: Context) -> None:
    """The n-th send and the n-th receive of a connection are one transfer; by the
    msccl-tools convention both steps name its source slot (on the sender) and its
    destination slot (on the receiver), so their srcbuf/srcoff/dstbuf/dstoff agree."""
    sends = connection_steps(ctx.algo, sending=True)
    recvs = connection_steps(ctx.algo, sending=False)
    for conn in sorted(sends):
        u, v, ch = conn
        for n, ((tu, out), (tv, into)) in enumerate(zip(sends[conn], recvs[conn],
                                                        strict=True)):
            if out.slots != into.slots:
                ctx.fail(f"message {n + 1} from rank {u} to rank {v} on channel {ch} is sent "
                         f"by {where(u, tu, out.s)} ({out.type}) as {_slot_text(out)} but "
                         f"received by {where(v, tv, into.s)} ({into.type}) as "
                         f"{_slot_text(into)}; both ends of a transfer must name the same "
                         "slots.")


PROGRAM_RULES: tuple[Callable[[Context], None], ...] = (
    connections_balance, transfers_agree_on_slots)


def check_structure(algo: XmlAlgo, limits: MscclLimits | None = None,
                    source: str = "MSCCL XML") -> None:
    """Every rule above, in order: the algorithm, each GPU, each step, the connections.
    Raises :class:`MscclXmlError` at the first rule broken."""
    ctx = Context(algo, limits or MscclLimits(), source)
    for rule in ALGO_RULES:
        rule(ctx)
    for gpu in algo.gpus:
        for gpu_rule in GPU_RULES:
            gpu_rule(ctx, gpu)
        for tb in gpu.tbs:
            for pos, step in enumerate(tb.steps):
                for step_rule in STEP_RULES:
                    step_rule(ctx, gpu, tb, pos, step)
        nops_pass_on_dependencies(ctx, gpu)
    for program_rule in PROGRAM_RULES:
        program_rule(ctx)
