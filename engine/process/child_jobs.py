"""Engine work in a child process: progress over a pipe, a cancel that stops at once.

A long engine call (solve, compare, preview, sweep point, contention analysis) runs as a
:class:`ChildJob`: a module-level function called in a child process with the arguments given
and a ``progress`` keyword. The child sends what happens over a pipe as events:

* ``("progress", phase, fraction)``, at most one per phase every ``PROGRESS_INTERVAL``;
* ``("done", result)``, the function's (picklable) return value;
* ``("failed", message)``, the one-sentence :class:`~canopy.engine.model.errors.CanopyError`;
* ``("crashed", message)``, any other exception: its traceback goes through
  :mod:`logging` to the log file (:func:`log_file`), and the message names that file.

The parent reads events without blocking (:meth:`ChildJob.events`, or whenever
:meth:`ChildJob.fileno` is readable), so an editor's event loop never waits for the engine
and shares no interpreter lock with it. :meth:`ChildJob.cancel` ends the child process, so
cancelling takes effect at once rather than at the engine's next progress point.

Children come from a fork server (a clean process started once, with the engine's
modules imported), so a job starts in milliseconds without copying the editor's state.
The call itself (function and arguments) goes to the child over a pipe of its own, pickled
a frame at a time like large events (:class:`_FrameSink`), not inside the process object
the fork server is handed.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import pickle
import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerContext, SpawnContext
from typing import Any

from canopy.engine.model.errors import CanopyError
from canopy.engine.model.limits import memory_budget
from canopy.engine.process.allocator import batch_allocator
from canopy.engine.process.gc_tuning import batch_collector
from canopy.engine.process.lifetime import die_with_parent, forget_fork_server
from canopy.engine.process.memory_guard import over_budget_text, start_memory_guard

EXIT_OVER_BUDGET = 86
"""Exit code of a child stopped by its memory guard (its parent says why)."""

log = logging.getLogger(__name__)

PROGRESS_INTERVAL = 0.05
"""Seconds between progress events within one phase."""
PRELOAD = ["canopy.engine.process.priority", "canopy.engine.forestcoll.solve",
"canopy.engine.comparison.table",
           "canopy.engine.generators", "canopy.engine.process.fork_server_loaded"]
"""Modules the fork server imports once, so that each job starts without importing them
(the first moves it to the batch class and ties its life to its parent's before the others
are imported; the last says that loading is done)."""

CHILD_NICENESS = 5
"""Background jobs (``ChildJob(..., background=True)``: previews, checks the user did not ask
for) run at this much lower a priority than the process that started them. Every job,
and the fork server they come from, is in the batch scheduling class
(:func:`batch_scheduling`, :mod:`canopy.engine.process.priority`), which keeps an editor
responsive without taking CPU share from the job the user waits for."""


def batch_scheduling() -> None:
    """Move this process to the kernel's batch scheduling class (Linux SCHED_BATCH):
    the same share of the CPU at the same niceness, but it never preempts a task that
    wakes up (an editor's event loop). Nothing where the class does not exist."""
    policy = getattr(os, "SCHED_BATCH", None)
    if policy is not None:
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, policy, os.sched_param(0))

FORK_SERVER_OF = "CANOPY_FORK_SERVER_OF"
"""Environment variable naming (by process id) the process whose fork server this is."""
FORK_SERVER_FROM_MAIN_THREAD = "CANOPY_FORK_SERVER_FROM_MAIN_THREAD"
"""Environment variable saying ("1" or "0") whether the fork server is being started from
its parent's main thread (see
:func:`~canopy.engine.process.lifetime.fork_server_dies_with_parent`)."""

FRAME_PAUSE = 0.0001
"""Seconds a thread decoding a large event (:class:`_Frames`) or encoding a large call
(:class:`_FrameSink`) lets go of the interpreter lock between frames, unless the caller
passes a ``between_frames`` of its own."""

Event = tuple[Any, ...]


def _context() -> ForkServerContext | SpawnContext:
    os.environ[FORK_SERVER_OF] = str(os.getpid())   # see canopy.engine.process.priority
    os.environ[FORK_SERVER_FROM_MAIN_THREAD] = \
        "1" if threading.current_thread() is threading.main_thread() else "0"
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        return ctx
    return multiprocessing.get_context("spawn")


def warm_up_fork_server() -> None:
    """Start the fork server (if children come from one) before the first job needs it."""
    ctx = _context()
    if isinstance(ctx, ForkServerContext):
        from multiprocessing import forkserver
        forkserver.ensure_running()


