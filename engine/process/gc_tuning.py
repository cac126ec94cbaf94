"""The cyclic garbage collector set for a process that runs one engine computation.

CPython's collector makes a young pass every 700 container allocations (net of frees) and,
as the heap grows, full passes over every object it tracks. The engine's work allocates
millions of containers that stay alive until the result is written and form no cycles
(plans, trees, timetables, routes): the collector's full passes walk them again and again
and find almost no garbage, time the computation loses for nothing.

:func:`batch_collector` is called where a process starts such work: the ``canopy`` command,
an engine job's child process (:mod:`canopy.engine.process.child_jobs`), and the benchmarks
that time a command in-process as it runs. It moves what start-up made (modules, classes,
functions, alive as long as the process) out of the collector's sight (:func:`gc.freeze`)
and raises the young generation's threshold to :data:`BATCH_THRESHOLD`, so passes come that
many times less often (mypy's command does the same). Most of what such work allocates
stays alive, so a young pass costs about as much per survivor whatever its threshold, and
the passes a computation of a million containers or fewer would make are not worth their
time: the threshold is that high. Garbage cycles are still collected, only later (a
higher peak where any are made). The editor's own process keeps the default thresholds
(:mod:`canopy.app.heap`: short pauses matter more there).
"""

from __future__ import annotations

import gc

BATCH_THRESHOLD = 1_000_000
"""Container allocations (net of frees) between young passes; CPython's default is 700."""


def batch_collector() -> None:
    """Freeze start-up's objects and make the collector's passes rare (see above)."""
    gc.freeze()
    young, older, oldest = gc.get_threshold()
    if 0 < young < BATCH_THRESHOLD:     # (0: the collector is switched off; keep it so)
        gc.set_threshold(BATCH_THRESHOLD, older, oldest)
