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
