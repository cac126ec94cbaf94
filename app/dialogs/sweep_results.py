"""Looking at a sweep: algbw against a chosen parameter, one line per algorithm.

Reads the rows ``canopy sweep`` wrote (:mod:`canopy.engine.sweep.runner`). The plot's x
axis is the chosen parameter; each algorithm's line joins the mean algbw of the points
at each x (its points are drawn as dots, so spread from the other parameters shows).
The metric is the bandwidth bound or the simulated algbw at one message size. A
double-click on a row of the table opens that point's topology in the editor.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QFormLayout,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from canopy.engine.generators import generate
from canopy.engine.model.topology import Topology

COLOURS = ["#1b6ca8", "#d1495b", "#2e8b57", "#edae49", "#6a4c93", "#00798c", "#8d6a9f"]


def _number(text: str) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def metrics_of(columns: list[str]) -> dict[str, str]:
    """Metric name -> column suffix: 'bound' -> '_algbw', '1G' -> '_algbw_1G', ..."""
    out = {"bandwidth bound": "_algbw"}
    for c in columns:
        if "_algbw_" in c:
            out.setdefault(f"simulated at {c.rsplit('_', 1)[1]}", "_algbw_" + c.rsplit("_", 1)[1])
    return out


def algorithm_columns(columns: list[str], suffix: str) -> dict[str, str]:
    """Algorithm -> its column for the metric ``suffix`` (the optimum as 'optimum')."""
    out = {}
    if suffix == "_algbw" and "bound_algbw" in columns:
        out["optimum"] = "bound_algbw"
    for c in columns:
        if c.endswith(suffix) and c != "bound_algbw" and c.count("_algbw") == 1:
            out[c[:-len(suffix)]] = c
    return out


def topology_of(row: dict[str, str]) -> Topology:
    """Regenerate a row's design from its generator and parameters."""
    params = {k.removeprefix("param."): v for k, v in row.items() if k.startswith("param.")}
    return generate(row["generator"], params)


class SweepResultsDialog(QDialog):
    """The plot and the table of one sweep's rows."""

    def __init__(self, rows: list[dict[str, str]], source: str,
                 open_topology: Callable[[Topology], None] | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Sweep results: {source}")
        self.rows = rows
        self.open_topology = open_topology
        columns = list(rows[0]) if rows else []
        self.params = [c for c in columns if c.startswith("param.")
                       and len({r.get(c) for r in rows}) > 1] or \
            [c for c in columns if c.startswith("param.")]
        layout = QVBoxLayout(self)
        form = QFormLayout()
        self.x_box = QComboBox()
        self.x_box.addItems([p.removeprefix("param.") for p in self.params])
        self.metric_box = QComboBox()
        self.metrics = metrics_of(columns)
        self.metric_box.addItems(list(self.metrics))
        form.addRow("Parameter (x)", self.x_box)
        form.addRow("algbw", self.metric_box)
        layout.addLayout(form)
        self.plot = pg.PlotWidget(background="w")
        self.plot.addLegend(offset=(10, 10))
        self.plot.setLabel("left", "algbw (GB/s)")
        layout.addWidget(self.plot, 3)
        self.table = QTableWidget(len(rows), len(columns))
        self.table.setHorizontalHeaderLabels(columns)
        for i, row in enumerate(rows):
            for j, c in enumerate(columns):
                self.table.setItem(i, j, QTableWidgetItem(str(row.get(c, ""))))
        self.table.resizeColumnsToContents()
        self.table.cellDoubleClicked.connect(self._open_row)
        layout.addWidget(self.table, 2)
        self.x_box.currentIndexChanged.connect(self.redraw)
        self.metric_box.currentIndexChanged.connect(self.redraw)
        self.resize(1100, 760)
        self.redraw()

    def series(self) -> dict[str, list[tuple[float, float]]]:
        """Algorithm -> (x, algbw) of every row with both numbers, for the current choice."""
        if not self.params:
            return {}
        x_col = self.params[self.x_box.currentIndex()]
        suffix = self.metrics[self.metric_box.currentText()]
        out: dict[str, list[tuple[float, float]]] = {}
        for name, col in algorithm_columns(list(self.rows[0]), suffix).items():
            points = [(_number(r.get(x_col, "")), _number(r.get(col, ""))) for r in self.rows]
            out[name] = [(x, y) for x, y in points if x is not None and y is not None]
        return out

    def redraw(self) -> None:
        self.plot.clear()
        if self.params:
            self.plot.setLabel("bottom", self.x_box.currentText())
        self.plot.setTitle("lines: the mean algbw of the points at each x (the other "
                           "parameters vary); dots: every point", size="9pt")
        for i, (name, points) in enumerate(self.series().items()):
            colour = COLOURS[i % len(COLOURS)]
            by_x: dict[float, list[float]] = defaultdict(list)
            for x, y in points:
                by_x[x].append(y)
            xs = sorted(by_x)
            # the optimum is drawn dashed and on top: ForestColl reaches it, so its line
            # would otherwise hide the optimum's
            optimum = name == "optimum"
            pen = pg.mkPen(colour, width=3 if optimum else 2,
                           style=Qt.PenStyle.DashLine if optimum else Qt.PenStyle.SolidLine)
            line = self.plot.plot(xs, [sum(by_x[x]) / len(by_x[x]) for x in xs],
                                  name=f"{name} (mean{', dashed' if optimum else ''})", pen=pen)
            line.setZValue(10 if optimum else 0)
            self.plot.plot([p[0] for p in points], [p[1] for p in points], pen=None,
                           symbol="o", symbolSize=6, symbolBrush=colour, symbolPen=None)

    def _open_row(self, row: int, _column: int) -> None:
        if self.open_topology is not None:
            self.open_topology(topology_of(self.rows[row]))
