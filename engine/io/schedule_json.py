"""canopy-schedule v1 JSON (docs/formats.md): write and read schedules.

Exact values (1/x*, y) are written as "p/q" strings next to float algbw figures for
people; reading takes the exact strings.

A tree edge is written either in full, ``{"src", "dst", "path"}``, or, in the compact
form used for large schedules, as an index into a top-level ``"routes"`` table of
distinct paths (``src`` and ``dst`` are the path's ends). Each distinct path is then
written once however many trees use it, so a 1024-GPU schedule is megabytes, not
hundreds of megabytes. Readers accept both forms, in any mix.
"""

from __future__ import annotations

import json
import os
from fractions import Fraction
from pathlib import Path
from typing import Any

from canopy.engine.io.topology_json import atomic_write_text
from canopy.engine.model.collectives import COLLECTIVES
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.limits import LONG_DIGITS, MAX_FILE_BYTES, check_integer_text
from canopy.engine.model.schedule import OptimumSummary, Schedule, Tree, TreeEdge

FORMAT = "canopy-schedule"
VERSION = 1
COMPACT_FROM_EDGES = 20_000   # tree edges from which the routes table is used


def _exact(value: Fraction) -> str:
    return str(value)


def schedule_to_dict(schedule: Schedule, compact: bool | None = None) -> dict[str, Any]:
    """The JSON object of ``schedule``; ``compact`` (default: for large schedules) writes
    tree edges as indices into a ``routes`` table."""
    opt = schedule.optimum
    every = [*schedule.trees, *(schedule.reduce_trees or [])]
    if compact is None:
        compact = sum(len(t.edges) for t in every) >= COMPACT_FROM_EDGES
    routes: dict[tuple[str, ...], int] | None = {} if compact else None
    trees = _trees_to_list(schedule.trees, routes)
    reduce_trees = _trees_to_list(schedule.reduce_trees, routes) if schedule.reduce_trees \
        else None
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
        **({"routes": [list(path) for path in routes]} if routes is not None else {}),
        "trees": trees,
        **({"reduce_trees": reduce_trees} if reduce_trees else {}),
        **({"reduce_tree_bandwidth": _exact(schedule.reduce_tree_bandwidth)}
           if schedule.reduce_tree_bandwidth is not None else {}),
        **({"split_budgets": True} if schedule.split_budgets else {}),
        **schedule.extra,
    }


def _trees_to_list(trees: list[Tree], routes: dict[tuple[str, ...], int] | None
                   ) -> list[dict[str, Any]]:
    """Trees as JSON; with ``routes``, edges become indices into that growing table."""
    out = []
    for t in trees:
        if routes is None:
            edges: list[Any] = [{"src": e.src, "dst": e.dst, "path": list(e.path)}
                                for e in t.edges]
        else:
            edges = [routes.setdefault(e.path, len(routes)) for e in t.edges]
        out.append({"root": t.root, "index": t.index, "multiplicity": t.multiplicity,
                    "height": t.height, "edges": edges})
    return out


def _trees_from_list(items: list[Any], routes: list[Any]) -> list[Tree]:
    shared: dict[int, TreeEdge] = {}

    def edge(e: Any) -> TreeEdge:
        if isinstance(e, dict):
            return TreeEdge(str(e["src"]), str(e["dst"]), tuple(map(str, e["path"])))
        if not isinstance(e, int) or not 0 <= e < len(routes):
            raise ValueError(f"tree edge {e!r} is not an index into the routes table")
        if e not in shared:
            path = tuple(map(str, routes[e]))
            if len(path) < 2:
                raise ValueError(f"route {e} has fewer than two nodes")
            shared[e] = TreeEdge(path[0], path[-1], path)
        return shared[e]

    trees = []
    for i, t in enumerate(items):
        edges = tuple(edge(e) for e in t["edges"])
        trees.append(Tree(str(t["root"]), int(t.get("index", i)), int(t["multiplicity"]),
                          edges))
    return trees


