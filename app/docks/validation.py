"""The Validation dock: live list of what stops ForestColl from running on the drawing.

The check (:func:`canopy.engine.topology.find_problems`) runs a moment after the last edit, so
typing and dragging never wait for it. Clicking a message selects the nodes and links
it names.
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QDockWidget, QListWidget, QListWidgetItem, QWidget

from canopy.app.document import Document
from canopy.engine.topology import find_problems

DELAY_MS = 300
ROLE_CULPRITS = Qt.ItemDataRole.UserRole + 1


class ValidationDock(QDockWidget):
    """Problems of the current topology; ``culprits_activated`` on click."""

    culprits_activated = Signal(list, list)
    """(node ids, link keys) named by the clicked message."""
    summary_changed = Signal(str, bool)
    """(one-line summary, whether the topology is fine)."""

    def __init__(self, doc: Document, parent: QWidget | None = None):
        super().__init__("Validation", parent)
        self.setObjectName("ValidationDock")
        self.doc = doc
        self.list = QListWidget()
        self.list.setWordWrap(True)
        self.list.itemClicked.connect(self._activate)
        self.list.itemActivated.connect(self._activate)
        self.setWidget(self.list)
        self.last_check_seconds = 0.0
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DELAY_MS)
        self._timer.timeout.connect(self.check_now)
        doc.edited.connect(self._timer.start)
        self.check_now()

    def check_now(self) -> None:
        """Run the check and show the result (normally called by the debounce timer)."""
        self._timer.stop()
        start = time.perf_counter()
        problems = find_problems(self.doc.topology)
        self.last_check_seconds = time.perf_counter() - start
        self.list.clear()
        count = len(self.doc.topology.links)
        for problem in problems:
            keys = [self.doc.key_at(i) for i in problem.links if i < count]
            item = QListWidgetItem("⚠ " + problem.message[0].upper() + problem.message[1:])
            item.setData(ROLE_CULPRITS, (list(problem.nodes), keys))
            item.setForeground(QColor("#8a1c12"))
            item.setToolTip("Click to select the nodes and links at fault.")
            self.list.addItem(item)
        if problems:
            summary = f"{len(problems)} problem{'s' if len(problems) > 1 else ''}: " \
                      f"{problems[0].message}"
            self.setWindowTitle(f"Validation ({len(problems)})")
        else:
            summary = "Ready for ForestColl: balanced and connected."
            self.setWindowTitle("Validation")
            item = QListWidgetItem("✓ " + summary)
            item.setForeground(QColor("#2e6b23"))
            self.list.addItem(item)
        self.summary_changed.emit(summary, not problems)

    def messages(self) -> list[str]:
        return [self.list.item(i).text() for i in range(self.list.count())]

    def _activate(self, item: QListWidgetItem) -> None:
        culprits = item.data(ROLE_CULPRITS)
        if culprits:
            nodes, keys = culprits
            self.culprits_activated.emit(
                [n for n in nodes if self.doc.has_node(n)], keys)
