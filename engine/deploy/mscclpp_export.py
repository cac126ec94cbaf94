"""The MSCCL++ plans a user runs: the schedule the runtime choice picks, per size range.

:func:`canopy.engine.deploy.runtime_choice.runtime_schedule` picks the schedule and layout
``canopy compare`` times (and, where smaller messages run faster on another one, that one
below a boundary). Each range becomes one plan whose ``min_message_size`` and
``max_message_size`` hold it (the whole buffer's bytes: the output for allgather, the
input otherwise, as the runtime's ``checkMessageSize`` compares); the file the user named
holds the largest messages and the others sit beside it (``STEM-below-512M.json``).
Every plan is read back with the parser's rules and run symbolically before it is
written (:mod:`canopy.engine.mscclpp.executor`).
Pipeline units and checks: :mod:`canopy.engine.mscclpp.files`.
"""

from __future__ import annotations

import os
from typing import Any

from canopy.engine.model.progress import Progress
from canopy.engine.model.schedule import Schedule
from canopy.engine.model.sizes import size_label
from canopy.engine.model.topology import Topology
from canopy.engine.msccl.model import XmlAlgo
from canopy.engine.msccl.reader import read_msccl_bytes
from canopy.engine.mscclpp.files import (
    REFERENCE_SIZE,
    MscclppExport,
    PlanFile,
    checked_plan,
    plan_stem,
    rank_servers,
    unit_for,
    write_plans,
)
from canopy.engine.mscclpp.writer import algo_plan


def schedule_plans(path: str | os.PathLike[str], topology: Topology, schedule: Schedule,
                   inplace: bool = True, limits: Any = None, tune: bool = True,
                   progress: Progress | None = None) -> list[PlanFile]:
    """The plans of ``schedule`` on ``topology`` (see the module docstring); ``limits``
    (:class:`~canopy.engine.msccl.MscclLimits`) bound the thread blocks per GPU (``--sms``).
    ``tune`` picks the pipeline unit by simulation (else 2 MiB per iteration). ``progress``
    follows the layout choice (``runtime_schedule``'s)."""
    from canopy.engine.deploy.runtime_choice import export_choice
    from canopy.engine.msccl import MscclLimits

    limits = limits or MscclLimits()
    choice = export_choice(topology, schedule, limits, progress)
    servers = rank_servers(topology)
    out = []
    for low, high, part in choice.ranges():
        where = os.fspath(path) if high is None else \
            f"{plan_stem(os.fspath(path))}-below-{size_label(high)}.json"
        algo = fitting_algo(part, inplace, limits, servers)
        reference = REFERENCE_SIZE if high is None else max(1 << 20, high // 2)
        unit = unit_for(algo, topology if tune else None, reference)
        out.append(checked_plan(algo, servers, where, unit, None, low, high))
    return out


TIGHTER = ((8, 8), (6, 4), (4, 2), (3, 1))   # (steps per thread block, chunks per step)


def fitting_algo(part: Any, inplace: bool, limits: Any, servers: list[int]) -> XmlAlgo:
    """The MSCCL program of a runtime choice whose MSCCL++ plan fits the runtime's 64 ops
    per thread block: the choice's own layout (the connections compare simulates) where it
    fits, else the same connections with fewer steps per thread block and chunks per step,
    then the mixed and compact layouts (:class:`~canopy.engine.msccl.MscclOptions`)."""
    from canopy.engine.msccl import MscclOptions, plan_xml

    def build(layout: str, lim: Any) -> bytes:
        source = part.plan if layout == "auto" else part.base
        return plan_xml(source, part.schedule.k,
                        MscclOptions(inplace=inplace, limits=lim, layout=layout))

    return _first_fitting(build, limits, servers)


def _first_fitting(build: Any, limits: Any, servers: list[int]) -> XmlAlgo:
    from dataclasses import replace

    from canopy.engine.msccl import MscclLimitError
    from canopy.engine.mscclpp.writer import MscclppLimitError

    # MSCCL's channel and parser limits do not bind MSCCL++: only thread blocks per GPU
    # (all resident) and ops per thread block do.
    free = replace(limits, max_channels=1 << 20, max_tbs_per_channel=1 << 20,
                   max_elements_per_gpu=1 << 30)
    tries = [("auto", limits)] + [
        (layout, replace(free, max_steps_per_tb=steps, max_count=count))
        for layout in ("auto", "mixed", "compact") for steps, count in TIGHTER]
    first: Exception | None = None
    for layout, lim in tries:
        try:
            algo = read_msccl_bytes(build(layout, lim))
            algo_plan(algo, servers, max_tbs=limits.max_tbs_per_gpu)
            return algo
        except (MscclLimitError, MscclppLimitError) as exc:
            first = first or exc
    raise MscclppLimitError(f"{str(first).rstrip('.')}; no layout of this schedule fits "
                            f"{limits.max_tbs_per_gpu} thread blocks of at most 64 operations "
                            "per GPU: a schedule with fewer trees does (canopy solve "
                            "--tolerance 1, or a smaller --k).")


def schedule_algo(schedule: Schedule, inplace: bool, servers: list[int],
                  limits: Any = None) -> XmlAlgo:
    """As :func:`fitting_algo` for ``schedule`` itself on the layouts of
    :func:`canopy.engine.msccl.schedule_threadblocks` (no runtime choice: quick, for tests)."""
    from canopy.engine.msccl import MscclLimits, MscclOptions, msccl_xml

    def build(layout: str, lim: Any) -> bytes:
        return msccl_xml(schedule, options=MscclOptions(inplace=inplace, limits=lim,
                                                        layout=layout))

    return _first_fitting(build, limits or MscclLimits(), servers)


def export_mscclpp(topology: Topology, schedule: Schedule, path: str | os.PathLike[str],
                   inplace: bool = True, limits: Any = None,
                   progress: Progress | None = None) -> MscclppExport:
    """The MSCCL++ export, one sequence for the command line and the editor: the plans of
    :func:`schedule_plans`, each checked, written atomically with the launcher beside
    them (:func:`canopy.engine.mscclpp.files.write_plans`); ``progress`` as there."""
    files = schedule_plans(path, topology, schedule, inplace, limits, progress=progress)
    return write_plans(files, path, schedule.collective, inplace)
