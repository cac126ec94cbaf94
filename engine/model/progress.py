"""Progress reporting and cancellation, shared by every long engine computation.

A long computation (solve, compare, sweep, contention analysis) takes an optional
``progress`` callable and calls it with the phase's name and the fraction done within
that phase. The caller stops the work by raising :class:`Cancelled` from that callable;
the engine lets it propagate. :class:`Cancelled` is not a
:class:`~canopy.engine.model.errors.CanopyError`: stopping on request is not bad input.
"""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    """``progress(phase, fraction)``: ``phase`` names the step, ``fraction`` is in [0, 1]."""

    def __call__(self, phase: str, fraction: float, /) -> None: ...


class Cancelled(Exception):
    """Raised from a progress callback to stop a long computation (the GUI's Cancel)."""


def report(progress: Progress | None, phase: str, fraction: float) -> None:
    """Call ``progress`` if there is one (it may raise :class:`Cancelled`)."""
    if progress is not None:
        progress(phase, fraction)
