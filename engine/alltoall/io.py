"""The ``canopy-alltoall`` v1 JSON file (docs/formats.md, "canopy-alltoall").

``algbw`` = N·λ in GB/s (a per-rank buffer of M bytes takes M / algbw); ``algbw_exact``
is present only when the verified schedule meets the certified bound; ``paths`` lists
every distinct route of every ordered pair with its rate (identical routes of a pair
merged), with ``rate_exact`` beside ``rate`` when the schedule is exact.

A thousand-node schedule has millions of paths (every ordered pair, a few routes each),
so the file is written compactly: one top-level key per line and one path per line, no
other whitespace; an output name ending in ``.gz`` is gzip-compressed.
:func:`save_result` returns the bytes written and the number of paths.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

from canopy.engine.alltoall.solve import AllToAllResult
from canopy.engine.alltoall.timestep_lp import TimeSteppedResult
from canopy.engine.io.topology_json import atomic_write_bytes

FORMAT = "canopy-alltoall"
VERSION = 1
_COMPACT = (",", ":")


def _text(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else str(value)


def _header(result: AllToAllResult, stepped: TimeSteppedResult | None) -> dict[str, Any]:
    """Every key but ``paths``."""
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
    })
    if result.nic is not None:
        data["host_nic"] = {"bandwidth": float(result.nic[0]), "forwarding": result.nic[1]}
    if result.regular_bound is not None:
        data["regular_bound_algbw"] = float(problem.num_compute * result.regular_bound)
    if stepped is not None:
        data["time_stepped"] = {
            "steps": stepped.steps, "algbw": stepped.algbw, "pair_data_gb": stepped.pair_data,
            "solver_tolerance": stepped.tolerance,
            "step_loads": [[[u, v, x] for (u, v), x in sorted(loads.items())]
                           for loads in stepped.step_loads]}
    return data


def _paths(result: AllToAllResult) -> Iterator[dict[str, Any]]:
    names = result.problem.names
    for s, t, route, rate in result.schedule.paths():
        path: dict[str, Any] = {"source": names[s], "target": names[t],
                                "route": [names[v] for v in route], "rate": float(rate)}
        if result.exact:
            path["rate_exact"] = _text(rate)
        yield path


def result_to_json(result: AllToAllResult, stepped: TimeSteppedResult | None = None
                   ) -> dict[str, Any]:
    """The whole file as a dictionary."""
    data = _header(result, stepped)
    data["paths"] = list(_paths(result))
    return data


def result_to_text(result: AllToAllResult, stepped: TimeSteppedResult | None = None
                   ) -> tuple[str, int]:
    """The compact JSON text (module docstring) and its number of paths."""
    lines = [f"{json.dumps(key)}:{json.dumps(value, separators=_COMPACT)}"
             for key, value in _header(result, stepped).items()]
    paths = [json.dumps(p, separators=_COMPACT) for p in _paths(result)]
    body = ",\n".join(lines) + ',\n"paths":[\n' + ",\n".join(paths) + "\n]"
    return "{\n" + body + "\n}\n", len(paths)


def save_result(result: AllToAllResult, path: str,
                stepped: TimeSteppedResult | None = None) -> tuple[int, int]:
    """Write the JSON to ``path`` (``-`` is standard output; ``*.gz`` gzip-compressed);
    returns (bytes written, paths)."""
    text, count = result_to_text(result, stepped)
    if path == "-":
        print(text, end="")
        return len(text.encode()), count
    data = text.encode()
    if path.endswith(".gz"):
        data = gzip.compress(data, compresslevel=6, mtime=0)
    atomic_write_bytes(path, data)
    return len(data), count
