"""The Plots dock and the data behind it: algbw for fixed k = 1…10 against the optimum,
and collective time from 1 KiB to 4 GiB (bandwidth bound plus latency) beside the executed
time of the schedule and, once compared, of the baselines."""

import copy
import math
from fractions import Fraction

import numpy as np
from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication

from canopy.app.commands import edit_links
from canopy.app.solution import compute_solution
from canopy.engine.comparison.plot_series import (
    EXECUTED_SIZES,
    collective_time_us,
    executed_times,
    fixed_k_curve,
    message_sizes,
)
from canopy.engine.comparison.table import compare
from canopy.engine.io.topology_json import load_sample


def curves_of(plot):
    return list(plot.getPlotItem().listDataItems())


def test_solution_matches_the_engine_curves():
    topo = load_sample("dgx-a100-2x8")
    for link in topo.links:
        link.latency = Fraction(1, 2) if "ib" in (link.source + link.target) else Fraction(1, 10)
    seen = []
    solution = compute_solution(topo, "allreduce", progress=lambda p, f: seen.append(p))
    assert "fixed-k curve" in seen and "link load" in seen and "executed time" in seen
    assert solution.curve == fixed_k_curve(topo, 10, "allreduce")
    assert solution.sizes == message_sizes() and solution.sizes[0] == 1024
    assert solution.sizes[-1] == 4 * 1024**3
    times = solution.times_us()
    for i in (0, 7, len(times) - 1):
        assert times[i] == collective_time_us(solution.schedule, topo, solution.sizes[i])
    assert solution.latency_us > 0
    plain = compute_solution(load_sample("dgx-a100-2x8"))
    assert plain.latency_us is None
    assert plain.times_us() == plain.bandwidth_us
    assert plain.executed_us == executed_times(plain.schedule, plain.topology)
    assert [s for s, _ in plain.executed_us] == list(EXECUTED_SIZES)
    # Executed never beats the bandwidth bound, and comes within 5 % of it at 1 GiB.
    bound = dict(zip(plain.sizes, plain.bandwidth_us, strict=True))
    for size, t in plain.executed_us:
        assert t >= bound[size]
    assert plain.executed_us[-1][1] <= bound[1 << 30] / Fraction(95, 100)


def test_plots_show_the_curves(window, qtbot):
    window.named_actions["solve_allgather"].trigger()
    qtbot.waitUntil(lambda: not window.solver.controller.busy, timeout=30000)
    window.solver.settle()
    solution = window.solver.controller.solution
    plots = window.solver.plots
    assert plots.windowTitle() == "Plots" and plots.body.isEnabled()
    k_curve, optimum, star = curves_of(plots.k_plot)
    assert list(k_curve.xData) == list(range(1, 11))
    # k = 13 lies past the curve (k = 1 .. 10): the axis reaches it, and its star is drawn
    assert star.name() == "this schedule (k = 13)" and list(star.xData) == [13]
    assert plots.k_plot.getPlotItem().viewRange()[0][1] >= 13.5
    assert list(k_curve.yData) == [float(v) for _, v in solution.curve]
    assert k_curve.name() == "best allgather algbw, k fixed"
    assert optimum.name() == "optimum 346.67 GB/s (k = 13)"
    assert [round(y, 3) for y in optimum.yData] == [346.667, 346.667]
    time_curve, executed = curves_of(plots.time_plot)  # no latencies in this sample
    assert list(time_curve.xData) == solution.sizes
    assert time_curve.yData[-1] == float(solution.bandwidth_us[-1])
    assert executed.name() == "executed (simulated)"
    assert list(executed.yData) == [float(t) for _, t in solution.executed_us]
    # A comparison of the same collective adds the baselines' executed times.
    comp = compare(solution.topology, "allgather", sizes=(1 << 20, 1 << 24),
                   algorithms=("ring",))
    plots.set_comparison(comp, solution.topology.fingerprint())
    names = [item.name() for item in curves_of(plots.time_plot)]
    assert names[-2].startswith("ForestColl as exported, k = ")
    assert names[-1] == "ring (executed)"
    ring = curves_of(plots.time_plot)[-1]
    assert list(ring.yData) == [float(comp.row("ring").times_us[s]) for s in (1 << 20, 1 << 24)]
    # A comparison of another network (edited since) is not drawn beside this solution.
    other = copy.deepcopy(solution.topology)
    other.links[0].bandwidth *= 2
    plots.set_comparison(comp, other.fingerprint())
    names = [item.name() for item in curves_of(plots.time_plot)]
    assert names == ["bandwidth bound (346.67 GB/s)", "executed (simulated)"]
    plots.set_comparison(None)
    assert plots.time_plot.getPlotItem().ctrl.logXCheck.isChecked()
    ticks = plots.time_plot.getAxis("bottom")._tickLevels[0]
    assert (math.log10(1024), "1 KiB") in ticks and (math.log10(4 * 1024**3), "4 GiB") in ticks


