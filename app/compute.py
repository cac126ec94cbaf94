"""Solving the document in the background and knowing when the results went stale.

:class:`ComputeController` snapshots the topology, runs
:func:`canopy.app.solution.compute_solution` in an
:class:`~canopy.app.job_runner.EngineJob`, and keeps the last
:class:`~canopy.app.solution.Solution`. On large drawings a bound-only job
(:func:`canopy.app.solution.compute_bound`: optimum, cut, k) runs first, so the
bound is shown within a second while the schedule is still being built. The executed
times (a simulation, far longer than the solve at 32-64 GPUs) follow the solution in a job
of their own (:func:`canopy.app.background.executed_of`), so the results are shown as
soon as the schedule is built and the time plot gains its executed curve after; that
job's process starts once the window has shown the results (:attr:`ComputeController.when_shown`).

Every edit that could change a schedule (nodes, links, kinds, bandwidths, latencies; not
moves or labels) is checked against the solved topology's
:meth:`~canopy.engine.model.topology.Topology.fingerprint`: the results are *stale* as long as they
differ,
and fresh again if the edits are undone.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QEventLoop, QObject, QTimer, Signal

from canopy.app.background import bound_of, executed_of, solution_of
from canopy.app.document import Document
from canopy.app.job_runner import EngineJob
from canopy.app.solution import Bound, Solution

BOUND_FIRST_NODES = 64
"""From this many compute nodes on, a solve first runs a bound-only job (the optimum is a
small part of a full solve there: see bench/scale.py)."""


class ComputeController(QObject):
    """Starts and cancels background work; owns the current solution and its freshness."""

    started = Signal(str)             # what is being computed, for the status bar
    progress = Signal(str, float)     # phase, fraction within the phase
    busy_changed = Signal(bool)
    solution_changed = Signal(object)  # the new Solution, or None when forgotten
    executed_changed = Signal(object)  # the Solution again, its executed times now in
    bound_changed = Signal(object)     # the Bound shown while the schedule is built, or None
    stale_changed = Signal(bool)
    failed = Signal(str, str)         # (what failed, one-sentence message)
    cancelled = Signal()

    def __init__(self, doc: Document, parent: QObject | None = None):
        super().__init__(parent)
        self.doc = doc
        self.solution: Solution | None = None
        self.bound: Bound | None = None
        """The optimum of the solve under way (None once its schedule arrived)."""
        self.stale = False
        self.job: EngineJob | None = None
        self._snapshot_at = -1
        self._pickled = b""        # the snapshot being solved, pickled
        self.bound_first_nodes = BOUND_FIRST_NODES
        self.when_shown: Callable[[Callable[[], None]], None] = lambda start: start()
        """Called with the start of the executed times' job as a solution arrives; calls it
        once the window has shown that solution (by default at once). A window showing
        results over turns of its event loop starts the simulation after them: started
        with them, its process takes a core from the showing, and its progress events ask
        the GUI thread for the interpreter lock in the middle of it."""
        self._busy = False
        self._changes = 0
        """Edits that could change a schedule so far: a result solved from a snapshot taken
        at the current count is fresh without comparing signatures (which sums every
        bandwidth, slow on large drawings)."""
        self._check = QTimer(self)
        self._check.setSingleShot(True)
        self._check.setInterval(0)
        self._check.timeout.connect(self.check_now)
        for signal in (doc.node_added, doc.node_removed, doc.node_changed, doc.node_renamed,
                       doc.link_added, doc.link_removed, doc.link_changed, doc.reset):
            signal.connect(self._check.start)
            signal.connect(self._count_change)

    # ------------------------------------------------------------ jobs

    @property
    def busy(self) -> bool:
        return self.job is not None

    def solve(self, collective: str = "allgather", k: int | None = None) -> bool:
        """Start solving a snapshot of the document; False if something is running.

        On a drawing with at least :attr:`bound_first_nodes` compute nodes (and k not
        fixed) the bound comes first from its own job, then the schedule's job starts.
        """
        if self.job is not None:
            return False
        pickled = self._pickled = pickle.dumps(self.doc.topology, pickle.HIGHEST_PROTOCOL)
        self._snapshot_at = self._changes
        what = f"Solving {collective}" + (f" with k = {k}" if k is not None else "")
        if k is None and len(self.doc.topology.compute_nodes()) >= self.bound_first_nodes:
            def full(bound: Bound) -> None:
                self.run(what, self._solved, solution_of, pickled, collective, k)
                self._bounded(bound)
            return self.run(f"Finding the optimum of {collective}", full, bound_of,
                            pickled, collective)
        return self.run(what, self._solved, solution_of, pickled, collective, k)

    def run(self, what: str, done: Callable[[Any], None], func: Callable[..., Any],
            *args: Any, stopped: Callable[[str], None] | None = None,
            start: Callable[[Callable[[], None]], None] | None = None, **kwargs: Any) -> bool:
        """Run ``func(*args, progress=..., **kwargs)`` in a child process, then
        ``done(result)``; False (and nothing started) while another job runs. Where it
        fails or is cancelled, ``stopped(why)`` runs first, if given. With ``start``, the
        job is under way (busy, cancellable) at once but its process starts when
        ``start`` calls the function it is given.

        ``func`` must be a module-level function and its arguments and result picklable.
        """
        if self.job is not None:
            return False
        job = self.job = EngineJob(func, *args, parent=self, **kwargs)
        job.progress.connect(self.progress)
        job.finished.connect(lambda result: self._ended(job, lambda: done(result)))

        def ended(why: str, then: Callable[[], None]) -> None:
            if stopped is not None:
                stopped(why)
            then()

        job.failed.connect(lambda message: self._ended(job, lambda: ended(
            "failed", lambda: self.failed.emit(what, message))))
        job.cancelled.connect(lambda: self._ended(job, lambda: ended(
            "cancelled", self.cancelled.emit)))
        self.started.emit(what)
        if not self._busy:
            self._busy = True
            self.busy_changed.emit(True)

        def go() -> None:
            if self.job is job:     # (not cancelled meanwhile)
                job.start()

        (start or (lambda now: now()))(go)
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

    def _ended(self, job: EngineJob, then: Callable[[], None]) -> None:
        """A job ended: ``then()`` (which may start the next job of a chain, keeping the
        controller busy), and not busy any more unless it did."""
        if self.job is job:
            self.job = None
        job.deleteLater()
        then()
        if self.job is None and self._busy:
            self._busy = False
            self.busy_changed.emit(False)

    def _count_change(self, *_args: object) -> None:
        self._changes += 1

    def _differs(self, solved: tuple[object, ...]) -> bool:
        """Whether the document changed since the snapshot with signature ``solved``."""
        if self._changes == self._snapshot_at:
            return False
        return solved != self.doc.topology.fingerprint()

    def _bounded(self, bound: Bound) -> None:
        """The bound of a new solve: it replaces the previous results."""
        self.forget()
        self.bound = bound
        self.stale = self._differs(bound.signature)
        self.bound_changed.emit(bound)
        self.stale_changed.emit(self.stale)

    def _solved(self, solution: Solution) -> None:
        self.solution = solution
        if self.bound is not None:  # the solution replaces it
            self.bound = None
            self.bound_changed.emit(None)
        self.stale = self._differs(solution.signature)
        if solution.schedule_to_simulate:     # started first: the status line then says
            self.run("Simulating the executed time", lambda times: self._simulated(   # solved
                solution, times, ""), executed_of, self._pickled,
                solution.schedule_to_simulate, start=self.when_shown,
                stopped=lambda why: self._simulated(solution, [], f"simulation {why}"))
        self.solution_changed.emit(solution)
        self.stale_changed.emit(self.stale)

    def _simulated(self, solution: Solution, times: list[Any], note: str) -> None:
        """The executed times of ``solution`` arrived (or ``note`` says why not): they
        complete it (the same object every view holds), unless another solution replaced
        it meanwhile."""
        if self.solution is not solution:
            return
        solution.executed_us, solution.executed_note = times, note
        solution.schedule_to_simulate = b""
        self.executed_changed.emit(solution)

    # ------------------------------------------------------------ freshness

    @property
    def fresh(self) -> bool:
        """There are results and they belong to the topology as it is now."""
        return self.solution is not None and not self.stale

    def forget(self) -> None:
        """Drop the results (another topology was opened: they do not describe it)."""
        if self.bound is not None:
            self.bound = None
            self.bound_changed.emit(None)
        if self.solution is None:
            return
        self.solution = None
        self.stale = False
        self.solution_changed.emit(None)
        self.stale_changed.emit(False)

    def check_now(self) -> None:
        """Compare the document with the solved topology (normally run after each edit)."""
        self._check.stop()
        shown = self.solution or self.bound
        if shown is None:
            return
        stale = shown.signature != self.doc.topology.fingerprint()
        if stale != self.stale:
            self.stale = stale
            self.stale_changed.emit(stale)
