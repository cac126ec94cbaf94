"""Solving and inspecting in the editor: the solve actions, the result docks, the canvas
overlays, the progress bar and File ▸ Export's schedule formats, for one window.

The window creates one :class:`SolveController` and places its actions through
:mod:`canopy.app.shell`; everything else about results lives here and in the modules it
wires together (:mod:`canopy.app.compute`, :mod:`canopy.app.canvas.overlays`,
:mod:`canopy.app.docks.results`, :mod:`canopy.app.docks.trees`,
:mod:`canopy.app.docks.plots`, :mod:`canopy.app.export`).
"""

from __future__ import annotations

import functools
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QCoreApplication, QEvent, QObject, Qt, QTimer
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QMenu,
    QMessageBox,
    QProgressBar,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from canopy.app.canvas.legend import CutLegend, LoadLegend
from canopy.app.canvas.overlays import Overlays
from canopy.app.compute import ComputeController
from canopy.app.docks.plots import PlotsDock
from canopy.app.docks.results import ResultsDock
from canopy.app.docks.trees import TreesDock
from canopy.app.export import Exporter
from canopy.app.job_runner import PHASES
from canopy.app.solution import Bound, Hop, Solution, hop_orders
from canopy.engine.forestcoll.bottleneck_words import describe_cut
from canopy.engine.model.collectives import COLLECTIVES
from canopy.engine.model.limits import number_text
from canopy.engine.model.topology import format_gbps

if TYPE_CHECKING:
    from canopy.app.main_window import MainWindow
    from canopy.engine.model.schedule import Schedule

HOP_CACHE = 256
"""Trees whose hop lists are kept (selecting a tree again is then only recolouring)."""
CLOSE_WAIT_MS = 10000
RIGHT_WIDTH = 380
PLOTS_HEIGHT = 230
MEASURE_SLICE_S = 0.002
"""Wall-clock seconds per turn of measuring the Results dock's labels ahead of its form's
first layout."""
DOCKS_HOLD = "result docks"
"""What holds the canvas's painting while the result docks first take their room."""
AFTER_STEP = QEvent.Type(QEvent.registerEventType())
"""Posted at low priority after each showing step: Qt posts a window's paint request at
that priority and sends posted events of one priority in order, so this arrives after
the layout and paint the step asked for, and the next step's timer is started only then."""
SOLVE_ACTIONS = {"allgather": ("solve_allgather", "Solve &Allgather", "F5"),
                 "reduce-scatter": ("solve_reduce_scatter", "Solve &Reduce-Scatter",
                                    "Shift+F5"),
                 "allreduce": ("solve_allreduce", "Solve All&reduce", "Ctrl+F5")}



def trees_text(schedule: Schedule) -> str:
    """How many distinct trees the schedule runs, as the Trees dock lists them: an
    allreduce whose reduce phase has trees of its own counts both phases'."""
    count = len(schedule.trees)
    if not schedule.reduce_trees:
        return f"{count} trees"
    reduce = len(schedule.reduce_trees)
    return f"{count + reduce} trees ({count} broadcast, {reduce} reduce)"

class FixedKDialog(QDialog):
    """Collective and k for Compute ▸ Solve with Fixed k…"""

    def __init__(self, collective: str, k: int, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Solve with fixed k")
        layout = QVBoxLayout(self)
        form = QFormLayout()
        self.collective = QComboBox()
        self.collective.addItems(COLLECTIVES)
        self.collective.setCurrentText(collective)
        form.addRow("Collective", self.collective)
        self.k = QSpinBox()
        self.k.setRange(1, 100000)
        self.k.setValue(k)
        self.k.setToolTip("Trees per compute node; fewer trees mean fewer, larger chunks "
                          "(ForestColl (arXiv:2402.06787) §4.5).")
        form.addRow("k (trees per node)", self.k)
        layout.addLayout(form)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)

    @staticmethod
    def ask(parent: QWidget, collective: str, k: int) -> tuple[str, int] | None:
        dialog = FixedKDialog(collective, k, parent)
        if dialog.exec() != QDialog.DialogCode.Accepted:
            return None
        return dialog.collective.currentText(), dialog.k.value()