def test_fixed_k_and_latency_add_curves(window, qtbot, monkeypatch):
    from canopy.app.solve_controller import FixedKDialog
    keys = window.doc.link_keys()
    edit_links(window.doc, keys, "latency", Fraction(2))
    monkeypatch.setattr(FixedKDialog, "ask", staticmethod(lambda *a: ("allgather", 2)))
    window.named_actions["solve_fixed_k"].trigger()
    qtbot.waitUntil(lambda: not window.solver.controller.busy, timeout=30000)
    window.solver.settle()
    plots = window.solver.plots
    names = [item.name() for item in curves_of(plots.k_plot)]
    assert names[0] == "best allgather algbw, k fixed" and names[1].startswith("optimum ")
    assert names[2] == "this schedule (k = 2)"
    names = [item.name() for item in curves_of(plots.time_plot)]
    assert names[0].startswith("bandwidth bound (342.86 GB/s)")
    assert names[1].startswith("with latency (+")
    assert names[2] == "optimum (bandwidth bound)"
    assert names[3] == "executed (simulated)"
    solution = window.solver.controller.solution
    with_latency = curves_of(plots.time_plot)[1]
    assert with_latency.yData[0] == float(solution.times_us()[0])
    edit_links(window.doc, keys[:1], "latency", Fraction(3))
    qtbot.waitUntil(lambda: window.solver.controller.stale, timeout=2000)
    assert not plots.body.isEnabled()
    assert plots.windowTitle() == "Plots — stale (topology edited)"


def test_large_schedules_are_not_simulated_in_the_editor(monkeypatch, qtbot):
    from canopy.app import solution as solution_module
    from canopy.app.docks.plots import PlotsDock

    monkeypatch.setattr(solution_module, "EDITOR_SENDS_LIMIT", 100)
    seen = []
    solution = compute_solution(load_sample("dgx-a100-2x8"),
                                progress=lambda p, f: seen.append(p))
    assert solution.executed_us == [] and "executed time" not in seen
    assert solution.executed_note == "480 sends per iteration (limit 100); Compare runs it"
    dock = PlotsDock()
    qtbot.addWidget(dock)
    dock.set_solution(solution, stale=False)
    title = dock.time_plot.getPlotItem().titleLabel
    assert "executed time not simulated here: 480 sends" in title.text
    # on its own line, so the plot's width does not cut it off
    assert title.text.startswith("Collective time<br>")
    # A comparison of this network draws the exported schedule's times, and the note goes.
    comp = compare(solution.topology, "allgather", sizes=(1 << 20, 1 << 24), algorithms=())
    dock.set_comparison(comp, solution.topology.fingerprint())
    exported = curves_of(dock.time_plot)[-1]
    assert exported.name() == f"ForestColl as exported, k = {comp.row('forestcoll').details['k']}" \
        " (executed)"
    assert list(exported.yData) == [float(comp.row("forestcoll").times_us[s])
                                    for s in (1 << 20, 1 << 24)]
    assert title.text == "Collective time"


class _Paints(QObject):
    """Counts paint events per watched widget."""

    def __init__(self, widgets):
        super().__init__()
        self.counts = {id(w): 0 for w in widgets}
        for w in widgets:
            w.installEventFilter(self)

    def eventFilter(self, watched, event):
        if event.type() == QEvent.Type.Paint and id(watched) in self.counts:
            self.counts[id(watched)] += 1
        return False


