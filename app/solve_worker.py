"""Running the engine off the GUI thread, with progress and prompt cancellation.

``SolveJob`` runs one engine call (solve, compare, ...) in a QThread. The engine reports
progress through a callback; the job forwards it as a Qt signal and raises
:class:`canopy.engine.progress.Cancelled` from that callback once Cancel was pressed, so the
engine stops at its next progress point (at most one switch or one tree batch later).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QThread, Signal

from canopy.engine.errors import CanopyError
from canopy.engine.logs import log_internal_error
from canopy.engine.progress import Cancelled

PHASES = ["optimum", "switch removal", "tree packing", "mapping back", "verification"]


class _Runner(QObject):
    progress = Signal(str, float)
    finished = Signal(object)
    failed = Signal(str)
    cancelled = Signal()

    def __init__(self, work: Callable[[Callable[[str, float], None]], Any]) -> None:
        super().__init__()
        self._work = work
        self._stop = threading.Event()

    def report(self, phase: str, fraction: float) -> None:
        if self._stop.is_set():
            raise Cancelled("the computation was cancelled.")
        self.progress.emit(phase, fraction)

    def run(self) -> None:
        try:
            result = self._work(self.report)
        except Cancelled:
            self.cancelled.emit()
        except CanopyError as exc:
            self.failed.emit(str(exc))
        except Exception as exc:  # an engine bug: one sentence, the traceback in the log
            self.failed.emit(log_internal_error("the engine", exc))
        else:
            self.finished.emit(result)


class SolveJob(QObject):
    """One background engine call. Connect the signals, then ``start()``."""

    progress = Signal(str, float)      # phase, fraction within the phase
    finished = Signal(object)          # the engine's result
    failed = Signal(str)               # one-sentence error
    cancelled = Signal()

    def __init__(self, work: Callable[[Callable[[str, float], None]], Any],
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._thread = QThread(self)
        self._runner = _Runner(work)
        self._runner.moveToThread(self._thread)
        self._thread.started.connect(self._runner.run)
        # Bound methods of this QObject run in the GUI thread (queued connections).
        self._runner.progress.connect(self._on_progress)
        self._runner.finished.connect(self._on_finished)
        self._runner.failed.connect(self._on_failed)
        self._runner.cancelled.connect(self._on_cancelled)

    def _stop_thread(self) -> None:
        self._thread.quit()
        self._thread.wait()

    def _on_progress(self, phase: str, fraction: float) -> None:
        self.progress.emit(phase, fraction)

    def _on_finished(self, result: object) -> None:
        self._stop_thread()
        self.finished.emit(result)

    def _on_failed(self, message: str) -> None:
        self._stop_thread()
        self.failed.emit(message)

    def _on_cancelled(self) -> None:
        self._stop_thread()
        self.cancelled.emit()

    def start(self) -> None:
        self._thread.start()

    def cancel(self) -> None:
        self._runner._stop.set()

    def is_running(self) -> bool:
        return self._thread.isRunning()

    def wait(self, ms: int = 30000) -> bool:
        return self._thread.wait(ms)
