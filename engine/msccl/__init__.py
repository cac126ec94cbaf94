"""MSCCL XML, all of it: lowering a plan, connections and thread blocks, writing, reading,
checking, running.

* :mod:`~canopy.engine.msccl.lowering`: a :class:`canopy.engine.model.plan.CollectivePlan`
  (the one schedule model) to per-rank send/receive/reduce steps;
* :mod:`~canopy.engine.msccl.threadblocks`: steps to thread blocks and channels, within
  the runtime's limits (:class:`MscclLimits`);
* :mod:`~canopy.engine.msccl.connections`: which connections a tree schedule's transfers
  take (the connection layouts), and :mod:`~canopy.engine.msccl.pairing`: two connection
  ends in one thread block where a GPU has too few;
* :mod:`~canopy.engine.msccl.options`: protocol, runtime dialect, layout and limits of a
  written program;
* :mod:`~canopy.engine.msccl.writer`: the ``<algo>`` XML document;
* :mod:`~canopy.engine.msccl.model`: the XML program as the runtime reads it;
  :mod:`~canopy.engine.msccl.reader` reads a file into it;
* :mod:`~canopy.engine.msccl.checks`: the runtime's rules, one named function each;
* :mod:`~canopy.engine.msccl.executor`: a symbolic run proving the collective's result;
* :mod:`~canopy.engine.msccl.timing`: the XML's time in the execution model of
  :mod:`canopy.engine.execution.simulate` (``canopy check-xml --topology``).
"""

from canopy.engine.msccl.options import LAYOUTS, RUNTIMES, MscclOptions
from canopy.engine.msccl.threadblocks import MscclLimitError, MscclLimits
from canopy.engine.msccl.writer import (
           explain_limits,
           largest_fitting_k,
           msccl_xml,
           plan_threadblocks,
           plan_xml,
           schedule_threadblocks,
           write_msccl,
)

__all__ = ["LAYOUTS", "RUNTIMES", "MscclLimitError", "MscclLimits", "MscclOptions",
           "explain_limits", "largest_fitting_k", "msccl_xml", "plan_threadblocks", "plan_xml",
           "schedule_threadblocks", "write_msccl"]
