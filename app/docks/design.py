"""The Design dock: what to build, what to upgrade, what breaks (docs/advise.md).

Advise runs :func:`canopy.engine.advise.report.advise` on a snapshot of the topology in
a child process through the window's :class:`canopy.app.compute.ComputeController` (one
engine job at a time; Compute ▸ Cancel and closing the window are handled there). The
dock then shows

* a table of the link classes: links, bandwidth per link, the lowest bandwidth that
  keeps today's optimum, the optimum with the class doubled, and whether it limits;
* the selected class's exact curve (pyqtgraph): the optimum against the class's
  bandwidth, with today's bandwidth and the threshold marked;
* the upgrades, best first; "Apply" sets every link of the chosen upgrade's classes in
  one undoable edit and advises again, so the new optimum shows at once;
* with "Failures" ticked, the optimum after each single link or switch failure.

"Name class…" puts the links selected on the canvas in a named class (their ``class``
key, saved with the topology), one undoable edit.
"""

from __future__ import annotations

import pickle
from fractions import Fraction
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDockWidget,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QInputDialog,
    QLabel,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from canopy.app.commands import EditLinks
from canopy.app.compute import ComputeController
from canopy.app.document import Document
from canopy.engine.advise.classes import link_class_name, link_classes
from canopy.engine.model.collectives import COLLECTIVES
from canopy.engine.model.errors import CanopyError
from canopy.engine.model.topology import format_gbps

TITLE = "Design"
CURVE = "#2c7bb6"
TODAY = "#d62728"
THRESHOLD = "#1a9850"
LIMITS = "#8a1c12"


def _gbps(text: str | None) -> str:
    return "" if text is None else format_gbps(Fraction(text))


def _item(text: str, tip: str = "") -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    item.setFlags(Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemIsEnabled)
    if tip:
        item.setToolTip(tip)
    return item


def _table(headers: list[str], tips: list[str] | None = None) -> QTableWidget:
    """A read-only table of whole rows; ``tips`` are the column headers' tooltips."""
    table = QTableWidget(0, len(headers))
    for col, text in enumerate(headers):
        header_item = QTableWidgetItem(text)
        if tips:
            header_item.setToolTip(tips[col])
        table.setHorizontalHeaderItem(col, header_item)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.verticalHeader().hide()
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    header = table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    header.setStretchLastSection(True)
    return table


