"""The whole command's time, split by phase, for the last line a command prints.

``canopy solve`` prints ``time: 9.41 s (reading 0.02 s, optimum 0.35 s, trees 1.20 s,
layout choice 6.90 s, XML 0.90 s, other 0.04 s)``: every second from the start of the
command to that line, the phases' sum plus what none of them measured ("other"). Where the
simulator's loops were compiled in this run (a fresh installation's first), the line says
how many of those seconds that took (:func:`canopy.engine.execution.jit.compile_seconds`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager

from canopy.engine.execution.jit import compile_seconds

COMPILE_SHOWN = 0.05          # seconds of compiling the time line mentions

# Schedule.timings keys (canopy.engine.forestcoll.solve, allreduce.lp_schedule) -> the phase printed
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
        compiling = compile_seconds()
        return f"time:            {total:.3f} s" + (f" ({split})" if split else "") + (
            f"; {compiling:.2f} s of it compiling the simulator for this machine (once: "
            "later runs load it)" if compiling >= COMPILE_SHOWN else "")


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
        elif self.ticker is not None:
            self.display.fraction = fraction        # type: ignore[union-attr]

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
class TerminalProgress:
    """An engine ``progress(phase, fraction)`` shown as one line on a terminal's standard
    error, rewritten at most every INTERVAL seconds and erased by :meth:`done`; silent
    when standard error is not a terminal (pipes, files, tests) and for the first
    QUIET seconds, so that short commands print nothing extra."""

    INTERVAL = 0.2
    QUIET = 1.0

    def __init__(self, what: str) -> None:
        import sys
        self.what = what
        self.stream = sys.stderr
        self.on = self.stream.isatty()
        self.start = time.perf_counter()
        self.last = 0.0
        self.shown = False
        self.fraction: float | None = None     # the ticking phase's, where it reports one

    def __call__(self, phase: str, fraction: float, /) -> None:
        now = time.perf_counter()
        if not self.on or now - self.start < self.QUIET or now - self.last < self.INTERVAL:
            return
        self.last = now
        text = f"{self.what}: {phase} {min(max(fraction, 0.0), 1.0):.0%}"[:79]
        self.stream.write(f"\r{text:<79}")
        self.stream.flush()
        self.shown = True

    @contextmanager
    def ticking(self, phase: str) -> Iterator[None]:
        """Show ``phase`` with its seconds so far, and the fraction done that its work
        reports (:attr:`fraction`, set as it runs; the MSCCL export's steps report little
        but for the layout choice), rewritten by a thread until the block ends."""
        import threading
        stop = threading.Event()
        began = time.perf_counter()
        self.fraction = None

        def tick() -> None:
            while not stop.wait(self.INTERVAL):
                now = time.perf_counter()
                if self.on and now - self.start >= self.QUIET:
                    done = "" if self.fraction is None else \
                        f" {min(max(self.fraction, 0.0), 1.0):.0%},"
                    text = f"{self.what}: {phase}{done} {now - began:.0f} s"[:79]
                    self.stream.write(f"\r{text:<79}")
                    self.stream.flush()
                    self.shown = True

        thread = threading.Thread(target=tick, daemon=True, name="terminal-progress")
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def done(self) -> None:
        if self.shown:
            self.stream.write("\r" + " " * 79 + "\r")
            self.stream.flush()
            self.shown = False
