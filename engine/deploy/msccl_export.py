"""The MSCCL export, one sequence for the command line and the editor.

1. **What runs.** The schedule's own collective with the automatic layout runs what
   :func:`canopy.engine.deploy.runtime_choice.runtime_schedule` chooses (the connections
   ``canopy compare`` times, possibly another schedule, and an XML per message-size range
   where the fastest differs by size); any other collective or layout is written as asked.
2. **Within the runtime's limits**, or one sentence naming the largest fixed k that fits
   (:func:`canopy.engine.msccl.writer.explain_limits`).
3. **Self-check.** Every XML runs through Canopy's symbolic MSCCL executor before anything
   is written; a failure there is a bug in Canopy and is reported as one.
4. **Files.** The XMLs and, where the runtime reads one, the config naming each XML's size
   range (:mod:`canopy.engine.deploy.msccl_ranges`), each written atomically.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from canopy.engine.deploy.msccl_ranges import (
    MscclFile,
    config_path,
    config_xml,
    msccl_files,
    wants_config,
)
from canopy.engine.deploy.run_commands import RCCL_NOTE, algo_dir_note
from canopy.engine.deploy.runtime_choice import runtime_schedule
from canopy.engine.io.topology_json import atomic_write_bytes
from canopy.engine.model.errors import CanopyError, ScheduleError
from canopy.engine.model.progress import Progress
from canopy.engine.model.schedule import Schedule
from canopy.engine.model.topology import Topology
from canopy.engine.msccl.executor import MscclXmlError, simulate_bytes
from canopy.engine.msccl.options import MscclOptions
from canopy.engine.msccl.threadblocks import MscclLimitError
from canopy.engine.msccl.writer import explain_limits, msccl_xml


@dataclass(frozen=True)
class MscclExport:
    """What an export wrote: the XMLs (the one for the largest messages last), the
    executor's summary of each, the config where one was written, why the XML runs another
    schedule or layout than asked (``note``) and RCCL's folder warning (``stray``)."""

    files: list[MscclFile]
    summaries: list[str]
    config: str | None
    note: str | None
    stray: str | None
    runtime_note: str | None = None       # which runtimes load no such file any more
    k: int = 0                 # the trees per GPU the XML runs (the schedule's unless noted)

    def lines(self) -> list[str]:
        """One line per file written, then the note and the warning, for people."""
        if len(self.files) == 1:
            out = list(self.summaries)
        else:
            out = [f"{Path(f.path).name} for {f.sizes_text()}: {text}"
                   for f, text in zip(self.files, self.summaries, strict=True)]
        if self.config is not None:
            out.append(f"{Path(self.config).name} names each XML's size range")
        if self.note is not None:
            out.append(f"the XML {self.note}")
        if self.runtime_note is not None:
            out.append(self.runtime_note)
        if self.stray is not None:
            out.append(self.stray)
        return out


def export_msccl(topology: Topology, schedule: Schedule, path: str | os.PathLike[str],
                 options: MscclOptions, collective: str | None = None,
                 progress: Progress | None = None, fixed_k_hint: str = "canopy solve --k {k}",
                 solver: Callable[[Topology, str, int], Schedule] | None = None
                 ) -> MscclExport:
    """Choose, check and write the MSCCL files of ``schedule`` run as ``collective``
    (default: its own). ``fixed_k_hint`` says how a user asks for a fixed k (``{k}`` is
    filled in) and ``solver`` solves again for one, when the limits are exceeded. Raises
    :class:`MscclLimitError` or :class:`CanopyError` with one sentence."""
    collective = collective or schedule.collective
    report = progress or (lambda phase, fraction: None)
    report("MSCCL layout", 0.0)
    note = None
    k = schedule.k
    try:
        if collective == schedule.collective and options.layout == "auto":
            choice = runtime_schedule(topology, schedule, options.limits,
                                      lambda _, fraction: report("MSCCL layout", fraction / 2))
            files, note = msccl_files(path, choice, options), choice.note
            k = choice.schedule.k
        else:
            files = [MscclFile(str(path), msccl_xml(schedule, collective, options))]
    except MscclLimitError as exc:
        raise explain_limits(exc, topology, schedule, collective, options, solver,
                             fixed_k_hint) from None
    report("MSCCL self-check", 0.5)
    summaries = []
    for f in files:
        try:
            summaries.append(simulate_bytes(f.data, limits=options.limits,
                                            source=Path(f.path).name).summary())
        except MscclXmlError as exc:
            raise ScheduleError(f"the exported MSCCL XML failed Canopy's simulator, which is "
                                f"a bug in Canopy ({exc})") from None
    config = config_path(path) if wants_config(files, options.runtime) else None
    try:
        for f in files:
            atomic_write_bytes(f.path, f.data)
        if config is not None:
            atomic_write_bytes(config, config_xml(files, options.protocol))
    except OSError as exc:
        raise CanopyError(f"{path} cannot be written ({exc.strerror or exc}).") from None
    stray = algo_dir_note([f.path for f in files]) if options.runtime == "rccl" else None
    runtime_note = RCCL_NOTE + "." if options.runtime == "rccl" else None
    return MscclExport(files, summaries, config, note, stray, runtime_note, k)
