"""The sweep spec (TOML) and the points it names.

A spec names generators with fixed parameters and parameter grids, and what to compute
at every point::

    name = "rails, oversubscription and NIC speed"
    collectives = ["allgather"]
    algorithms = ["bound", "forestcoll", "ring"]   # "bound" alone: optimum only;
                                                   # "advise", "advise-failures": advice
    sizes = ["16M", "1G"]                           # simulated message sizes
    time_limit = 120                                # seconds per point

    [[generator]]
    kind = "cluster"
    params = { servers = 4, gpus = 8, scale-out = "leaf-spine" }
    grid = { rails = [1, 2], oversubscription = [1, 2], nic-bw = [25, 50] }

Every combination of a generator's grid values is a point, once per collective. A point
is keyed by a hash of its topology and what is computed there, so a sweep resumed after
a crash skips the points whose rows are already written. Every error in a spec is one
sentence naming the key at fault.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from canopy.engine.generators import GENERATORS, generate
from canopy.engine.io.topology_json import topology_to_dict
from canopy.engine.model.collectives import COLLECTIVES
from canopy.engine.model.errors import CanopyError, unreadable
from canopy.engine.model.limits import MAX_FILE_BYTES
from canopy.engine.model.plan import ALGORITHMS
from canopy.engine.model.sizes import parse_size
from canopy.engine.sweep.advice import ADVICE

DEFAULT_TIME_LIMIT = 300.0
ALL_ALGORITHMS = ("bound", *ADVICE, *ALGORITHMS)
"""What a spec's ``algorithms`` may name: the bound, the design advice (per-class
columns; "advise-failures" adds the worst single failure) and the algorithms."""


class SpecError(CanopyError):
    """A sweep spec that cannot be run; the message names the key at fault."""


@dataclass(frozen=True)
class Point:
    """One design and collective to evaluate."""

    kind: str
    params: dict[str, Any]
    collective: str
    key: str = field(compare=False)


@dataclass(frozen=True)
class Spec:
    name: str
    collectives: tuple[str, ...]
    algorithms: tuple[str, ...]
    sizes: tuple[int, ...]
    time_limit: float
    points: tuple[Point, ...]


MAX_TIME_LIMIT = 86_400
"""Longest time_limit (seconds per point) a spec may give."""
MAX_POINTS = 10_000
"""Points (topology x collective) a sweep spec may list; each is hashed when read."""


def _flag(name: str) -> str:
    return name.replace("-", "_")


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise SpecError(f"{where} must be a list, such as [1, 2].")
    if not value:
        raise SpecError(f"{where} is empty; give at least one value.")
    return value


def point_key(kind: str, params: dict[str, Any], collective: str,
              algorithms: tuple[str, ...], sizes: tuple[int, ...]) -> str:
    """A stable hash of the topology a point builds and what is computed on it."""
    topology = topology_to_dict(generate(kind, params))
    topology.pop("name", None)
    text = json.dumps({"topology": topology, "collective": collective,
                       "algorithms": list(algorithms), "sizes": list(sizes)},
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def parse_spec(data: dict[str, Any], source: str = "spec") -> Spec:
    """Check a spec read from TOML and list its points."""
    known = {"name", "collectives", "algorithms", "sizes", "time_limit", "generator"}
    for key in data:
        if key not in known:
            raise SpecError(f"{source}: unknown key '{key}'; use {', '.join(sorted(known))}.")
    collectives = tuple(_list(data.get("collectives", ["allgather"]),
                              f"{source}: 'collectives'"))
    for c in collectives:
        if c not in COLLECTIVES:
            raise SpecError(f"{source}: 'collectives' has '{c}'; use {', '.join(COLLECTIVES)}.")
    algorithms = tuple(_list(data.get("algorithms", ["bound", "forestcoll"]),
                             f"{source}: 'algorithms'"))
    for a in algorithms:
        if a not in ALL_ALGORITHMS:
            raise SpecError(f"{source}: 'algorithms' has '{a}'; use "
                            f"{', '.join(ALL_ALGORITHMS)}.")
    try:
        sizes = tuple(parse_size(str(s)) for s in _list(data.get("sizes", ["1G"]),
                                                         f"{source}: 'sizes'"))
    except CanopyError as exc:
        raise SpecError(f"{source}: 'sizes': {exc}") from None
    limit = data.get("time_limit", DEFAULT_TIME_LIMIT)
    if not isinstance(limit, int | float) or isinstance(limit, bool) \
            or not 0 < limit <= MAX_TIME_LIMIT:
        raise SpecError(f"{source}: 'time_limit' must be a number of seconds above 0 and "
                        f"at most {MAX_TIME_LIMIT:,} (a day).")
    generators = _list(data.get("generator"), f"{source}: '[[generator]]'")
    points: list[Point] = []
    for number, gen in enumerate(generators, 1):
        where = f"{source}: generator {number}"
        if not isinstance(gen, dict):
            raise SpecError(f"{where} must be a table with 'kind', 'params' and 'grid'.")
        kind = gen.get("kind")
        if not isinstance(kind, str) or kind not in GENERATORS:
            raise SpecError(f"{where}: kind '{kind}' is not a generator; use one of "
                            f"{', '.join(GENERATORS)}.")
        for key in gen:
            if key not in ("kind", "params", "grid"):
                raise SpecError(f"{where}: unknown key '{key}'; use kind, params and grid.")
        for key in ("params", "grid"):
            if not isinstance(gen.get(key, {}), dict):
                raise SpecError(f"{where}: '{key}' must be a table, such as "
                                "{ servers = 4, gpus = 8 }.")
        fixed = {_flag(k): v for k, v in gen.get("params", {}).items()}
        grid = {_flag(k): _list(v, f"{where}: grid '{k}'")
                for k, v in gen.get("grid", {}).items()}
        names = list(grid)
        count = math.prod(len(v) for v in grid.values()) * len(collectives)
        if len(points) + count > MAX_POINTS:
            raise SpecError(f"{where}: the grid has {count:,} points (with every "
                            f"collective); a sweep takes at most {MAX_POINTS:,} (split it "
                            "into several specs).")
        for values in itertools.product(*(grid[n] for n in names)):
            params = {**fixed, **dict(zip(names, values, strict=True))}
            try:
                keys = [point_key(kind, params, c, algorithms, sizes) for c in collectives]
            except CanopyError as exc:
                raise SpecError(f"{where}: {exc}") from None
            points += [Point(kind, params, c, k)
                       for c, k in zip(collectives, keys, strict=True)]
    return Spec(str(data.get("name", Path(source).stem)), collectives, algorithms, sizes,
                float(limit), tuple(points))


def load_spec(path: str | os.PathLike[str]) -> Spec:
    """Read and check a sweep spec file."""
    p = Path(path)
    try:
        if p.stat().st_size > MAX_FILE_BYTES:
            raise SpecError(f"{p} is larger than {MAX_FILE_BYTES >> 20} MiB, the most Canopy "
                            "reads.")
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError(f"{p}: no such file.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(unreadable(p, exc)) from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{p} is not valid TOML ({exc}).") from None
    except RecursionError:
        raise SpecError(f"{p} nests arrays or tables too deeply for Canopy to read.") from None
    return parse_spec(data, str(p))