class SolveController(QObject):
    """Owns the compute controller, the overlays and the result docks of one window."""

    def __init__(self, window: MainWindow):
        super().__init__(window)
        self.window = window
        self.controller = ComputeController(window.doc, self)
        self.overlays = Overlays(window.scene)
        self.legend = LoadLegend(window.view.viewport())
        self.legend.hide()
        self.cut_legend = CutLegend(window.view.viewport())
        self.cut_legend.hide()
        window.view.add_overlay(self.legend)
        window.view.add_overlay(self.cut_legend)
        self.errors: list[str] | None = None
        """When a list, failures are collected here instead of shown (scripted runs)."""
        self._hops: OrderedDict[int, dict[Hop, list[int]]] = OrderedDict()
        self._sized_docks = False
        self._first_pending: Solution | None = None
        self._steps: deque[Callable[[], object]] = deque()
        """What is left to do to show a new solution, one step per event-loop turn."""
        self._step_timer = QTimer(self)
        self._step_timer.setSingleShot(True)
        self._step_timer.setInterval(0)
        self._step_timer.timeout.connect(self._next_step)
        self._after_steps: list[Callable[[], None]] = []
        """Run once the steps have run out (the executed times' job starts then)."""
        self._create_actions()
        self.results = ResultsDock(self.actions["show_cut"], self.actions["show_load"], window)
        self.trees = TreesDock(window)
        self.plots = PlotsDock(window)
        self.exporter = Exporter(window, self.controller)
        self._place_docks()
        self._make_solve_button()
        self._build_progress()
        c = self.controller
        c.when_shown = self._when_shown
        c.busy_changed.connect(self._busy_changed)
        c.progress.connect(self._progress)
        c.started.connect(lambda what: window.statusBar().showMessage(what + "…"))
        c.solution_changed.connect(self._solution_changed)
        c.executed_changed.connect(self._executed_changed)
        c.bound_changed.connect(self._bound_changed)
        c.stale_changed.connect(self._stale_changed)
        c.failed.connect(self._failed)
        c.cancelled.connect(lambda: self._stopped("Cancelled."))
        self.trees.tree_selected.connect(self._tree_selected)
        self.actions["show_cut"].toggled.connect(self.overlays.set_cut_visible)
        self.actions["show_cut"].toggled.connect(self._update_legend)
        self.actions["show_load"].toggled.connect(self._show_load)
        window.doc.reset.connect(self._after_reset)
        window.installEventFilter(self)

    def _after_reset(self) -> None:
        """A new or reloaded topology: the canvas items were all replaced. Results that
        still fit it (the same file opened again) are drawn on the new items; results of
        another topology are dropped, since nothing was edited."""
        solution = self.controller.solution
        if solution is not None and solution.signature != self.window.doc.topology.fingerprint():
            self.controller.forget()
            return
        self.controller.check_now()
        if self.controller.fresh:
            self.window.scene.when_built(self.overlays.redraw)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """Closing the window stops background work first (its thread must not outlive
        the window)."""
        if watched is self.window and event.type() == QEvent.Type.Close \
                and self.controller.busy:
            self.controller.cancel()
            self.controller.wait(CLOSE_WAIT_MS)
        return False

    # ------------------------------------------------------------ building

    def _create_actions(self) -> None:
        w = self.window
        self.actions: dict[str, QAction] = {}

        def action(name: str, text: str, slot: Callable[[], object] | None = None,
                   shortcut: str = "", tip: str = "", checkable: bool = False) -> QAction:
            act = QAction(text, w)
            if shortcut:
                act.setShortcut(QKeySequence(shortcut))
            act.setStatusTip(tip)
            act.setToolTip(tip or text.replace("&", ""))
            act.setCheckable(checkable)
            if slot is not None:
                act.triggered.connect(lambda _=False, s=slot: s())
            self.actions[name] = act
            return act

        for collective, (name, text, key) in SOLVE_ACTIONS.items():
            action(name, text, functools.partial(self.controller.solve, collective), key,
                   f"Compute the optimal {collective} schedule in the background ({key})")
        self.actions["solve_allgather"].setIconText("Solve")
        action("solve_fixed_k", "Solve with Fixed &k…", self.solve_fixed_k, "",
               "Best schedule with a chosen number of trees per node (§4.5)")
        action("cancel", "&Cancel", self.controller.cancel, "Ctrl+.",
               "Stop the computation that is running")
        self.actions["cancel"].setEnabled(False)
        self.actions["cancel"].setIconText("Cancel")
        action("show_cut", "Show Bottleneck &Cut", None, "Ctrl+Shift+B",
               "Shade the bottleneck cut S* and emphasise the links leaving it",
               checkable=True)
        self.actions["show_cut"].setChecked(True)
        self.actions["show_cut"].setIconText("Cut")
        action("show_load", "Show Link &Load", None, "Ctrl+Shift+L",
               "Colour every link by its utilisation (schedule load / bandwidth)",
               checkable=True)
        self.actions["show_load"].setIconText("Load")
        action("next_tree", "&Next Tree", lambda: self.trees.step(1), "]",
               "Select the next tree in the Trees dock (])")
        action("previous_tree", "&Previous Tree", lambda: self.trees.step(-1), "[",
               "Select the previous tree in the Trees dock ([)")

    def _place_docks(self) -> None:
        w = self.window
        w.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.results)
        w.tabifyDockWidget(w.properties, self.results)
        # the trees share the right column with the undo history, so the canvas keeps
        # its width after a solve
        w.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.trees)
        w.tabifyDockWidget(w.history, self.trees)
        w.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.plots)
        w.tabifyDockWidget(w.validation, self.plots)
        w.properties.raise_()
        w.validation.raise_()
        self.trees.hide()

    def _make_solve_button(self) -> None:
        """The tool bar's Solve button: allgather, with the other solves in its menu."""
        solve = QToolButton()
        solve.setDefaultAction(self.actions["solve_allgather"])
        solve.setPopupMode(QToolButton.ToolButtonPopupMode.MenuButtonPopup)
        menu = QMenu("Solve", solve)
        menu.addActions([self.actions[SOLVE_ACTIONS[c][0]] for c in COLLECTIVES])
        menu.addAction(self.actions["solve_fixed_k"])
        solve.setMenu(menu)
        self.solve_button = solve

    def _build_progress(self) -> None:
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setMaximumWidth(320)
        self.progress.setMinimumWidth(240)
        self.progress.setTextVisible(True)
        self.cancel_button = QToolButton()
        self.cancel_button.setDefaultAction(self.actions["cancel"])
        bar = self.window.statusBar()
        self.solved_label = QLabel()
        bar.addPermanentWidget(self.solved_label)
        bar.addPermanentWidget(self.progress)
        bar.addPermanentWidget(self.cancel_button)
        self.progress.hide()
        self.cancel_button.hide()

    # ------------------------------------------------------------ commands

    def solve_fixed_k(self) -> bool:
        solution = self.controller.solution
        collective = solution.collective if solution else "allgather"
        k = solution.schedule.k if solution else 1
        answer = FixedKDialog.ask(self.window, collective, k)
        if answer is None:
            return False
        return self.controller.solve(answer[0], answer[1])

    def solve_and_wait(self, collective: str = "allgather", k: int | None = None,
                       timeout_ms: int = 600000) -> str | None:
        """Solve, keeping the event loop running until it ends (scripts, screenshots);
        returns the error sentence, or None on success."""
        self.errors = []
        try:
            if not self.controller.solve(collective, k):
                return "another computation is running."
            if not self.controller.wait(timeout_ms):
                self.controller.cancel()
                self.controller.wait()
                return "the computation did not finish in time."
            self.settle()
            return self.errors[0] if self.errors else None
        finally:
            self.errors = None

    # ------------------------------------------------------------ controller signals

    def _busy_changed(self, busy: bool) -> None:
        for name, _text, _key in SOLVE_ACTIONS.values():
            self.actions[name].setEnabled(not busy)
        self.actions["solve_fixed_k"].setEnabled(not busy)
        self.actions["cancel"].setEnabled(busy)
        self.progress.setVisible(busy)
        self.cancel_button.setVisible(busy)
        if busy:
            self.progress.setValue(0)
            self.progress.setFormat("starting…")
        self.exporter.update()

    def _progress(self, phase: str, fraction: float) -> None:
        step = f" ({PHASES.index(phase) + 1}/{len(PHASES)})" if phase in PHASES else ""
        self.progress.setFormat(f"{phase}{step}: %p%")
        self.progress.setValue(int(max(0.0, min(1.0, fraction)) * 1000))

    def _stopped(self, text: str) -> None:
        """A solve ended without a schedule: a bound already shown stays, marked so."""
        self.window.statusBar().showMessage(text, 5000)
        if self.controller.bound is not None:
            self.results.schedule_stopped(text)
            for dock in (self.trees, self.plots):
                dock.set_pending(False)
            self._show_solved(self.controller.stale)

    def _failed(self, what: str, message: str) -> None:
        self._stopped(f"{what} failed.")
        if self.errors is not None:
            self.errors.append(message)
        else:
            QMessageBox.critical(self.window, f"{what} failed", message)

    def _solution_changed(self, solution: Solution | None) -> None:
        """Show a new solution, one step per turn of the event loop.

        Filling the docks, recolouring the canvas, showing the docks (a relayout of the
        window), the plots and the first tree each cost a paint of their own; done at once
        they held the event loop up for a quarter of a second (bench/gui_responsiveness.py),
        so each step runs in its own turn and the window paints in between.
        """
        self._hops.clear()
        self._steps.clear()
        self._release_holds()  # (a step left undone now)
        if solution is None:
            self._forgotten()
            return
        schedule = solution.schedule
        self.window.statusBar().showMessage(
            f"Solved {schedule.collective}: {trees_text(schedule)}, "
            f"k = {number_text(schedule.k)}, in {solution.seconds:.2f} s.", 8000)
        self._show_solved(self.controller.stale)
        self.exporter.update()
        self._first_pending = solution
        for dock in (self.trees, self.plots):
            dock.pending = False
        self.plots.hold()   # each plot paints in the turn after its own step
        # the tree list at once (a model reset: cheap), so a tree can be chosen right away
        self.trees.set_solution(solution, self.controller.stale)
        # the canvas's overlays, labels and first tree before the plots: the first time,
        # the canvas is held unpainted from the docks' sizing to its first tree, and
        # painted once, at its new size, with all of them
        self._steps.extend([
            lambda: self.results.fill(solution),
            self._measure_results,
            lambda: self.results.set_stale(self.controller.stale),
            self._show_docks,
            self._draw_overlays,
            self._fit_canvas,
            lambda: self._select_first(solution),
            # the first tree's diagram is drawn and painted before the canvas is released:
            # a paint of the window paints every widget waiting for one, so the two
            # would share a turn
            self.trees.diagram.draw_pending,
            lambda: self.window.view.hold_painting(DOCKS_HOLD, False),
            lambda: self._plot(solution)])
        self._step_timer.start()

    def _executed_changed(self, solution: Solution) -> None:
        """The executed times followed the solution: the plots again, with them."""
        self._plot(solution)
        self._step_timer.start()

    def _next_step(self) -> None:
        """The next step, unless the canvas is still placing its labels over turns of
        its own: then after them (two slices of work in one turn of the event loop would
        hold it up as long as both).

        The step after it is timed from its paint (:data:`AFTER_STEP`), not from its
        end: the event loop sends posted events (the step's layout and paint) before it
        fires timers, and then fires every timer due in the order they fell due, so a
        timer falling due during the paint (another window's work, the user's) came
        after a next step started at the end of this one: two steps and a paint with
        no turn for anything else between them."""
        if self._steps and not self.window.scene.placing_labels():
            self._steps.popleft()()
            if self._steps:
                QCoreApplication.postEvent(self, QEvent(AFTER_STEP),
                                           Qt.EventPriority.LowEventPriority.value)
                return
        if self._steps:
            self._step_timer.start()
        else:
            self._steps_done()

    def customEvent(self, event: QEvent) -> None:
        if event.type() == AFTER_STEP and self._steps:
            self._step_timer.start()

    def _when_shown(self, start: Callable[[], None]) -> None:
        """``start`` once the steps showing the solution that comes with it have run (the
        controller hands it over just before the solution)."""
        self._after_steps.append(start)
        self._step_timer.start()

    def _steps_done(self) -> None:
        after, self._after_steps = self._after_steps, []
        for then in after:
            then()

    def _measure_results(self) -> None:
        """Measure the Results dock's new labels a slice a turn, until all are."""
        if not self.results.measure_some(MEASURE_SLICE_S):
            self._steps.appendleft(self._measure_results)

    def _draw_overlays(self) -> None:
        """The cut (and load) on the canvas, with the tree chosen meanwhile if any; the
        legend that names the cut follows in a turn of its own (at 1024 GPUs indexing the
        hops, styling the cut and describing it is too much for one turn)."""
        self.overlays.set_solution(self.controller.solution)
        position = self.trees.current_position()
        if position >= 0:
            self.overlays.show_tree(self.tree_hops(position))
        self._steps.appendleft(self._update_legend)

    def _show_docks(self) -> None:
        """Bring the result docks forward, one a turn (each is laid out and painted in
        the turn after it is shown); the first time, give them their room, holding the
        canvas unpainted until :meth:`_fit_canvas` and the first tree (each turn would
        repaint it at a size it is about to leave)."""
        then: list[Callable[[], object]] = [self.results.raise_, self.plots.raise_]
        if not self._sized_docks:
            self._sized_docks = True
            self.window.view.hold_painting(DOCKS_HOLD)
            # the docks on the right are painted once sized, each in a turn of its own
            for dock in (self.results, self.trees):
                dock.setUpdatesEnabled(False)
            then += [self._size_docks, lambda: self.results.setUpdatesEnabled(True),
                     lambda: self.trees.setUpdatesEnabled(True)]
        self._steps.extendleft(reversed(then))
        self.trees.show()
        self.trees.raise_()

    def _release_holds(self) -> None:
        self.window.view.hold_painting(DOCKS_HOLD, False)
        for dock in (self.results, self.trees):
            dock.setUpdatesEnabled(True)

    def _fit_canvas(self) -> None:
        """After the docks first took room from the canvas: show the whole drawing again
        (its labels placed over the next turns)."""
        if DOCKS_HOLD in self.window.view.holds():
            self.window.view.zoom_to_fit(labels_in_turns=True)

    def _size_docks(self) -> None:
        self.window.resizeDocks([self.results], [RIGHT_WIDTH], Qt.Orientation.Horizontal)
        self.window.resizeDocks([self.results, self.trees], [4, 6], Qt.Orientation.Vertical)
        self.window.resizeDocks([self.plots], [PLOTS_HEIGHT], Qt.Orientation.Vertical)

    def _plot(self, solution: Solution) -> None:
        """The plots, now unless their dock is hidden in a shown window (then when the
        dock is next shown)."""
        if self.window.isVisible() and not self.plots.isVisible():
            self.plots.set_solution_later(solution, self.controller.stale)
        else:  # each plot in a turn of its own, before the first tree is selected
            self._steps.extendleft(reversed(self.plots.steps(solution, self.controller.stale)))

    def _bound_changed(self, bound: Bound | None) -> None:
        """The optimum of a large solve arrived before its schedule: show it at once
        (a bound that goes away is replaced by its solution, or dropped)."""
        if bound is None and self.controller.solution is not None:
            return  # the solution's own steps replace it
        self.results.set_bound(bound, self.controller.stale)
        for dock in (self.trees, self.plots):
            dock.set_pending(bound is not None)
        if bound is None:
            self._show_solved(self.controller.stale)
            return
        # bringing the dock forward repaints the whole window: a turn of its own
        self._steps.append(self.results.raise_)
        self._step_timer.start()
        self._show_solved(self.controller.stale)
        self.window.statusBar().showMessage(
            f"Optimum found in {bound.seconds:.2f} s; building the schedule…", 8000)

    def _show_solved(self, stale: bool) -> None:
        """The lasting summary in the status bar (temporary messages come and go)."""
        solution, bound = self.controller.solution, self.controller.bound
        if solution is None and bound is not None:
            building = "building the schedule…" if self.controller.busy else "no schedule"
            self.solved_label.setText(
                f"{bound.collective} bound {format_gbps(bound.optimum_algbw)} GB/s · "
                f"k = {bound.optimum.k} · {building}" + (" (stale)" if stale else ""))
            self.solved_label.setToolTip("The optimum of the last solve; its schedule "
                                         + ("is being built." if self.controller.busy
                                            else "was not built."))
            return
        if solution is None:
            self.solved_label.clear()
            return
        schedule = solution.schedule
        self.solved_label.setText(
            f"{schedule.collective} {format_gbps(schedule.algbw)} GB/s · "
            f"k = {number_text(schedule.k)} · "
            f"{trees_text(schedule)}" + (" (stale)" if stale else ""))
        self.solved_label.setToolTip(
            f"Last solve: {schedule.collective}, {trees_text(schedule)}, "
            f"k = {number_text(schedule.k)}, {solution.seconds:.2f} s")

    def _forgotten(self) -> None:
        """Empty every result dock and take the overlays off (results were dropped)."""
        self._first_pending = None
        self._steps.clear()
        self._steps_done()
        self.overlays.set_solution(None)
        for dock in (self.results, self.trees, self.plots):
            dock.set_solution(None, False)
            dock.set_pending(False)
        self.trees.hide()
        self.exporter.update()
        self._update_legend()
        self.solved_label.clear()

    def _select_first(self, solution: Solution) -> None:
        """Select the first tree of a new solution, unless a tree was chosen since."""
        if solution is self._first_pending:
            self._first_pending = None
            self.trees.select_position(0)

    def settle(self) -> None:
        """Finish showing a new solution now (scripts and screenshots)."""
        self._step_timer.stop()
        while self._steps:
            self._steps.popleft()()
        self._steps_done()
        solution = self.controller.solution
        if solution is not None and self.plots.solution is not solution:
            self.plots.set_solution(solution, self.controller.stale)
        self.overlays.finish_restyling()
        self.window.scene.finish_labels()
        self.window.view.paint_whole()

    def _stale_changed(self, stale: bool) -> None:
        self.overlays.set_active(not stale)
        for dock in (self.results, self.trees, self.plots):
            dock.set_stale(stale)
        self._show_solved(stale)
        self.exporter.update()
        self._update_legend()
        if stale:
            self.window.statusBar().showMessage(
                "Results are stale: the topology changed since the solve.", 8000)

    def _tree_selected(self, position: int) -> None:
        self._first_pending = None
        self.overlays.show_tree(self.tree_hops(position) if position >= 0 else None)

    def tree_hops(self, position: int) -> dict[Hop, list[int]]:
        """The hops of tree ``position`` (cached for the most recent trees)."""
        hops = self._hops.get(position)
        if hops is None:
            assert self.controller.solution is not None
            hops = hop_orders(self.controller.solution.trees[position])
            self._hops[position] = hops
            if len(self._hops) > HOP_CACHE:
                self._hops.popitem(last=False)
        else:
            self._hops.move_to_end(position)
        return hops

    def _show_load(self, on: bool) -> None:
        self.overlays.set_load_visible(on)
        self._update_legend()

    def _update_legend(self) -> None:
        fresh = self.controller.fresh
        self.legend.setVisible(self.actions["show_load"].isChecked() and fresh)
        solution = self.controller.solution
        if solution is not None and fresh and self.actions["show_cut"].isChecked():
            opt = solution.schedule.optimum
            _nodes, side = self.overlays.shaded_side()
            self.cut_legend.set_cut(
                describe_cut(solution.topology, opt.bottleneck_cut, opt.cut_bandwidth), side)
            self.cut_legend.show()
        else:
            self.cut_legend.hide()
