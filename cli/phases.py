"""The whole command's time, split by phase, for the last line a command prints.

``canopy solve`` prints ``time: 9.41 s (reading 0.02 s, optimum 0.35 s, trees 1.20 s,
layout choice 6.90 s, XML 0.90 s, other 0.04 s)``: every second from the start of the
command to that line, the phases' sum plus what none of them measured ("other").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager

# Schedule.timings keys (canopy.engine.forest, allreduce_schedule) -> the phase printed
SCHEDULE_PHASES = {"optimum": "optimum", "verification": "verification",
                   "allreduce bound": "allreduce bound", "allreduce LP": "allreduce LP"}


class PhaseClock:
    """Seconds per named phase since ``start`` (a ``time.perf_counter`` reading)."""

    def __init__(self, start: float | None = None) -> None:
        self.start = time.perf_counter() if start is None else start
        self.seconds: dict[str, float] = {}

    def add(self, phase: str, seconds: float) -> None:
        self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - began)

    def add_schedule(self, timings: Mapping[str, float], within: float) -> None:
        """A solve's own timings (``Schedule.timings``, which overlap: "total" holds the
        rest) as phases; ``within`` seconds were spent in the solve in all, and what its
        named phases do not cover counts as "trees"."""
        named = 0.0
        for key, phase in SCHEDULE_PHASES.items():
            if key in timings:
                self.add(phase, timings[key])
                named += timings[key]
        self.add("trees", max(0.0, within - named))

    def follow(self, names: Mapping[str, str],
               display: Callable[[str, float], None] | None = None) -> PhaseFollower:
        """A progress callback timing an engine call's own phases (:class:`PhaseFollower`)."""
        return PhaseFollower(self, names, display)

    def line(self) -> str:
        total = time.perf_counter() - self.start
        parts = [(name, s) for name, s in self.seconds.items() if s >= 0.005]
        other = total - sum(self.seconds.values())
        if other >= 0.005:
            parts.append(("other", other))
        split = ", ".join(f"{name} {s:.2f} s" for name, s in parts)
        return f"time:            {total:.3f} s" + (f" ({split})" if split else "")


class PhaseFollower:
    """An engine ``progress(phase, fraction)`` that times its phases on a clock: each
    phase runs from its first report to the next phase's (or :meth:`finish`), under the
    name ``names`` gives it; reports go on to ``display`` too."""

    def __init__(self, clock: PhaseClock, names: Mapping[str, str],
                 display: Callable[[str, float], None] | None = None) -> None:
        self.clock, self.names, self.display = clock, names, display
        self.current: str | None = None
        self.began = 0.0
        self.ticker: AbstractContextManager[None] | None = None

    def __call__(self, phase: str, fraction: float, /) -> None:
        name = self.names.get(phase, phase)
        if name != self.current:
            self._end()
            self.current, self.began = name, time.perf_counter()
            ticking = getattr(self.display, "ticking", None)
            if ticking is not None:
                self.ticker = ticking(name)
                self.ticker.__enter__()
        elif self.display is not None and self.ticker is None:
            self.display(name, fraction)

    def _end(self) -> None:
        if self.ticker is not None:
            self.ticker.__exit__(None, None, None)
            self.ticker = None
        if self.current is not None:
            self.clock.add(self.current, time.perf_counter() - self.began)
            self.current = None

    def finish(self) -> None:
        self._end()
        done = getattr(self.display, "done", None)
        if done is not None:
            done()
