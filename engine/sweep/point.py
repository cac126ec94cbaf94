"""What a sweep computes at one point: one tidy row.

Columns: ``key``, ``generator``, one ``param.NAME`` per parameter, ``collective``, ``N``,
``bound_algbw`` (the exact optimum, GB/s), ``k`` (ForestColl's Prop. 3, arXiv:2402.06787),
and when asked for, ``forestcoll_k`` and ``solve_seconds`` (CPU seconds of the verified
ForestColl schedule), ``ALGORITHM_algbw`` (each algorithm's bandwidth bound) and
``ALGORITHM_algbw_SIZE`` (its simulated nccl-tests algbw at each size), the design advice's
columns when ``advise`` or ``advise-failures`` is asked for
(:mod:`canopy.engine.sweep.advice`), and ``error`` (one sentence, or empty).
"""

from __future__ import annotations

import time
from typing import Any

from canopy.engine.comparison.table import compare
from canopy.engine.forestcoll.optimum import optimum
from canopy.engine.forestcoll.solve import solve
from canopy.engine.generators import generate
from canopy.engine.model.errors import CanopyError
from canopy.engine.model.progress import Progress, report
from canopy.engine.model.sizes import size_label
from canopy.engine.sweep.advice import ADVICE, advice_columns
from canopy.engine.sweep.spec import Point


def base_row(point: Point) -> dict[str, Any]:
    """The columns that name a point, whatever becomes of it."""
    row: dict[str, Any] = {"key": point.key, "generator": point.kind}
    row.update({f"param.{name}": value for name, value in point.params.items()})
    row["collective"] = point.collective
    return row


def evaluate(point: Point, algorithms: tuple[str, ...], sizes: tuple[int, ...],
             progress: Progress | None = None) -> dict[str, Any]:
    """The row of ``point``; engine errors become its ``error`` column."""
    row = base_row(point)
    row["error"] = ""
    try:
        topology = generate(point.kind, point.params)
        report(progress, "optimum", 0.0)
        opt = optimum(topology)
        row.update(N=len(topology.compute_nodes()),
                   bound_algbw=float(opt.algbw(point.collective)), k=opt.k)
        if "forestcoll" in algorithms:
            start = time.process_time()
            schedule = solve(topology, point.collective, progress=progress)
            row.update(forestcoll_k=schedule.k,
                       solve_seconds=round(time.process_time() - start, 3))
        if any(a in ADVICE for a in algorithms):
            row.update(advice_columns(topology, point.collective,
                                      "advise-failures" in algorithms))
        baselines = tuple(a for a in algorithms
                          if a not in ("bound", "forestcoll", *ADVICE))
        if baselines or ("forestcoll" in algorithms and sizes):
            comparison = compare(topology, point.collective, sizes, algorithms=baselines,
                                 progress=progress)
            for r in comparison.rows:
                if r.algorithm not in algorithms:
                    continue
                row[f"{r.algorithm}_algbw"] = None if r.algbw is None else float(r.algbw)
                for size in sizes:
                    row[f"{r.algorithm}_algbw_{size_label(size)}"] = (
                        float(r.algbw_at(size)) if size in r.times_us else None)
    except CanopyError as exc:
        row["error"] = str(exc)
    return row
