"""The Jobs dock: the jobs sharing the fabric, and their slowdown by routing.

A job is made from the selected compute nodes (File order is rank order), given a
collective, an algorithm and a message size (nccl-tests style: 64M = 64 MiB), and drawn
with its own colour on the canvas. Edits go on the undo stack. After Compute ▸ Analyze
Contention the table shows each job's alone time and its slowdown under ECMP (mean and
p99 over seeds), source routing and vClos side by side (vClos (Han et al., arXiv:2308.05692) §3,
§6).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TypedDict, Unpack

from PySide6.QtCore import Signal
from PySide6.QtGui import QBrush
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDockWidget,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from canopy.app.canvas.fabric_marks import job_color
from canopy.app.canvas.scene import TopologyScene
from canopy.app.commands import DocumentCommand
from canopy.app.document import Document
from canopy.engine.fabric.analysis import FabricResult
from canopy.engine.fabric.vclos_rails import rail_lines
from canopy.engine.model.errors import CanopyError
from canopy.engine.model.sizes import parse_size, size_label
from canopy.engine.model.workloads import COLLECTIVES, Job

COLUMNS = ["Job", "GPUs", "Collective", "Size", "Alone µs", "ECMP", "p99", "Source",
           "vClos"]
TIPS = {"ECMP": "mean slowdown over the ECMP hash seeds", "p99": "99th percentile of the "
        "ECMP slowdown over seeds", "Source": "slowdown with each job routed as if alone",
        "vClos": "slowdown in the job's own vClos (or why vClos refused it)",
        "Alone µs": "the execution model's time of the collective with the fabric to itself"}


class JobChanges(TypedDict, total=False):
    """The fields of a :class:`Job` the dock edits."""

    collective: str
    algorithm: str
    size: int


class SetJobs(DocumentCommand):
    """Replace the document's job list (undoable)."""

    def __init__(self, doc: Document, jobs: list[Job], text: str):
        super().__init__(text)
        self.doc = doc
        self.old = list(doc.topology.jobs)
        self.new = list(jobs)

    def redo(self) -> None:
        self._set(self.new)

    def undo(self) -> None:
        self._set(self.old)

    def _set(self, jobs: list[Job]) -> None:
        self.doc.topology.jobs = list(jobs)
        self.doc.edited.emit()


