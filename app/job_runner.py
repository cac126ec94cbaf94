"""Engine jobs for the editor: a child process per job, its events read from the event loop.

:class:`EngineJob` wraps :class:`canopy.engine.jobs.Job` for Qt: a ``QSocketNotifier`` on
the job's pipe turns each event into a signal, so the window never waits for the engine
and never shares an interpreter lock with it (no process-wide tweaks are needed), and
:meth:`EngineJob.cancel` ends the child at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QSocketNotifier, Signal

from canopy.engine.jobs import Job

PHASES = ["optimum", "switch removal", "tree packing", "mapping back", "verification"]


class EngineJob(QObject):
    """``func(*args, progress=..., **kwargs)`` in a child process. Connect, then start()."""

    progress = Signal(str, float)      # phase, fraction within the phase
    finished = Signal(object)          # the engine's result
    failed = Signal(str)               # one-sentence error (input, or where the log is)
    cancelled = Signal()

    def __init__(self, func: Callable[..., Any], *args: Any,
                 parent: QObject | None = None, **kwargs: Any) -> None:
        super().__init__(parent)
        self._job = Job(func, *args, **kwargs)
        self._notifier: QSocketNotifier | None = None

    def start(self) -> None:
        self._job.start()
        self._notifier = QSocketNotifier(self._job.fileno(), QSocketNotifier.Type.Read, self)
        self._notifier.activated.connect(self._read)

    def is_running(self) -> bool:
        return self._notifier is not None

    def cancel(self) -> None:
        """Stop the engine now; ``cancelled`` follows from the event loop."""
        if self._notifier is None:
            return
        self._stop_listening()
        self._job.cancel()
        self.cancelled.emit()

    def _stop_listening(self) -> None:
        if self._notifier is not None:
            self._notifier.setEnabled(False)
            self._notifier.deleteLater()
            self._notifier = None

    def _read(self) -> None:
        for event in self._job.events():
            kind = event[0]
            if kind == "progress":
                self.progress.emit(event[1], event[2])
                continue
            self._stop_listening()
            if kind == "done":
                self.finished.emit(event[1])
            else:
                self.failed.emit(event[1])
