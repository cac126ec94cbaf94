"""MSCCL XML: lowering a schedule to steps, thread blocks, writing, reading, checking, running.

* :mod:`~canopy.engine.msccl.lowering`: trees to per-rank send/receive/reduce steps;
* :mod:`~canopy.engine.msccl.threadblocks`: steps to thread blocks and channels, limits;
* :mod:`~canopy.engine.msccl.writer`: the ``<algo>`` XML document;
* :mod:`~canopy.engine.msccl.executor`: reading an XML back, checking the runtime's
  rules and executing it symbolically to prove the collective's postcondition.
"""

from canopy.engine.msccl.threadblocks import MscclLimitError, MscclLimits
from canopy.engine.msccl.writer import (
    LAYOUTS,
    RUNTIMES,
    MscclOptions,
    build_layout,
    explain_limits,
    largest_fitting_k,
    msccl_xml,
    write_msccl,
)

__all__ = ["LAYOUTS", "RUNTIMES", "MscclLimitError", "MscclLimits", "MscclOptions", "build_layout",
           "explain_limits", "largest_fitting_k", "msccl_xml", "write_msccl"]
