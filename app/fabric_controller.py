"""Shared fabrics in the editor: the Jobs dock, Compute ▸ Analyze Contention, the Failed
toggle in Properties, and the canvas marks (job colours, failures, link-load heat map).

:func:`install` wires them into one :class:`~canopy.app.main_window.MainWindow` after
the :class:`~canopy.app.solve_controller.SolveController` has built the Compute menu. The analysis
runs :func:`canopy.engine.fabric.analysis.analyze` for ECMP, source routing and vClos
in the background on a snapshot, with the solve controller's progress bar and Cancel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QCheckBox, QFormLayout
from shiboken6 import isValid

from canopy.app.canvas.fabric_marks import FabricMarks
from canopy.app.commands import edit_links, edit_nodes
from canopy.app.docks.jobs import JobsDock
from canopy.engine.fabric.analysis import ROUTINGS, FabricResult, analyze
from canopy.engine.model.progress import Progress
from canopy.engine.model.topology import Topology

if TYPE_CHECKING:
    from canopy.app.compute import ComputeController
    from canopy.app.main_window import MainWindow


def analyze_all(topology: Topology, seeds: int, progress: Progress | None = None
                ) -> dict[str, FabricResult]:
    """ECMP, source routing and vClos on ``topology`` (run in the engine's child
    process); progress runs over the three analyses. Plans are dropped from the results
    (the editor shows numbers only, and they are sent back through a pipe)."""
    results = {}
    for i, routing in enumerate(ROUTINGS):
        def step(phase: str, fraction: float, i: int = i, routing: str = routing) -> None:
            if progress is not None:
                half = 0.5 if phase == "seeds" else 0.0
                progress(f"contention ({routing})", (i + half + fraction / 2) / len(ROUTINGS))
        result = analyze(topology, routing=routing, seeds=seeds, progress=step,
                         where=topology.name)
        for job in result.jobs:
            job.canonical = None
        results[routing] = result
    return results


class FabricController(QObject):
    """The Jobs dock, the Analyze Contention action, the Failed toggle and the marks."""

    def __init__(self, window: MainWindow, controller: ComputeController):
        super().__init__(window)
        self.window = window
        self.controller = controller
        self.dock = JobsDock(window.doc, window.scene, window)
        window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.dock)
        window.tabifyDockWidget(window.properties, self.dock)
        window.properties.raise_()
        self.marks = FabricMarks(window.scene, window.doc)
        action = QAction("Analyze &Contention", window)
        action.setShortcut("Ctrl+Shift+J")
        tip = ("Slowdown of the jobs sharing this fabric under ECMP, source routing and "
               "vClos")
        action.setStatusTip(tip)
        action.setToolTip(tip)
        action.triggered.connect(self.analyze)
        self.controller.busy_changed.connect(lambda busy: action.setEnabled(not busy))
        self.actions = {"analyze_contention": action}
        self.dock.analyze_requested.connect(self.analyze)
        self.dock.heat_toggled.connect(self._show_heat)
        window.doc.reset.connect(lambda: self._show_heat(False))
        self._add_failed_toggle()

    # ------------------------------------------------------------ analysis

    def analyze(self) -> bool:
        """Start the analysis of a snapshot; False if busy or there are no jobs."""
        doc = self.window.doc
        if not doc.topology.jobs:
            self.window.statusBar().showMessage("Make a job first: select compute nodes and "
                                                "press New Job from Selection.", 5000)
            self.dock.show()
            self.dock.raise_()
            return False
        topology = doc.snapshot()
        seeds = self.dock.seeds.value()
        return self.controller.run("Analyzing contention", self._done, analyze_all,
                                   topology, seeds)

    def _done(self, results: dict[str, FabricResult]) -> None:
        self.dock.set_results(results)
        self.dock.show()
        self.dock.raise_()
        if self.dock.heat.isChecked():
            self._show_heat(True)
        ecmp = results["ecmp"]
        worst = max((j.p99 or 1.0 for j in ecmp.jobs), default=1.0)
        self.window.statusBar().showMessage(
            f"Contention: {len(ecmp.jobs)} jobs, worst ECMP p99 slowdown {worst:.2f} over "
            f"{ecmp.seeds} seeds.", 8000)

    def _show_heat(self, on: bool) -> None:
        result = self.dock.results.get("ecmp")
        if not on or result is None:
            if self.marks.heat_on:
                self.marks.set_heat(None)
                self.window.solver.overlays.refresh()   # the solution's colours return
            return
        self.marks.set_heat({(k.source, k.target): sum(k.loads) / len(k.loads)
                             for k in result.links})

    # ------------------------------------------------------------ failures

    def _add_failed_toggle(self) -> None:
        props = self.window.properties
        self.node_failed = QCheckBox("Failed (carries nothing)")
        self.node_failed.setToolTip("A failed switch stays in the file but carries no "
                                    "traffic: the optimum, schedules and routes avoid it")
        self.link_failed = QCheckBox("Failed (carries nothing)")
        self.link_failed.setToolTip("A failed link stays in the file but carries no traffic")
        node_form = props.node_box.layout()
        link_form = props.link_box.layout()
        assert isinstance(node_form, QFormLayout) and isinstance(link_form, QFormLayout)
        node_form.addRow(self.node_failed)
        link_form.addRow(self.link_failed)
        self.node_failed.clicked.connect(self._commit_node_failed)
        self.link_failed.clicked.connect(self._commit_link_failed)
        for signal in (self.window.scene.selectionChanged, self.window.doc.edited):
            signal.connect(self._refresh_failed)
        self._refresh_failed()

    def _selection(self) -> tuple[list[str], list[int]]:
        doc, scene = self.window.doc, self.window.scene
        # the scene may still hold items of a document just replaced (Open): skip them
        return ([n for n in scene.selected_node_ids() if doc.has_node(n)],
                [k for k in scene.selected_link_keys() if doc.has_link(k)])

    def _refresh_failed(self) -> None:
        if not isValid(self.window.scene):       # the window is closing
            return
        doc = self.window.doc
        nodes, links = self._selection()
        switches = [n for n in nodes if not doc.node(n).is_compute]
        self.node_failed.setEnabled(bool(switches) and len(switches) == len(nodes))
        _show_state(self.node_failed, [doc.node(n).failed for n in nodes])
        _show_state(self.link_failed, [doc.link(k).failed for k in links])

    def _commit_node_failed(self, on: bool) -> None:
        nodes, _ = self._selection()
        edit_nodes(self.window.doc, nodes, "failed", on)

    def _commit_link_failed(self, on: bool) -> None:
        _, links = self._selection()
        edit_links(self.window.doc, links, "failed", on)


def _show_state(box: QCheckBox, values: list[bool]) -> None:
    box.blockSignals(True)
    box.setTristate(False)
    if values and all(values):
        box.setCheckState(Qt.CheckState.Checked)
    elif any(values):
        box.setCheckState(Qt.CheckState.PartiallyChecked)
    else:
        box.setCheckState(Qt.CheckState.Unchecked)
    box.blockSignals(False)

