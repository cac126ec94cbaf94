"""Engine jobs for the editor: a child process per job, its events read off the GUI thread.

:class:`EngineJob` wraps :class:`canopy.engine.process.child_jobs.ChildJob` for Qt. A
reader thread waits on the job's pipe and receives each event there, so reading a large
result (a 1024-GPU solution takes a noticeable time to unpickle) and waiting for a busy
child to write it never hold up the event loop; each event then reaches the GUI thread as
a queued signal. The window shares no interpreter lock with the engine (it runs in the
child), no process-wide tweaks are needed, and :meth:`EngineJob.cancel` ends the child at
once.

The reader thread does need the interpreter lock to pickle a job's call and to unpickle
its events. Between two pickle frames it waits for the event loop to have a turn
(:func:`_turn`), so the two take the lock in turns: on a busy machine, a reader that
merely let go of the lock for a moment took it back before the event loop was scheduled
again, and the loop, needing the lock for every call into Python, stalled
(bench/gui_responsiveness.py measures it).
"""

from __future__ import annotations

import functools
import gc
import itertools
import select
import threading
from collections.abc import Callable, Iterator
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal

from canopy.app.heap import collector_paused
from canopy.engine.process.child_jobs import ChildJob, Event, warm_up_fork_server

PHASES = ["optimum", "switch removal", "tree packing", "mapping back", "verification"]
LARGE_EVENT_OBJECTS = 20_000
"""Objects made by decoding an event past which the reader thread makes a middle pass."""
TURN_WAIT_S = 0.1
"""Longest a reader thread waits for the event loop's turn between two frames (a loop
that is not running, in a script or while the application quits, does not stop it)."""


def warm_up() -> None:
    """Start the engine's fork server now, while the editor is small and no window waits.

    The first job otherwise starts it from the reader thread: a fork of the whole editor
    process, holding the interpreter lock (and so the event loop) for tens of
    milliseconds in the middle of the user's first solve.
    """
    warm_up_fork_server()


class _Dispatcher(QObject):
    """Carries every job's events from the reader threads to the GUI thread.

    It is created once, in the GUI thread, and never deleted (but by the interpreter as
    it quits: :func:`_while_alive`), so a reader thread only ever emits through an object
    that outlives it. Each job is registered here from
    :meth:`EngineJob.start` until its reader's last event or its deletion, whichever
    comes first; both happen in the GUI thread. An event for a job that is gone (its
    window closed) is dropped here: no reader thread holds, emits through or deletes an
    object that a closing window deletes (that race crashed the process).
    """

    job_event = Signal(int, object)     # job key, event (not "event": QObject's handler)
    turn = Signal(object)               # a threading.Event the event loop sets in its turn

    def __init__(self) -> None:
        super().__init__()
        self.jobs: dict[int, EngineJob] = {}
        self.job_event.connect(self._deliver, Qt.ConnectionType.QueuedConnection)
        self.turn.connect(self._turn, Qt.ConnectionType.QueuedConnection)

    def _turn(self, done: threading.Event) -> None:
        """A reader thread waits for the event loop's turn: this is it."""
        done.set()

    def _deliver(self, key: int, event: Event | None) -> None:
        if gc.get_count()[0] > LARGE_EVENT_OBJECTS:     # a large event was decoded
            gc.collect(1)
        if event is None:                   # the reader's end
            self.jobs.pop(key, None)
            return
        job = self.jobs.get(key)
        if job is not None:
            job._handle(event)


_DISPATCHER: _Dispatcher | None = None
_KEYS = itertools.count()


def _dispatcher() -> _Dispatcher:
    global _DISPATCHER
    if _DISPATCHER is None:
        _DISPATCHER = _Dispatcher()
    return _DISPATCHER