class DesignDock(QDockWidget):
    """Per-class curves, thresholds, upgrades and failures of the drawn topology."""

    advised = Signal(object)     # the canopy-advice dict

    def __init__(self, doc: Document, controller: ComputeController, scene: Any,
                 parent: QWidget | None = None):
        super().__init__(TITLE, parent)
        self.setObjectName("DesignDock")
        self.doc = doc
        self.controller = controller
        self.scene = scene
        self.advice: dict[str, Any] | None = None
        self.stale = False

        self.collective = QComboBox()
        self.collective.addItems(list(COLLECTIVES))
        self.collective.setToolTip("The collective whose optimum the advice is about "
                                   "(allreduce: reduce-scatter + allgather)")
        self.failures = QCheckBox("Failures")
        self.failures.setToolTip("Also find the optimum after each single link or switch "
                                 "failure")
        self.run_button = QPushButton("Advise")
        self.run_button.setToolTip("Compute every link class's curve, its threshold and "
                                   "the best upgrades (in the background)")
        self.run_button.clicked.connect(self.start)
        self.name_button = QPushButton("Name class…")
        self.name_button.setToolTip("Put the links selected on the canvas in a named class")
        self.name_button.clicked.connect(self.name_selection)
        self.summary = QLabel("Press Advise to see what limits the optimum, what each link "
                              "class can lose for free, and which upgrade buys the most.")
        self.summary.setWordWrap(True)
        top = QHBoxLayout()
        top.addWidget(QLabel("Collective:"))
        top.addWidget(self.collective)
        top.addWidget(self.failures)
        top.addWidget(self.run_button)
        top.addWidget(self.name_button)
        top.addStretch(1)

        self.classes = _table(
            ["Class", "Links", "GB/s", "Down to", "Doubled", "Limits"],
            ["Link class (by role, or named by you)", "Links in the class",
             "Bandwidth per link per direction (GB/s)",
             "The lowest bandwidth per link (GB/s) that keeps today's optimum",
             "The optimum (GB/s) with this class at twice its bandwidth",
             "Whether raising this class alone raises the optimum"])
        self.classes.itemSelectionChanged.connect(self._plot_selected)
        self.plot = pg.PlotWidget(background="w")
        self.plot.setLabel("left", "optimum (GB/s)")
        self.plot.setLabel("bottom", "class bandwidth (GB/s per link)")
        self.plot.showGrid(x=True, y=True, alpha=0.25)
        self.plot.setMenuEnabled(False)
        for name in ("left", "bottom"):
            self.plot.getAxis(name).setTextPen("#2d3440")
            self.plot.getAxis(name).enableAutoSIPrefix(False)
        self.plot.setMinimumWidth(260)
        self.upgrades = _table(["Upgrade", "Optimum (GB/s)", "Gain", "Price"])
        self.apply_button = QPushButton("Apply upgrade")
        self.apply_button.setToolTip("Set the chosen upgrade's class bandwidths in one "
                                     "undoable edit and advise again")
        self.apply_button.clicked.connect(self.apply_selected)
        self.apply_button.setEnabled(False)
        self.upgrades.itemSelectionChanged.connect(
            lambda: self.apply_button.setEnabled(bool(self.upgrades.selectedItems())))
        upgrades_box = QWidget()
        column = QVBoxLayout(upgrades_box)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.upgrades, 1)
        column.addWidget(self.apply_button)
        self.failure_table = _table(["Failed element", "Alike", "Optimum (GB/s)", "Loss"])
        self.tabs = QTabWidget()
        self.tabs.addTab(upgrades_box, "Upgrades")
        self.tabs.addTab(self.failure_table, "Failures")

        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self.classes)
        splitter.addWidget(self.plot)
        splitter.addWidget(self.tabs)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        splitter.setStretchFactor(2, 2)
        body = QWidget()
        layout = QVBoxLayout(body)
        layout.addLayout(top)
        layout.addWidget(self.summary)
        layout.addWidget(splitter, 1)
        # Scrolled, so the dock asks for little room: tabbed with Validation at the bottom,
        # its full height would otherwise set the window's smallest size.
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(body)
        self.setWidget(scroll)
        controller.busy_changed.connect(lambda busy: self.run_button.setEnabled(not busy))
        for signal in (doc.link_added, doc.link_removed, doc.link_changed, doc.node_added,
                       doc.node_removed, doc.node_changed, doc.reset):
            signal.connect(self._mark_stale)

    # ------------------------------------------------------------ running

    def start(self) -> bool:
        """Advise on a snapshot of the document in the background; False when busy."""
        from canopy.app.background import advice_of

        pickled = pickle.dumps(self.doc.topology, pickle.HIGHEST_PROTOCOL)
        collective = self.collective.currentText()
        started = self.controller.run(f"Advising on {collective}", self._done, advice_of,
                                      pickled, collective, self.failures.isChecked())
        if started:
            self.summary.setText(f"Advising on {collective}…")
        return started

    def _done(self, advice: dict[str, Any]) -> None:
        self.show_advice(advice)
        window = self.window()
        if hasattr(window, "statusBar"):
            window.statusBar().showMessage(
                f"Advised on {advice['collective']}: optimum "
                f"{_gbps(advice['optimum_exact'])} GB/s.", 8000)
        self.advised.emit(advice)

    def _mark_stale(self, *_args: object) -> None:
        if self.advice is not None and not self.stale:
            self.stale = True
            self.summary.setText(self.summary.text() + "  (The drawing changed since: "
                                 "press Advise again.)")

    # ------------------------------------------------------------ showing

    def show_advice(self, advice: dict[str, Any]) -> None:
        self.advice = advice
        self.stale = False
        optimum = _gbps(advice["optimum_exact"])
        limiting = [c["name"] for c in advice["classes"] if c.get("limits_optimum")]
        text = (f"{advice['collective']} optimum {optimum} GB/s. Bottleneck: "
                f"{advice['bottleneck']['text']}")
        if limiting:
            text += f" Raising {', '.join(limiting)} raises it."
        else:
            text += " No class raises it alone (see the upgrades)."
        if "optimum_note" in advice:
            note = advice["optimum_note"]
            text += " " + note[:1].upper() + note[1:] + "."
        self.summary.setText(text)
        rows = advice["classes"]
        self.classes.setRowCount(len(rows))
        for r, c in enumerate(rows):
            limits = c.get("limits_optimum")
            cells = [c["name"], str(len(c["links"])), _gbps(c["bandwidth"]),
                     _gbps(c.get("keeps_optimum_down_to")),
                     _gbps(c.get("optimum_at_double")), "yes" if limits else ""]
            for col, text in enumerate(cells):
                item = _item(text, "exact: " + str(c.get("keeps_optimum_down_to"))
                             if col == 3 else "")
                if limits:
                    item.setForeground(pg.mkColor(LIMITS))
                self.classes.setItem(r, col, item)
        ups = advice.get("upgrades", [])
        self.upgrades.setRowCount(len(ups))
        for r, u in enumerate(ups):
            change = ", ".join(f"{k} → {_gbps(v)}" for k, v in u["bandwidths"].items())
            cells = [change, _gbps(u["optimum"]), f"+{u['gain_percent']:g} %",
                     u.get("price", "")]
            for col, text in enumerate(cells):
                self.upgrades.setItem(r, col, _item(str(text)))
        fails = advice.get("failures") or []
        self.failure_table.setRowCount(len(fails))
        for r, f in enumerate(fails):
            cells = [f["element"], str(f["alike"]), _gbps(f["optimum"]),
                     f"-{f['loss_percent']:g} %"]
            for col, text in enumerate(cells):
                self.failure_table.setItem(r, col, _item(text, " ".join(f["cut"][:20])))
        self.tabs.setTabText(1, f"Failures ({len(fails)})" if fails else "Failures")
        if rows:
            self.classes.selectRow(self._most_telling(rows))
        self._plot_selected()

    @staticmethod
    def _most_telling(rows: list[dict[str, Any]]) -> int:
        """The class shown first: one that limits, else the one that can drop furthest
        without loss (its curve shows the free margin)."""
        for r, c in enumerate(rows):
            if c.get("limits_optimum"):
                return r

        def slack(r: int) -> Fraction:
            c = rows[r]
            low = c.get("keeps_optimum_down_to")
            return 1 - Fraction(low) / Fraction(c["bandwidth"]) if low else Fraction(0)
        return max(range(len(rows)), key=slack)

    def _plot_selected(self) -> None:
        self.plot.clear()
        if self.advice is None:
            return
        chosen = self.classes.selectedItems()
        if not chosen:
            return
        c = self.advice["classes"][chosen[0].row()]
        points = c.get("curve") or []
        xs = [float(Fraction(p["bandwidth"])) for p in points]
        ys = [float(Fraction(p["optimum"])) for p in points]
        self.plot.setTitle(f"{c['name']}: optimum against its bandwidth", color="#2d3440",
                           size="10pt")
        self.plot.plot(xs, ys, pen=pg.mkPen(CURVE, width=2), symbol="o", symbolSize=6,
                       symbolBrush=CURVE)
        today = float(Fraction(c["bandwidth"]))
        self.plot.addItem(pg.InfiniteLine(today, angle=90, pen=pg.mkPen(TODAY, width=1),
                                          label="today", labelOpts={"color": TODAY,
                                                                    "position": 0.9}))
        if c.get("keeps_optimum_down_to") is not None:
            low = float(Fraction(c["keeps_optimum_down_to"]))
            if low != today:
                self.plot.addItem(pg.InfiniteLine(
                    low, angle=90, pen=pg.mkPen(THRESHOLD, width=1, style=Qt.PenStyle.DashLine),
                    label="keeps optimum", labelOpts={"color": THRESHOLD, "position": 0.75}))

    # ------------------------------------------------------------ editing

    def apply_selected(self) -> bool:
        """Apply the chosen upgrade as one undoable edit, then advise again."""
        chosen = self.upgrades.selectedItems()
        if self.advice is None or not chosen:
            return False
        upgrade = self.advice["upgrades"][chosen[0].row()]
        return self.apply_upgrade({k: Fraction(v) for k, v in upgrade["bandwidths"].items()})

    def apply_upgrade(self, bandwidths: dict[str, Fraction]) -> bool:
        """Set each named class to its new per-link bandwidth (its links scale with
        its widest one) in one undo step; False when a class is no longer there."""
        topology = self.doc.topology
        try:
            classes = {c.name: c for c in link_classes(topology)}
        except CanopyError as exc:
            self.summary.setText(str(exc))
            return False
        keys = {index: key for key, index in self.doc.link_indices().items()}
        changes: dict[int, dict[str, tuple[object, object]]] = {}
        for name, value in bandwidths.items():
            if name not in classes:
                self.summary.setText(f"The drawing has no class '{name}' any more; "
                                     "press Advise again.")
                return False
            lc = classes[name]
            for i in lc.links:
                old = topology.links[i].bandwidth
                new = old * value / lc.bandwidth
                if new != old:
                    changes[keys[i]] = {"bandwidth": (old, new)}
        if not changes:
            return False
        what = ", ".join(f"{k} to {format_gbps(v)} GB/s" for k, v in bandwidths.items())
        self.doc.undo_stack.push(EditLinks(self.doc, changes, f"Upgrade {what}"))
        self.start()
        return True

    def name_selection(self, name: str | None = None) -> bool:
        """Put the canvas's selected links in class ``name`` (asked for when None)."""
        keys = self.scene.selected_link_keys() if self.scene is not None else []
        if not keys:
            self.summary.setText("Select links on the canvas first, then name their class.")
            return False
        if name is None:
            name, ok = QInputDialog.getText(self, "Name class",
                                            f"Class of the {len(keys)} selected links:")
            if not ok:
                return False
        try:
            link_class_name({"class": name}, 0) if name else None
        except CanopyError as exc:
            self.summary.setText(str(exc))
            return False
        changes: dict[int, dict[str, tuple[object, object]]] = {}
        for key in keys:
            old = self.doc.link(key).extra.get("class")
            if old != (name or None):
                changes[key] = {"link_class": (old, name or None)}
        if changes:
            self.doc.undo_stack.push(EditLinks(self.doc, changes,
                                               f"Name class '{name}' of {len(keys)} links"))
        return True
