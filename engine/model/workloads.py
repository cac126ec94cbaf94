"""Jobs on a shared fabric: which compute nodes run which collective, at what size.

A job (vClos (Han et al., arXiv:2308.05692) §3-4: a DML task) is a set of compute nodes running one
collective
with one algorithm at one message size. Jobs live in the topology file as a top-level
``jobs`` list (kept on round trips) or in a separate jobs file::

    {"format": "canopy-jobs", "version": 1,
     "jobs": [{"name": "a", "nodes": ["n0.gpu0", ...], "collective": "allreduce",
               "algorithm": "ring", "size": 67108864}]}

``size`` is the message size in bytes (nccl-tests convention); ``collective`` is
``allgather``, ``reduce-scatter``, ``allreduce`` or ``alltoall``; ``algorithm`` is
``ring`` (NCCL rings), ``forestcoll`` (the verified optimal trees) or, for all-to-all,
``direct`` (every pair exchanges its share over its own connection).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from canopy.engine.model.errors import CanopyError, TopologyError, unreadable
from canopy.engine.model.limits import (
    MAX_DIGITS,
    MAX_FILE_BYTES,
    MAX_MESSAGE_BYTES,
    number_text,
)
from canopy.engine.model.sizes import parse_size
from canopy.engine.model.topology import Topology

FORMAT = "canopy-jobs"
VERSION = 1
COLLECTIVES = ("allgather", "reduce-scatter", "allreduce", "alltoall")
ALGORITHMS = ("ring", "forestcoll", "direct")
DEFAULT_SIZE = 64 << 20
_KEYS = {"name", "nodes", "collective", "algorithm", "size"}


@dataclass
class Job:
    """One collective job: ``nodes`` in rank order, ``size`` in bytes."""

    name: str
    nodes: tuple[str, ...]
    collective: str = "allreduce"
    algorithm: str = "ring"
    size: int = DEFAULT_SIZE
    extra: dict[str, Any] = field(default_factory=dict)


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        if not value.is_finite() or value.adjusted() > MAX_DIGITS:
            return float(value)        # inf: refused where a number is needed
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _size(value: Any, where: str) -> int:
    """Bytes, as a whole number or as the command line spells sizes ("256M", "1G")."""
    value = _plain(value)
    if isinstance(value, str):
        try:
            return parse_size(value)
        except CanopyError as exc:
            raise TopologyError(f"{where}: {exc}") from None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise TopologyError(f"{where} has size {str(value)[:40]!r}; give a positive whole "
                            "number of bytes or a size such as 256M.")
    if value > MAX_MESSAGE_BYTES:
        raise TopologyError(f"{where} has size {number_text(value)} bytes; Canopy simulates "
                            "messages of up to 1 TiB (docs/limits.md).")
    return value


def job_from_dict(raw: Any, index: int, source: str) -> Job:
    """Parse one job object; every problem is one sentence naming ``source`` and the job."""
    if not isinstance(raw, dict):
        raise TopologyError(f"{source}: job {index} is not a JSON object.")
    name = raw.get("name", f"job{index}")
    if not isinstance(name, str) or not name:
        raise TopologyError(f"{source}: job {index} has no string 'name'.")
    where = f"{source}: job '{name}'"
    nodes = raw.get("nodes")
    if not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes):
        raise TopologyError(f"{where} has no 'nodes' list of node ids.")
    if not nodes:
        raise TopologyError(f"{where} is empty: give it at least 2 compute nodes.")
    collective = raw.get("collective", "allreduce")
    if collective not in COLLECTIVES:
        raise TopologyError(f"{where} has collective {collective!r}; use one of "
                            f"{', '.join(COLLECTIVES)}.")
    default = "direct" if collective == "alltoall" else "ring"
    algorithm = raw.get("algorithm", default)
    if algorithm not in ALGORITHMS or (algorithm == "direct") != (collective == "alltoall"):
        allowed = "direct" if collective == "alltoall" else "ring or forestcoll"
        raise TopologyError(f"{where} has algorithm {algorithm!r}; {collective} runs "
                            f"{allowed}.")
    size = _size(raw.get("size", DEFAULT_SIZE), where)
    return Job(name, tuple(nodes), collective, algorithm, size,
               {k: _plain(v) for k, v in raw.items() if k not in _KEYS})


def jobs_from_list(raw: Any, source: str) -> list[Job]:
    """Parse a ``jobs`` list (names must be unique)."""
    if not isinstance(raw, list):
        raise TopologyError(f"{source}: 'jobs' must be a list.")
    jobs = [job_from_dict(r, i, source) for i, r in enumerate(raw)]
    seen: set[str] = set()
    for job in jobs:
        if job.name in seen:
            raise TopologyError(f"{source}: job name '{job.name}' is used more than once.")
        seen.add(job.name)
    return jobs


def job_to_dict(job: Job) -> dict[str, Any]:
    out: dict[str, Any] = {"name": job.name, "nodes": list(job.nodes),
                           "collective": job.collective, "algorithm": job.algorithm,
                           "size": job.size}
    out.update(job.extra)
    return out


def check_jobs(topology: Topology, jobs: list[Job], source: str = "jobs",
               allow_overlap: bool = True) -> None:
    """Raise TopologyError unless every job names >= 2 distinct live compute nodes of
    ``topology`` (and, without ``allow_overlap``, no node is in two jobs)."""
    kinds = {n.id: n.kind for n in topology.nodes}
    owner: dict[str, str] = {}
    for job in jobs:
        where = f"{source}: job '{job.name}'"
        for node in job.nodes:
            if node not in kinds:
                raise TopologyError(f"{where} names node '{node}', which is not in the "
                                    "topology.")
            if kinds[node] != "compute":
                raise TopologyError(f"{where} names '{node}', which is a switch, not a "
                                    "compute node.")
        if len(set(job.nodes)) != len(job.nodes):
            twice = next(n for n in job.nodes if job.nodes.count(n) > 1)
            raise TopologyError(f"{where} names node '{twice}' twice.")
        if len(job.nodes) < 2:
            raise TopologyError(f"{where} has {len(job.nodes)} node; a collective needs "
                                "at least 2.")
        for node in job.nodes:
            if not allow_overlap and node in owner:
                raise TopologyError(f"{where} shares node '{node}' with job "
                                    f"'{owner[node]}'; jobs may not overlap here.")
            owner.setdefault(node, job.name)


def _integer(text: str) -> int | Decimal:
    """JSON integers up to the digit limit; longer ones stay Decimal (refused as sizes)."""
    return int(text) if len(text) <= MAX_DIGITS else Decimal(text)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in JSON numbers")


def load_jobs(path: str | os.PathLike[str]) -> list[Job]:
    """Read a canopy-jobs file (or a bare JSON list of jobs)."""
    p = Path(path)
    try:
        if p.stat().st_size > MAX_FILE_BYTES:
            raise TopologyError(f"{p} is larger than {MAX_FILE_BYTES >> 20} MiB, the most "
                                "Canopy reads.")
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TopologyError(f"{p}: no such file.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TopologyError(unreadable(p, exc)) from None
    try:
        data = json.loads(text, parse_float=Decimal, parse_int=_integer,
                          parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise TopologyError(f"{p} is not valid JSON (line {exc.lineno}, column "
                            f"{exc.colno}: {exc.msg}).") from None
    except RecursionError:
        raise TopologyError(f"{p} nests arrays or objects too deeply for Canopy to read "
                            "(a jobs file needs three levels).") from None
    except ValueError as exc:
        raise TopologyError(f"{p}: {exc}.") from None
    try:
        if isinstance(data, dict):
            if data.get("format") != FORMAT:
                raise TopologyError(f"{p}: format is {data.get('format')!r}, expected "
                                    f"'{FORMAT}'.")
            if data.get("version") != VERSION:
                raise TopologyError(f"{p}: version {_plain(data.get('version'))!r} is not "
                                    f"supported (this Canopy reads version {VERSION}).")
            data = data.get("jobs")
        return jobs_from_list(data, str(p))
    except RecursionError:       # the parser took it; converting or quoting it did not
        raise TopologyError(f"{p} nests arrays or objects too deeply for Canopy to read "
                            "(a jobs file needs three levels).") from None
