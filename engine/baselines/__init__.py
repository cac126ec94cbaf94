"""Baseline collective schedules to compare ForestColl with (docs/architecture.md, "Baselines").

Each baseline is a function of a topology returning a
:class:`~canopy.engine.model.plan.BaselineResult`: the schedule the algorithm would run,
its bandwidth-only algbw on the physical links, and a plan the simulator can run.
"""
