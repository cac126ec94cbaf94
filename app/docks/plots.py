"""The Plots dock (pyqtgraph): algbw with k fixed to 1…10 against the optimum, and the
modelled collective time from 1 KiB to 4 GiB.

The first plot is ForestColl (arXiv:2402.06787) §4.5 (Thms 13-15): with k trees per node the best
algbw is N·k/U*, approaching the optimum N·x* as k grows. The second is the bandwidth
bound M / algbw (§3.1) plus, where links carry latencies, the latency of the deepest
route of any tree (:func:`canopy.engine.comparison.plot_series.collective_time_us`), beside the time
the schedule takes in the execution model (:mod:`canopy.engine.execution.simulate`) and, once
compared, the baselines' executed times, so the gap can be read at every size.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pyqtgraph as pg
from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QPainter, QPaintEvent, QPicture, QRegion
from PySide6.QtWidgets import QGraphicsItem, QHBoxLayout, QWidget

from canopy.app.docks.banner import SolutionDock
from canopy.app.solution import Solution
from canopy.engine.comparison.table import Comparison
from canopy.engine.model.collectives import collective_algbw
from canopy.engine.model.limits import number_text
from canopy.engine.model.topology import format_gbps

TITLE = "Plots"
CURVE = "#2c7bb6"
OPTIMUM = "#d62728"
LATENCY = "#7b2cbf"
EXECUTED = "#1a9850"
BASELINE_COLOURS = ["#fdae61", "#8c6d31", "#636363", "#e377c2", "#17becf"]
SIZE_TICKS = [(2**10, "1 KiB"), (2**15, "32 KiB"), (2**20, "1 MiB"), (2**25, "32 MiB"),
              (2**30, "1 GiB"), (2**32, "4 GiB")]


TIME_TITLE = "Collective time"
AXES = ("left", "bottom")

class HalvedPlot(pg.PlotWidget):
    """A plot whose first paint after a hold (:meth:`PlotsDock.hold`) can be made in two
    side-by-side halves, a step of the editor's each: that paint draws every axis into
    its cache and every curve, symbol and legend entry anew, as long as any other step."""

    def __init__(self) -> None:
        super().__init__(background="w")
        self.left_half_only = False
        """The next paint draws the left half only and keeps the rest for :attr:`right_half`."""
        self.right_half: QRegion | None = None
        """What the last paint in halves left to paint."""

    def paintEvent(self, event: QPaintEvent) -> None:
        if self.left_half_only:
            self.left_half_only = False
            room = self.viewport().rect()
            half = QRegion(QRect(room.left(), room.top(), room.width() // 2, room.height()))
            now, later = event.region().intersected(half), event.region().subtracted(half)
            if not now.isEmpty() and not later.isEmpty():
                self.right_half = later
                super().paintEvent(QPaintEvent(now))
                return
        super().paintEvent(event)


def _plot_widget(title: str, left: str, bottom: str) -> HalvedPlot:
    plot = HalvedPlot()
    plot.setTitle(title, color="#2d3440", size="10pt")
    plot.setLabel("left", left)
    plot.setLabel("bottom", bottom)
    plot.showGrid(x=True, y=True, alpha=0.25)
    plot.setMenuEnabled(False)
    for name in AXES:
        axis = plot.getAxis(name)
        axis.setTextPen("#2d3440")
        axis.setPen("#8a94a6")
        axis.enableAutoSIPrefix(False)
        # an axis (its ticks, texts and grid lines) is drawn again only when its range or
        # size changes, not on every paint of the plot (a change of the curves, the
        # title, the legend)
        axis.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
    return plot


def lay_out_axes(plot: pg.PlotWidget) -> None:
    """Work out the plot's axes' ticks and texts now, as their next paint would: pyqtgraph
    keeps them (as a picture it draws from) until the range or the size changes, so the
    first paint of a new plot only draws them (each half is long enough to be felt)."""
    plot.scene().prepareForPaint()      # (a range set to fit the curves is set now)
    scratch = QPicture()
    painter = QPainter(scratch)
    try:
        for name in AXES:
            plot.getAxis(name).paint(painter, None, None)
    finally:
        painter.end()


class PlotsDock(SolutionDock):
    """Two plots of the current solution, greyed out when it is stale."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(TITLE, "PlotsDock", parent)
        self.solution: Solution | None = None
        self.comparison: Comparison | None = None
        self.compared_network: tuple | None = None
        row = QHBoxLayout(self.body)
        row.setContentsMargins(0, 0, 0, 0)
        self.k_plot = _plot_widget("algbw with k fixed", "algbw (GB/s)", "k (trees per node)")
        self.time_plot = _plot_widget(TIME_TITLE, "time (µs)", "message size")
        self.time_plot.setLogMode(x=True, y=True)
        self.time_plot.getAxis("bottom").setTicks(
            [[(math.log10(size), text) for size, text in SIZE_TICKS]])
        row.addWidget(self.k_plot)
        row.addWidget(self.time_plot)
        self.content_layout.addWidget(self.body, 1)
        self.setWidget(self.content)
        self._later: tuple[Solution, bool] | None = None
        self.visibilityChanged.connect(self._shown)
        self.set_solution(None, False)

    def set_solution_later(self, solution: Solution, stale: bool) -> None:
        """Plot ``solution`` when the dock is next shown (building plots nobody sees
        would only hold up the editor)."""
        self.set_solution(None, stale)
        self._later = (solution, stale)

    def _shown(self, visible: bool) -> None:
        if visible and self._later is not None:
            solution, _stale = self._later
            self.set_solution(solution, self.stale)

    def set_solution(self, solution: Solution | None, stale: bool) -> None:
        for step in self.steps(solution, stale):
            step()

    def hold(self) -> None:
        """Paint neither plot until its step has drawn it (:meth:`steps`): the first paint
        of a pyqtgraph plot lays out its axes' ticks and texts, long enough to be felt, so
        each plot gets a turn of the event loop of its own, and a dock brought forward
        meanwhile paints no stale or empty plot."""
        for plot in (self.k_plot, self.time_plot):
            plot.setUpdatesEnabled(False)

    def _release(self, plot: HalvedPlot, halves: bool = False) -> None:
        """Paint ``plot`` now, in a step of its own (not in the next step's turn); with
        ``halves`` its left half only, :meth:`_paint_right_half` following."""
        if not plot.updatesEnabled():
            plot.setUpdatesEnabled(True)
            if plot.isVisible():
                plot.left_half_only = halves
                plot.viewport().repaint()

    @staticmethod
    def _paint_right_half(plot: HalvedPlot) -> None:
        """Paint what :meth:`_release` left of ``plot``'s first paint."""
        later, plot.right_half = plot.right_half, None
        if later is not None and plot.isVisible():
            plot.viewport().repaint(later)

    def _lay_out_axes(self, plot: pg.PlotWidget) -> None:
        """The axes of a plot held unpainted (:meth:`hold`), laid out before its paint."""
        if not plot.updatesEnabled() and plot.isVisible():
            lay_out_axes(plot)

    def steps(self, solution: Solution | None, stale: bool) -> list[Callable[[], None]]:
        """Plotting ``solution`` as steps, one plot each, to be run in order (an editor
        gives each its own turn of the event loop: building a pyqtgraph plot and its first
        paint each take long enough to be felt). After :meth:`hold`, each plot's first paint
        is a step of its own too."""
        self._later = None
        self.solution = solution
        failed: list[bool] = []

        def start() -> None:
            self.k_plot.clear()
            self.time_plot.clear()
            self.time_plot.setTitle(TIME_TITLE, color="#2d3440", size="10pt")
            self.set_stale(stale)   # the plots' room shows now; each plot when released

        def plot(draw: Callable[[Solution], None]) -> Callable[[], None]:
            def run() -> None:
                if solution is None or failed or self.solution is not solution:
                    return
                try:
                    draw(solution)
                except OverflowError:  # bandwidths like 1e-999 GB/s: times past any float
                    failed.append(True)
                    self.k_plot.clear()
                    self.time_plot.clear()
                    self.time_plot.setTitle(f"{TIME_TITLE}: too large to plot in floating "
                                            "point", color="#2d3440", size="10pt")
            return run

        def finish() -> None:
            for widget in (self.k_plot, self.time_plot):
                self._release(widget)
            if solution is not None and not failed and self.solution is solution:
                self._set_time_title(solution)
            self.set_stale(stale)

        # each curve with its legend entry in a step of its own (pyqtgraph's plot() of a
        # named curve is long enough to be felt)
        return [start, plot(self._k_ranges_and_legend), plot(self._plot_k),
                plot(self._plot_k_optimum),
                plot(self._plot_k_schedule),
                lambda: self._lay_out_axes(self.k_plot), lambda: self._release(self.k_plot, True),
                lambda: self._paint_right_half(self.k_plot),
                plot(self._plot_time), lambda: self._lay_out_axes(self.time_plot),
                lambda: self._release(self.time_plot, True),
                lambda: self._paint_right_half(self.time_plot), finish]

    def set_comparison(self, comparison: Comparison | None, network: tuple | None = None
                       ) -> None:
        """Draw the compared algorithms' executed times too: ForestColl's as exported and
        the baselines'. ``network`` is the compared network's
        :meth:`~canopy.engine.model.topology.Topology.fingerprint`; a comparison is drawn only
        beside a solution of the same network and collective."""
        self.comparison = comparison
        self.compared_network = network
        if self.solution is not None:
            self.time_plot.clear()
            self._plot_time(self.solution)
            self._set_time_title(self.solution)

    def _compared(self, solution: Solution) -> Comparison | None:
        """The comparison, when it is of ``solution``'s network and collective."""
        comp = self.comparison
        if comp is None or comp.collective != solution.collective \
                or self.compared_network != solution.topology.fingerprint():
            return None
        return comp

    def _set_time_title(self, solution: Solution) -> None:
        """The time plot's title; where the editor did not simulate the schedule, a
        second line says why, until a comparison draws the exported schedule's times."""
        title = TIME_TITLE
        fc = self._compared(solution)
        fc_row = fc.row("forestcoll") if fc is not None else None
        exported = fc_row is not None and bool(fc_row.times_us)
        if solution.schedule_to_simulate and not exported:
            title += "<br><span style='font-size:8pt'>executed time: simulating…</span>"
        elif solution.executed_note and not exported:
            title += ("<br><span style='font-size:8pt'>executed time not simulated here: "
                      f"{solution.executed_note}</span>")
        self.time_plot.setTitle(title, color="#2d3440", size="10pt")

    def _k_ranges_and_legend(self, solution: Solution) -> None:
        """The k plot's ranges and its (empty) legend, before its curves (a step of its
        own: with the first curve, pyqtgraph's items for both take as long as a paint)."""
        plot = self.k_plot
        values = [float(v) for _, v in solution.curve]
        optimum = float(solution.schedule.optimal_algbw)
        # the ranges first: with them fixed, adding each item does not re-range the view
        low, high = min([*values, optimum]), max([*values, optimum])
        span = max(high - low, high * 0.01)
        # the curve in the upper part, the legend (bottom right) in the lower part: the
        # values sit within a few per cent of the optimum, so below them is empty
        plot.setYRange(low - 3 * span, high + 0.2 * span)
        plot.setXRange(0.5, _k_axis_end(solution) + 0.5)
        legend = plot.addLegend(offset=(-10, -10), labelTextColor="#2d3440",
                                labelTextSize="8pt")
        legend.setColumnCount(2)    # two short rows leave the curve above them clear

    def _plot_k(self, solution: Solution) -> None:
        """The fixed-k curve (after :meth:`_k_ranges_and_legend`)."""
        plot = self.k_plot
        schedule = solution.schedule
        ks = [k for k, _ in solution.curve]
        values = [float(v) for _, v in solution.curve]
        # the fixed-k search (§4.5) is over tree schedules: for allreduce, reduce-scatter
        # + allgather, even where the App. E LP schedule runs (and beats it)
        what = "RS + AG allreduce" if schedule.split_budgets else schedule.collective
        plot.plot(ks, values, pen=pg.mkPen(CURVE, width=2), symbol="o", symbolSize=7,
                  symbolBrush=CURVE, symbolPen="w", name=f"best {what} algbw, k fixed")

    def _plot_k_optimum(self, solution: Solution) -> None:
        """The optimum on the k plot (after :meth:`_plot_k`)."""
        plot = self.k_plot
        schedule = solution.schedule
        ks = _k_axis_end(solution)
        optimum = float(schedule.optimal_algbw)
        # a two-point line named in the legend: an InfiniteLine with a label recomputes
        # its bounding box, slowly, each time it is placed
        if schedule.split_budgets:
            rs_ag = collective_algbw("allreduce", len(schedule.compute_nodes),
                                     schedule.optimum.x)
            plot.plot([0.5, ks + 0.5], [float(rs_ag)] * 2,
                      pen=pg.mkPen(CURVE, width=1.2, style=Qt.PenStyle.DotLine),
                      name=f"RS + AG optimum {format_gbps(rs_ag)} GB/s "
                           f"(k = {number_text(schedule.optimum.k)})")
            name = f"allreduce LP (App. E) {format_gbps(schedule.optimal_algbw)} GB/s"
        else:
            name = (f"optimum {format_gbps(schedule.optimal_algbw)} GB/s "
                    f"(k = {number_text(schedule.optimum.k)})")
        plot.plot([0.5, ks + 0.5], [optimum, optimum],
                  pen=pg.mkPen(OPTIMUM, width=1.5, style=Qt.PenStyle.DashLine), name=name)

    def _plot_k_schedule(self, solution: Solution) -> None:
        """This schedule on the k plot, a star (after :meth:`_plot_k_optimum`)."""
        schedule = solution.schedule
        if schedule.k <= _k_axis_end(solution):
            self.k_plot.plot([schedule.k], [float(schedule.algbw)], pen=None, symbol="star",
                             symbolSize=16, symbolBrush=LATENCY, name=f"this schedule (k = "
                             f"{schedule.k})")

    def _plot_time(self, solution: Solution) -> None:
        plot = self.time_plot
        # top left: times grow with size, so the curves mostly leave that corner empty;
        # small sizes' latency can reach it, so the legend has a light background
        plot.addLegend(offset=(10, 10), labelTextColor="#2d3440", labelTextSize="8pt",
                       brush=(255, 255, 255, 215), pen="#d0d5de")
        schedule = solution.schedule
        sizes = solution.sizes
        plot.plot(sizes, [float(t) for t in solution.bandwidth_us],
                  pen=pg.mkPen(CURVE, width=2),
                  name=f"bandwidth bound ({format_gbps(schedule.algbw)} GB/s)")
        if solution.latency_us is not None:
            plot.plot(sizes, [float(t) for t in solution.times_us()],
                      pen=pg.mkPen(LATENCY, width=2),
                      name=f"with latency (+{float(solution.latency_us):.3g} µs)")
        if schedule.fixed_k:
            ratio = schedule.algbw / schedule.optimal_algbw
            plot.plot(sizes, [float(t * ratio) for t in solution.bandwidth_us],
                      pen=pg.mkPen(OPTIMUM, width=1.5, style=Qt.PenStyle.DashLine),
                      name="optimum (bandwidth bound)")
        if solution.executed_us:
            plot.plot([s for s, _ in solution.executed_us],
                      [float(t) for _, t in solution.executed_us],
                      pen=pg.mkPen(EXECUTED, width=2), symbol="o", symbolSize=6,
                      symbolBrush=EXECUTED, symbolPen="w", name="executed (simulated)")
        self._plot_baselines(solution)

    def _plot_baselines(self, solution: Solution) -> None:
        comp = self._compared(solution)
        if comp is None:
            return
        fc = comp.row("forestcoll")
        if fc is not None and fc.times_us:
            sizes = sorted(fc.times_us)
            self.time_plot.plot(sizes, [float(fc.times_us[s]) for s in sizes],
                                pen=pg.mkPen(EXECUTED, width=1.5, style=Qt.PenStyle.DashLine),
                                symbol="d", symbolSize=8, symbolBrush=EXECUTED, symbolPen="w",
                                name=f"ForestColl as exported, k = {fc.details.get('k')} "
                                     "(executed)")
        rows = [r for r in comp.rows if r.algorithm != "forestcoll" and r.times_us]
        for colour, row in zip(BASELINE_COLOURS, rows, strict=False):
            sizes = sorted(row.times_us)
            self.time_plot.plot(sizes, [float(row.times_us[s]) for s in sizes],
                                pen=pg.mkPen(colour, width=1.5, style=Qt.PenStyle.DashLine),
                                symbol="t", symbolSize=7, symbolBrush=colour, symbolPen="w",
                                name=f"{row.algorithm} (executed)")


def _k_axis_end(solution: Solution) -> int:
    """The k plot's last k: the curve's, or this schedule's where that lies a little
    beyond it (13 on 2 x DGX A100 past a curve to 10), so its star is drawn."""
    curve_end = len(solution.curve)
    k = solution.schedule.k
    return k if curve_end < k <= 2 * curve_end else curve_end