def test_each_plot_is_built_and_first_painted_in_steps_of_its_own(qtbot):
    """The first paint of a pyqtgraph plot is long enough to be felt: after hold(), no step
    of showing a solution paints both plots, neither plot paints before it is drawn, and
    each plot's first paint is made in two steps, a half each."""
    from canopy.app.docks.plots import PlotsDock

    solution = compute_solution(load_sample("dgx-a100-2x8"))
    dock = PlotsDock()
    qtbot.addWidget(dock)
    dock.resize(900, 260)
    dock.show()
    qtbot.waitExposed(dock)
    k_view, time_view = dock.k_plot.viewport(), dock.time_plot.viewport()
    paints = _Paints([k_view, time_view])
    dock.hold()
    steps = dock.steps(solution, stale=False)
    painted = []
    for step in steps:
        before = dict(paints.counts)
        step()
        for _ in range(3):
            QApplication.processEvents()
        painted.append({name for name, view in (("k", k_view), ("time", time_view))
                        if paints.counts[id(view)] > before[id(view)]})
    assert all(len(p) <= 1 for p in painted), painted
    first_k = next(i for i, p in enumerate(painted) if "k" in p)
    first_time = next(i for i, p in enumerate(painted) if "time" in p)
    assert 2 <= first_k < first_time < len(steps) - 1
    assert len(steps) >= 6
    # each plot's first paint in two steps: its left half, then the rest
    assert [i for i, p in enumerate(painted) if "k" in p] == [first_k, first_k + 1]
    # (the time plot's title, with the executed time's state, is set as the last step)
    assert [i for i, p in enumerate(painted) if "time" in p][:2] == [first_time, first_time + 1]
    assert list(dock.k_plot.getPlotItem().listDataItems()[0].yData) == \
        [float(v) for _, v in solution.curve]


def _shown_dock(qtbot, solution, in_steps):
    """A Plots dock showing ``solution``: in the editor's steps (axes laid out before the
    first paint, drawn from their cache), or at once with the axes' cache off (as pyqtgraph
    draws them by itself)."""
    from PySide6.QtWidgets import QGraphicsItem

    from canopy.app.docks.plots import AXES, PlotsDock
    dock = PlotsDock()
    qtbot.addWidget(dock)
    dock.resize(900, 260)
    dock.show()
    qtbot.waitExposed(dock)
    if in_steps:
        dock.hold()
        for step in dock.steps(solution, stale=False):
            step()
            QApplication.processEvents()
    else:
        for plot in (dock.k_plot, dock.time_plot):
            for name in AXES:
                plot.getAxis(name).setCacheMode(QGraphicsItem.CacheMode.NoCache)
        dock.set_solution(solution, stale=False)
        QApplication.processEvents()
    return dock


def test_axes_laid_out_ahead_and_cached_look_as_drawn_directly(qtbot):
    """Laid out in a step before the first paint and drawn from a cached picture, the
    plots look as pyqtgraph draws them directly, also after a range change (the cache of
    an axis is redrawn when its ticks change, not shown stale)."""
    from canopy.app.docks.plots import AXES

    solution = compute_solution(load_sample("dgx-a100-2x8"))
    stepped, direct = _shown_dock(qtbot, solution, True), _shown_dock(qtbot, solution, False)
    laid_out = []
    for plot in (stepped.k_plot, stepped.time_plot):
        for name in AXES:
            axis = plot.getAxis(name)
            assert axis.picture is not None         # laid out, and not since invalidated
            laid_out.append(axis.picture)

    def image(dock):
        """The dock's pixels, as an array of RGB levels."""
        img = dock.grab().toImage().convertToFormat(QImage.Format.Format_RGB32)
        pixels = np.frombuffer(img.constBits(), np.uint8, img.sizeInBytes())
        return pixels.reshape(img.height(), img.bytesPerLine())[:, :img.width() * 4] \
            .astype(int)

    def alike(a, b):
        # (a cached picture is blended onto the plot once more: antialiased edges may
        # differ by one level)
        return bool(np.abs(a - b).max() <= 1)

    assert alike(image(stepped), image(direct))
    assert [plot.getAxis(name).picture for plot in (stepped.k_plot, stepped.time_plot)
            for name in AXES] == laid_out           # the first paint laid out nothing again
    before = image(stepped)
    for dock in (stepped, direct):
        dock.k_plot.setXRange(2.5, 6.5, padding=0)
        dock.time_plot.setYRange(0, 2, padding=0)
        QApplication.processEvents()
    after = image(stepped)
    assert alike(after, image(direct)) and not alike(after, before)


def test_an_allreduce_lp_schedule_is_told_apart_from_the_fixed_k_curve(qtbot):
    """Where the App. E LP schedule runs, the fixed-k curve is reduce-scatter + allgather's,
    and the plot says so, with both optima."""
    from canopy.app.docks.plots import PlotsDock

    solution = compute_solution(load_sample("mesh-2d-3x3"), "allreduce")
    assert solution.schedule.split_budgets
    dock = PlotsDock()
    qtbot.addWidget(dock)
    dock.set_solution(solution, stale=False)
    names = [item.name() for item in curves_of(dock.k_plot)]
    assert names == ["best RS + AG allreduce algbw, k fixed",
                     "RS + AG optimum 56.25 GB/s (k = 1)", "allreduce LP (App. E) 75 GB/s",
                     "this schedule (k = 1)"]    # spanning trees on two-way links: k = 1