class _PipeProgress:
    """The child's ``progress``: sends at most one event per phase and interval."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.phase = ""
        self.last = 0.0

    def __call__(self, phase: str, fraction: float) -> None:
        now = time.perf_counter()
        if phase != self.phase or fraction >= 1.0 or now - self.last >= PROGRESS_INTERVAL:
            self.phase, self.last = phase, now
            self.conn.send(("progress", phase, float(fraction)))


def _child(conn: Connection, calls: Connection, log_path: str, niceness: int,
           budget: int | None = None) -> None:
    forget_fork_server()
    die_with_parent()
    start_memory_guard(lambda message: os._exit(EXIT_OVER_BUDGET), budget)
    batch_scheduling()                        # a fork server's children are there already
    os.nice(max(0, niceness - os.nice(0)))
    batch_collector()
    batch_allocator()
    try:
        try:
            func, args, kwargs = pickle.loads(calls.recv_bytes())
        except (EOFError, OSError):
            os._exit(0)       # the parent ended (or gave up) before it sent the call
        finally:
            calls.close()
        result = func(*args, progress=_PipeProgress(conn), **kwargs)
    except (BrokenPipeError, ConnectionResetError):
        os._exit(0)           # the parent closed its end: nobody wants the result any more
    except CanopyError as exc:
        _last_word(conn, ("failed", str(exc)))
    except Exception as exc:  # an engine bug: the traceback goes to the log, not the pipe
        log_internal_error(exc, log_path)
        _last_word(conn, ("crashed", f"internal error ({exc.__class__.__name__}); "
                                     f"the traceback is in {log_path}."))
    else:
        _last_word(conn, ("done", result))
    finally:
        with contextlib.suppress(OSError):
            conn.close()


def _last_word(conn: Connection, event: Event) -> None:
    """Send a job's last event; a parent gone meanwhile (its editor quit) hears nothing,
    and nothing reaches the terminal."""
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        conn.send(event)


def log_internal_error(exc: BaseException, path: str) -> None:
    """Log ``exc`` with its traceback to the file ``path`` (never to the terminal)."""
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(name)s: %(message)s"))
    log.addHandler(handler)
    log.propagate = False
    try:
        log.error("internal error %s: %s", exc.__class__.__name__, exc, exc_info=exc)
    finally:
        log.removeHandler(handler)
        handler.close()


def log_file() -> str:
    """``$CANOPY_LOG``, or ``canopy.log`` in the user's state folder (created as needed)."""
    path = os.environ.get("CANOPY_LOG")
    if not path:
        base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"),
                                                                 ".local", "state")
        os.makedirs(os.path.join(base, "canopy"), exist_ok=True)
        path = os.path.join(base, "canopy", "canopy.log")
    return path


class _Frames:
    """``data`` as a file for :class:`pickle.Unpickler`, read one pickle frame at a time.

    ``pickle.loads`` decodes a whole event in one call that never lets go of the interpreter
    lock: a large solution holds it for a long stretch, and the editor's event loop, wanting
    the lock, waits that long. An unpickler reading from this object instead calls
    :meth:`read` once per frame (protocol 4 frames are about 64 KiB, quick to decode) and,
    from the second frame on, lets go of the lock for ``FRAME_PAUSE`` seconds first. A
    thread that wants the lock meanwhile (the event loop, which needs it for every call into
    Python: each paint and each slot) then gets it within a frame, instead of waiting out
    the interpreter's switch interval (5 ms) again and again. Decoding so takes longer in
    wall time, and the editor stays responsive meanwhile (docs/performance.md, "Editor
    responsiveness").
    """

    def __init__(self, data: bytes, between_frames: Callable[[], None] | None = None) -> None:
        self._view = memoryview(data)
        self._at = 0
        self._between = between_frames or _pause
        self.reads = 0
        self.largest_read = 0

    def read(self, size: int = -1) -> bytes:
        if self.reads:
            self._between()
        end = len(self._view) if size < 0 else min(len(self._view), self._at + size)
        chunk = bytes(self._view[self._at:end])
        self._at = end
        self.reads += 1
        self.largest_read = max(self.largest_read, len(chunk))
        return chunk

    def readinto(self, buffer: memoryview) -> int:
        chunk = self.read(len(buffer))
        buffer[:len(chunk)] = chunk
        return len(chunk)

    def readline(self) -> bytes:
        rest = self._view[self._at:]
        end = bytes(rest).find(b"\n")
        return self.read(len(rest) if end < 0 else end + 1)


def _pause() -> None:
    """Let go of the interpreter lock for a moment (between two pickle frames)."""
    time.sleep(FRAME_PAUSE)


class _FrameSink:
    """A file for :class:`pickle.Pickler` that keeps what it is given, frame by frame.

    The pickler hands over each protocol 4 frame (about 64 KiB) as it completes it, so
    ``between_frames`` runs between frames: encoding a large topology no longer holds the
    interpreter lock in one piece (:class:`_Frames` is the other way).
    """

    def __init__(self, between_frames: Callable[[], None]) -> None:
        self._between = between_frames
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        if self.parts:
            self._between()
        self.parts.append(bytes(data))
        return len(data)


