"""All-to-all schedules as MSCCL++ execution plans: the MSCCL program of
:func:`canopy.engine.alltoall.msccl.alltoall_xml` (out of place) translated by
:func:`canopy.engine.mscclpp.writer.algo_plan` and checked (:mod:`canopy.engine.mscclpp.files`).
"""

from __future__ import annotations

import os
from typing import Any

from canopy.engine.alltoall.msccl import alltoall_xml
from canopy.engine.model.topology import Topology
from canopy.engine.msccl.reader import read_msccl_bytes
from canopy.engine.mscclpp.files import (
    REFERENCE_SIZE,
    PlanFile,
    checked_plan,
    rank_servers,
    unit_for,
)


def alltoall_plan(path: str | os.PathLike[str], topology: Topology, schedule: Any,
                  tune: bool = True) -> PlanFile:
    """The out-of-place all-to-all plan of an all-to-all schedule
    (:func:`canopy.engine.alltoall.msccl.alltoall_xml`'s program)."""
    algo = read_msccl_bytes(alltoall_xml(schedule).data)
    unit = unit_for(algo, topology if tune else None, REFERENCE_SIZE)
    return checked_plan(algo, rank_servers(topology), os.fspath(path), unit, None)


NEAR = 0.98       # a plan this near compare's MCF row needs no explanation


def mcf_gap(topology: Topology, result: Any, file: PlanFile, size: int = REFERENCE_SIZE
            ) -> str | None:
    """Where the plan of ``result`` (an :class:`~canopy.engine.alltoall.solve.AllToAllResult`)
    runs below NEAR of compare's MCF row at ``size`` in the execution model, one sentence
    saying by how much and why; else None.

    The plan sends everything a GPU sends to one peer through one thread block (one
    connection), a relay forwarding what it receives after what it sends itself, as the
    MSCCL program does; compare's MCF row gives every route of every pair a connection of
    its own weighted by the route's rate, so on links shared by several routes the
    plan's equal shares per peer do not follow the flow's rates."""
    from canopy.engine.alltoall.compare import mcf_plan
    from canopy.engine.execution.program import algbw_gbps
    from canopy.engine.execution.simulate import fastest
    from canopy.engine.model.sizes import size_label
    from canopy.engine.mscclpp.reader import read_plan_bytes
    from canopy.engine.mscclpp.timing import time_plan

    mine = time_plan(read_plan_bytes(file.data, file.path), topology, size).algbw
    row = algbw_gbps(size, fastest(topology, mcf_plan(result), size).time_us)
    ratio = float(mine / row)
    if ratio >= NEAR:
        return None
    return (f"at {size_label(size)} the plan runs {float(mine):.2f} GB/s in the execution "
            f"model, {ratio:.1%} of compare's MCF row ({float(row):.2f} GB/s): it sends all "
            "of a GPU's data for one peer through one thread block, relays after their own "
            "sends, so routes sharing a link get equal shares per peer where the MCF row "
            "gives each route a connection weighted by its rate")
