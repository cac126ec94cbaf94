"""The simulator's loops compiled by numba, and the seconds that compiling took.

numba compiles a loop the first time it runs on a machine and keeps the result on disk
(``cache=True``, beside the module), so a fresh installation's first ``canopy compare``
spends seconds compiling that later runs load in a fraction of one. A command's time line
says how much of it was compiling (:func:`compile_seconds`), so a first run's phases are
not read as the simulator's speed. The seconds are numba's ``numba:compile`` events
(its event API, ``numba.core.event``), outermost ones only: compiling a loop compiles the
helpers it inlines within the same event.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

_SECONDS = [0.0]
_WATCHING: list[Any] = []


def cached_jit(function: Callable[..., Any]) -> Any:
    """``function`` compiled by numba with its disk cache (ImportError without numba),
    its compile time counted by :func:`compile_seconds`."""
    import numba

    _watch()
    return numba.njit(cache=True)(function)


def compile_seconds() -> float:
    """Seconds this process has spent compiling loops (0 where each came from the disk
    cache, or numba is not installed)."""
    return _SECONDS[0]


def _watch() -> None:
    """Count the seconds of numba's outermost compile events from now on (once)."""
    if _WATCHING:
        return
    from numba.core import event

    class Clock(event.Listener):
        def __init__(self) -> None:
            self.depth = 0
            self.began = 0.0

        def on_start(self, _event: Any) -> None:
            if self.depth == 0:
                self.began = time.perf_counter()
            self.depth += 1

        def on_end(self, _event: Any) -> None:
            self.depth -= 1
            if self.depth == 0:
                _SECONDS[0] += time.perf_counter() - self.began

    clock = Clock()
    event.register("numba:compile", clock)
    _WATCHING.append(clock)
