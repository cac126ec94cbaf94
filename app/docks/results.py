"""The Results dock: the optimum, k, y, the trees and the bottleneck cut of the last solve.

The numbers follow ForestColl (arXiv:2402.06787) §3.1 eq. (1) (1/x* = |S*∩V_c| / B+(S*)), §4.2
Prop. 3
(k and y) and §4.6 (algbw per collective: N·x*, halved for allreduce).
"""

from __future__ import annotations

import time
from fractions import Fraction

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
from canopy.app.solution import Bound, Solution
from canopy.engine.allreduce.lp_schedule import describe_choice
from canopy.engine.forestcoll.bottleneck_words import describe_cut as cut_in_words
from canopy.engine.forestcoll.fewest_trees import describe_k
from canopy.engine.model.collectives import COLLECTIVES, collective_algbw
from canopy.engine.model.limits import number_text
from canopy.engine.model.schedule import OptimumSummary
from canopy.engine.model.topology import Topology, format_gbps

TITLE = "Results"


def _value_label() -> QLabel:
    label = QLabel()
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    label.setWordWrap(True)
    return label


def tradeoff_table(curve: list[tuple[int, Fraction]], optimum: Fraction,
                   schedule_k: int, schedule_algbw: Fraction) -> str:
    """k → best algbw → % of the optimum for each k that beats every smaller k (and the
    schedule's own k), as a small HTML table."""
    frontier: list[tuple[int, Fraction]] = []
    for k, algbw in curve:
        if not frontier or algbw > frontier[-1][1]:
            frontier.append((k, algbw))
    if schedule_k > curve[-1][0] and schedule_algbw > frontier[-1][1]:
        frontier.append((schedule_k, schedule_algbw))
    rows = "".join(f"<tr><td align='right'>{number_text(k)}</td>"
                   f"<td align='right'>{format_gbps(algbw)}"
                   f"</td><td align='right'>{float(algbw / optimum) * 100:.2f} %</td></tr>"
                   for k, algbw in frontier)
    return ("<table cellspacing='0' cellpadding='2'><tr><th>k</th><th>algbw (GB/s)</th>"
            f"<th>of optimum</th></tr>{rows}</table>")


