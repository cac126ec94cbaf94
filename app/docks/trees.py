"""The Trees dock: every tree of the schedule, filterable by root, and the selected one
drawn as a tree (diagram) and listed as an outline.

A tree of multiplicity m stands for m unit trees, each carrying 1/k of its root's shard
at the tree bandwidth y (ForestColl (arXiv:2402.06787) §3.2), so the listed bandwidth is m·y.
"""

from __future__ import annotations

import re
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QItemSelectionModel,
    QModelIndex,
    QPersistentModelIndex,
    QRegularExpression,
    QSortFilterProxyModel,
    Qt,
    Signal,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QSplitter,
    QTableView,
    QTabWidget,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from canopy.app.docks.banner import SolutionDock
from canopy.app.docks.tree_diagram import TreeDiagramView
from canopy.app.solution import ShownTree, Solution
from canopy.engine.model.limits import number_text
from canopy.engine.model.topology import format_gbps

TITLE = "Trees"
ALL_ROOTS = "All roots"
COLUMNS = ["Root", "Tree", "Mult.", "GB/s", "Height", "Phase"]
COLUMN_TIPS = ["The compute node whose shard the tree carries",
               "Which of its root's distinct trees this is (i of n)",
               "Multiplicity m: identical unit trees this row stands for",
               "Bandwidth of the row: m · y",
               "Longest root-to-leaf chain of logical edges",
               "Which phase of the collective runs the tree"]
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
POSITION_ROLE = Qt.ItemDataRole.UserRole + 2


