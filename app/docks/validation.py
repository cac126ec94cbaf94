"""The Validation dock: live list of what stops ForestColl from running on the drawing.

The check (:func:`canopy.engine.model.topology.find_problems`) runs a moment after the last
edit, so typing and dragging never wait for it; on drawings of :data:`IN_JOB_FROM` links or
more, where checking takes long enough to be felt, it runs in an engine job's child process.
Clicking a message selects the nodes and links it names.
"""

from __future__ import annotations

import pickle
import time

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QDockWidget, QListWidget, QListWidgetItem, QWidget

from canopy.app.background import problems_of
from canopy.app.document import Document
from canopy.app.job_runner import EngineJob
from canopy.engine.model.topology import Problem, find_problems

DELAY_MS = 300
IN_JOB_FROM = 2000
"""Links from which the check after an edit runs in a child process."""
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
        self._timer.timeout.connect(self._check_soon)
        doc.edited.connect(self._timer.start)
        doc.edited.connect(self._count_edit)
        self._edits = 0
        self._job: EngineJob | None = None
        self.check_now()

    def _count_edit(self) -> None:
        self._edits += 1

    def _check_soon(self) -> None:
        """After edits: at once on small drawings, in a child process on large ones."""
        if len(self.doc.topology.links) < IN_JOB_FROM:
            self.check_now()
            return
        if self._job is not None:  # a newer drawing to check
            self._job.cancel()
            self._job.deleteLater()
        edits = self._edits
        job = self._job = EngineJob(problems_of, pickle.dumps(self.doc.topology), parent=self,
                                    background=True)
        job.finished.connect(lambda problems: self._checked(job, edits, problems))
        job.failed.connect(lambda _message: self._checked(job, edits, None))
        job.start()

    def _checked(self, job: EngineJob, edits: int, problems: list[Problem] | None) -> None:
        if self._job is job:
            self._job = None
        job.deleteLater()
        if problems is None or edits != self._edits:
            self.check_now()  # the job failed, or the drawing changed meanwhile
        else:
            self._show(problems)

    def check_now(self) -> None:
        """Run the check and show the result (normally called by the debounce timer)."""
        self._timer.stop()
        start = time.perf_counter()
        problems = find_problems(self.doc.topology)
        self.last_check_seconds = time.perf_counter() - start
        self._show(problems)

    def _show(self, problems: list[Problem]) -> None:
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
