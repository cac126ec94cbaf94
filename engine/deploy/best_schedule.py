"""The schedule Canopy runs for a collective: one entry point for every front end.

ForestColl's verified trees (Zhao et al., arXiv:2402.06787, §4), and for allreduce App. E's
LP schedule where it is faster than reduce-scatter + allgather (§4.6)
(:func:`canopy.engine.allreduce.lp_schedule.choose_allreduce`). ``canopy solve``, the
editor's Solve and ``canopy compare`` all call :func:`best_schedule`.
"""

from __future__ import annotations

from fractions import Fraction

from canopy.engine.forestcoll.solve import solve
from canopy.engine.model.progress import Progress
from canopy.engine.model.schedule import Schedule
from canopy.engine.model.topology import Topology


def best_schedule(topology: Topology, collective: str = "allgather", k: int | None = None,
                  tolerance: Fraction | int | str = 0, allreduce_lp: str = "auto",
                  progress: Progress | None = None, where: str = "") -> Schedule:
    """The verified schedule of ``collective`` on ``topology`` (see the module docstring).

    ``allreduce_lp`` is "auto", "on" or "off" (:func:`choose_allreduce`'s ``mode``); a fixed
    ``k`` asks for k trees per node, so "auto" then keeps reduce-scatter + allgather."""
    schedule = solve(topology, collective, k=k, progress=progress, where=where,
                     tolerance=tolerance)
    if collective != "allreduce":
        return schedule
    from canopy.engine.allreduce.lp_schedule import choose_allreduce  # numpy, HiGHS: allreduce only

    mode = "off" if k is not None and allreduce_lp == "auto" else allreduce_lp
    return choose_allreduce(topology, schedule, mode, progress, where=where)