class TreeTableModel(QAbstractTableModel):
    """One row per listed tree: root, index, multiplicity, bandwidth (GB/s), height."""

    def __init__(self, parent: Any = None):
        super().__init__(parent)
        self.trees: list[ShownTree] = []
        self.per_root: dict[tuple[str, str], int] = {}

    def set_trees(self, trees: list[ShownTree]) -> None:
        self.beginResetModel()
        self.trees = trees
        self.per_root = {}
        for shown in trees:
            key = (shown.tree.root, shown.phase)
            self.per_root[key] = self.per_root.get(key, 0) + 1
        self.endResetModel()

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.trees)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation != Qt.Orientation.Horizontal:
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        if role == Qt.ItemDataRole.ToolTipRole:
            return COLUMN_TIPS[section]
        return None

    def data(self, index: QModelIndex | QPersistentModelIndex,
             role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        shown = self.trees[index.row()]
        column = index.column()
        values: list[object] = [shown.tree.root, shown.tree.index, shown.tree.multiplicity,
                                shown.bandwidth, shown.height, shown.phase]
        if role == Qt.ItemDataRole.DisplayRole:
            value = values[column]
            if column == 1:
                count = self.per_root.get((shown.tree.root, shown.phase), 1)
                return f"{shown.tree.index + 1} of {count}"
            return format_gbps(shown.bandwidth) if column == 3 else \
                number_text(value) if isinstance(value, int) else str(value)
        if role == SORT_ROLE:
            return float(shown.bandwidth) if column == 3 else values[column]
        if role == POSITION_ROLE:
            return index.row()
        if role == Qt.ItemDataRole.TextAlignmentRole and column in (1, 2, 3, 4):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


class TreesDock(SolutionDock):
    """The tree list, a root filter, and the selected tree as a diagram and an outline."""

    tree_selected = Signal(int)
    """Position of the selected tree in ``solution.trees``, or -1 for none."""

    disable_when_stale = False

    def __init__(self, parent: QWidget | None = None):
        super().__init__(TITLE, "TreesDock", parent)
        self.solution: Solution | None = None
        self.model = TreeTableModel(self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(SORT_ROLE)
        self.proxy.setFilterKeyColumn(0)

        self.body = QSplitter(Qt.Orientation.Vertical)
        top = QWidget()
        top_layout = QVBoxLayout(top)
        top_layout.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        row.addWidget(QLabel("Root:"))
        self.root_filter = QComboBox()
        self.root_filter.setMinimumContentsLength(12)
        self.root_filter.currentTextChanged.connect(self._filter)
        row.addWidget(self.root_filter, 1)
        self.count = QLabel()
        row.addWidget(self.count)
        top_layout.addLayout(row)
        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(-1, Qt.SortOrder.AscendingOrder)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(22)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setAlternatingRowColors(True)
        self.table.selectionModel().currentRowChanged.connect(self._current_changed)
        top_layout.addWidget(self.table)
        self.body.addWidget(top)

        self.tabs = QTabWidget()
        self.diagram = TreeDiagramView()
        self.outline = QTreeWidget()
        self.outline.setHeaderLabels(["Node", "Switch hops from the parent", "Depth"])
        self.outline.setUniformRowHeights(True)
        self.tabs.addTab(self.diagram, "Diagram")
        self.tabs.addTab(self.outline, "Outline")
        self.tabs.currentChanged.connect(self._tab_changed)
        self.shown: ShownTree | None = None
        self._outline_of: ShownTree | None = None
        self.body.addWidget(self.tabs)
        self.body.setSizes([220, 320])
        self.content_layout.addWidget(self.body, 1)
        self.setWidget(self.content)
        self.set_solution(None, False)

    # ------------------------------------------------------------ state

    def set_solution(self, solution: Solution | None, stale: bool) -> None:
        self.solution = solution
        self.model.set_trees(solution.trees if solution else [])
        phases = {t.phase for t in solution.trees} if solution else set()
        self.table.setColumnHidden(COLUMNS.index("Phase"), len(phases) < 2)
        self.root_filter.blockSignals(True)
        self.root_filter.clear()
        self.root_filter.addItem(ALL_ROOTS)
        if solution is not None:
            self.root_filter.addItems(solution.schedule.compute_nodes)
        self.root_filter.blockSignals(False)
        self._filter(ALL_ROOTS)
        self._size_columns()
        self._show(None)
        self.set_stale(stale)

    def _size_columns(self) -> None:
        """Widths from the longest root name and the headers (measuring every row of a
        large schedule would take too long)."""
        metrics = self.table.fontMetrics()
        header = self.table.horizontalHeader().fontMetrics()
        roots = self.solution.schedule.compute_nodes if self.solution else []
        widest = max((metrics.horizontalAdvance(r) for r in roots), default=0)
        for column, name in enumerate(COLUMNS):
            sample = {"Root": "", "Tree": "88 of 88", "Mult.": "8888", "GB/s": "888.88",
                      "Height": "888", "Phase": "both phases"}[name]
            width = max(header.horizontalAdvance(name), metrics.horizontalAdvance(sample),
                        widest if name == "Root" else 0)
            self.table.setColumnWidth(column, width + 14)

    def _filter(self, root: str) -> None:
        current = self.current_position()
        if root == ALL_ROOTS or not root:
            self.proxy.setFilterRegularExpression(QRegularExpression())
        else:
            self.proxy.setFilterRegularExpression(
                QRegularExpression("^" + re.escape(root) + "$"))
        total = len(self.model.trees)
        shown = self.proxy.rowCount()
        self.count.setText(f"{shown} of {total} trees" if shown != total else f"{total} trees")
        if current >= 0 and not self._select_source_row(current):
            self.table.clearSelection()
            self._show(None)

    # ------------------------------------------------------------ selection

    def current_position(self) -> int:
        index = self.table.selectionModel().currentIndex()
        if not index.isValid() or not self.table.selectionModel().isRowSelected(
                index.row(), QModelIndex()):
            return -1
        return int(self.proxy.data(index, POSITION_ROLE))

    def select_position(self, position: int) -> bool:
        """Select the tree at ``position`` of ``solution.trees`` (showing all roots if the
        filter hides it); False if there is no such tree."""
        if not 0 <= position < len(self.model.trees):
            return False
        if not self._select_source_row(position):
            self.root_filter.setCurrentText(ALL_ROOTS)
            return self._select_source_row(position)
        return True

    def _select_source_row(self, row: int) -> bool:
        index = self.proxy.mapFromSource(self.model.index(row, 0))
        if not index.isValid():
            return False
        flags = (QItemSelectionModel.SelectionFlag.ClearAndSelect
                 | QItemSelectionModel.SelectionFlag.Rows)
        self.table.selectionModel().setCurrentIndex(index, flags)
        self.table.scrollTo(index)
        return True

    def step(self, delta: int) -> None:
        """Select the next (+1) or previous (-1) tree in the list as shown."""
        rows = self.proxy.rowCount()
        if not rows:
            return
        current = self.table.selectionModel().currentIndex()
        row = current.row() + delta if current.isValid() else (0 if delta > 0 else rows - 1)
        row = max(0, min(rows - 1, row))
        flags = (QItemSelectionModel.SelectionFlag.ClearAndSelect
                 | QItemSelectionModel.SelectionFlag.Rows)
        index = self.proxy.index(row, 0)
        self.table.selectionModel().setCurrentIndex(index, flags)
        self.table.scrollTo(index)

    def _current_changed(self, current: QModelIndex, previous: QModelIndex) -> None:
        position = int(self.proxy.data(current, POSITION_ROLE)) if current.isValid() else -1
        self._show(self.model.trees[position] if position >= 0 else None)
        self.tree_selected.emit(position)

    def _show(self, shown: ShownTree | None) -> None:
        self.shown = shown
        self.diagram.show_tree(shown)
        self.outline.clear()
        self._outline_of = None
        if self.tabs.currentWidget() is self.outline:
            self._fill_outline()

    def _tab_changed(self) -> None:
        if self.tabs.currentWidget() is self.outline and self._outline_of is not self.shown:
            self._fill_outline()

    def _fill_outline(self) -> None:
        """List the shown tree in the outline (only while the Outline tab is open)."""
        shown = self._outline_of = self.shown
        self.outline.clear()
        if shown is None:
            return
        tree = shown.tree
        depth = tree.depth()
        root = QTreeWidgetItem([tree.root, "(root)", "0"])
        items = {tree.root: root}
        for edge in tree.edges:
            hops = " → ".join(edge.path[1:-1]) or "direct link"
            item = QTreeWidgetItem(items[edge.src], [edge.dst, hops, str(depth[edge.dst])])
            items[edge.dst] = item
        self.outline.addTopLevelItem(root)
        self.outline.expandAll()
        self.outline.resizeColumnToContents(0)
