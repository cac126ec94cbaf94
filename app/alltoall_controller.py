"""Compute ▸ Solve All-to-All: the MCF optimum in the editor.

:class:`AllToAllController` owns the Solve All-to-All action (placed in the Compute menu by
:mod:`canopy.app.shell`), an "All-to-All" dock (tabbed with the Results dock) with algbw,
the certified bound, the cut bound and the method, shown in the Results dock too, and
File ▸ Export ▸ All-to-All MSCCL XML…. The solve runs as an engine job (a child process,
through the solve controller's one-job-at-a-time ComputeController) on a snapshot of the
topology. The canvas shows each link's
utilisation by the schedule (the same colour scale as Show Link Load) with the bottleneck
(saturated) links drawn wider; any edit clears the drawing, as the result no longer fits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QDockWidget, QFileDialog, QLabel, QMessageBox, QScrollArea

from canopy.app.canvas.overlays import CUT_LINK, utilisation_color
from canopy.engine.alltoall import AllToAllResult, solve_alltoall
from canopy.engine.alltoall.msccl import alltoall_xml
from canopy.engine.io.topology_json import atomic_write_bytes
from canopy.engine.model.errors import CanopyError
from canopy.engine.model.topology import format_gbps

if TYPE_CHECKING:
    from canopy.app.compute import ComputeController
    from canopy.app.main_window import MainWindow


def describe(result: AllToAllResult, heading: bool = True) -> str:
    """The dock's text (rich text); without the heading for the Results dock's box."""
    exact = "exact" if result.exact else f"gap {result.gap:.3%} to the bound"
    links = ", ".join(f"{u}→{v}" for u, v in result.bottleneck_links()[:12])
    more = len(result.bottleneck) - 12
    rows = [
        ("algbw", f"<b>{format_gbps(result.algbw)} GB/s</b> ({exact})"),
        ("per pair λ", f"{format_gbps(result.lam)} GB/s"),
        ("bound", f"{format_gbps(result.bound_algbw)} GB/s (length certificate)"),
        ("cut bound", f"{format_gbps(result.cut_bound_algbw)} GB/s"),
        ("method", "link LP (HiGHS)" if result.method == "lp" else "decomposition"),
        ("N", str(result.num_compute)),
        ("bottleneck", links + (f", … ({len(result.bottleneck)} links)" if more > 0 else "")),
    ]
    body = "".join(f"<tr><td><i>{k}</i>&nbsp;</td><td>{v}</td></tr>" for k, v in rows)
    head = "<p><b>All-to-all</b> (max concurrent flow)</p>" if heading else ""
    return (f"{head}<table>{body}</table><p>Time for a per-rank buffer of M bytes: "
            "M / algbw. On the canvas, links are coloured by utilisation (as Show Link "
            "Load) and the bottleneck links are drawn wider with a dark outline.</p>")


class AllToAllController(QObject):
    """The action, the dock and the canvas drawing of one window."""

    def __init__(self, window: MainWindow, controller: ComputeController):
        super().__init__(window)
        self.window = window
        self.controller = controller
        self.result: AllToAllResult | None = None
        self._styled: list[int] = []
        self.label = QLabel("Compute ▸ Solve All-to-All to see the all-to-all optimum.")
        self.label.setWordWrap(True)
        self.label.setAlignment(Qt.AlignmentFlag.AlignTop)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.label)
        self.dock = QDockWidget("All-to-All", window)
        self.dock.setObjectName("AllToAllDock")
        self.dock.setWidget(scroll)
        window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.dock)
        window.tabifyDockWidget(window.solver.results, self.dock)
        self.dock.hide()
        self.solve_action = QAction("Solve All-to-&All", window)
        self.solve_action.setStatusTip("Maximum concurrent flow: the all-to-all optimum, "
                                       "its bound and bottleneck links")
        self.solve_action.triggered.connect(self.solve)
        self.export_action = QAction("All-to-All MSCCL XML…", window)
        self.export_action.setEnabled(False)
        self.export_action.triggered.connect(self.export)
        self.actions = {"solve_alltoall": self.solve_action,
                        "export_alltoall_msccl": self.export_action}
        window.doc.edited.connect(self.clear)
        window.doc.reset.connect(self.clear)

    # ------------------------------------------------------------ solve

    def solve(self) -> bool:
        """Solve a snapshot as an engine job; False while another job runs."""
        controller = self.controller
        if controller.busy:
            return False
        self.clear()
        return controller.run("Solving all-to-all", self._done, solve_alltoall,
                              self.window.doc.snapshot())

    def wait(self, ms: int = 120000) -> bool:
        """Wait for a running solve (scripts and tests)."""
        return self.controller.wait(ms)

    def _done(self, result: AllToAllResult) -> None:
        self.result = result
        self.label.setText(describe(result))
        results = self.window.solver.results
        results.set_alltoall(describe(result, heading=False))
        results.show()
        results.raise_()
        self.export_action.setEnabled(True)
        self._draw()
        self.window.statusBar().showMessage(
            f"All-to-all: {format_gbps(result.algbw)} GB/s in {result.seconds:.2f} s.", 8000)

    # ------------------------------------------------------------ canvas

    def _draw(self) -> None:
        """Colour each link by its utilisation; saturated links wider."""
        assert self.result is not None
        problem = self.result.problem
        names = problem.names
        loads = self.result.schedule.arc_loads()
        util = {(names[int(u)], names[int(v)]): load / c for u, v, load, c in
                zip(problem.tails, problem.heads, loads, problem.capacity, strict=True)}
        tight = set(self.result.bottleneck_links())
        scene = self.window.scene
        for item in scene.link_items():
            hops = [(item.source, item.target)] + ([(item.target, item.source)]
                                                  if item.duplex else [])
            used = [util[h] for h in hops if h in util]
            if not used:
                continue
            width = max(3.0, item.width) + (2.0 if any(h in tight for h in hops) else 0.0)
            outline = CUT_LINK if any(h in tight for h in hops) else None
            item.set_highlight(utilisation_color(float(max(used))), width, (), outline)
            self._styled.append(item.key)

    def clear(self) -> None:
        scene = self.window.scene
        for key in self._styled:
            try:
                scene.link_item(key).set_highlight(None)
            except KeyError:
                continue
        self._styled = []
        self.window.solver.results.set_alltoall(None)
        if self.result is not None:
            self.result = None
            self.export_action.setEnabled(False)
            self.label.setText("The topology changed: solve all-to-all again.")

    # ------------------------------------------------------------ export

    def export(self) -> None:
        if self.result is None:
            return
        path, _ = QFileDialog.getSaveFileName(self.window, "Export All-to-All MSCCL XML",
                                              "alltoall.xml", "MSCCL XML (*.xml)")
        if path:
            self.write_xml(path)

    def write_xml(self, path: str) -> str | None:
        """Write the checked XML; returns the error sentence, or None."""
        assert self.result is not None
        try:
            xml = alltoall_xml(self.result.schedule)
            atomic_write_bytes(path, xml.data)
        except (CanopyError, OSError) as exc:
            QMessageBox.critical(self.window, "Export failed", str(exc))
            return str(exc)
        self.window.statusBar().showMessage(f"Wrote {path} ({xml.report.summary()}).", 8000)
        return None

