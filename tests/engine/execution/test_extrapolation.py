"""The saturation rule of the loop extrapolation
(:func:`canopy.engine.execution.extrapolation.loop_time`
with ``saturated``): a loop too short next to its pipeline for the period rule, run
briefly, extrapolated at the busiest link's time per iteration once that link is
saturated, and run in full otherwise; ``canopy compare`` applies it to the baselines."""

from fractions import Fraction

import pytest

from canopy.engine.baselines.blink import blink_baseline
from canopy.engine.baselines.tacos import DEFAULT_CHUNKS, tacos_baseline
from canopy.engine.comparison.table import _saturates, compare
from canopy.engine.execution import simulate as sim
from canopy.engine.execution.extrapolation import LoopTime, loop_time
from canopy.engine.execution.simulate import fastest
from canopy.engine.generators import generate

# One worker runs the module: what its fixtures compute is kept per process.
pytestmark = pytest.mark.xdist_group("engine-execution-test_extrapolation")

FLOOR = Fraction(5)
FILL = Fraction(300)


def timed(period_at):
    """A run function T(n) = FILL + Σ_{i<n} period_at(i), recording the runs asked for."""
    runs: list[int] = []

    def run(n: int) -> Fraction:
        runs.append(n)
        return FILL + sum((period_at(i) for i in range(n)), Fraction(0))

    return run, runs


def test_a_saturated_loop_is_extrapolated_from_an_eighth_of_it():
    # 256 iterations of 1000 sends, 42 stages: the period rule would need 14 x 84
    # iterations, so without ``saturated`` the loop runs in full; with it, runs of 32, 48
    # and 64 iterations at the floor give the full run's time exactly.
    run, runs = timed(lambda i: FLOOR * 3 if i < 8 else FLOOR)
    full = loop_time(run, 256, 1000, 42, lambda: FLOOR)
    assert runs == [256] and full == LoopTime(FILL + 8 * 15 + 248 * 5, 256_000, 0)
    runs.clear()
    short = loop_time(run, 256, 1000, 42, lambda: FLOOR, saturated=True)
    assert runs == [32, 48, 64]
    assert short == LoopTime(full.time_us, (32 + 48 + 64) * 1000, 64)


def test_a_loop_above_its_floor_runs_in_full_after_the_probes():
    # Iterations 2 % slower than the busiest link's time: not saturated, so the loop runs
    # in full; the sends of the probes are counted too.
    run, runs = timed(lambda i: FLOOR * Fraction(102, 100))
    result = loop_time(run, 256, 1000, 42, lambda: FLOOR, saturated=True)
    assert runs == [32, 48, 256]
    assert result == LoopTime(FILL + 256 * FLOOR * Fraction(102, 100), (32 + 48 + 256) * 1000, 0)


def test_the_whole_window_must_be_within_a_fifth_of_a_percent():
    # Both halves within 1 % of the floor (+0.9 %, then +0.3 %) but the whole window 0.6 %
    # above: still filling, run in full.
    run, runs = timed(lambda i: FLOOR * (Fraction(1009, 1000) if i < 48 else Fraction(1003, 1000)))
    result = loop_time(run, 256, 1000, 42, lambda: FLOOR, saturated=True)
    assert runs == [32, 48, 64, 256] and result.unrolled == 0
    # ... and within it, it is extrapolated (+0.1 % and -0.1 % around the floor).
    run, runs = timed(lambda i: FLOOR * (Fraction(1001, 1000) if i < 48 else Fraction(999, 1000)))
    result = loop_time(run, 256, 1000, 42, lambda: FLOOR, saturated=True)
    assert runs == [32, 48, 64] and result.unrolled == 64
    assert result.time_us == run(64) + 192 * FLOOR


@pytest.mark.parametrize("pieces, per_piece", [(63, 1000), (256, 100)])
def test_short_or_cheap_loops_run_in_full_without_probes(pieces, per_piece):
    # Fewer than 8 x MIN_SATURATED iterations, or within the budget of sends.
    run, runs = timed(lambda i: FLOOR)
    result = loop_time(run, pieces, per_piece, 42, lambda: FLOOR, saturated=True)
    assert runs == [pieces] and result == LoopTime(FILL + pieces * FLOOR, pieces * per_piece, 0)


@pytest.fixture(scope="module")
def cluster():
    """8 x DGX A100 (64 GPUs), a size ``canopy compare`` is timed at (bench/compare_speed.py)."""
    return generate("cluster", {"servers": "8"})


def test_blink_and_tacos_pick_the_same_depth_within_a_twentieth_of_a_percent(cluster):
    # The rows whose simulation the rule shortens in ``canopy compare`` at 64 GPUs: Blink's
    # single-root trees (256 iterations, 42 stages) and TACOS's timetable (64 iterations of
    # 64 KiB pieces). Same depth as the full runs, time within 0.05 % (measured: Blink
    # +0.020 % at 128 MiB, +0.034 % at 1 GiB; TACOS equal to rounding).
    blink = blink_baseline(cluster, "allgather").plan_at(Fraction(1 << 30))
    tacos = tacos_baseline(cluster, "allgather", DEFAULT_CHUNKS, None, "ring", Fraction(1))
    cases = [(blink, 128 << 20, 32), (blink, 1 << 30, 256),
             (tacos.plan_at(Fraction(1 << 30)), 1 << 30, 8)]
    for plan, size, start in cases:
        full = fastest(cluster, plan, size, start=start)
        short = fastest(cluster, plan, size, start=start, saturated=True)
        assert short.pieces == full.pieces and full.unrolled == 0 < short.unrolled
        assert short.messages < full.messages
        assert abs(short.time_us / full.time_us - 1) < Fraction(5, 10000)


def test_compare_runs_forestcolls_loops_as_before(cluster, monkeypatch):
    # Only Blink's and TACOS's rows ask for the rule (not TACOS's allreduce, whose
    # timetables run above the floor): ForestColl's row (and its layouts, and
    # check-xml) and the rings time loops as the period rule does.
    asked: list[bool] = []
    real = sim.loop_time

    def spy(*args, **kwargs):
        asked.append(kwargs.get("saturated", args[6] if len(args) > 6 else False))
        return real(*args, **kwargs)

    monkeypatch.setattr(sim, "loop_time", spy)
    rows = {}
    for algorithms in ((), ("ring",), ("blink",)):
        asked.clear()
        sim.forget_results()
        compare(cluster, sizes=(1 << 30,), algorithms=algorithms)
        rows[algorithms] = list(asked)
    assert rows[()] and not any(rows[()]) and not any(rows[("ring",)])
    assert any(rows[("blink",)])
    assert [(a, c) for a in ("forestcoll", "ring", "blink", "tacos", "lr1")
            for c in ("allgather", "reduce-scatter", "allreduce") if _saturates(a, c)] == \
        [("blink", "allgather"), ("blink", "reduce-scatter"), ("blink", "allreduce"),
         ("tacos", "allgather"), ("tacos", "reduce-scatter")]
