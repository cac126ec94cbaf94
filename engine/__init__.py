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
    "Topology": "canopy.engine.model.topology",
    "Node": "canopy.engine.model.topology",
    "Link": "canopy.engine.model.topology",
    "find_problems": "canopy.engine.model.topology",
    "load_topology": "canopy.engine.io.topology_json",
    "loads_topology": "canopy.engine.io.topology_json",
    "save_topology": "canopy.engine.io.topology_json",
    "load_sample": "canopy.engine.io.topology_json",
    "sample_names": "canopy.engine.io.topology_json",
    "generate": "canopy.engine.generators",
    "GENERATORS": "canopy.engine.generators",
    # the optimum and schedules
    "Optimum": "canopy.engine.forestcoll.optimum",
    "optimum": "canopy.engine.forestcoll.optimum",
    "COLLECTIVES": "canopy.engine.model.collectives",
    "Schedule": "canopy.engine.model.schedule",
    "Tree": "canopy.engine.model.schedule",
    "solve": "canopy.engine.forestcoll.solve",
    "verify": "canopy.engine.model.verification",
    "load_schedule": "canopy.engine.io.schedule_json",
    "save_schedule": "canopy.engine.io.schedule_json",
    # comparison with today's schedules
    "compare": "canopy.engine.comparison.table",
    # errors and progress
    "CanopyError": "canopy.engine.model.errors",
    "TopologyError": "canopy.engine.model.errors",
    "ScheduleError": "canopy.engine.model.errors",
    "Progress": "canopy.engine.model.progress",
    "Cancelled": "canopy.engine.model.progress",
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