def _encode(value: Any, between_frames: Callable[[], None] = _pause) -> bytes:
    """``pickle.dumps(value)``, a frame at a time (:class:`_FrameSink`)."""
    sink = _FrameSink(between_frames)
    pickle.Pickler(sink, pickle.HIGHEST_PROTOCOL).dump(value)
    return b"".join(sink.parts)


def _decode(data: bytes, between_frames: Callable[[], None] | None = None) -> Event:
    """Unpickle an event frame by frame (:class:`_Frames`), letting go of the GIL between
    frames, so the editor's event loop runs while a large result decodes.

    The cyclic collector is left alone here; the editor's reader thread pauses it around
    an event and collects once after a large one (``canopy.app.job_runner._decoded``):
    a 1024-GPU solution otherwise set off a full pass while it decoded and another in the
    event loop's turns soon after.
    """
    return pickle.Unpickler(_Frames(data, between_frames)).load()


class ChildJob:
    """One engine call in a child process.

    Examples
    --------
    >>> from canopy.engine.forestcoll.solve import solve
    >>> from canopy.engine.io.topology_json import load_sample
    >>> job = ChildJob(solve, load_sample("forestcoll-fig2.json"), "allreduce")
    >>> job.start()
    >>> kind, schedule = job.wait()[-1]
    >>> kind, schedule.collective
    ('done', 'allreduce')
    """

    def __init__(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self.func, self.args, self.kwargs = func, args, kwargs
        self.background = False   # True before start(): runs at CHILD_NICENESS lower
        self._conn: Connection | None = None
        self._process: multiprocessing.process.BaseProcess | None = None
        self.ended = False

    def start(self, between_frames: Callable[[], None] = _pause) -> None:
        """Pickle the call, start the child and send it the call; ``func`` must accept
        the ``progress`` keyword. ``between_frames`` runs between frames of the pickled
        call (a thread starting a job can give an event loop its turn there)."""
        data = _encode((self.func, self.args, self.kwargs), between_frames)
        ctx = _context()
        parent, child = ctx.Pipe(duplex=False)
        calls, call = ctx.Pipe(duplex=False)
        self._process = ctx.Process(target=_child, daemon=True,
                                    args=(child, calls, log_file(), os.nice(0)
                                          + (CHILD_NICENESS if self.background else 0),
                                          memory_budget()))
        self._process.start()
        child.close()
        calls.close()
        self._conn = parent
        # a child gone meanwhile (stopped) breaks the pipe: its end tells the reader so
        with call, contextlib.suppress(BrokenPipeError):
            call.send_bytes(data)

    def fileno(self) -> int:
        """The pipe's descriptor: readable when an event (or the child's end) is waiting."""
        assert self._conn is not None
        return self._conn.fileno()

    def events(self, between_frames: Callable[[], None] | None = None) -> Iterator[Event]:
        """Every event waiting now, without blocking; the last one ends the job.
        ``between_frames`` runs between pickle frames of a large event (:class:`_Frames`)."""
        while not self.ended and self._conn is not None and self._conn.poll():
            try:
                event = _decode(self._conn.recv_bytes(), between_frames)
            except (EOFError, OSError):
                code = self._exit_code()
                event = ("failed", over_budget_text(memory_budget())) \
                    if code == EXIT_OVER_BUDGET else \
                    ("crashed", f"the engine process ended unexpectedly (exit code {code}).")
            if event[0] != "progress":
                self._finish()
            yield event

    def wait(self, timeout: float | None = None) -> list[Event]:
        """Block until the job ends (or ``timeout`` seconds pass); the events received."""
        got: list[Event] = []
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.ended and self._conn is not None:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not self._conn.poll(left):
                break
            got.extend(self.events())
        return got

    def cancel(self) -> None:
        """Stop the child now; no further events arrive."""
        if self._process is not None and self._process.is_alive():
            self._process.kill()
        self._finish()

    def stop(self) -> None:
        """Kill the child but leave the pipe open: a reader on another thread then sees
        the end (an ended job's last event) and closes it; :meth:`cancel` closes it now.

        Called from another thread than the reader's, so it only sends the signal: asking
        whether the child is alive reads the fork server's report of its end, which the
        reader thread may be reading at the same moment (joining the child)."""
        process = self._process
        if process is not None:
            with contextlib.suppress(ValueError, AttributeError, OSError):  # not started,
                process.kill()                                              # or closed

    def _exit_code(self) -> int | None:
        if self._process is None:
            return None
        self._process.join(1.0)
        return self._process.exitcode

    def _finish(self) -> None:
        self.ended = True
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._process is not None:
            self._process.join(1.0)
