"""How far :func:`canopy.engine.deploy.runtime_choice.runtime_schedule` has come.

The choice simulates candidate schedules one after another, each on its layouts, and ends
as soon as one runs near enough the optimum, so how many it simulates is not known ahead.
Its progress counts what it knows: every candidate the search may consider at most gets
an equal slot (the rest of the search is skipped at once where it ends early), and a
candidate's slot fills with its layouts simulated of those it has. The fraction never goes
back and reaches 1 when the choice is made. Long simulations call :meth:`ChoiceProgress.check`
as they run (:func:`canopy.engine.execution.simulate.fastest`'s ``check``), which repeats
the last report every TICK_SECONDS, so that a ``progress`` raising
:class:`~canopy.engine.model.progress.Cancelled` stops the choice within a fraction of a
second (:mod:`canopy.engine.model.progress`).
"""

from __future__ import annotations

import time

from canopy.engine.model.progress import Progress

PHASE = "layout choice"     # the phase name the choice reports under
TICK_SECONDS = 0.1          # most time between reports while a simulation runs


class ChoiceProgress:
    """The choice's ``progress(PHASE, fraction)`` over ``slots`` candidate slots."""

    def __init__(self, progress: Progress | None, slots: int = 1) -> None:
        self.progress = progress
        self.slots = max(1, slots)
        self.slot = -1
        self.fraction = 0.0
        self.base = 0.0             # the fraction the current slots start from
        self.last = time.perf_counter()

    def plan(self, slots: int) -> None:
        """The search may consider ``slots`` candidates from here on: they share what is
        left of the fraction (a search begun again, as where no candidate's MSCCL++ plan
        fits, goes on from where the first one stopped)."""
        self.slots = max(1, slots)
        self.slot = -1
        self.base = self.fraction

    def candidate(self) -> None:
        """A candidate's layouts are about to be simulated: its slot begins."""
        self.slot = min(self.slot + 1, self.slots - 1)
        self._report(self._at(0.0))

    def layouts(self, done: int, of: int) -> None:
        """``done`` of the current candidate's ``of`` layouts are simulated."""
        self._report(self._at(min(done, of) / max(of, 1)))

    def finishing(self) -> None:
        """The last slot begins: the search is over, the chosen candidate's rivals are
        simulated at the second size."""
        self.slot = self.slots - 1
        self._report(self._at(0.0))

    def check(self) -> None:
        """Repeat the last report if TICK_SECONDS have passed (a running simulation's
        ``check``)."""
        if self.progress is not None and time.perf_counter() - self.last >= TICK_SECONDS:
            self._report(self.fraction)

    def done(self) -> None:
        """The choice is made."""
        self._report(1.0)

    def _at(self, within: float) -> float:
        share = (max(self.slot, 0) + within) / self.slots
        return self.base + (1.0 - self.base) * share

    def _report(self, fraction: float) -> None:
        self.fraction = max(self.fraction, fraction)
        if self.progress is not None:
            self.last = time.perf_counter()
            self.progress(PHASE, self.fraction)
