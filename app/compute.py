"""Solving the document in the background and knowing when the results went stale.

:class:`ComputeController` snapshots the topology, runs
:func:`canopy.app.solution.compute_solution` in a
:class:`~canopy.app.solve_worker.SolveJob`, and keeps the last
:class:`~canopy.app.solution.Solution`. Every edit that could change a schedule (nodes,
links, kinds, bandwidths, latencies; not moves or labels) is checked against the solved
topology's :func:`~canopy.app.solution.signature`: the results are *stale* as long as they
differ, and fresh again if the edits are undone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QEventLoop, QObject, QTimer, Signal

from canopy.app.document import Document
from canopy.app.job_runner import EngineJob
from canopy.app.solution import Solution, compute_solution, signature


class ComputeController(QObject):
    """Starts and cancels background work; owns the current solution and its freshness."""

    started = Signal(str)             # what is being computed, for the status bar
    progress = Signal(str, float)     # phase, fraction within the phase
    busy_changed = Signal(bool)
    solution_changed = Signal(object)  # the new Solution, or None when forgotten
    stale_changed = Signal(bool)
    failed = Signal(str, str)         # (what failed, one-sentence message)
    cancelled = Signal()

    def __init__(self, doc: Document, parent: QObject | None = None):
        super().__init__(parent)
        self.doc = doc
        self.solution: Solution | None = None
        self.stale = False
        self.job: EngineJob | None = None
        self._check = QTimer(self)
        self._check.setSingleShot(True)
        self._check.setInterval(0)
        self._check.timeout.connect(self.check_now)
        for signal in (doc.node_added, doc.node_removed, doc.node_changed, doc.node_renamed,
                       doc.link_added, doc.link_removed, doc.link_changed, doc.reset):
            signal.connect(self._check.start)

    # ------------------------------------------------------------ jobs

    @property
    def busy(self) -> bool:
        return self.job is not None

    def solve(self, collective: str = "allgather", k: int | None = None) -> bool:
        """Start solving a snapshot of the document; False if something is running."""
        topology = self.doc.snapshot()
        what = f"Solving {collective}" + (f" with k = {k}" if k is not None else "")
        return self.run(what, self._solved, compute_solution, topology, collective, k)

    def run(self, what: str, done: Callable[[Any], None], func: Callable[..., Any],
            *args: Any, **kwargs: Any) -> bool:
        """Run ``func(*args, progress=..., **kwargs)`` in a child process, then
        ``done(result)``; False (and nothing started) while another job runs.

        ``func`` must be a module-level function and its arguments and result picklable.
        """
        if self.job is not None:
            return False
        job = self.job = EngineJob(func, *args, parent=self, **kwargs)
        job.progress.connect(self.progress)
        job.finished.connect(lambda result: (self._end(), done(result)))
        job.failed.connect(lambda message: (self._end(), self.failed.emit(what, message)))
        job.cancelled.connect(lambda: (self._end(), self.cancelled.emit()))
        self.started.emit(what)
        self.busy_changed.emit(True)
        job.start()
        return True

    def cancel(self) -> None:
        if self.job is not None:
            self.job.cancel()

    def wait(self, ms: int = 60000) -> bool:
        """Run the event loop until the running job has ended and delivered its result
        (scripts, screenshots, closing the window); True if it ended within ``ms``."""
        if self.job is None:
            return True
        loop = QEventLoop()
        self.busy_changed.connect(loop.quit)
        QTimer.singleShot(ms, loop.quit)
        loop.exec()
        self.busy_changed.disconnect(loop.quit)
        return self.job is None

    def _end(self) -> None:
        job, self.job = self.job, None
        if job is not None:
            job.deleteLater()
        self.busy_changed.emit(False)

    def _solved(self, solution: Solution) -> None:
        self.solution = solution
        self.stale = solution.signature != signature(self.doc.topology)
        self.solution_changed.emit(solution)
        self.stale_changed.emit(self.stale)

    # ------------------------------------------------------------ freshness

    @property
    def fresh(self) -> bool:
        """There are results and they belong to the topology as it is now."""
        return self.solution is not None and not self.stale

    def forget(self) -> None:
        """Drop the results (another topology was opened: they do not describe it)."""
        if self.solution is None:
            return
        self.solution = None
        self.stale = False
        self.solution_changed.emit(None)
        self.stale_changed.emit(False)

    def check_now(self) -> None:
        """Compare the document with the solved topology (normally run after each edit)."""
        self._check.stop()
        if self.solution is None:
            return
        stale = self.solution.signature != signature(self.doc.topology)
        if stale != self.stale:
            self.stale = stale
            self.stale_changed.emit(stale)
