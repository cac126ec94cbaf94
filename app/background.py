"""Engine calls the editor makes in a job's child process besides solving (no Qt here).

The child imports this module by name; see :mod:`canopy.app.job_runner`.
"""

from __future__ import annotations

import pickle

from canopy.engine.progress import Progress
from canopy.engine.topology import Problem, find_problems


def problems_of(pickled: bytes, progress: Progress | None = None) -> list[Problem]:
    """:func:`~canopy.engine.topology.find_problems` of a pickled topology (pickled by
    the editor at once, so later edits cannot reach the copy being checked)."""
    return find_problems(pickle.loads(pickled))
