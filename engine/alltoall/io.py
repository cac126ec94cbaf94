"""The ``canopy-alltoall`` v1 JSON file (DESIGN.md, "More collectives and fabrics").

``algbw`` = N·λ in GB/s (a per-rank buffer of M bytes takes M / algbw); ``algbw_exact``
is present only when the verified schedule meets the certified bound; ``paths`` lists
every route of every ordered pair with its rate.
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

from canopy.engine.alltoall.solve import AllToAllResult
from canopy.engine.alltoall.timestep_lp import TimeSteppedResult
from canopy.engine.topology_io import atomic_write_bytes

FORMAT = "canopy-alltoall"
VERSION = 1


def _text(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else str(value)


def result_to_json(result: AllToAllResult, stepped: TimeSteppedResult | None = None
                   ) -> dict[str, Any]:
    problem = result.problem
    names = problem.names
    data: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "compute_nodes": [names[c] for c in problem.compute],
        "forwarding": problem.forwarding,
        "method": result.method,
        "algbw": float(result.algbw),
    }
    if result.exact:
        data["algbw_exact"] = _text(result.algbw)
    data.update({
        "pair_rate": float(result.lam),
        "pair_rate_exact": _text(result.lam),
        "bound_algbw": float(result.bound_algbw),
        "bound_algbw_exact": _text(result.bound_algbw),
        "gap": result.gap,
        "cut_bound_algbw": float(result.cut_bound_algbw),
        "solver_tolerance": result.tolerance,
        "bottleneck_links": [list(link) for link in result.bottleneck_links()],
        "paths": [{"source": names[s], "target": names[t], "route": [names[v] for v in route],
                   "rate": float(rate), "rate_exact": _text(rate)}
                  for s, t, route, rate in result.schedule.paths()],
    })
    if result.regular_bound is not None:
        data["regular_bound_algbw"] = float(problem.num_compute * result.regular_bound)
    if stepped is not None:
        data["time_stepped"] = {
            "steps": stepped.steps, "algbw": stepped.algbw, "pair_data_gb": stepped.pair_data,
            "solver_tolerance": stepped.tolerance,
            "step_loads": [[[u, v, x] for (u, v), x in sorted(loads.items())]
                           for loads in stepped.step_loads]}
    return data


def save_result(result: AllToAllResult, path: str,
                stepped: TimeSteppedResult | None = None) -> None:
    """Write the JSON to ``path`` (``-`` is standard output)."""
    text = json.dumps(result_to_json(result, stepped), indent=1) + "\n"
    if path == "-":
        print(text, end="")
    else:
        atomic_write_bytes(path, text.encode())
