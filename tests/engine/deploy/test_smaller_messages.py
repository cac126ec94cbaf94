"""runtime_schedule's choice for messages below 512 MiB: the candidate fastest at 256 MiB,
where that is not the fastest at 1 GiB (connections._smaller_messages)."""

from fractions import Fraction
from types import SimpleNamespace

import pytest

import canopy.engine.execution.simulate as simulate
from canopy.engine.deploy.runtime_choice import SECOND_SIZE, _smaller_messages
from tests.runtime_candidates import OPTIMUM, answer_at, tried
from tests.runtime_candidates import candidate as _candidate


def _run(monkeypatch, best, others, at_256):
    """_smaller_messages with the simulator answering ``at_256[layout name]`` (fraction of
    the optimum) at SECOND_SIZE; returns (chosen name or None, layouts simulated, tried)."""
    asked = answer_at(monkeypatch, at_256)
    cands = [best, *others]
    records = tried(cands)
    chosen, _ = _smaller_messages(None, OPTIMUM, best, cands, records)
    assert all(size == SECOND_SIZE for size, _ in asked)
    return (None if chosen is None else chosen.name), [name for _, name in asked], records


def test_the_candidate_fastest_at_256M_runs_below_the_boundary(monkeypatch):
    """Punctured torus reduce-scatter: k = 5 on layout 6 runs 99.16 % of the optimum at
    1 GiB and 96.55 % at 256 MiB, k = 3 on it 98.76 and 96.47 %, k = 3 shared by step
    97.83 and 97.09 %, k = 5 shared by step, paired 97.22 and 96.74 % (TACOS: 98.8 and
    96.83 %): k = 5 runs from 512 MiB, k = 3 shared by step below; k = 5 shared, paired
    (96.87 % at 1 GiB) cannot beat 97.09 % at 256 MiB and is not simulated there."""
    best = _candidate(5, Fraction(9916, 10000), "k5 even")
    others = [_candidate(3, Fraction(9876, 10000), "k3 even"),
              _candidate(3, Fraction(9783, 10000), "k3 step"),
              _candidate(5, Fraction(9722, 10000), "k5 step paired"),
              _candidate(5, Fraction(9687, 10000), "k5 shared paired")]
    at_256 = {"k5 even": Fraction(9655, 10000), "k3 even": Fraction(9647, 10000),
              "k3 step": Fraction(9709, 10000), "k5 step paired": Fraction(9674, 10000),
              "k5 shared paired": Fraction(1)}
    name, simulated, tried = _run(monkeypatch, best, others, at_256)
    assert name == "k3 step"
    assert simulated == ["k5 even", "k3 even", "k3 step", "k5 step paired"]
    # k3 even and k5 step paired stop at 256 MiB once they provably run below the fastest
    # there so far (96.80 % = k5 even's plus SPLIT_GAIN, then k3 step's 97.09 %)
    assert [t.get("executed_fraction_256M") for t in tried] == \
        [0.9655, None, 0.9709, None, None]
    assert [t.get("executed_below_256M") for t in tried] == [None, 0.968, None, 0.9709, None]


def test_one_choice_where_the_best_is_also_fastest_at_256M(monkeypatch):
    best = _candidate(5, Fraction(991, 1000), "k5")
    # k = 3 as fast, slower, or faster by less than SPLIT_GAIN (0.25 % of the optimum)
    for at_256 in (Fraction(966, 1000), Fraction(965, 1000), Fraction(9684, 10000)):
        name, simulated, _ = _run(monkeypatch, best, [_candidate(3, Fraction(989, 1000), "k3")],
                                  {"k5": Fraction(966, 1000), "k3": at_256})
        assert name is None and simulated == ["k5", "k3"]      # one XML: k = 5 at every size
    name, _, _ = _run(monkeypatch, best, [_candidate(3, Fraction(989, 1000), "k3")],
                      {"k5": Fraction(966, 1000), "k3": Fraction(9686, 10000)})
    assert name == "k3"
    # a candidate no faster at 1 GiB than the best at 256 MiB plus SPLIT_GAIN cannot
    # overtake it there by that much
    slow = _candidate(3, Fraction(9685, 10000), "k3")
    name, simulated, _ = _run(monkeypatch, best, [slow], {"k5": Fraction(966, 1000),
                                                          "k3": Fraction(1)})
    assert name is None and simulated == ["k5"]
    name, simulated, _ = _run(monkeypatch, best, [], {})
    assert name is None and simulated == []


@pytest.mark.parametrize("fastest", [0, 1])
def test_the_chooser_gives_smaller_messages_their_own_layout(monkeypatch, fastest):
    """2 x DGX A100 allreduce's layouts, timed by a stand-in simulator: the first (or the
    second) runs 1 % faster than the others at 1 GiB, the last 10 % faster than the others
    at 256 MiB. That one runs from 512 MiB (compare's row and the export's upper XML), the
    last below; the note names the chosen layout once, and the first layout's figure where
    another was chosen."""
    from canopy.engine.deploy import runtime_choice as connections
    from canopy.engine.forestcoll.solve import solve
    from canopy.engine.io.topology_json import load_sample
    from canopy.engine.msccl.threadblocks import MscclLimits

    topo = load_sample("dgx-a100-2x8.json")
    schedule = solve(topo, "allreduce")
    order = []

    def fake(topology, plan, size, check=None, deadline_us=None):
        if size == connections.REFERENCE_SIZE:
            order.append(plan)
            share = Fraction(96, 100) if len(order) == fastest + 1 else Fraction(95, 100)
        else:
            share = Fraction(90, 100) if plan is order[-1] else Fraction(80, 100)
        return SimpleNamespace(algbw=schedule.algbw * share, past_deadline=False)

    monkeypatch.setattr(simulate, "fastest", fake)
    monkeypatch.setattr(connections, "TOLERANCES", ())
    choice = connections._choose(topo, schedule, MscclLimits(), fastest_first=False)
    assert choice.plan is order[fastest] and choice.below is not None
    assert choice.below.plan is order[-1] and choice.boundary == connections.BOUNDARY
    assert choice.below.layout == "shared evenly, unit trees"
    assert choice.note.endswith("at 256 MiB): an MSCCL XML per size range")
    assert choice.note.count("runs k = ") == 1     # the chosen layout is named once
    assert ("of the optimum at 1 GiB; shared connections 95.0%); it runs from 512 MiB up ("
            in choice.note) == (fastest == 1)
    assert "below it (95.00% at 1 GiB, 90.00% at 256 MiB)" in choice.note
