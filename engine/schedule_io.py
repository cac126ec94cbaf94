"""canopy-schedule v1 JSON (DESIGN.md): write and read schedules.

Exact values (1/x*, y) are written as "p/q" strings next to float algbw figures for
people; reading takes the exact strings.
"""

from __future__ import annotations

import json
import os
from fractions import Fraction
from pathlib import Path
from typing import Any

from canopy.engine.errors import ScheduleError
from canopy.engine.schedule import OptimumSummary, Schedule, Tree, TreeEdge
from canopy.engine.topology_io import atomic_write_text

FORMAT = "canopy-schedule"
VERSION = 1


def _exact(value: Fraction) -> str:
    return str(value)


def schedule_to_dict(schedule: Schedule) -> dict[str, Any]:
    opt = schedule.optimum
    return {
        "format": FORMAT,
        "version": VERSION,
        "collective": schedule.collective,
        "compute_nodes": list(schedule.compute_nodes),
        "optimality": {
            "inverse_x": _exact(opt.inverse_x),
            "algbw": round(float(schedule.optimal_algbw), 6),
            "algbw_exact": _exact(schedule.optimal_algbw),
            "bottleneck_cut": list(opt.bottleneck_cut),
            "cut_bandwidth": _exact(opt.cut_bandwidth),
            "k": opt.k,
            "tree_bandwidth": _exact(opt.tree_bandwidth),
        },
        "k": schedule.k,
        "fixed_k": schedule.fixed_k,
        "tree_bandwidth": _exact(schedule.tree_bandwidth),
        "algbw": round(float(schedule.algbw), 6),
        "algbw_exact": _exact(schedule.algbw),
        "timings_s": {k: round(v, 6) for k, v in schedule.timings.items()},
        "trees": _trees_to_list(schedule.trees),
        **({"reduce_trees": _trees_to_list(schedule.reduce_trees)}
           if schedule.reduce_trees else {}),
        **({"reduce_tree_bandwidth": _exact(schedule.reduce_tree_bandwidth)}
           if schedule.reduce_tree_bandwidth is not None else {}),
        **schedule.extra,
    }


def _trees_to_list(trees: list[Tree]) -> list[dict[str, Any]]:
    return [{"root": t.root, "index": t.index, "multiplicity": t.multiplicity,
             "height": t.height,
             "edges": [{"src": e.src, "dst": e.dst, "path": list(e.path)} for e in t.edges]}
            for t in trees]


def _trees_from_list(items: list[Any]) -> list[Tree]:
    trees = []
    for i, t in enumerate(items):
        edges = tuple(TreeEdge(str(e["src"]), str(e["dst"]), tuple(map(str, e["path"])))
                      for e in t["edges"])
        trees.append(Tree(str(t["root"]), int(t.get("index", i)), int(t["multiplicity"]),
                          edges))
    return trees


def _fraction(value: Any, what: str, source: str) -> Fraction:
    try:
        return Fraction(str(value))
    except (ValueError, ZeroDivisionError):
        raise ScheduleError(f"{source}: {what} {value!r} is not a number.") from None


def schedule_from_dict(data: Any, source: str = "schedule") -> Schedule:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ScheduleError(f"{source}: format is not '{FORMAT}'.")
    if data.get("version") != VERSION:
        raise ScheduleError(f"{source}: version {data.get('version')!r} is not supported.")
    try:
        opt = data["optimality"]
        trees = _trees_from_list(data["trees"])
        reduce_trees = _trees_from_list(data["reduce_trees"]) if "reduce_trees" in data \
            else None
        known = {"format", "version", "collective", "compute_nodes", "optimality", "k",
                 "fixed_k", "tree_bandwidth", "algbw", "algbw_exact", "timings_s", "trees",
                 "reduce_trees", "reduce_tree_bandwidth"}
        schedule = Schedule(
            collective=str(data["collective"]),
            compute_nodes=[str(c) for c in data["compute_nodes"]],
            k=int(data["k"]),
            tree_bandwidth=_fraction(data["tree_bandwidth"], "tree_bandwidth", source),
            trees=trees,
            optimum=OptimumSummary(
                inverse_x=_fraction(opt["inverse_x"], "inverse_x", source),
                bottleneck_cut=tuple(opt.get("bottleneck_cut", ())),
                cut_bandwidth=_fraction(opt.get("cut_bandwidth", 0), "cut_bandwidth", source),
                k=int(opt.get("k", data["k"])),
                tree_bandwidth=_fraction(opt.get("tree_bandwidth", data["tree_bandwidth"]),
                                         "tree_bandwidth", source)),
            fixed_k=bool(data.get("fixed_k", False)),
            reduce_trees=reduce_trees,
            reduce_tree_bandwidth=(
                _fraction(data["reduce_tree_bandwidth"], "reduce_tree_bandwidth", source)
                if "reduce_tree_bandwidth" in data else None),
            extra={k: v for k, v in data.items() if k not in known},
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ScheduleError(f"{source}: malformed schedule ({exc.__class__.__name__}: {exc}).") \
            from None
    claimed = data.get("algbw_exact", data.get("algbw"))
    if claimed is not None:
        schedule.extra["claimed_algbw"] = claimed
    return schedule


def save_schedule(schedule: Schedule, path: str | os.PathLike[str]) -> None:
    """Write a schedule as canopy-schedule JSON, atomically.

    Parameters
    ----------
    schedule : Schedule
        A schedule from :func:`canopy.engine.solve`.
    path : str or os.PathLike
        Where to write it.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from canopy.engine import load_sample, solve
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "schedule.json"
    >>> save_schedule(solve(load_sample("forestcoll-fig2.json")), target)
    >>> load_schedule(target).collective
    'allgather'
    """
    atomic_write_text(path, json.dumps(schedule_to_dict(schedule), indent=1) + "\n")


def load_schedule(path: str | os.PathLike[str]) -> Schedule:
    """Read a canopy-schedule JSON file (``canopy solve --json``).

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Returns
    -------
    Schedule
        Not yet verified: pass it to :func:`canopy.engine.verify` with its topology.

    Raises
    ------
    ScheduleError
        One sentence naming the file and the field at fault.

    Examples
    --------
    >>> load_schedule("missing.json")
    Traceback (most recent call last):
    ...
    canopy.engine.errors.ScheduleError: missing.json: no such file.
    """
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ScheduleError(f"{p}: no such file.") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ScheduleError(f"{p} is not a readable JSON schedule ({exc}).") from None
    return schedule_from_dict(data, str(p))