def _fmt(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


class JobsDock(QDockWidget):
    """Table of jobs, the job editor, and the results of the last contention analysis."""

    analyze_requested = Signal()
    heat_toggled = Signal(bool)

    def __init__(self, doc: Document, scene: TopologyScene, parent: QWidget | None = None):
        super().__init__("Jobs", parent)
        self.setObjectName("JobsDock")
        self.doc = doc
        self.scene = scene
        self.results: dict[str, FabricResult] = {}
        body = QWidget()
        layout = QVBoxLayout(body)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        for col, name in enumerate(COLUMNS):
            header = self.table.horizontalHeaderItem(col)
            if header is not None and name in TIPS:
                header.setToolTip(TIPS[name])
        self.table.setMinimumHeight(90)
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QTableWidget.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        layout.addWidget(self.table)
        buttons = QHBoxLayout()
        self.add_button = QPushButton("New Job from Selection")
        self.add_button.setToolTip("A job of the selected compute nodes (rank order: file "
                                   "order)")
        self.remove_button = QPushButton("Remove Job")
        self.analyze_button = QPushButton("Analyze Contention")
        for b in (self.add_button, self.remove_button, self.analyze_button):
            buttons.addWidget(b)
        layout.addLayout(buttons)
        form = QFormLayout()
        self.collective = QComboBox()
        self.collective.addItems(list(COLLECTIVES))
        self.algorithm = QComboBox()
        self.size_field = QLineEdit()
        self.size_field.setToolTip("Message size in bytes; K, M, G are powers of two (64M)")
        self.seeds = QSpinBox()
        self.seeds.setRange(1, 10000)
        self.seeds.setValue(100)
        self.seeds.setToolTip("ECMP hash seeds: each is one hash configuration of the fabric")
        self.heat = QCheckBox("Show link load (ECMP, mean over seeds)")
        self.error = QLabel()
        self.error.setStyleSheet("color: #b3261e;")
        self.error.setWordWrap(True)
        form.addRow("Collective", self.collective)
        form.addRow("Algorithm", self.algorithm)
        form.addRow("Size", self.size_field)
        form.addRow("ECMP seeds", self.seeds)
        form.addRow(self.heat)
        layout.addLayout(form)
        layout.addWidget(self.error)
        scroll = QScrollArea()           # a small window still fits the dock area
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setWidget(body)
        self.setWidget(scroll)
        self.add_button.clicked.connect(self.add_from_selection)
        self.remove_button.clicked.connect(self.remove_selected)
        self.analyze_button.clicked.connect(self.analyze_requested)
        self.table.itemSelectionChanged.connect(self._show_selected)
        self.collective.activated.connect(lambda: self._edit_selected(
            collective=self.collective.currentText()))
        self.algorithm.activated.connect(lambda: self._edit_selected(
            algorithm=self.algorithm.currentText()))
        self.size_field.editingFinished.connect(self._commit_size)
        self.heat.toggled.connect(self.heat_toggled)
        for signal in (doc.edited, doc.reset):
            signal.connect(self.refresh)
        doc.node_renamed.connect(self._renamed)
        doc.reset.connect(self.clear_results)
        self.refresh()

    # ------------------------------------------------------------ editing

    def selected_index(self) -> int | None:
        rows = self.table.selectionModel().selectedRows()
        return rows[0].row() if rows else None

    def add_from_selection(self) -> Job | None:
        """A new job of the selected compute nodes (at least 2), rank order = file order."""
        chosen = set(self.scene.selected_node_ids())
        nodes = tuple(n for n in self.doc.topology.compute_nodes() if n in chosen)
        if len(nodes) < 2:
            self.error.setText("Select at least 2 compute nodes to make a job of them.")
            return None
        names = {j.name for j in self.doc.topology.jobs}
        index = len(self.doc.topology.jobs)
        while f"job{index}" in names:
            index += 1
        job = Job(f"job{index}", nodes)
        self.doc.undo_stack.push(SetJobs(self.doc, [*self.doc.topology.jobs, job],
                                         f"New job {job.name} ({len(nodes)} nodes)"))
        self.table.selectRow(len(self.doc.topology.jobs) - 1)
        self.error.setText("")
        return job

    def remove_selected(self) -> None:
        index = self.selected_index()
        if index is None:
            return
        jobs = list(self.doc.topology.jobs)
        gone = jobs.pop(index)
        self.doc.undo_stack.push(SetJobs(self.doc, jobs, f"Remove job {gone.name}"))

    def _edit_selected(self, **changes: Unpack[JobChanges]) -> None:
        index = self.selected_index()
        if index is None:
            return
        jobs = list(self.doc.topology.jobs)
        job = jobs[index]
        if "collective" in changes:
            alltoall = changes["collective"] == "alltoall"
            if alltoall != (job.algorithm == "direct"):
                changes["algorithm"] = "direct" if alltoall else "ring"
        if all(getattr(job, k) == v for k, v in changes.items()):
            return
        jobs[index] = replace(job, **changes)
        what = ", ".join(f"{k} {v}" for k, v in changes.items())
        self.doc.undo_stack.push(SetJobs(self.doc, jobs, f"Set {what} of {job.name}"))

    def _commit_size(self) -> None:
        if not self.size_field.isModified():
            return
        self.size_field.setModified(False)
        try:
            size = parse_size(self.size_field.text())
        except CanopyError as exc:
            self.error.setText(str(exc))
            return
        self.error.setText("")
        self._edit_selected(size=size)

    def _renamed(self, old: str, new: str) -> None:
        for job in self.doc.topology.jobs:
            if old in job.nodes:
                job.nodes = tuple(new if n == old else n for n in job.nodes)
        self.refresh()

    # ------------------------------------------------------------ showing

    def set_results(self, results: dict[str, FabricResult]) -> None:
        self.results = results
        self.refresh()

    def clear_results(self) -> None:
        self.results = {}
        self.refresh()

    def refresh(self) -> None:
        jobs = self.doc.topology.jobs
        keep = self.selected_index()
        self.table.blockSignals(True)
        self.table.setRowCount(len(jobs))
        found = {r: {j.name: j for j in res.jobs} for r, res in self.results.items()}
        for row, job in enumerate(jobs):
            ecmp = found.get("ecmp", {}).get(job.name)
            source = found.get("source", {}).get(job.name)
            vclos = found.get("vclos", {}).get(job.name)
            vclos_text = ("refused" if vclos is not None and vclos.refused
                          else _fmt(vclos.mean if vclos else None))
            cells = [job.name, str(len(job.nodes)), f"{job.collective}/{job.algorithm}",
                     size_label(job.size), _fmt(ecmp.alone_us if ecmp else None, 1),
                     _fmt(ecmp.mean if ecmp else None), _fmt(ecmp.p99 if ecmp else None),
                     _fmt(source.mean if source else None), vclos_text]
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if col == 0:
                    item.setForeground(QBrush(job_color(row)))
                if col == len(cells) - 1 and vclos is not None and vclos.refused:
                    item.setToolTip(vclos.refused)
                elif col == len(cells) - 1 and vclos is not None and rail_lines(
                        vclos.placement):
                    item.setToolTip("vClos rail by rail:\n"
                                    + "\n".join(rail_lines(vclos.placement)))
                self.table.setItem(row, col, item)
        self.table.resizeColumnsToContents()
        self.table.blockSignals(False)
        if keep is not None and keep < len(jobs):
            self.table.selectRow(keep)
        self.remove_button.setEnabled(bool(jobs))
        self.analyze_button.setEnabled(bool(jobs))
        self._show_selected()

    def _show_selected(self) -> None:
        index = self.selected_index()
        job = self.doc.topology.jobs[index] if index is not None and \
            index < len(self.doc.topology.jobs) else None
        for w in (self.collective, self.algorithm, self.size_field):
            w.setEnabled(job is not None)
        if job is None:
            return
        self.collective.setCurrentText(job.collective)
        self.algorithm.clear()
        self.algorithm.addItems(["direct"] if job.collective == "alltoall"
                                else ["ring", "forestcoll"])
        self.algorithm.setCurrentText(job.algorithm)
        if not self.size_field.hasFocus():
            self.size_field.setText(size_label(job.size))
            self.size_field.setModified(False)
