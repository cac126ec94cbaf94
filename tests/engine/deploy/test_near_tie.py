"""runtime_schedule's near ties at 1 GiB are decided with 256 MiB (connections._near_tie)."""

from fractions import Fraction

from canopy.engine.deploy.runtime_choice import NEAR, SECOND_SIZE, _near_tie, _smaller_messages
from tests.runtime_candidates import OPTIMUM, answer_at, tried
from tests.runtime_candidates import candidate as _candidate


def _run(monkeypatch, best, others, at_256):
    """_near_tie with the simulator answering ``at_256[layout name]`` (fraction of the
    optimum) at SECOND_SIZE; returns (chosen name, the sizes simulated, tried)."""
    asked = answer_at(monkeypatch, at_256)
    cands = [best, *others]
    records = tried(cands)
    chosen, _ = _near_tie(None, OPTIMUM, best, cands, records)
    return chosen.name, [size for size, _ in asked], records


def test_a_near_tie_goes_to_the_faster_pair(monkeypatch):
    """Punctured torus allgather: k = 5 runs 99.1 % at 1 GiB and 96.3 % at 256 MiB, k = 3
    98.9 % and 97.3 %: k = 3 runs both sizes faster together (TACOS: 98.8 % and 96.8 %)."""
    best = _candidate(5, Fraction(991, 1000), "k5")
    near = _candidate(3, Fraction(989, 1000), "k3")
    name, sizes, tried = _run(monkeypatch, best, [near],
                              {"k5": Fraction(963, 1000), "k3": Fraction(973, 1000)})
    assert name == "k3" and sizes == [SECOND_SIZE, SECOND_SIZE]
    assert [t["executed_fraction_256M"] for t in tried] == [0.963, 0.973]


def test_the_best_keeps_ties_and_candidates_beyond_near_are_not_simulated(monkeypatch):
    best = _candidate(5, Fraction(991, 1000), "k5")
    tie = _candidate(3, Fraction(989, 1000), "k3")
    name, _, _ = _run(monkeypatch, best, [tie],
                      {"k5": Fraction(963, 1000), "k3": Fraction(965, 1000)})
    assert name == "k5"                 # 1/0.963 + 4/0.991 < 1/0.965 + 4/0.989
    far = _candidate(3, best.fraction - NEAR - Fraction(1, 10**6), "k3")
    name, sizes, _ = _run(monkeypatch, best, [far], {"k5": Fraction(0), "k3": Fraction(1)})
    assert name == "k5" and sizes == []


def test_a_near_tie_does_not_drop_below_95_percent(monkeypatch):
    """The best at 95.2 %: a candidate at 94.9 % is within NEAR but below the bar of 95 % of
    the optimum."""
    best = _candidate(5, Fraction(952, 1000), "k5")
    low = _candidate(3, Fraction(949, 1000), "k3")
    name, sizes, _ = _run(monkeypatch, best, [low], {"k5": Fraction(0), "k3": Fraction(1)})
    assert name == "k5" and sizes == []


def test_a_candidate_that_cannot_beat_the_smallest_total_stops(monkeypatch):
    """The best is timed first; each other candidate's 256 MiB run stops once it provably
    cannot bring both sizes' total below the smallest so far, and the one that can wins as
    before (the best's own total is what it is scored by, not the smallest)."""
    best = _candidate(5, Fraction(991, 1000), "k5")
    slow = _candidate(4, Fraction(990, 1000), "k4")
    fast = _candidate(3, Fraction(989, 1000), "k3")
    name, sizes, tried = _run(monkeypatch, best, [fast, slow],
                              {"k5": Fraction(963, 1000), "k3": Fraction(973, 1000),
                               "k4": Fraction(964, 1000)})
    assert name == "k3" and sizes == [SECOND_SIZE] * 3
    assert [t.get("executed_fraction_256M") for t in tried] == [0.963, 0.973, None]
    assert tried[2]["executed_below_256M"] > 0.964


def test_a_near_tie_run_goes_on_to_the_bar_smaller_messages_sets(monkeypatch):
    """k = 3 cannot beat k = 5's total over both sizes unless it runs 97.06 % at 256 MiB,
    but it could run messages below the boundary where it beats k = 5 there by SPLIT_GAIN
    (96.55 %): its run goes on to that bar, finishes at 96.6 %, and _smaller_messages takes
    it from there without running it again."""
    best = _candidate(5, Fraction(991, 1000), "k5")
    near = _candidate(3, Fraction(989, 1000), "k3")
    asked = answer_at(monkeypatch, {"k5": Fraction(963, 1000), "k3": Fraction(966, 1000)})
    records = tried([best, near])
    at = []
    chosen, _ = _near_tie(None, OPTIMUM, best, [best, near], records, at)
    assert chosen is best and [t["executed_fraction_256M"] for t in records] == [0.963, 0.966]
    small, _ = _smaller_messages(None, OPTIMUM, best, [best, near], records, at)
    assert small is near and [name for _, name in asked] == ["k5", "k3"]
