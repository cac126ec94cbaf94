"""Work done a slice per turn of the event loop, for a caller that waits for its result.

:func:`run_in_turns` drives a generator of steps (such as
:func:`canopy.engine.io.topology_json.reading_steps`): each turn of the event loop runs
steps for :data:`SLICE_S` seconds, or up to a step that yields :data:`END_TURN` (heavy work
that follows gets a turn of its own), then lets the window paint and take input. The caller
waits in a local event loop, so it gets the result (or the exception) as from a plain call,
while opening a 1,024-GPU file no longer holds the event loop up in one long turn
(bench/gui_responsiveness.py measures the longest).
"""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import TypeVar

from PySide6.QtCore import QEventLoop, QTimer

T = TypeVar("T")
SLICE_S = 0.008
"""Seconds of steps per turn of the event loop."""
END_TURN = "end turn"
"""Yielded by a step after which the turn ends, whatever the time left."""


class Abandoned(Exception):
    """The event loop was told to quit (the application is closing) before the work ended."""


def run_in_turns(steps: Generator[object, None, T], slice_s: float = SLICE_S) -> T:
    """Run ``steps`` a slice per turn of the event loop and return its result (or raise
    what a step raised); the event loop runs meanwhile. Raises :class:`Abandoned` when
    the application quits first."""
    loop = QEventLoop()
    returned: list[T] = []          # the generator's value, once it ends
    raised: list[Exception] = []    # or what a step raised
    timer = QTimer()
    timer.setSingleShot(True)
    timer.setInterval(0)

    def turn() -> None:
        deadline = time.perf_counter() + slice_s
        try:
            while time.perf_counter() < deadline:
                if next(steps) == END_TURN:
                    break
        except StopIteration as end:
            returned.append(end.value)
        except Exception as exc:  # noqa: BLE001 - handed to the caller, who expects it
            raised.append(exc)
        else:
            timer.start()
            return
        loop.quit()

    timer.timeout.connect(turn)
    timer.start()
    loop.exec()
    timer.stop()
    if raised:
        raise raised[0]
    if not returned:
        steps.close()
        raise Abandoned
    return returned[0]