def test_the_status_bar_counts_the_trees_the_trees_dock_lists():
    """An App. E allreduce lists its reduce trees beside its broadcast trees; the status
    bar and the solved label count both, as the Trees dock does."""
    from canopy.app.solve_controller import trees_text

    schedule = compute_solution(load_sample("mesh-2d-3x3"), "allreduce").schedule
    assert schedule.reduce_trees
    both = len(schedule.trees) + len(schedule.reduce_trees)
    assert trees_text(schedule) == (f"{both} trees ({len(schedule.trees)} broadcast, "
                                    f"{len(schedule.reduce_trees)} reduce)")
    plain = compute_solution(load_sample("mesh-2d-3x3"), "allgather").schedule
    assert trees_text(plain) == f"{len(plain.trees)} trees"


def test_results_are_shown_before_the_executed_time_which_follows(window, qtbot):
    """The editor's solve shows its results as soon as the schedule is built; the executed
    times (a simulation, the longest part at 32-64 GPUs) follow from a job of their own and
    complete the same solution, and the time plot gains their curve. Cancelling that job
    keeps the results and says the simulation was cancelled."""
    window.doc.set_topology(load_sample("dgx-a100-2x8"))
    controller = window.solver.controller
    shown, completed = [], []
    controller.solution_changed.connect(lambda s: shown.append(
        (controller.busy, list(s.executed_us), bool(s.schedule_to_simulate))))
    controller.executed_changed.connect(completed.append)
    window.named_actions["solve_allgather"].trigger()
    qtbot.waitUntil(lambda: bool(shown), timeout=60000)
    assert shown == [(True, [], True)]     # shown while the simulation still runs
    window.solver.settle()
    title = window.solver.plots.time_plot.getPlotItem().titleLabel.text
    assert completed or "executed time: simulating" in title
    qtbot.waitUntil(lambda: bool(completed) and not controller.busy, timeout=60000)
    solution = controller.solution
    assert completed == [solution]
    assert [size for size, _ in solution.executed_us] == sorted(EXECUTED_SIZES)
    assert solution.executed_us == executed_times(solution.schedule, solution.topology)
    window.solver.settle()
    names = [item.name() for item in curves_of(window.solver.plots.time_plot)]
    assert "executed (simulated)" in names

    window.named_actions["solve_allgather"].trigger()
    qtbot.waitUntil(lambda: len(shown) == 2, timeout=60000)
    assert controller.busy
    controller.cancel()
    qtbot.waitUntil(lambda: not controller.busy, timeout=30000)
    assert controller.solution is not None
    assert controller.solution.executed_note == "simulation cancelled"
    assert controller.solution.executed_us == []


def test_the_simulation_starts_once_the_results_are_shown(window, qtbot):
    """The executed times' job is under way (busy, cancellable) as the solution arrives,
    but its process starts only once the window's steps showing the solution ran out
    (started with them, it took a core from the showing); cancelled before it started,
    it never starts and the results stay."""
    window.doc.set_topology(load_sample("dgx-a100-2x8"))
    solver, controller = window.solver, window.solver.controller
    handed = controller.when_shown
    steps_left = []
    controller.when_shown = lambda start: handed(
        lambda: (steps_left.append(len(solver._steps)), start()))
    pending = []
    controller.solution_changed.connect(lambda s: pending.append(
        (controller.job.is_running(), len(solver._steps) > 0)))
    window.named_actions["solve_allgather"].trigger()
    qtbot.waitUntil(lambda: not controller.busy, timeout=60000)
    assert pending == [(False, True)] and steps_left == [0]
    assert controller.solution.executed_us and controller.solution.executed_note == ""

    def cancel_at_once(solution):
        pending.append(controller.job)
        controller.cancel()
    controller.solution_changed.connect(cancel_at_once)
    window.named_actions["solve_allgather"].trigger()
    qtbot.waitUntil(lambda: len(pending) == 3, timeout=60000)
    assert not controller.busy and controller.job is None
    solver.settle()
    assert steps_left == [0, 0] and not pending[2].is_running()
    assert controller.solution.executed_note == "simulation cancelled"
