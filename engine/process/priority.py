"""Imported first by the engine's fork server
(:data:`canopy.engine.process.child_jobs.PRELOAD`): it puts the fork server, and so every
job forked from it, in the kernel's batch scheduling class
(:func:`~canopy.engine.process.child_jobs.batch_scheduling`).

The fork server starts with the editor and then imports the engine (numpy, scipy,
networkx, OR-Tools: seconds of CPU on a busy machine). A process at a lower priority
(a higher niceness) keeps the editor responsive while it runs, but a job the user waits
for then gets a fraction of its share on a busy machine and may starve. Batch
scheduling instead
keeps the job's full share of the CPU and only gives up wake-up preemption: a task of
the batch class never preempts a waking interactive task, so the editor's event loop
runs as soon as it has work. A niceness could not be undone by the jobs forked from here
(raising a priority needs privileges), a scheduling class can: background jobs lower
their own priority (:data:`~canopy.engine.process.child_jobs.CHILD_NICENESS`), the rest
keep the editor's. Only the fork server does this on import: the process that starts it
names itself in :data:`~canopy.engine.process.child_jobs.FORK_SERVER_OF`, so importing
this module anywhere else (a doctest run) changes nothing.

It also ties the fork server's life to its parent's
(:func:`~canopy.engine.process.lifetime.fork_server_dies_with_parent`) before the engine
is imported: a command killed while its fork server loads leaves nothing behind.
"""

from __future__ import annotations

import os

from canopy.engine.process.child_jobs import (
    FORK_SERVER_FROM_MAIN_THREAD,
    FORK_SERVER_OF,
    batch_scheduling,
)
from canopy.engine.process.lifetime import ParentWatch, fork_server_dies_with_parent

LOADING_WATCH: ParentWatch | None = None
"""The fork server's watch of its parent while it loads the engine, if it needs one
(stopped by :mod:`canopy.engine.process.fork_server_loaded`)."""

if os.environ.get(FORK_SERVER_OF) == str(os.getppid()):
    LOADING_WATCH = fork_server_dies_with_parent(
        os.environ.get(FORK_SERVER_FROM_MAIN_THREAD) == "1")
    batch_scheduling()