class ResultsDock(SolutionDock):
    """Numbers of the current solution, with toggles for the cut and load overlays."""

    def __init__(self, cut_action: QAction, load_action: QAction,
                 parent: QWidget | None = None):
        super().__init__(TITLE, "ResultsDock", parent)
        self.solution: Solution | None = None
        self.bound: Bound | None = None
        body = QVBoxLayout(self.body)
        body.setContentsMargins(0, 0, 0, 0)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.values: dict[str, QLabel] = {}
        self._unmeasured: list[QLabel] = []
        """Value labels given a new text whose size hints are not worked out yet."""
        for key, text in [("topology", "Topology"), ("collective", "Collective"),
                          ("n", "N"), ("allgather", "Optimal algbw"),
                          ("reduce-scatter", ""), ("allreduce", ""),
                          ("achieved", "This schedule"), ("inverse_x", "1/x*"),
                          ("k", "k"), ("y", "y"), ("tradeoff", "Fewer trees"),
                          ("trees", "Trees"), ("time", "Time")]:
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
        # Compute ▸ Solve All-to-All reports here too, above ForestColl's numbers
        self.alltoall = QGroupBox("All-to-all (max concurrent flow)")
        self.alltoall.setObjectName("AllToAllResults")
        self.values["alltoall"] = _value_label()
        QVBoxLayout(self.alltoall).addWidget(self.values["alltoall"])
        self.alltoall.hide()
        self.content_layout.insertWidget(1, self.alltoall)
        self.content_layout.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setWidget(self.content)
        self.setWidget(scroll)
        _bind(self.show_cut, cut_action)
        _bind(self.show_load, load_action)
        self.set_solution(None, False)

    def set_alltoall(self, html: str | None) -> None:
        """Show the last all-to-all result (rich text), or remove it with None."""
        self.values["alltoall"].setText(html or "")
        self.alltoall.setVisible(html is not None)
        self.set_stale(self.stale)

    def set_stale(self, stale: bool) -> None:
        super().set_stale(stale)
        if self.solution is None and not self.alltoall.isHidden():
            self.banner.hide()

    def set_solution(self, solution: Solution | None, stale: bool) -> None:
        self.fill(solution)
        self.set_stale(stale)

    def fill(self, solution: Solution | None) -> None:
        """The numbers of ``solution``, not shown yet: :meth:`set_stale` shows them (the
        first time, laying out the form takes as long as filling it: a turn each)."""
        self.solution = solution
        self.bound = None
        self._unmeasured = list(self.values.values()) if solution is not None else []
        if solution is not None:
            self._fill(solution)

    def measure_some(self, seconds: float) -> bool:
        """Work out the size hints of the labels :meth:`fill` gave a text, for about
        ``seconds`` of wall time (one label at least); True once all are. A label keeps
        its hints until its text changes, so laying out the form as it is shown then
        only places them: the wrapped and rich-text labels' measuring, most of the
        form's first layout, can be spread over turns of the event loop before it."""
        deadline = time.perf_counter() + seconds
        while self._unmeasured:         # one at least, so a turn always gets further
            label = self._unmeasured.pop()
            label.sizeHint()
            label.minimumSizeHint()
            if time.perf_counter() >= deadline:
                break
        return not self._unmeasured

    def set_bound(self, bound: Bound | None, stale: bool) -> None:
        """Show the optimum of a solve whose schedule is still being built;
        None when the schedule arrived or the solve ended."""
        if bound is None:
            if self.bound is not None:
                self.bound = None
                self.set_stale(stale)
            return
        self.solution = None
        self.bound = bound
        self._fill_optimum(bound.topology, bound.collective, bound.compute_nodes,
                           bound.optimum, fixed_k=None)
        v = self.values
        v["achieved"].setText("<i>building the schedule…</i>")
        k = bound.optimum.k
        v["k"].setText(f"{k} tree{'s' if k != 1 else ''} per node (Prop. 3); the schedule "
                       "may need fewer")
        v["k"].setToolTip("")
        v["tradeoff"].setText("—")
        v["trees"].setText("<i>building…</i>")
        v["time"].setText(f"{bound.seconds:.2f} s for the optimum (bound only)")
        v["time"].setToolTip("")
        self.set_stale(stale)

    def schedule_stopped(self, why: str) -> None:
        """The solve behind the bound shown ended without a schedule."""
        if self.bound is not None:
            self.values["achieved"].setText(f"<i>not built: {why.rstrip('.').lower()}</i>")
            self.values["trees"].setText("—")

    def has_results(self) -> bool:
        return self.solution is not None or self.bound is not None

    def text(self, key: str) -> str:
        return self.values[key].text()

    def _fill_optimum(self, topo: Topology, solved: str, n: int, opt: OptimumSummary,
                      fixed_k: int | None) -> None:
        """What the optimum alone gives: algbw per collective, 1/x*, y and the cut."""
        v = self.values
        switches, links = len(topo.switch_nodes()), len(topo.links)
        v["topology"].setText(f"{topo.name} ({switches} switch{'es' if switches != 1 else ''}"
                              f", {links} link{'s' if links != 1 else ''})")
        fixed = f", k fixed to {number_text(fixed_k)}" if fixed_k else ""
        v["collective"].setText(solved + fixed)
        v["n"].setText(f"{n} compute nodes")
        for collective in COLLECTIVES:
            algbw = format_gbps(collective_algbw(collective, n, opt.x))
            text = f"{algbw} GB/s  {collective}"
            v[collective].setText(f"<b>{text}</b>" if collective == solved else text)
        inverse_x = number_text(opt.inverse_x)
        v["inverse_x"].setText(f"{inverse_x}  (x* = {format_gbps(opt.x)} GB/s per node)")
        v["y"].setText(f"{number_text(opt.tree_bandwidth)} GB/s per tree (Prop. 3)")
        cut = list(opt.bottleneck_cut)
        compute = set(topo.compute_nodes())
        inside = sum(1 for name in cut if name in compute)
        v["cut"].setText(cut_in_words(topo, cut, opt.cut_bandwidth))
        v["cut"].setToolTip("S* = {" + ", ".join(cut) + "}")
        v["ratio"].setText(f"|S* ∩ V_c| / B+(S*) = {inside} / {format_gbps(opt.cut_bandwidth)}"
                           f" GB/s = {inverse_x} = 1/x*: {inside} compute nodes inside, "
                           f"{format_gbps(opt.cut_bandwidth)} GB/s leaving.")

    def _fill(self, solution: Solution) -> None:
        schedule = solution.schedule
        opt = schedule.optimum
        v = self.values
        self._fill_optimum(solution.topology, schedule.collective, len(schedule.compute_nodes),
                           opt, schedule.k if schedule.fixed_k else None)
        if schedule.split_budgets:
            rs_ag = format_gbps(collective_algbw("allreduce", len(schedule.compute_nodes),
                                                 opt.x))
            v["allreduce"].setText(f"<b>{format_gbps(schedule.algbw)} GB/s  allreduce (LP, "
                                   f"App. E; RS + AG {rs_ag})</b>")
        share = schedule.algbw / schedule.optimal_algbw
        verdict = "optimal" if share == 1 else f"{float(share) * 100:.2f} % of the optimum"
        lp = " (allreduce LP, App. E)" if schedule.split_budgets else ""
        k = number_text(schedule.k)
        v["achieved"].setText(f"{format_gbps(schedule.algbw)} GB/s with k = {k}: "
                              f"{verdict}, verified{lp}")
        v["achieved"].setToolTip(describe_choice(schedule))
        words = describe_k(schedule)       # the notation in the tooltip keeps the dock short
        v["k"].setText(words.split(" (k = ")[0])
        v["k"].setToolTip(words)
        v["y"].setText(f"{number_text(schedule.tree_bandwidth)} GB/s per tree (Prop. 3: "
                       f"{number_text(opt.tree_bandwidth)})")
        v["tradeoff"].setText(tradeoff_table(solution.curve, schedule.optimal_algbw,
                                             schedule.k, schedule.algbw))
        v["tradeoff"].setToolTip("Best algbw with k trees per node (§4.5, fixed-k search); "
                                 "solve with a tolerance to take fewer trees.")
        heights = [t.height for t in solution.trees]
        units = sum(t.tree.multiplicity for t in solution.trees)
        v["trees"].setText(f"{len(solution.trees)} distinct ({number_text(units)} with "
                           f"repeats), {min(heights)}–{max(heights)} links deep")
        v["time"].setText(f"{solution.seconds:.2f} s")
        v["time"].setToolTip("\n".join(f"{phase}: {seconds:.3f} s"
                                       for phase, seconds in schedule.timings.items()))


def _bind(box: QCheckBox, action: QAction) -> None:
    """Keep a check box and a checkable action in step, both ways."""
    box.setChecked(action.isChecked())
    box.toggled.connect(action.setChecked)
    action.toggled.connect(box.setChecked)
