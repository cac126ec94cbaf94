"""Imported first by the engine's fork server (:data:`canopy.engine.process.child_jobs.PRELOAD`): it
lowers the fork server's priority by :data:`~canopy.engine.process.child_jobs.CHILD_NICENESS`.

The fork server starts with the editor and then imports the engine (numpy, scipy,
networkx, OR-Tools: seconds of CPU on a busy machine), at the editor's own priority until
now: while it did, opening and solving a 1024-GPU drawing saw the event loop wait up to
190 ms for a CPU (bench/gui_responsiveness.py). Its children, the jobs,
inherit the lower priority. Only the fork server does this on import: the process that
starts it names itself in :data:`~canopy.engine.process.child_jobs.FORK_SERVER_OF`, so importing
this
module anywhere else (a doctest run) changes nothing.
"""

from __future__ import annotations

import os

from canopy.engine.process.child_jobs import CHILD_NICENESS, FORK_SERVER_OF

if os.environ.get(FORK_SERVER_OF) == str(os.getppid()):
    os.nice(CHILD_NICENESS)
