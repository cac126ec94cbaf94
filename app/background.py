"""Engine calls the editor makes in a job's child process besides solving (no Qt here).

The child imports this module by name; see :mod:`canopy.app.job_runner`.
"""

from __future__ import annotations

import pickle
from fractions import Fraction

from canopy.app.solution import (
    Bound,
    Solution,
    compute_bound,
    compute_solution,
    executed_of_schedule,
)
from canopy.engine.model.progress import Progress
from canopy.engine.model.topology import Problem, find_problems


def problems_of(pickled: bytes, progress: Progress | None = None) -> list[Problem]:
    """:func:`~canopy.engine.model.topology.find_problems` of a pickled topology (pickled by
    the editor at once, so later edits cannot reach the copy being checked)."""
    return find_problems(pickle.loads(pickled))


def bound_of(pickled: bytes, collective: str, progress: Progress | None = None) -> Bound:
    """:func:`~canopy.app.solution.compute_bound` of a pickled topology: the editor pickles
    the document at once, where a copy made in its process (pickling and unpickling it
    there) would cost twice that in the event loop's turn."""
    return compute_bound(pickle.loads(pickled), collective, progress)


def advice_of(pickled: bytes, collective: str, failures: bool,
              progress: Progress | None = None) -> dict:
    """The canopy-advice dict (:mod:`canopy.engine.advise.report`) of a pickled
    topology: class curves and upgrades, and the failure scan when ``failures``."""
    from canopy.engine.advise.report import advise

    return advise(pickle.loads(pickled), collective, failures=failures,
                  progress=progress).to_dict()


def solution_of(pickled: bytes, collective: str, k: int | None,
                progress: Progress | None = None) -> Solution:
    """:func:`~canopy.app.solution.compute_solution` of a pickled topology, without the
    executed times (:func:`executed_of` follows in a job of its own)."""
    return compute_solution(pickle.loads(pickled), collective, k, progress, executed=False)


def executed_of(pickled: bytes, schedule: bytes, progress: Progress | None = None
                ) -> list[tuple[int, Fraction]]:
    """The executed times of a pickled schedule on a pickled topology
    (:func:`~canopy.app.solution.executed_of_schedule`)."""
    return executed_of_schedule(pickle.loads(schedule), pickle.loads(pickled), progress)
