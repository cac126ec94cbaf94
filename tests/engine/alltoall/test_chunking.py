"""The all-to-all lowering's split of each pair's chunks among its routes
(engine/alltoall/msccl.py: floors and ceilings of the shares, ceilings placed so that the
busiest arc carries as little as it can)."""

from collections import defaultdict
from fractions import Fraction

from canopy.engine.alltoall import solve_alltoall
from canopy.engine.alltoall.msccl import _apportion, _balanced, _routes_by_pair, chunking
from canopy.engine.io.topology_json import load_sample


def _peak(pairs, counts, capacity):
    load = defaultdict(Fraction)
    for pair, routes in pairs.items():
        for k, (_, _, arcs) in zip(counts[pair], routes, strict=True):
            for a in arcs:
                load[a] += Fraction(k) / capacity[a]
    return max(load.values())


def test_three_pairs_with_three_equal_routes_spread_their_extra_chunks():
    """Three pairs each split 2 chunks over three routes of equal rate, one arc each, the
    same three arcs: rounded one pair at a time (largest remainder, ties to the first) all
    six chunks go to the first two arcs (3 each); balanced, each arc carries 2."""
    capacity = (Fraction(1),) * 3
    pairs = {(s, 3): [(Fraction(1), [s, 3], [a]) for a in range(3)] for s in range(3)}
    greedy = {pair: _apportion([Fraction(1, 3)] * 3, 2) for pair in pairs}
    assert _peak(pairs, greedy, capacity) == 3
    balanced = _balanced(pairs, 2, capacity)
    assert _peak(pairs, balanced, capacity) == 2
    assert all(sorted(k) == [0, 1, 1] for k in balanced.values())


def test_a_move_between_routes_lowers_the_busiest_arc():
    """Pair (0, 1) rounded first takes its extra chunk on arc 0 (both arcs empty); pair
    (2, 1) can only use arc 0 and loads it further: moving (0, 1)'s chunk to arc 1 lowers
    the busiest arc from 2 to 1."""
    capacity = (Fraction(1), Fraction(1))
    pairs = {(0, 1): [(Fraction(1), [0, 1], [0]), (Fraction(1), [0, 2, 1], [1])],
             (2, 1): [(Fraction(1), [2, 1], [0])]}
    counts = _balanced(pairs, 1, capacity)
    assert counts == {(0, 1): [0, 1], (2, 1): [1]}
    assert _peak(pairs, counts, capacity) == 1


def test_the_torus_split_loads_its_busiest_arc_within_one_percent_of_the_rates():
    """tpu-v4-4x4x4-torus: 8 chunks per pair over up to 15 routes; rounded pair by pair
    the busiest arc carries 3.9 % more than the routes' rates give it, balanced 0.4 %."""
    schedule = solve_alltoall(load_sample("tpu-v4-4x4x4-torus")).schedule
    pairs = _routes_by_pair(schedule)
    capacity = schedule.problem.capacity
    c, split, _ = chunking(schedule)
    exact = {pair: [rate * c / sum(r for r, _, _ in routes) for rate, _, _ in routes]
             for pair, routes in pairs.items()}
    greedy = {pair: _apportion([k / c for k in exact[pair]], c) for pair in pairs}
    counts = {pair: [next((k for k, hops in split[pair] if hops == h), 0)
                     for _, h, _ in routes] for pair, routes in pairs.items()}
    assert all(sum(k) == c for k in counts.values())
    assert all(abs(k - x) < 1 for pair in pairs
               for k, x in zip(counts[pair], exact[pair], strict=True))
    rates = _peak(pairs, exact, capacity)
    assert _peak(pairs, greedy, capacity) > rates * Fraction(103, 100)
    assert _peak(pairs, counts, capacity) <= rates * Fraction(101, 100)
