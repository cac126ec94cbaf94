"""The Results dock: the optimum, k, y, the trees and the bottleneck cut of the last solve.

The numbers follow forestcoll.txt §3.1 eq. (1) (1/x* = |S*∩V_c| / B+(S*)), §4.2 Prop. 3
(k and y) and §4.6 (algbw per collective: N·x*, halved for allreduce).
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QCheckBox,
    QFormLayout,
    QGroupBox,
    QLabel,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from canopy.app.docks.banner import SolutionDock
from canopy.app.solution import Solution
from canopy.engine.cut_words import describe_cut as cut_in_words
from canopy.engine.optimality import COLLECTIVES, collective_algbw
from canopy.engine.topology import format_gbps

TITLE = "Results"


def _value_label() -> QLabel:
    label = QLabel()
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    label.setWordWrap(True)
    return label


class ResultsDock(SolutionDock):
    """Numbers of the current solution, with toggles for the cut and load overlays."""

    def __init__(self, cut_action: QAction, load_action: QAction,
                 parent: QWidget | None = None):
        super().__init__(TITLE, "ResultsDock", parent)
        self.solution: Solution | None = None
        body = QVBoxLayout(self.body)
        body.setContentsMargins(0, 0, 0, 0)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.values: dict[str, QLabel] = {}
        for key, text in [("topology", "Topology"), ("collective", "Collective"),
                          ("n", "N"), ("allgather", "Optimal algbw"),
                          ("reduce-scatter", ""), ("allreduce", ""),
                          ("achieved", "This schedule"), ("inverse_x", "1/x*"),
                          ("k", "k"), ("y", "y"), ("trees", "Trees"), ("time", "Time")]:
            self.values[key] = _value_label()
            form.addRow(text, self.values[key])
        body.addLayout(form)

        cut_box = QGroupBox("Bottleneck cut S*")
        cut_layout = QVBoxLayout(cut_box)
        self.values["cut"] = _value_label()
        self.values["ratio"] = _value_label()
        cut_layout.addWidget(self.values["cut"])
        cut_layout.addWidget(self.values["ratio"])
        self.show_cut = QCheckBox("Show the cut on the canvas")
        cut_layout.addWidget(self.show_cut)
        body.addWidget(cut_box)
        self.show_load = QCheckBox("Colour links by load (utilisation)")
        body.addWidget(self.show_load)
        body.addStretch(1)
        self.content_layout.addWidget(self.body)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setWidget(self.content)
        self.setWidget(scroll)
        _bind(self.show_cut, cut_action)
        _bind(self.show_load, load_action)
        self.set_solution(None, False)

    def set_solution(self, solution: Solution | None, stale: bool) -> None:
        self.solution = solution
        if solution is not None:
            self._fill(solution)
        self.set_stale(stale)


    def text(self, key: str) -> str:
        return self.values[key].text()

    def _fill(self, solution: Solution) -> None:
        schedule = solution.schedule
        opt = schedule.optimum
        topo = solution.topology
        n = len(schedule.compute_nodes)
        v = self.values
        switches, links = len(topo.switch_nodes()), len(topo.links)
        v["topology"].setText(f"{topo.name} ({switches} switch{'es' if switches != 1 else ''}"
                              f", {links} link{'s' if links != 1 else ''})")
        v["collective"].setText(schedule.collective
                                + (f", k fixed to {schedule.k}" if schedule.fixed_k else ""))
        v["n"].setText(f"{n} compute nodes")
        for collective in COLLECTIVES:
            algbw = format_gbps(collective_algbw(collective, n, opt.x))
            text = f"{algbw} GB/s  {collective}"
            v[collective].setText(f"<b>{text}</b>" if collective == schedule.collective
                                  else text)
        if schedule.fixed_k:
            share = float(schedule.algbw / schedule.optimal_algbw) * 100
            v["achieved"].setText(f"{format_gbps(schedule.algbw)} GB/s with k = {schedule.k} "
                                  f"({share:.1f} % of the optimum), verified")
        else:
            v["achieved"].setText(f"{format_gbps(schedule.algbw)} GB/s: optimal, verified")
        v["inverse_x"].setText(f"{opt.inverse_x}  (x* = {format_gbps(opt.x)} GB/s per node)")
        k_text = f"{opt.k} trees per node (optimal)"
        y_text = f"{opt.tree_bandwidth} GB/s per tree"
        if schedule.fixed_k:
            k_text = f"{schedule.k} trees per node (fixed); optimal k = {opt.k}"
            y_text = f"{schedule.tree_bandwidth} GB/s per tree (optimal y = {opt.tree_bandwidth})"
        v["k"].setText(k_text)
        v["y"].setText(y_text)
        heights = [t.height for t in solution.trees]
        units = sum(t.tree.multiplicity for t in solution.trees)
        v["trees"].setText(f"{len(solution.trees)} distinct ({units} unit trees), "
                           f"height {min(heights)}–{max(heights)}")
        v["time"].setText(f"{solution.seconds:.2f} s")
        v["time"].setToolTip("\n".join(f"{phase}: {seconds:.3f} s"
                                       for phase, seconds in schedule.timings.items()))
        cut = list(opt.bottleneck_cut)
        compute = set(schedule.compute_nodes)
        inside = sum(1 for name in cut if name in compute)
        v["cut"].setText(cut_in_words(topo, cut, opt.cut_bandwidth))
        v["cut"].setToolTip("S* = {" + ", ".join(cut) + "}")
        v["ratio"].setText(f"|S* ∩ V_c| / B+(S*) = {inside} / {format_gbps(opt.cut_bandwidth)}"
                           f" GB/s = {opt.inverse_x} = 1/x*: {inside} compute nodes inside, "
                           f"{format_gbps(opt.cut_bandwidth)} GB/s leaving.")


def _bind(box: QCheckBox, action: QAction) -> None:
    """Keep a check box and a checkable action in step, both ways."""
    box.setChecked(action.isChecked())
    box.toggled.connect(action.setChecked)
    action.toggled.connect(box.setChecked)
