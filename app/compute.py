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

import gc
import sys
import time
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QEventLoop, QObject, QTimer, Signal

from canopy.app.document import Document
from canopy.app.solution import Solution, compute_solution, signature
from canopy.app.solve_worker import SolveJob

PROGRESS_INTERVAL = 0.05
"""Seconds between progress signals within one phase."""
JOB_SWITCH_INTERVAL = 0.0001
"""Interpreter switch interval while a job runs (seconds; Python's default is 0.005).

The engine is pure Python, so the worker holds the interpreter lock whenever it can.
PySide releases the lock around calls into Qt, and each time the GUI thread wants it
back it may wait a whole switch interval: painting or handling an event makes hundreds
of such calls, which at 5 ms each would freeze the window for seconds. A short interval
only costs the worker time while the GUI thread is actually busy."""


class Throttled:
    """A progress callback passing on at most one report per phase and interval.

    Every queued signal makes the GUI thread take the interpreter lock from the busy
    worker; hundreds of reports per second would stall the window. Cancellation is still
    noticed within one interval.
    """

    def __init__(self, report: Callable[[str, float], None],
                 interval: float = PROGRESS_INTERVAL):
        self.report = report
        self.interval = interval
        self.phase = ""
        self.last = 0.0

    def __call__(self, phase: str, fraction: float) -> None:
        now = time.perf_counter()
        if phase != self.phase or fraction >= 1.0 or now - self.last >= self.interval:
            self.phase, self.last = phase, now
            self.report(phase, fraction)


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
        self.job: SolveJob | None = None
        self._switch_interval = sys.getswitchinterval()
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
        return self.run(what, lambda report: compute_solution(topology, collective, k, report),
                        self._solved)

    def run(self, what: str, work: Callable[[Callable[[str, float], None]], Any],
            done: Callable[[Any], None]) -> bool:
        """Run any engine ``work(report)`` in the background; ``done(result)`` afterwards."""
        if self.job is not None:
            return False
        job = self.job = SolveJob(lambda report: work(Throttled(report)), self)
        job.progress.connect(self.progress)
        job.finished.connect(lambda result: (self._end(), done(result)))
        job.failed.connect(lambda message: (self._end(), self.failed.emit(what, message)))
        job.cancelled.connect(lambda: (self._end(), self.cancelled.emit()))
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(JOB_SWITCH_INTERVAL)
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
        sys.setswitchinterval(self._switch_interval)
        job, self.job = self.job, None
        if job is not None:
            job.deleteLater()
        self.busy_changed.emit(False)

    def _solved(self, solution: Solution) -> None:
        # A solution is a few hundred thousand long-lived objects (trees, edges, routes on
        # 512 GPUs). Frozen, they are left out of the cyclic collector's full passes,
        # which would otherwise stall the window for 100+ ms at random moments (such as
        # selecting a tree); the previous solution's objects are unfrozen to be freed.
        gc.unfreeze()
        self.solution = solution
        gc.freeze()
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
        gc.unfreeze()
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
