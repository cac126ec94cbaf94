"""The event loop's deadline check counts superseded link finishes as events: where it
falls (every CHECK_EVERY events) does not depend on how the loop keeps its events."""

from fractions import Fraction

import pytest

from canopy.engine.execution import kernel
from canopy.engine.execution.program import Program
from canopy.engine.model.topology import Link, Node, Topology


def _stops(monkeypatch, deadline, every):
    """The time the Python event loop stops at (None: it runs to the end) on a program
    whose link a -> b changes its next finish: ``big`` (30,000 bytes) streams alone from
    0 (finish at 3 µs), ``late`` (4,000 bytes, after a zero-byte send over c -> b,
    delivered at 1 µs) joins it at 1 and ends at 1.8, delivered at 2.8; ``big`` ends at
    3.4, delivered at 4.4. Events: the two starts at 0, the delivery and the start at 1,
    the finishes at 1.8, the delivery at 2.8, the superseded finish at 3, the finish at
    3.4, the delivery at 4.4."""
    nodes = [Node("a"), Node("b"), Node("c")]
    topo = Topology("t", nodes, [Link("a", "b", Fraction(10), latency=Fraction(1)),
                                 Link("c", "b", Fraction(10), latency=Fraction(1))])
    prog = Program()
    gate = prog.send(prog.connect(("c", "b")), Fraction(0))
    prog.send(prog.connect(("a", "b")), Fraction(30000))
    prog.send(prog.connect(("a", "b")), Fraction(4000), after=[gate])
    results = []
    loop, run_flat = kernel._event_loop, kernel.run_flat
    monkeypatch.setattr(kernel, "CHECK_EVERY", every)
    monkeypatch.setattr(kernel, "_event_loop", lambda *a: results.append(loop(*a)) or results[-1])
    monkeypatch.setattr(kernel, "run_flat", lambda *a: run_flat(*a, deadline=deadline))
    try:
        assert kernel.run_program(topo, prog) == pytest.approx(4.4)
    except kernel.PastDeadline:
        assert results[0][1] == -1
        return results[0][0]
    return None


EVENTS = [0, 0, 1, 1, 1.8, 2.8, 3, 3.4, 4.4]


@pytest.mark.parametrize("every", range(1, 11))
def test_a_check_falls_on_every_kth_event_superseded_finishes_included(monkeypatch, every):
    # Any deadline below the links' work passes at the first check: the loop stops at
    # the every-th event, the superseded finish at 3 µs being the seventh.
    stop = _stops(monkeypatch, 1e-9, every)
    assert stop == (pytest.approx(EVENTS[every - 1]) if every <= len(EVENTS) else None)


@pytest.mark.parametrize("every", range(1, 11))
def test_a_deadline_the_bound_passes_late_stops_only_at_a_check_then(monkeypatch, every):
    # At 4 µs the bound (the time plus the unsent bytes' time) passes only at the last
    # event, the ninth counting the superseded finish: the checks of every 1, 3 and 9
    # events fall there; the others let the run end (after the deadline).
    stop = _stops(monkeypatch, 4.0, every)
    assert stop == (pytest.approx(4.4) if 9 % every == 0 else None)
