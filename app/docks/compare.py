"""The Compare dock: ForestColl against today's schedules on the drawn topology.

:meth:`CompareDock.start` runs :func:`canopy.engine.comparison.table.compare` (ForestColl,
NCCL-style
rings, Blink, TACOS, contention-free LR rings; one α-β simulator for all) on a snapshot
of the topology through the window's :class:`canopy.app.compute.ComputeController` (a
:class:`canopy.app.job_runner.EngineJob`, one engine job at a time, Compute ▸ Cancel and
window closing handled there), with a progress bar and a Cancel button in the dock.
Errors are shown by the window in a dialog with the engine's sentence. The result is
shown as

* a table: algorithm, bandwidth bound (algbw from link congestion), how many times
  ForestColl's bound is the row's, then the simulated time and nccl-tests algbw at each
  message size; a baseline that does not apply reads "n/a: reason" (reason as tooltip);
* a pyqtgraph bar chart: algbw per algorithm, grouped by message size, with each
  algorithm's bound as the last group, and a legend.

Editing the network (nodes, kinds, groups, links) after a run marks the comparison
stale; moving nodes does not, and undoing back to the compared network clears the mark.
Groups count (unlike for a solve): rings and TACOS order GPUs by server.
"""

from __future__ import annotations

import re
import time
from fractions import Fraction
from typing import TypedDict

import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFont, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDockWidget,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from canopy.app.compute import ComputeController
from canopy.app.document import Document
from canopy.engine.comparison.table import (
    LAYOUT_PHASE,
    SLOW,
    Comparison,
    ComparisonRow,
    compare,
)
from canopy.engine.execution.program import CUT_THROUGH
from canopy.engine.execution.simulate import REPORT_SIZES
from canopy.engine.model.sizes import size_label

NAMES = {"forestcoll": "ForestColl", "ring": "Ring (NCCL)", "blink": "Blink",
         "tacos": "TACOS", "lr1": "LR1 rings", "lr3": "LR3 rings"}
COLORS = {"forestcoll": "#3c8d2f", "ring": "#3f6fb5", "blink": "#e08a1e",
          "tacos": "#8e5ab5", "lr1": "#b5523f", "lr3": "#4a9ea3"}
NOT_APPLICABLE = QColor("#6b7280")
STALE_STYLE = "color: #8a1c12; font-weight: bold;"
STALE_TEXT = "#9aa1ad"
CHART_TEXT = "#2d3440"
STALE_OPACITY = 0.35


class CompareOptions(TypedDict, total=False):
    """The keyword arguments of :meth:`CompareDock.start`; empty before the first run."""

    collective: str
    sizes: tuple[int, ...]
    switch_mode: str
    full: bool


def display_name(algorithm: str) -> str:
    return NAMES.get(algorithm, algorithm)


FULL_OPTION = "Build every row in full"
"""The Compare dialog's check box that builds the rows large topologies leave out."""


def row_text(row: ComparisonRow) -> str:
    """What a row without numbers says in the table: why it does not apply, or, for a
    row left out for time, how to run it from this window."""
    assert row.reason is not None
    if row.omitted:
        return (f"n/a: {row.reason.split(':')[0]} (slow); tick “{FULL_OPTION}” in "
                f"Compute ▸ Compare Algorithms… to run it")
    return f"n/a: {short_reason(row.reason)}"


def short_reason(reason: str) -> str:
    """A reason without its parenthesised details, so it fits the table (the tooltip
    keeps them): "the network is not a tree, so contention-free rings do not apply."."""
    return re.sub(r" \([^()]*\)", "", reason)


def _number(value: Fraction | float, digits: int = 2) -> str:
    return f"{float(value):,.{digits}f}"


def _bound(row: ComparisonRow) -> Fraction:
    """The bandwidth bound of a row that applies (no ``reason``): every such row has one."""
    if row.algbw is None:
        raise ValueError(f"the {row.algorithm} row applies but has no bandwidth bound")
    return row.algbw


def _time(us: Fraction) -> str:
    return _number(us, 1 if us < 1000 else 0)


class _BarSample(pg.ItemSample):
    """A legend swatch for a bar series: just its colour (the stock sample also draws a
    line, which pokes out beside the square)."""

    def paint(self, painter, *args) -> None:
        if not self.item.isVisible():
            super().paint(painter, *args)
            return
        painter.setPen(pg.mkPen(self.item.opts["pen"]))
        painter.setBrush(pg.mkBrush(self.item.opts["brush"]))
        painter.drawRect(QRectF(3, 3, 14, 14))


