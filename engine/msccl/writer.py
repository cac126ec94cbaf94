"""Export a canopy schedule as an MSCCL XML algorithm (microsoft/msccl, RCCL's MSCCL).

The file is what the MSCCL runtime's parser reads::

    <algo name proto nchannels nchunksperloop ngpus coll inplace outofplace minBytes maxBytes>
      <gpu id i_chunks o_chunks s_chunks>
        <tb id send recv chan>
          <step s type srcbuf srcoff dstbuf dstoff cnt depid deps hasdep/>

``nchunksperloop`` is N·k; rank r owns chunks r·k … r·k+k−1 (see
:mod:`canopy.engine.msccl.lowering` for the steps and
:mod:`canopy.engine.msccl.threadblocks` for thread blocks, channels and ordering).
Dependencies: a step with ``depid``/``deps`` waits until thread block ``depid`` of the same
GPU has finished step ``deps``; that step carries ``hasdep="1"`` so the runtime publishes
its completion. Steps in the same thread block are ordered by position and carry no
dependency. Every step waits on at most one other, so no ``nop`` steps are needed.

Routes: a thread block that sends over switches carries ``via="sw1,sw2"``, the nodes
between the two GPUs on the physical route the schedule gives that connection (the route
of its tree edges in the plan), so that ``canopy check-xml --topology`` times the XML over
exactly the routes ``canopy compare`` assumed. The runtime's parser reads attributes by
name and ignores this one (msccl-tools' readers too); the fabric, not the XML, decides
the real route, so ``via`` documents the routing the schedule's optimum needs.

Buffer conventions follow msccl-tools and the runtime's pointers:

* allgather: ``i`` holds the rank's k chunks, ``o`` all N·k. In place, ``i`` is ``o`` at
  offset r·k, so only ``o`` is named; out of place, the rank copies its own chunks from
  ``i`` into ``o`` and sends them from ``i``.
* reduce_scatter: ``i`` holds N·k chunks, ``o`` the rank's k. In place the result stays
  in ``i`` at r·k (``o`` is that slice); out of place it goes to ``o``. Partial sums on the
  way live in scratch ``s``; the input is never written outside the rank's result.
* allreduce: ``i`` and ``o`` both hold N·k chunks; in place ``o`` is ``i``. Partial sums
  and results live in the result buffer.

The XML has no declaration and is indented with spaces, which the runtime's hand-written
parser needs. microsoft/msccl (and msccl-tools) call reduce-scatter ``reduce_scatter``;
RCCL's MSCCL parser wants ``reducescatter`` (``runtime="rccl"``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from fractions import Fraction

from lxml import etree

from canopy.engine.io.topology_json import atomic_write_bytes
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.limits import number_text
from canopy.engine.model.memo import RecentMemo
from canopy.engine.model.plan import CollectivePlan, trees_plan
from canopy.engine.model.schedule import Schedule
from canopy.engine.model.topology import Topology
from canopy.engine.msccl.connections import runtime_layout
from canopy.engine.msccl.lowering import (
    XML_COLLECTIVE,
    Step,
    StepProgram,
    chunks_per_root,
    plan_steps,
)
from canopy.engine.msccl.model import COLLECTIVES, XmlAlgo, XmlGpu, XmlStep, XmlThreadBlock
from canopy.engine.msccl.options import LAYOUTS, PROTOCOLS, RUNTIMES, MscclOptions
from canopy.engine.msccl.threadblocks import (
    MscclLimitError,
    MscclLimits,
    ThreadBlockAssignment,
    assign_threadblocks,
)
from canopy.engine.msccl.waits import runs_to_end


def schedule_threadblocks(schedule: Schedule, collective: str | None = None,
                          options: MscclOptions | None = None) -> ThreadBlockAssignment:
    """Steps, thread blocks and channels of ``schedule`` run as ``collective`` (default:
    the schedule's own): the thread-block assignment of its plan
    (:func:`canopy.engine.model.plan.trees_plan`, the plan ``canopy compare`` times) with k
    chunks per root. Raises
    :class:`ScheduleError` (:class:`MscclLimitError` when the runtime's limits cannot be
    met)."""
    options = options or MscclOptions()
    plan = trees_plan(collective or schedule.collective, list(schedule.compute_nodes),
                      schedule.trees, schedule.k, schedule.reduce_trees)
    if options.layout == "auto":
        with contextlib.suppress(MscclLimitError):   # then the layouts below, compact last
            plan = runtime_layout(plan, options.limits)
    return plan_threadblocks(plan, schedule.k, options)


def plan_threadblocks(plan: CollectivePlan, chunks: int | None = None,
                      options: MscclOptions | None = None) -> ThreadBlockAssignment:
    """Steps, thread blocks and channels of ``plan`` with ``chunks`` chunks per root
    (default: the fewest that hold every tree's share, :func:`chunks_per_root`)."""
    options = options or MscclOptions()
    _check_options(options)
    return _assign(plan, chunks, options)


_KEPT: RecentMemo[ThreadBlockAssignment] = RecentMemo(2)


def kept_threadblocks(plan: CollectivePlan, chunks: int | None, options: MscclOptions
                      ) -> ThreadBlockAssignment:
    """:func:`plan_threadblocks`, kept for the last plans asked by what only reads it
    (:func:`plan_xml`, :func:`plan_algo`, the runtime choice's MSCCL++ fit check): the
    runtime choice checks the chosen layout's MSCCL++ thread blocks, and the export then
    writes the same thread blocks. Kept by
    what they depend on: the chunks, in place or not, the limits, fusing, channels and
    layout (not the protocol, runtime, name or sizes, which only the text names)."""
    _check_options(options)
    key = (chunks, options.inplace, options.limits, options.fuse, options.channels,
           options.layout)
    return _KEPT.get(plan, key, lambda: _assign(plan, chunks, options))


def _check_options(options: MscclOptions) -> None:
    """Raise ScheduleError where ``options`` name an unknown protocol, runtime or layout."""
    if options.protocol not in PROTOCOLS:
        raise ScheduleError(f"unknown MSCCL protocol '{options.protocol}'; use one of "
                            f"{', '.join(PROTOCOLS)}.")
    if options.runtime not in RUNTIMES:
        raise ScheduleError(f"unknown MSCCL runtime '{options.runtime}'; use one of "
                            f"{', '.join(RUNTIMES)}.")
    if options.layout not in LAYOUTS:
        raise ScheduleError(f"unknown MSCCL layout '{options.layout}'; use one of "
                            f"{', '.join(LAYOUTS)}.")


def _assign(plan: CollectivePlan, chunks: int | None, options: MscclOptions
            ) -> ThreadBlockAssignment:
    """:func:`plan_threadblocks` of valid ``options``."""
    chunks = chunks_per_root(plan) if chunks is None else chunks
    most = _most_pieces(options.limits)
    if chunks > most:
        raise MscclLimitError(
            f"the MSCCL program does not fit the runtime's limits: k = "
            f"{number_text(chunks)} pieces per rank need more than the "
            f"{options.limits.max_elements_per_gpu} XML elements "
            "RCCL's parser holds per GPU.")
    if options.layout == "auto" and any(isinstance(e.channel, int) for t in plan.trees
                                        for e in t.edges):
        return _given(plan, chunks, options)
    tries = {"auto": ("pipelined", "per-tree", "mixed", "compact")}.get(options.layout,
                                                                 (options.layout,))
    for layout in tries[:-1]:
        try:
            return _layout(plan, chunks, options, layout)
        except MscclLimitError:
            continue
    return _layout(plan, chunks, options, tries[-1])


def _given(plan: CollectivePlan, chunks: int, options: MscclOptions) -> ThreadBlockAssignment:
    """The thread blocks of a plan whose edges name their channels: one per connection,
    each connection's transfers in the plan's order
    (:func:`~canopy.engine.msccl.threadblocks.assign_threadblocks`, ``"given"``). Why
    that cannot deadlock (:mod:`canopy.engine.msccl.connections`, layout 3) takes nodes
    that add their children's data shallow first; where the reduce trees give an
    ``accumulation`` (the order the plan's simulation delivers them in), the program is
    kept only if its waits form no cycle (:func:`~canopy.engine.msccl.waits.runs_to_end`),
    else its nodes add shallow first."""
    def lay_out(accumulate: bool) -> ThreadBlockAssignment:
        steps = plan_steps(plan, chunks, options.inplace, options.limits.max_count,
                           fuse_fanout=False, accumulate=accumulate)
        return assign_threadblocks(steps, options.limits, False, options.channels, "given")

    if any(t.accumulation for t in plan.reduce_trees):
        assignment = lay_out(True)
        if runs_to_end(assignment):
            return assignment
    return lay_out(False)


def pipeline_pieces(plan: CollectivePlan, chunks: int, limits: MscclLimits) -> list[int]:
    """Chunks per step the pipelined layout tries, fewest first: 1 (every unit tree on
    connections of its own), then the smallest multiplicity q and its doublings (a tree of
    multiplicity m then streams on about m/q connections, so trees still share a link in
    proportion to the data they carry, as the execution model's plan gives a tree edge
    the weight of its share)."""
    n = len(plan.compute_nodes)
    counts = [t.share * n * chunks for t in plan.trees] or [Fraction(1)]
    largest, q = max(counts), max(2, int(min(counts)))
    out = [1]
    while q < largest and q <= limits.max_count:
        out.append(q)
        q *= 2
    return out


def _layout(plan: CollectivePlan, chunks: int, options: MscclOptions, layout: str
            ) -> ThreadBlockAssignment:
    """Steps and thread blocks of one layout (see :class:`MscclOptions`)."""
    inplace, most = options.inplace, options.limits.max_count
    if layout == "pipelined":
        pieces = pipeline_pieces(plan, chunks, options.limits)
        for piece in pieces:
            steps = plan_steps(plan, chunks, inplace, most, piece=piece, fuse_fanout=False)
            try:
                return assign_threadblocks(steps, options.limits, options.fuse,
                                           options.channels, "own")
            except MscclLimitError:
                if piece == pieces[-1]:
                    raise
    if layout != "compact":
        steps = plan_steps(plan, chunks, inplace, most, fuse_fanout=False)
        return assign_threadblocks(steps, options.limits, options.fuse, options.channels,
                                   "prefer-own" if layout == "mixed" else "own")
    steps = plan_steps(plan, chunks, inplace, most)
    return assign_threadblocks(steps, options.limits, options.fuse, options.channels)


def _most_pieces(limits: MscclLimits) -> int:
    """The largest k any layout can hold: a root sends each piece of at most
    ``max_count`` chunks in a step of its own, one XML element each."""
    return limits.max_count * limits.max_elements_per_gpu


VIA_MAX_CHARS = 255     # the runtime's parser holds attribute values of up to 255 chars


def via_text(route: tuple[str, ...]) -> str | None:
    """The ``via`` attribute of a thread block whose send connection takes ``route``: the
    nodes between the two GPUs, comma-separated; None for a direct link, or when the text
    would not fit the runtime parser's attribute buffer (then readers route it themselves)."""
    if len(route) <= 2:
        return None
    text = ",".join(route[1:-1])
    return text if len(text) <= VIA_MAX_CHARS and '"' not in text else None


def _xml_steps(assignment: ThreadBlockAssignment) -> list[list[list[XmlStep]]]:
    """Each rank's thread blocks' steps as the XML writes them (a step waits on another
    thread block's step by ``depid``/``deps``, which carries ``hasdep``; a send's ``dst``
    and a receive's ``src`` default to ``o`` and ``i`` at -1)."""
    position: dict[Step, tuple[int, int]] = {}
    for rank_tbs in assignment.tbs:
        for tb_id, tb in enumerate(rank_tbs):
            for s, step in enumerate(tb.steps):
                position[step] = (tb_id, s)
    depended = {step.dep for step in position if step.dep is not None and
                position[step.dep][0] != position[step][0]}
    out = []
    for rank_tbs in assignment.tbs:
        rank_steps = []
        for tb_id, tb in enumerate(rank_tbs):
            steps = []
            for s, step in enumerate(tb.steps):
                dep = step.dep
                if dep is not None and position[dep][0] != tb_id:
                    depid, deps = position[dep]
                else:
                    depid, deps = -1, -1
                src = step.src if step.src is not None else ("i", -1)
                dst = step.dst if step.dst is not None else ("o", -1)
                steps.append(XmlStep(s, step.kind, src[0], src[1], dst[0], dst[1], step.cnt,
                                     depid, deps, step in depended))
            rank_steps.append(steps)
        out.append(rank_steps)
    return out


def _algo_names(assignment: ThreadBlockAssignment, options: MscclOptions) -> tuple[str, str]:
    """(the ``name``, the ``coll`` as the runtime's dialect spells it) of the ``<algo>``."""
    plan: StepProgram = assignment.plan
    coll = XML_COLLECTIVE[plan.collective]
    if options.runtime == "rccl" and coll == "reduce_scatter":
        coll = "reducescatter"
    return (options.name or f"canopy-{coll}-{plan.ngpus}gpus-k{plan.k}-"
                            f"{'inplace' if plan.inplace else 'outofplace'}"), coll


def threadblocks_element(assignment: ThreadBlockAssignment,
                         options: MscclOptions | None = None) -> etree._Element:
    """The ``<algo>`` element of ``assignment``."""
    options = options or MscclOptions()
    plan: StepProgram = assignment.plan
    name, coll = _algo_names(assignment, options)
    algo = etree.Element("algo")
    for key, value in [
            ("name", name),
            ("proto", options.protocol), ("nchannels", assignment.nchannels),
            ("nchunksperloop", plan.nchunks), ("ngpus", plan.ngpus), ("coll", coll),
            ("inplace", int(plan.inplace)), ("outofplace", int(not plan.inplace)),
            ("minBytes", options.min_bytes), ("maxBytes", options.max_bytes)]:
        algo.set(key, str(value))
    for rank, (rank_tbs, rank_steps) in enumerate(zip(assignment.tbs, _xml_steps(assignment),
                                                       strict=True)):
        gpu = etree.SubElement(algo, "gpu")
        i_chunks, o_chunks, s_chunks = plan.buffer_sizes(rank)
        for key, value in [("id", rank), ("i_chunks", i_chunks), ("o_chunks", o_chunks),
                           ("s_chunks", s_chunks)]:
            gpu.set(key, str(value))
        for tb_id, (tb, steps) in enumerate(zip(rank_tbs, rank_steps, strict=True)):
            tb_elem = etree.SubElement(gpu, "tb")
            for key, value in [("id", tb_id), ("send", tb.send), ("recv", tb.recv),
                               ("chan", tb.channel)]:
                tb_elem.set(key, str(value))
            via = via_text(tb.route)
            if via is not None:
                tb_elem.set("via", via)
            for step in steps:      # (lxml keeps the attributes in the dict's order)
                etree.SubElement(tb_elem, "step", {
                    "s": str(step.s), "type": step.type, "srcbuf": step.srcbuf,
                    "srcoff": str(step.srcoff), "dstbuf": step.dstbuf,
                    "dstoff": str(step.dstoff), "cnt": str(step.cnt),
                    "depid": str(step.depid), "deps": str(step.deps),
                    "hasdep": str(int(step.hasdep))})
    return algo


def threadblocks_algo(assignment: ThreadBlockAssignment,
                      options: MscclOptions | None = None, routes: bool = True) -> XmlAlgo:
    """The program of :func:`threadblocks_element` as
    :func:`canopy.engine.msccl.reader.read_msccl_bytes` reads it back, built without the
    XML text (what the runtime choice counts an MSCCL++ plan's thread blocks on);
    ``routes=False`` leaves every thread block's ``via`` empty (counting needs none)."""
    options = options or MscclOptions()
    plan: StepProgram = assignment.plan
    name, coll = _algo_names(assignment, options)
    gpus = []
    for rank, (rank_tbs, rank_steps) in enumerate(zip(assignment.tbs, _xml_steps(assignment),
                                                       strict=True)):
        gpu = XmlGpu(rank, *plan.buffer_sizes(rank))
        for tb_id, (tb, steps) in enumerate(zip(rank_tbs, rank_steps, strict=True)):
            via = tuple(x for x in (via_text(tb.route) or "").split(",") if x) if routes \
                else ()
            gpu.tbs.append(XmlThreadBlock(tb_id, tb.send, tb.recv, tb.channel, steps, via))
        gpus.append(gpu)
    return XmlAlgo(name, options.protocol, assignment.nchannels, plan.nchunks, plan.ngpus,
                   COLLECTIVES[coll], bool(plan.inplace), not plan.inplace, gpus,
                   options.min_bytes, options.max_bytes)


def threadblocks_xml(assignment: ThreadBlockAssignment,
                     options: MscclOptions | None = None) -> bytes:
    """The MSCCL XML document of ``assignment`` (UTF-8 bytes, written with lxml)."""
    return etree.tostring(threadblocks_element(assignment, options or MscclOptions()),
                          pretty_print=True, encoding="utf-8")


def msccl_xml(schedule: Schedule, collective: str | None = None,
              options: MscclOptions | None = None) -> bytes:
    """The MSCCL XML of ``schedule`` (UTF-8 bytes, written with lxml)."""
    return threadblocks_xml(schedule_threadblocks(schedule, collective, options), options)


def plan_xml(plan: CollectivePlan, chunks: int | None = None,
             options: MscclOptions | None = None) -> bytes:
    """The MSCCL XML of any plan (rings, allreduce-LP schedules, …), :func:`plan_threadblocks`."""
    options = options or MscclOptions()
    return threadblocks_xml(kept_threadblocks(plan, chunks, options), options)


def plan_algo(plan: CollectivePlan, chunks: int | None = None,
              options: MscclOptions | None = None, routes: bool = True) -> XmlAlgo:
    """The program :func:`plan_xml` writes, as its reader reads it back
    (:func:`threadblocks_algo`)."""
    options = options or MscclOptions()
    return threadblocks_algo(kept_threadblocks(plan, chunks, options), options, routes)


def write_msccl(path: str | os.PathLike[str], schedule: Schedule,
                collective: str | None = None, options: MscclOptions | None = None) -> None:
    """Write :func:`msccl_xml` to ``path`` atomically."""
    atomic_write_bytes(path, msccl_xml(schedule, collective, options))


Solver = Callable[[Topology, str, int], Schedule]


def largest_fitting_k(topology: Topology, collective: str, below: int,
                      options: MscclOptions | None = None, solver: Solver | None = None
                      ) -> int | None:
    """The largest fixed k < ``below`` whose schedule fits the runtime's limits, or None.

    Tries k = below−1, below−2, … 1 with ``solver`` (default
    :func:`canopy.engine.forestcoll.solve.solve`);
    fitting is not monotone in k in general, so the scan does not skip values.
    """
    if solver is None:
        from canopy.engine.forestcoll.solve import solve

        def solver(topo: Topology, coll: str, k: int) -> Schedule:
            return solve(topo, coll, k=k)
    for k in range(below - 1, 0, -1):
        try:
            schedule_threadblocks(solver(topology, collective, k), collective, options)
        except MscclLimitError:
            continue
        return k
    return None


def explain_limits(error: MscclLimitError, topology: Topology, schedule: Schedule,
                   collective: str | None = None, options: MscclOptions | None = None,
                   solver: Solver | None = None, fixed_k_hint: str = "canopy solve --k {k}"
                   ) -> ScheduleError:
    """``error`` completed with the largest fixed k that fits, as one sentence;
    ``fixed_k_hint`` says how a user asks for a fixed k (``{k}`` is filled in) and
    ``solver`` solves for one (:func:`largest_fitting_k`)."""
    collective = collective or schedule.collective
    text = str(error).rstrip(".")
    most = _most_pieces((options or MscclOptions()).limits)
    if schedule.k > most:
        return MscclLimitError(f"{text}; a fixed k of at most {most} may fit "
                               f"({fixed_k_hint.format(k='K')}).")
    k = largest_fitting_k(topology, collective, schedule.k, options, solver)
    if k is None:
        return MscclLimitError(f"{text}; no fixed k fits either.")
    return MscclLimitError(f"{text} at k = {schedule.k}; the largest fixed k that fits is {k} "
                           f"({fixed_k_hint.format(k=k)}).")
