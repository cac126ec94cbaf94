"""Canopy's engine: topologies, the ForestColl optimum, schedules and their exports.

Pure Python plus numerical libraries; it never imports Qt (an import-linter contract in
``pyproject.toml`` holds it to that). The names below are the public API; everything
else is reachable through its module but may change between releases. Names load on
first use, so ``import canopy.engine`` stays cheap.

Examples
--------
>>> from canopy.engine import load_sample, optimum, solve
>>> topo = load_sample("dgx-a100-2x8.json")
>>> opt = optimum(topo)
>>> opt.inverse_x, float(opt.algbw()), opt.k
(Fraction(3, 65), 346.6666666666667, 13)
>>> schedule = solve(topo)
>>> schedule.algbw == opt.algbw()
True
"""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    # topologies
    "Topology": "canopy.engine.topology",
    "Node": "canopy.engine.topology",
    "Link": "canopy.engine.topology",
    "find_problems": "canopy.engine.topology",
    "load_topology": "canopy.engine.topology_io",
    "loads_topology": "canopy.engine.topology_io",
    "save_topology": "canopy.engine.topology_io",
    "load_sample": "canopy.engine.topology_io",
    "sample_names": "canopy.engine.topology_io",
    "generate": "canopy.engine.generators",
    "GENERATORS": "canopy.engine.generators",
    # the optimum and schedules
    "Optimum": "canopy.engine.optimality",
    "optimum": "canopy.engine.optimality",
    "COLLECTIVES": "canopy.engine.optimality",
    "Schedule": "canopy.engine.schedule",
    "Tree": "canopy.engine.schedule",
    "solve": "canopy.engine.forest",
    "verify": "canopy.engine.verification",
    "load_schedule": "canopy.engine.schedule_io",
    "save_schedule": "canopy.engine.schedule_io",
    # comparison with today's schedules
    "compare": "canopy.engine.comparison",
    # errors and progress
    "CanopyError": "canopy.engine.errors",
    "TopologyError": "canopy.engine.errors",
    "ScheduleError": "canopy.engine.errors",
    "Progress": "canopy.engine.progress",
    "Cancelled": "canopy.engine.progress",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'canopy.engine' has no attribute '{name}'")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
