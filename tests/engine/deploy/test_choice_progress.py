"""The runtime choice reports its progress, and a progress that raises Cancelled stops it."""

import pytest

from canopy.engine.deploy import choice_progress, runtime_choice
from canopy.engine.deploy.choice_progress import PHASE
from canopy.engine.deploy.runtime_choice import _choose, runtime_schedule
from canopy.engine.execution import simulate
from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.progress import Cancelled
from canopy.engine.msccl import MscclLimits


def _problem():
    """2 x DGX A100, allgather: the optimal k needs shared connections, so the choice
    simulates more than one candidate."""
    topo = load_sample("dgx-a100-2x8.json")
    return topo, solve(topo, "allgather"), MscclLimits()


def test_progress_rises_to_the_end_and_the_choice_is_the_same(monkeypatch):
    monkeypatch.setattr(runtime_choice, "_MEMO", {})
    topo, schedule, limits = _problem()
    seen = []
    choice = runtime_schedule(topo, schedule, limits, lambda *report: seen.append(report))
    assert {phase for phase, _ in seen} == {PHASE}
    fractions = [f for _, f in seen]
    assert fractions == sorted(fractions) and fractions[0] == 0 and fractions[-1] == 1
    assert len(set(fractions)) >= 3            # it moves in between
    plain = _choose(topo, schedule, limits)    # no progress, no memo
    assert (choice.schedule.k, choice.layout, choice.candidates) == \
        (plain.schedule.k, plain.layout, plain.candidates)
    again = []
    assert runtime_schedule(topo, schedule, limits, lambda *r: again.append(r)) is choice
    assert again == [(PHASE, 1.0)]             # memoized: done at once


def test_cancel_stops_the_choice_mid_search_and_within_a_simulation(monkeypatch):
    monkeypatch.setattr(runtime_choice, "_MEMO", {})
    topo, schedule, limits = _problem()

    def mid_search(phase, fraction):
        if 0 < fraction < 1:
            raise Cancelled("stopped")
    with pytest.raises(Cancelled):
        runtime_schedule(topo, schedule, limits, mid_search)
    assert runtime_choice._MEMO == {}
    # a running simulation repeats the last report through its check
    monkeypatch.setattr(choice_progress, "TICK_SECONDS", 0.0)
    real = simulate.fastest

    def checked(*args, check=None, **kwargs):
        check()
        return real(*args, check=check, **kwargs)
    monkeypatch.setattr(simulate, "fastest", checked)
    seen = []

    def repeated(phase, fraction):
        if seen and seen[-1] == fraction:
            raise Cancelled("stopped")
        seen.append(fraction)
    with pytest.raises(Cancelled):
        runtime_schedule(topo, schedule, limits, repeated)
    assert seen == [0.0] and runtime_choice._MEMO == {}
