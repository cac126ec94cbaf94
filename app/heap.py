"""Short pauses of the cyclic garbage collector in the editor.

CPython's cyclic collector now and then makes a full pass over every object it tracks,
holding up the event loop meanwhile. At start-up the editor's modules (PySide6, pyqtgraph,
numpy, scipy, the engine) alone are over a hundred thousand such objects: every full pass
walked them before it even reached a drawing, and on large clusters such passes held up the
editor visibly (bench/gui_responsiveness.py measures the event loop's longest gaps).

:func:`settle_start_up` runs once, when ``canopy gui`` starts, before the first window
exists: it collects what importing left behind, then moves every object alive (modules,
classes, functions: they live as long as the process) out of the collector's sight with
:func:`gc.freeze`. Full passes then walk only what the editor made since: drawings, their
canvas items, results. Nothing a window creates is ever frozen: frozen garbage cycles
are never collected, and a Qt wrapper kept alive that way could be handed out for a new
object at its address.

Even so, a full pass over a 1024-GPU drawing with its solution shown walks over a hundred
thousand objects holding the interpreter lock, and CPython starts one whenever ten middle
passes have gone by, which is while a large result arrives or is drawn. So the editor makes
full passes itself, when it is idle (:class:`IdleCollector`): the collector's own full
passes are switched off (their threshold set out of reach), young and middle passes run as
always, and a full pass that is due (:data:`FULL_PASS_DUE` middle passes since the last)
runs once the GUI thread has used under :data:`IDLE_CPU_S` of CPU over the last
:data:`IDLE_S`, or at once past :data:`BACKSTOP` middle passes, so cyclic garbage is still
collected within seconds. This module and the job runner (:mod:`canopy.app.job_runner`:
its reader threads pause the collector while they decode an event, and the middle pass
after a large one runs in the GUI thread as it is delivered) are the only places the
editor touches the collector; engine jobs run in their own processes.
"""

from __future__ import annotations

import gc
import threading
import time
from collections import deque

from PySide6.QtCore import QObject, QTimer

FULL_PASS_DUE = 10
"""Middle passes after which a full pass is due (CPython's own third threshold)."""
BACKSTOP = 100
"""Middle passes after which the full pass runs even while the editor is busy."""
IDLE_S = 1.0
"""The span over which the GUI thread's CPU is looked at."""
IDLE_CPU_S = 0.03
"""GUI-thread CPU over :data:`IDLE_S` below which the editor counts as idle."""
CHECK_MS = 250
"""How often :class:`IdleCollector` looks."""
NEVER = 2**31 - 1
"""The third threshold that keeps CPython from starting full passes itself."""

_settled = False
_pauses = [0]
_pauses_lock = threading.Lock()


class collector_paused:  # noqa: N801 - a context manager, named for the with-statement
    """Pause the cyclic collector while a thread other than the GUI thread runs Python
    (the engine job reader, the recovery writer): a pass set off by an allocation there
    would free the GUI thread's cyclic garbage, Qt objects among them, on that thread.
    The collector is the process's, so overlapping pauses are counted and it runs again
    when the last ends."""

    def __enter__(self) -> None:
        with _pauses_lock:
            _pauses[0] += 1
            gc.disable()

    def __exit__(self, *exc: object) -> None:
        with _pauses_lock:
            _pauses[0] -= 1
            if not _pauses[0]:
                gc.enable()
_collector: IdleCollector | None = None      # kept alive here: it has no Qt parent


def settle_start_up() -> None:
    """Keep the objects of start-up out of the collector's full passes and make full
    passes wait for an idle moment (first call only; needs the QApplication)."""
    global _settled, _collector
    if not _settled:
        _settled = True
        gc.collect()
        gc.freeze()
        young, middle, _ = gc.get_threshold()
        gc.set_threshold(young, middle, NEVER)
        _collector = IdleCollector()


class IdleCollector(QObject):
    """Makes the full passes CPython would make, at moments the editor is idle."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._samples: deque[tuple[float, float]] = deque()   # (monotonic, GUI thread CPU)
        self.passes = 0
        self._timer = QTimer(self)
        self._timer.timeout.connect(lambda: self.check(time.monotonic(), time.thread_time()))
        self._timer.start(CHECK_MS)

    def check(self, now: float, cpu: float) -> bool:
        """Record the GUI thread's CPU ``cpu`` at ``now`` (both in seconds); make a full
        pass where one is due and the editor idle, or past :data:`BACKSTOP`. True if it
        made one."""
        samples = self._samples
        samples.append((now, cpu))
        while len(samples) > 1 and now - samples[1][0] >= IDLE_S:
            samples.popleft()       # keep one sample at least IDLE_S old
        middle_passes = gc.get_count()[2]
        if middle_passes < FULL_PASS_DUE:
            return False
        since, cpu_then = samples[0]
        idle = now - since >= IDLE_S and cpu - cpu_then < IDLE_CPU_S
        if not idle and middle_passes < BACKSTOP:
            return False
        gc.collect()
        self.passes += 1
        return True