def _fraction(value: Any, what: str, source: str) -> Fraction:
    try:
        return Fraction(str(value))
    except (ValueError, ZeroDivisionError):
        raise ScheduleError(f"{source}: {what} {value!r} is not a number.") from None


def _short_text(value: str) -> str:
    """``value`` quoted, cut to 40 characters."""
    return repr(value if len(value) <= 40 else value[:40] + "…")


def schedule_from_dict(data: Any, source: str = "schedule") -> Schedule:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ScheduleError(f"{source}: format is not '{FORMAT}'.")
    if data.get("version") != VERSION:
        raise ScheduleError(f"{source}: version {data.get('version')!r} is not supported.")
    try:
        opt = data["optimality"]
        routes = data.get("routes", [])
        if not isinstance(routes, list):
            raise ValueError("routes is not a list")
        trees = _trees_from_list(data["trees"], routes)
        reduce_trees = _trees_from_list(data["reduce_trees"], routes) \
            if "reduce_trees" in data else None
        known = {"format", "version", "collective", "compute_nodes", "optimality", "k",
                 "fixed_k", "tree_bandwidth", "algbw", "algbw_exact", "timings_s", "trees",
                 "reduce_trees", "reduce_tree_bandwidth", "routes", "split_budgets"}
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
            split_budgets=bool(data.get("split_budgets", False)),
        )
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise ScheduleError(f"{source}: malformed schedule ({exc.__class__.__name__}: {exc}).") \
            from None
    if schedule.collective not in COLLECTIVES:
        raise ScheduleError(f"{source}: collective {_short_text(schedule.collective)} is not "
                            f"one of {', '.join(COLLECTIVES)}.")
    claimed = data.get("algbw_exact", data.get("algbw"))
    if claimed is not None:
        _fraction(claimed if isinstance(claimed, (int, float, str)) else repr(claimed)[:40],
                  "algbw", source)
        schedule.extra["claimed_algbw"] = claimed
    return schedule


def save_schedule(schedule: Schedule, path: str | os.PathLike[str],
                  compact: bool | None = None) -> None:
    """Write a schedule as canopy-schedule JSON, atomically.

    Parameters
    ----------
    schedule : Schedule
        A schedule from :func:`canopy.engine.solve`.
    path : str or os.PathLike
        Where to write it.
    compact : bool, optional
        Write tree edges as indices into a ``routes`` table, without indentation.
        By default large schedules (from ``COMPACT_FROM_EDGES`` tree edges) are compact.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from canopy.engine import load_sample, solve
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "schedule.json"
    >>> save_schedule(solve(load_sample("forestcoll-fig2.json")), target)
    >>> load_schedule(target).collective
    'allgather'
    """
    data = schedule_to_dict(schedule, compact)
    text = json.dumps(data, indent=None if "routes" in data else 1,
                      separators=(",", ":") if "routes" in data else None)
    atomic_write_text(path, text + "\n")


def _short_integer(text: str) -> int:
    """JSON integers within the documented digit limit (:mod:`canopy.engine.model.limits`)."""
    check_integer_text(text, LONG_DIGITS)
    return int(text)


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
    canopy.engine.model.errors.ScheduleError: missing.json: no such file.
    """
    p = Path(path)
    try:
        if p.stat().st_size > MAX_FILE_BYTES:
            raise ScheduleError(f"{p} is larger than the {MAX_FILE_BYTES // 2**20} MiB "
                                "Canopy reads.")
        data = json.loads(p.read_text(encoding="utf-8"), parse_int=_short_integer)
    except FileNotFoundError:
        raise ScheduleError(f"{p}: no such file.") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ScheduleError(f"{p} is not a readable JSON schedule ({exc}).") from None
    except RecursionError:
        raise ScheduleError(f"{p} nests arrays or objects too deeply for Canopy to "
                            "read.") from None
    except ValueError as exc:
        raise ScheduleError(f"{p} has a number that {exc}.") from None
    return schedule_from_dict(data, str(p))
