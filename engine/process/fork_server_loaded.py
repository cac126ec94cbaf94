"""Imported last by the engine's fork server
(:data:`canopy.engine.process.child_jobs.PRELOAD`): loading is done, and the fork server's
own loop now notices its parent's end (its "alive" pipe closes), so the thread that
watched the parent while the engine loaded (:mod:`canopy.engine.process.priority`) stops
before the first job is forked.
"""

from __future__ import annotations

from canopy.engine.process import priority

if priority.LOADING_WATCH is not None:
    priority.LOADING_WATCH.stop()
    priority.LOADING_WATCH = None