class CompareDock(QDockWidget):
    """Runs comparisons in the background and shows the latest one."""

    compared = Signal(object, float)
    """A comparison arrived: (the Comparison, seconds it took)."""

    def __init__(self, doc: Document, controller: ComputeController,
                 parent: QWidget | None = None):
        super().__init__("Compare", parent)
        self.setObjectName("CompareDock")
        self.doc = doc
        self.controller = controller
        self.comparison: Comparison | None = None
        self._running = False
        self._started = 0.0
        self.options = CompareOptions()
        self.stale = False
        self.signature: tuple | None = None
        self._pending: tuple | None = None      # signature of the run in progress

        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.stale_label = QLabel("Stale: the topology changed since this comparison.")
        self.stale_label.setStyleSheet(STALE_STYLE)
        self.stale_label.hide()
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(True)
        self.progress.setMinimumWidth(280)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.cancel)
        self.again_button = QPushButton("Run Again")
        self.again_button.setToolTip("Compare again with the same options on the current "
                                     "topology")
        self.again_button.clicked.connect(self.run_again)
        self.again_button.setEnabled(False)
        self.progress.hide()
        self.cancel_button.hide()

        top = QHBoxLayout()
        top.addWidget(self.summary, 1)
        top.addWidget(self.stale_label)
        top.addWidget(self.progress)
        top.addWidget(self.cancel_button)
        top.addWidget(self.again_button)

        self.model = QStandardItemModel(self)
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setAlternatingRowColors(True)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.table.horizontalHeader().setStretchLastSection(False)
        self.table.setWordWrap(False)

        self.plot = pg.PlotWidget(background="w")
        self.plot.setMenuEnabled(False)
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.hideButtons()
        self.plot.showGrid(y=True, alpha=0.25)
        self.plot.setLabel("left", "algbw (GB/s)")
        self.plot.setMinimumWidth(320)
        self.legend = self.plot.addLegend(offset=(8, 4), colCount=3, labelTextSize="8pt",
                                          brush=pg.mkBrush(255, 255, 255, 220),
                                          labelTextColor=CHART_TEXT, sampleType=_BarSample)
        for side in ("left", "bottom"):
            self.plot.getAxis(side).setTextPen(CHART_TEXT)
        self.bars: list[pg.BarGraphItem] = []

        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self.table)
        splitter.addWidget(self.plot)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        splitter.setSizes([720, 480])
        splitter.setChildrenCollapsible(False)
        self.splitter = splitter

        self.placeholder = QLabel("Compute ▸ Compare Algorithms… runs ForestColl, NCCL-style "
                                  "rings, Blink, TACOS and contention-free rings on this "
                                  "topology and simulates them at 1 MB – 1 GB.")
        self.placeholder.setWordWrap(True)
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setStyleSheet("color: #4b5668;")
        self.pages = QStackedWidget()
        self.pages.addWidget(self.placeholder)
        self.pages.addWidget(splitter)

        body = QWidget()
        layout = QVBoxLayout(body)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(self.pages, 1)
        self.setWidget(body)

        self._stale_timer = QTimer(self)
        self._stale_timer.setSingleShot(True)
        self._stale_timer.setInterval(150)
        self._stale_timer.timeout.connect(self.check_stale)
        for signal in (doc.node_added, doc.node_removed, doc.node_changed, doc.node_renamed,
                       doc.link_added, doc.link_removed, doc.link_changed, doc.reset):
            signal.connect(self._stale_timer.start)
        doc.reset.connect(self._after_reset)
        controller.progress.connect(self._on_progress)
        controller.failed.connect(self._on_failed)
        controller.cancelled.connect(self._on_cancelled)

    # ------------------------------------------------------------ running

    def is_running(self) -> bool:
        return self._running

    def start(self, collective: str = "allgather", sizes: tuple[int, ...] = REPORT_SIZES,
              switch_mode: str = CUT_THROUGH, full: bool = False) -> bool:
        """Compare on the current topology in the background; False while the window's
        controller is busy (a solve or another comparison). ``full`` builds the rows a
        large topology otherwise leaves out for time (``compare``'s ``force``)."""
        if self.controller.busy:
            return False
        topology = self.doc.snapshot()
        where = str(self.doc.path) if self.doc.path else self.doc.display_name
        sizes = tuple(sizes)

        if not self.controller.run(f"Comparing algorithms ({collective})", self._on_finished,
                                   compare, topology, collective, sizes,
                                   switch_mode=switch_mode, where=where,
                                   force=("forestcoll", *SLOW) if full else ()):
            return False
        self._running = True
        self._started = time.perf_counter()
        self.options = CompareOptions(collective=collective, sizes=sizes,
                                      switch_mode=switch_mode, full=full)
        self._pending = topology.fingerprint()
        self.progress.setValue(0)
        self.progress.setFormat(f"Comparing ({collective})… %p%")
        self.progress.show()
        self.cancel_button.show()
        self.cancel_button.setEnabled(True)
        self.again_button.setEnabled(False)
        self.summary.setText(f"Comparing algorithms for {collective} on "
                             f"{topology.name or self.doc.display_name}…")
        self.show()
        self.raise_()
        return True

    def run_again(self) -> bool:
        return bool(self.options) and self.start(**self.options)

    def cancel(self) -> None:
        if self._running:
            self.controller.cancel()
            self.cancel_button.setEnabled(False)
            self.progress.setFormat("Cancelling…")

    def _done(self) -> None:
        self._running = False
        self.progress.hide()
        self.cancel_button.hide()
        self.again_button.setEnabled(bool(self.options))

    def _on_progress(self, phase: str, fraction: float) -> None:
        if not self._running or not self.cancel_button.isEnabled():
            return
        self.progress.setValue(round(fraction * 1000))
        what = ("Finishing" if phase == "done" else "Choosing ForestColl's connections"
                if phase == LAYOUT_PHASE else display_name(phase))
        self.progress.setFormat(f"{what}… %p%")

    def _on_finished(self, comparison: Comparison) -> None:
        self._done()
        self.signature = self._pending
        self.show_comparison(comparison)
        self.check_stale()
        self.compared.emit(comparison, time.perf_counter() - self._started)

    def _on_failed(self, what: str, message: str) -> None:
        # The window shows the engine's sentence in a dialog (canopy.app.solve_controller).
        if self._running:
            self._done()
            self.summary.setText(f"The comparison failed: {message}")

    def _on_cancelled(self) -> None:
        if not self._running:
            return
        self._done()
        if self.comparison is None:
            self.summary.setText("Comparison cancelled.")
        else:
            self.summary.setText(self._describe(self.comparison) + "  (A newer run was "
                                 "cancelled.)")

    # ------------------------------------------------------------ staleness

    def _after_reset(self) -> None:
        """Another topology was opened: a comparison of a different network is dropped
        (it was not edited into this one, so "stale" would mislead)."""
        if self.comparison is not None and not self._running \
                and self.doc.topology.fingerprint() != self.signature:
            self.clear()

    def clear(self) -> None:
        """Back to the placeholder, with no comparison."""
        self._stale_timer.stop()
        self.comparison = None
        self.stale = False
        self.stale_label.hide()
        self._fade(False)
        self.setWindowTitle("Compare")
        self.summary.clear()
        self.model.clear()
        self.pages.setCurrentIndex(0)

    def check_stale(self) -> None:
        """Compare the document's network with the compared one; show or hide the mark."""
        self._stale_timer.stop()
        if self.comparison is None:
            return
        self.stale = self.doc.topology.fingerprint() != self.signature
        self.stale_label.setVisible(self.stale)
        self._fade(self.stale)
        self.setWindowTitle("Compare (stale)" if self.stale else "Compare")

    def _fade(self, faded: bool) -> None:
        """Grey out stale results (text and bars) without disabling tooltips."""
        self.table.setStyleSheet(f"QTableView {{ color: {STALE_TEXT}; }}" if faded else "")
        for bars in self.bars:
            bars.setOpacity(STALE_OPACITY if faded else 1.0)

    # ------------------------------------------------------------ showing results

    def _describe(self, comp: Comparison) -> str:
        return (f"{comp.topology}: {comp.collective}, N = {comp.compute_nodes}. "
                "Bound from link congestion; times from the α-β simulator "
                f"({float(comp.default_latency):g} µs per link unless set, switches "
                f"{comp.switch_mode}). algbw = size / time.")

    def show_comparison(self, comp: Comparison) -> None:
        self.comparison = comp
        self.summary.setText(self._describe(comp))
        self._fill_table(comp)
        self._fill_chart(comp)
        self.pages.setCurrentIndex(1)

    def _fill_table(self, comp: Comparison) -> None:
        model = self.model
        model.clear()
        self.table.clearSpans()
        headers = ["Algorithm", "Bound GB/s", "ForestColl speed-up"]
        for s in comp.sizes:
            headers += [f"{size_label(s)} µs", f"{size_label(s)} GB/s"]
        model.setHorizontalHeaderLabels(headers)
        tips = ["", "Bandwidth-only algbw of the schedule: message size over the time its "
                "most congested link needs", "How many times ForestColl's bound is this "
                "row's bound"]
        for s in comp.sizes:
            tips += [f"Simulated collective time at {s:,} bytes (best pipeline depth)",
                     f"nccl-tests algbw at {s:,} bytes: size / simulated time"]
        for column, tip in enumerate(tips):
            if tip:
                model.horizontalHeaderItem(column).setToolTip(tip)
        for row in comp.rows:
            if row.reason is None:
                model.appendRow(self._row_items(comp, row, len(headers)))
        # Columns fit the numbers; "n/a: reason" rows go in afterwards, spanning them.
        self.table.resizeColumnsToContents()
        for index, row in enumerate(comp.rows):
            if row.reason is not None:
                model.insertRow(index, self._row_items(comp, row, len(headers)))
                self.table.setSpan(index, 1, 1, len(headers) - 1)

    def _row_items(self, comp: Comparison, row: ComparisonRow, width: int
                   ) -> list[QStandardItem]:
        name = QStandardItem(display_name(row.algorithm))
        name.setData(row.algorithm, Qt.ItemDataRole.UserRole)
        swatch = QColor(COLORS.get(row.algorithm, "#888888"))
        name.setData(swatch, Qt.ItemDataRole.DecorationRole)
        if row.algorithm == "forestcoll":
            font = QFont()
            font.setBold(True)
            name.setFont(font)
        if row.reason is not None:
            cell = QStandardItem(row_text(row))
            cell.setToolTip(row.reason)
            name.setToolTip(row.reason)
            cell.setForeground(NOT_APPLICABLE)
            font = QFont()
            font.setItalic(True)
            cell.setFont(font)
            return [name, cell] + [QStandardItem("") for _ in range(width - 2)]
        items = [name]
        bound = QStandardItem(_number(_bound(row)))
        link = row.details.get("bottleneck_link")
        if link:
            bound.setToolTip(f"Most congested link: {link[0]} → {link[1]}")
        items.append(bound)
        ratio = comp.ratio(row)
        items.append(QStandardItem("" if ratio is None else f"{float(ratio):.2f}×"))
        for s in comp.sizes:
            t = QStandardItem(_time(row.times_us[s]))
            t.setToolTip(f"{display_name(row.algorithm)} at {size_label(s)}: "
                         f"{float(row.times_us[s]):,.3f} µs with {row.pieces[s]} pipeline "
                         "pieces per tree")
            bw = QStandardItem(_number(row.algbw_at(s)))
            at = comp.ratio(row, s)
            if at is not None:
                bw.setToolTip(f"ForestColl is {float(at):.2f}× as fast at {size_label(s)}")
            items += [t, bw]
        for item in items[1:]:
            item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return items

    def _fill_chart(self, comp: Comparison) -> None:
        for item in self.bars:
            self.plot.removeItem(item)
        self.bars = []
        self.legend.clear()
        rows = [r for r in comp.rows if r.reason is None]
        groups = [size_label(s) for s in comp.sizes] + ["bound"]
        width = 0.8 / max(len(rows), 1)
        for j, row in enumerate(rows):
            heights = [float(row.algbw_at(s)) for s in comp.sizes] + [float(_bound(row))]
            offset = (j - (len(rows) - 1) / 2) * width
            color = QColor(COLORS.get(row.algorithm, "#888888"))
            bars = pg.BarGraphItem(x=[g + offset for g in range(len(groups))],
                                   height=heights, width=width * 0.92,
                                   brush=pg.mkBrush(color), pen=pg.mkPen(color.darker(130)),
                                   name=display_name(row.algorithm))
            self.plot.addItem(bars)
            self.bars.append(bars)
        axis = self.plot.getAxis("bottom")
        axis.setTicks([list(enumerate(groups))])
        self.plot.setXRange(-0.6, len(groups) - 0.4, padding=0)
        top = max((float(_bound(r)) for r in rows), default=1.0)
        top = max([top] + [float(r.algbw_at(s)) for r in rows for s in comp.sizes])
        # Head room for the legend (rows of three) above the bars.
        legend_rows = (len(rows) + 2) // 3
        self.plot.setYRange(0, top * (1.1 + 0.14 * legend_rows), padding=0)

    # ------------------------------------------------------------ for tests and export

    def table_text(self) -> list[list[str]]:
        """The table's cells as shown (one list per row)."""
        return [[self.model.item(r, c).text() for c in range(self.model.columnCount())]
                for r in range(self.model.rowCount())]
