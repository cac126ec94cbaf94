"""Long loops timed from short runs: the period of a pipeline once it is full.

The iterations of a loop are identical, so once the pipeline is full every further
iteration adds the same time; :func:`loop_time` runs whole loops of growing length until
successive increments agree, and adds the rest at that period.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

MAX_MESSAGES = 30_000                 # sends unrolled per simulation; longer loops extrapolate


PIECES_PER_STAGE = 2                  # the first depth tried: 2 x stages pieces


PERIOD_TOLERANCE = Fraction(1, 100)   # successive increments of an extrapolation that agree


MIN_UNROLL = 4                        # the shortest run when extrapolating


SATURATION_SHARE = 8                  # a saturated loop's first run: 1/8 of its iterations


MIN_SATURATED = 8                     # and at least this many


SATURATED = Fraction(1, 500)          # its increment within 0.2 % of the floor: saturated


@dataclass(frozen=True)
class LoopTime:
    """The time of a loop (µs), the sends executed to find it and the longest run when
    extrapolated (else 0)."""

    time_us: Fraction
    messages: int
    unrolled: int


def loop_time(run: Callable[[int], Fraction], pieces: int, per_piece: int, stages: int,
              floor: Callable[[], Fraction], budget: int | None = MAX_MESSAGES,
              saturated: bool = False) -> LoopTime:
    """The time of a loop of ``pieces`` identical iterations of ``per_piece`` sends each,
    ``run(n)`` being the time of the same loop cut after n iterations (same piece size)
    and ``floor()`` the busiest link's time per iteration. The one extrapolation rule of
    the execution model: :func:`simulate` times plans with it and
    :func:`canopy.engine.msccl.timing.time_xml` times MSCCL XML with it, so equal programs
    get equal times.

    When the loop has more than ``budget`` sends (``None``: no limit) it is not unrolled in
    full: its iterations are identical, so once the pipeline is full each further iteration
    adds the same time (the period). Loops of n = h, 2h, 4h, ... iterations are run,
    h = PIECES_PER_STAGE · ``stages`` (at least MIN_UNROLL, more if ``budget`` allows seven
    times h iterations), each giving the increment (T(n) - T(n/2)) / (n/2), taken at least
    ``floor()``; once two successive increments agree within PERIOD_TOLERANCE,
    T(L) = T(n) + (L - n) · increment. Short runs would mislead: while the pipeline fills,
    the increments can agree on a period half again too slow (as on mi250-2x16's
    reduce-scatter, whose pipeline has 22 stages). A loop shorter than fourteen times h, or
    whose increments have not settled by half its length, is run in full; with
    ``saturated``, one shorter than fourteen times h is first tried by :func:`_saturated`
    (which counts its runs' sends even where it finds no saturation).
    """
    first = max(MIN_UNROLL, PIECES_PER_STAGE * stages, (budget or 0) // max(7 * per_piece, 1))
    if budget is None or pieces * per_piece <= budget:
        return LoopTime(run(pieces), pieces * per_piece, 0)
    if pieces < 14 * first:
        short = _saturated(run, pieces, per_piece, floor) if saturated else LoopTime(
            Fraction(0), 0, 0)
        if short.unrolled:
            return short
        return LoopTime(run(pieces), short.messages + pieces * per_piece, 0)
    least = floor()
    count, time = first, run(first)
    executed = count
    steps: list[Fraction] = []
    while True:
        if 4 * count > pieces:
            return LoopTime(run(pieces), (executed + pieces) * per_piece, 0)
        longer = run(2 * count)
        executed += 2 * count
        steps.append(max(least, (longer - time) / count))
        count, time = 2 * count, longer
        if len(steps) >= 2 and abs(steps[-1] - steps[-2]) <= PERIOD_TOLERANCE * steps[-1]:
            break
    return LoopTime(time + (pieces - count) * steps[-1], executed * per_piece, count)


def _saturated(run: Callable[[int], Fraction], pieces: int, per_piece: int,
               floor: Callable[[], Fraction]) -> LoopTime:
    """The loop of ``pieces`` iterations extrapolated at the busiest link's time per
    iteration (``floor()``) where a short run shows that link saturated: runs of n, 3n/2
    and 2n iterations, n the even number nearest below ``pieces`` / SATURATION_SHARE
    (at least MIN_SATURATED), whose increments over both halves (T(3n/2) - T(n),
    T(2n) - T(3n/2), per iteration) are within PERIOD_TOLERANCE of the floor and over the
    whole window within SATURATED of it. A link busy all the time moves each further
    iteration in exactly its time, and no loop runs faster than that, so the rest of the
    loop adds ``floor()`` per iteration: T(pieces) = T(2n) + (pieces - 2n) · floor.

    This is for the loops :func:`loop_time` would otherwise run in full because they are
    short next to their pipeline (Blink's single-root trees at 256 iterations, 42 stages;
    TACOS's timetables, whose pieces go back to back): at 8 x DGX A100 the extrapolations
    agree with the full runs within 0.05 % (tests). Where the link never saturates (Blink on
    rail-leaf-spine-4x8, whose fill is still draining after 64 iterations) the probes are
    lost: up to 9/16 of the loop on top of its full run. Both halves are checked, not only
    the window: a window can average out on the floor while its halves run above and below
    it (Blink on tacos-2d-switch-8x4), and such a loop does not end where that extrapolation
    says. Returns the runs' sends and, where the floor was not reached, ``unrolled`` 0 (the
    caller runs the loop in full)."""
    n = pieces // SATURATION_SHARE // 2 * 2
    if n < MIN_SATURATED:
        return LoopTime(Fraction(0), 0, 0)
    least = floor()
    start, middle = run(n), run(n + n // 2)

    def near(step: Fraction, tolerance: Fraction) -> bool:
        return abs(step - least) <= tolerance * least

    if not near((middle - start) / (n // 2), PERIOD_TOLERANCE):
        return LoopTime(Fraction(0), (n + n + n // 2) * per_piece, 0)
    end = run(2 * n)
    executed = (n + n + n // 2 + 2 * n) * per_piece
    if not (near((end - middle) / (n // 2), PERIOD_TOLERANCE)
            and near((end - start) / n, SATURATED)):
        return LoopTime(Fraction(0), executed, 0)
    return LoopTime(end + (pieces - 2 * n) * least, executed, 2 * n)
