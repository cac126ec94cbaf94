"""File ▸ Export ▸ MSCCL++ Plan (Ctrl+E): the editor's default schedule export.

The schedule runs as ``canopy solve --mscclpp`` writes it
(:func:`canopy.engine.deploy.mscclpp_export.export_mscclpp`: the runtime choice's plans per
message-size range, each checked by a symbolic run, and the launcher beside them), in the
background as an engine job; the run dialog then shows what was written and the
``torchrun`` command with MSCCL++'s NCCL interposition library. Failures, the runtime's
limits included, come as a dialog with one sentence.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtWidgets import QInputDialog

from canopy.engine.deploy.mscclpp_export import export_mscclpp
from canopy.engine.model.progress import Progress
from canopy.engine.model.schedule import Schedule
from canopy.engine.model.topology import Topology
from canopy.engine.mscclpp.launcher import run_text
from canopy.engine.network.servers import compute_nodes_by_server

if TYPE_CHECKING:
    from canopy.app.export import Exporter

MODES = ["in place (output buffer holds the input)", "out of place"]


def export_plan_job(topology: Topology, schedule: Schedule, inplace: bool, path: Path,
                    progress: Progress) -> tuple[str, str]:
    """The export as an engine job (a child process): a line per plan written, and the
    launcher's path."""
    progress("MSCCL++ plan", 0.0)
    done = export_mscclpp(topology, schedule, path, inplace,
                          progress=lambda _, fraction: progress("MSCCL++ plan", fraction))
    return done.summary(), done.launcher


def export_mscclpp_plan(exporter: Exporter, path: Path | None = None,
                        inplace: bool | None = None) -> bool:
    """Ask for the buffers and the file, then export in the background."""
    from canopy.app.export import RunCommandDialog

    schedule = exporter._schedule()
    if schedule is None:
        return False
    assert exporter.controller.solution is not None
    topology = exporter.controller.solution.topology
    if inplace is None:
        mode, ok = QInputDialog.getItem(exporter.window, "Export MSCCL++ Plan", "Buffers:",
                                        MODES, 0, False)
        if not ok:
            return False
        inplace = mode == MODES[0]
    suffix = "inplace" if inplace else "outofplace"
    path = path or exporter._ask_path("Export MSCCL++ Plan",
                                      f"{exporter._stem()}.{schedule.collective}.{suffix}.json",
                                      "MSCCL++ execution plan (*.json);;All files (*)")
    if path is None:
        return False
    target = path

    def done(result: tuple[str, str]) -> None:
        summary, launcher = result
        exporter.window.statusBar().showMessage(
            f"Exported the MSCCL++ plan to {target}: {summary.replace(chr(10), '; ')}", 10000)
        command = run_text(launcher, len(schedule.compute_nodes),
                           len(compute_nodes_by_server(topology)[0]))
        exporter.run_dialog = RunCommandDialog(
            target, f"{summary}\nlauncher {Path(launcher).name}", command, exporter.window,
            how="Run it with MSCCL++ on the cluster (set MSCCLPP_BUILD to its build folder):")
        exporter.run_dialog.show()

    return exporter.controller.run("Exporting the MSCCL++ plan", done, export_plan_job,
                                   topology, schedule, inplace, target)
