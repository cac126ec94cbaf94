"""Plan files: Canopy's lowered MSCCL programs as checked MSCCL++ plans, written with a
launcher beside them.

:func:`checked_plan` writes a program's plan (:func:`canopy.engine.mscclpp.writer.algo_plan`)
and proves it before anyone runs it: read back with the parser's rules and run
symbolically (:mod:`canopy.engine.mscclpp.executor`). The pipeline unit (bytes of a chunk
per iteration, :func:`unit_for`) is chosen so that at a reference size (1 GiB, or half the
boundary of a smaller-message plan) the plan runs the loop iterations ``canopy check-xml``
picks for the same program, which are the pipeline depth ``canopy compare`` picks
(:func:`canopy.engine.msccl.timing.fastest_xml`). :func:`write_plans` writes the plans and
the launcher (:mod:`canopy.engine.mscclpp.launcher`) atomically.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from canopy.engine.io.topology_json import atomic_write_bytes
from canopy.engine.model.errors import CanopyError, ScheduleError
from canopy.engine.model.sizes import size_label
from canopy.engine.model.topology import Topology
from canopy.engine.msccl.model import XmlAlgo
from canopy.engine.mscclpp.executor import ExecutionReport, execute
from canopy.engine.mscclpp.reader import UNBOUNDED, parse_plan
from canopy.engine.mscclpp.writer import DEFAULT_UNIT, algo_plan

REFERENCE_SIZE = 1 << 30


@dataclass(frozen=True)
class PlanFile:
    """One plan: its path, JSON bytes, the sizes it runs (``max_bytes`` excluded; None: no
    upper end) and its symbolic run."""

    path: str
    data: bytes
    report: ExecutionReport
    min_bytes: int = 0
    max_bytes: int | None = None
    unit_size: int = DEFAULT_UNIT

    @property
    def size_step(self) -> int:
        """The runtime runs the plan at whole-buffer sizes (the output for allgather, the
        input otherwise) that are multiples of this: 16 bytes times the most chunks of a
        buffer (``checkMessageSize``; the launcher leaves other sizes to NCCL)."""
        gpu = json.loads(self.data)["gpus"][0]
        return 16 * max(gpu["input_chunks"], gpu["output_chunks"], 1)

    def sizes_text(self) -> str:
        step = self.size_step
        whole = "" if step & (step - 1) == 0 else \
            f"; multiples of {step} B only, other sizes go to NCCL"
        if self.max_bytes is None:
            return ("every size" if self.min_bytes == 0 else
                    f"{size_label(self.min_bytes)} and above") + whole
        return f"below {size_label(self.max_bytes)}{whole}"


def rank_servers(topology: Topology) -> list[int]:
    """Per rank (compute node in file order), its server: the node's ``group``; GPUs
    without one share a server."""
    ids: dict[str | None, int] = {}
    return [ids.setdefault(topology.node(v).group, len(ids)) for v in topology.compute_nodes()]


def unit_for(algo: XmlAlgo, topology: Topology | None, size: int) -> int:
    """Bytes of a chunk per pipeline iteration: the chunk at ``size`` over the iterations
    :func:`~canopy.engine.msccl.timing.fastest_xml` picks, a multiple of 16."""
    if topology is None:
        return DEFAULT_UNIT
    from canopy.engine.msccl.timing import fastest_xml

    iterations = fastest_xml(algo, topology, size).iterations
    chunk = Fraction(size, algo.nchunksperloop)
    unit = -(-chunk // iterations)
    return max(16, int(-(-unit // 16) * 16))


COMPACT_ABOVE = 4 << 20      # bytes of an indented plan past which it is written compact


def plan_bytes(plan: dict[str, Any]) -> bytes:
    """The plan as JSON: indented for people to read, or without whitespace where that
    would pass COMPACT_ABOVE bytes (a 64-GPU all-to-all plan is mostly indentation:
    compact, it stays within what ``canopy check-plan`` reads; the runtime's JSON parser
    takes either)."""
    text = json.dumps(plan, indent=1)
    if len(text) > COMPACT_ABOVE:
        text = json.dumps(plan, separators=(",", ":"))
    return (text + "\n").encode()


def checked_plan(algo: XmlAlgo, servers: list[int], path: str, unit: int, name: str | None,
                 min_bytes: int = 0, max_bytes: int | None = None,
                 lanes: dict[tuple[int, int, int], int] | None = None,
                 lockstep: bool = False) -> PlanFile:
    """The plan of ``algo`` (with ``lanes`` and ``lockstep``, see
    :func:`~canopy.engine.mscclpp.writer.algo_plan`) after the parser's rules and a
    symbolic run."""
    plan = algo_plan(algo, servers, unit, name, min_bytes,
                     UNBOUNDED if max_bytes is None else max_bytes - 1, lanes=lanes,
                     lockstep=lockstep)
    data = plan_bytes(plan)
    try:
        report = execute(parse_plan(json.loads(data), path))
    except CanopyError as exc:
        raise ScheduleError(f"the MSCCL++ plan failed Canopy's check, which is a bug in "
                            f"Canopy ({exc})") from None
    return PlanFile(path, data, report, min_bytes, max_bytes, unit)


def plan_stem(path: str) -> str:
    return path[:-5] if path.lower().endswith(".json") else path


@dataclass(frozen=True)
class MscclppExport:
    """What :func:`export_mscclpp` wrote: the plans (largest messages last) and the
    launcher beside them."""

    files: list[PlanFile]
    launcher: str

    def summary(self) -> str:
        return "\n".join(f"{Path(f.path).name} ({f.report.summary()}, {f.sizes_text()})"
                         for f in self.files)


def write_plans(files: list[PlanFile], path: str | os.PathLike[str], collective: str,
                inplace: bool) -> MscclppExport:
    """Write ``files`` and the launcher beside ``path`` (the largest messages' plan)."""
    from canopy.engine.mscclpp.launcher import launcher_path, launcher_script

    script = launcher_path(path)
    try:
        for f in files:
            atomic_write_bytes(f.path, f.data)
        atomic_write_bytes(script, launcher_script([f.path for f in files], collective,
                                                   inplace))
    except OSError as exc:
        raise CanopyError(f"{path} cannot be written ({exc.strerror or exc}).") from None
    return MscclppExport(files, script)
