"""Exports of schedules: MSCCL XML algorithms and tree listings."""

from canopy.engine.export.msccl import (
    RUNTIMES,
    MscclOptions,
    build_layout,
    explain_limits,
    largest_fitting_k,
    msccl_xml,
    write_msccl,
)
from canopy.engine.export.msccl_threadblocks import MscclLimitError, MscclLimits
from canopy.engine.export.trees_xml import trees_xml, write_trees_xml

__all__ = ["RUNTIMES", "MscclLimitError", "MscclLimits", "MscclOptions", "build_layout",
           "explain_limits", "largest_fitting_k", "msccl_xml", "trees_xml", "write_msccl",
           "write_trees_xml"]