class EngineJob(QObject):
    """``func(*args, progress=..., **kwargs)`` in a child process. Connect, then start()."""

    progress = Signal(str, float)      # phase, fraction within the phase
    finished = Signal(object)          # the engine's result
    failed = Signal(str)               # one-sentence error (input, or where the log is)
    cancelled = Signal()

    def __init__(self, func: Callable[..., Any], *args: Any,
                 parent: QObject | None = None, background: bool = False,
                 **kwargs: Any) -> None:
        """``background``: work the user did not ask for and does not wait on (previews,
        checks), run at a lower priority
        (:data:`canopy.engine.process.child_jobs.CHILD_NICENESS`)."""
        super().__init__(parent)
        self._job = ChildJob(func, *args, **kwargs)
        self._job.background = background
        self._started = self._running = False
        self._stopped = threading.Event()
        """Set by cancel and deletion; the reader thread asks this, never the job itself."""
        self._dispatcher = _dispatcher()
        self._key = next(_KEYS)
        job, jobs, key, stopped = self._job, self._dispatcher.jobs, self._key, self._stopped
        # A window that closes deletes its jobs: their children end, later events drop.
        def end(*_: object) -> None:
            stopped.set()
            job.stop()
            jobs.pop(key, None)

        self.destroyed.connect(end)

    def start(self) -> None:
        """Start the child from the reader thread: pickling the arguments and, for the
        first job, waiting for the fork server to import the engine (seconds on a busy
        machine) happen off the GUI thread too.

        The reader thread gets nothing of this object: no bound method, no reference.
        Holding one, it could let go of the last reference to this object's wrapper as it
        ended, freeing the wrapper on the reader thread while the GUI thread deletes the
        object: a Qt object touched from two threads at once."""
        if self._stopped.is_set():
            return      # cancelled before it started
        self._started = self._running = True
        self._dispatcher.jobs[self._key] = self
        emit = functools.partial(_while_alive, self._dispatcher.job_event.emit, self._key)
        turn = functools.partial(_turn, functools.partial(_while_alive,
                                                          self._dispatcher.turn.emit))
        stopped = self._stopped
        threading.Thread(target=_read, args=(self._job, emit, lambda: not stopped.is_set(),
                                             turn),
                         daemon=True, name="engine-job").start()

    def is_running(self) -> bool:
        return self._running

    def cancel(self) -> None:
        """Stop the engine now (or, not started yet, never start it); ``cancelled``
        follows at once, nothing else does."""
        if self._stopped.is_set() or self._started and not self._running:
            return
        self._running = False
        self._stopped.set()
        self._job.stop()   # the reader sees the child's end and closes the pipe
        self.cancelled.emit()

    def _handle(self, event: Event) -> None:
        if not self._running:
            return  # cancelled: a late event (or the child's end) is dropped
        kind = event[0]
        if kind == "progress":
            self.progress.emit(event[1], event[2])
            return
        self._running = False
        if kind == "done":
            self.finished.emit(event[1])
        else:
            self.failed.emit(event[1])


def _while_alive(emit: Callable[..., None], *args: object) -> bool:
    """``emit(*args)`` from a reader thread; False, and nothing raised, once the dispatcher
    is gone: the interpreter deletes it as the editor quits while a reader may still run
    (it printed "Signal source has been deleted" with a traceback on the way out)."""
    try:
        emit(*args)
    except RuntimeError:
        return False
    return True


def _turn(ask: Callable[[threading.Event], bool]) -> None:
    """Between two pickle frames in a reader thread: wait until the event loop has had
    a turn (it sets the event ``ask`` sends it), or :data:`TURN_WAIT_S`."""
    done = threading.Event()
    if ask(done):
        done.wait(TURN_WAIT_S)


def _read(job: ChildJob, emit: Callable[[Event | None], bool], running: Callable[[], bool],
          turn: Callable[[], None]) -> None:
    """The job's reader thread: start the child, then pass every event of ``job``, until
    its last, to the GUI thread through the dispatcher, and then the end (``None``);
    between pickle frames, ``turn()``. Once ``emit`` fails (the editor is quitting) the
    child is stopped and the thread ends.

    The cyclic collector is paused while this thread starts the job, decodes and hands
    on events (it waits in ``select`` with the collector running, and only select's two
    small lists are made then): a pass set off by an allocation here would free the GUI
    thread's cyclic garbage, Qt objects among them, on this thread."""
    with collector_paused():
        try:
            job.start(turn)
        except Exception as exc:  # noqa: BLE001 - e.g. an argument that cannot be pickled
            emit(("crashed", f"the engine job could not start ({exc})."))
            emit(None)
            return
        if not running():
            job.stop()  # cancelled while starting
    fd = job.fileno()
    while not job.ended:
        select.select([fd], [], [])
        with collector_paused():
            events = job.events(turn)
            while (event := _decoded(events)) is not None:
                if not emit(event):
                    job.cancel()
                    return
    with collector_paused():
        emit(None)


def _decoded(events: Iterator[Event]) -> Event | None:
    """The next event (None: no more now), decoded while the reader thread has the cyclic
    collector paused (:func:`_read`).

    Decoding a 1024-GPU solution makes 65,000 objects the collector follows: unpaused,
    young passes would run over them again and again while they are decoded. The middle
    pass that then walks them once (and leaves them to the full passes the editor makes
    when idle, :class:`canopy.app.heap.IdleCollector`) runs in the GUI thread as the event
    is delivered (:meth:`_Dispatcher._deliver`), never on the reader thread.
    """
    return next(events, None)
