"""Rings in the execution model: their latency term grows with the loop iterations, so
the fastest depth for a ring is the protocol's fewest; relayed hops are named."""

from fractions import Fraction

import pytest

from canopy.engine.baselines.ring import ring_baseline
from canopy.engine.baselines.shortfall import relayed_hops, shortfall_line
from canopy.engine.execution.simulate import fastest, min_pieces, simulate
from canopy.engine.model.topology import COMPUTE, Link, Node, Topology

BANDWIDTH = Fraction(10)      # GB/s: 10^4 bytes per µs
ALPHA = Fraction(1)           # µs per link (the default latency)


def _one_way_ring(n: int) -> Topology:
    nodes = [Node(f"g{i}", COMPUTE) for i in range(n)]
    return Topology("ring", nodes, [Link(f"g{i}", f"g{(i + 1) % n}", BANDWIDTH, duplex=False)
                                    for i in range(n)])


@pytest.mark.parametrize("n", [3, 4, 6])
@pytest.mark.parametrize("pieces", [1, 2, 5])
def test_ring_time_is_bandwidth_plus_a_latency_term_per_iteration(n, pieces):
    """T(P) = (N-1)/N · M/b + P·(N-2)·α + α, exactly: step s on a GPU waits for step
    s - 1 on its neighbour, and each step pays α before the next can leave."""
    topo = _one_way_ring(n)
    size = 3 << 20
    plan = ring_baseline(topo, "allgather").plan_at(Fraction(size))
    result = simulate(topo, plan, size, pieces, exact=True)
    bandwidth_us = Fraction(n - 1, n) * size / (BANDWIDTH * 1000)
    assert result.time_us == bandwidth_us + pieces * (n - 2) * ALPHA + ALPHA


def test_fastest_runs_a_ring_at_the_fewest_iterations():
    """Deeper pipelines only add latency to a ring: ``fastest`` keeps the protocol's
    fewest iterations (two deep runs alone, the former rule, were slower)."""
    topo = _one_way_ring(4)
    size = 1 << 24
    plan = ring_baseline(topo, "allgather").plan_at(Fraction(size))
    lowest = min_pieces(plan, size)
    best = fastest(topo, plan, size)
    assert best.pieces == lowest
    assert best.time_us == simulate(topo, plan, size, lowest).time_us


def test_relayed_hops_are_found_and_named():
    """A 3-GPU line a - b - c has one ring; its hop c -> a relays through b."""
    nodes = [Node(x, COMPUTE) for x in "abc"]
    topo = Topology("line", nodes, [Link("a", "b", BANDWIDTH), Link("b", "c", BANDWIDTH)])
    result = ring_baseline(topo, "allgather")
    assert result.details["relayed_hops"] == [["c", "b", "a"]]
    line = shortfall_line("ring", Fraction(60, 100), "1G", result.details, 3, 2)
    assert line == ("ring runs at 60.0% of its own bound at 1G: 1 of its 3 ring hops relay "
                    "through other GPUs (e.g. c -> b -> a), which store and forward each "
                    "message, and every ring step waits for the one before it.")
    assert relayed_hops([], {"a"}) == []
    assert shortfall_line("ring", Fraction(96, 100), "1G", result.details, 3, 2) is None


def test_a_timetable_with_idle_links_is_named():
    """A TACOS timetable at 87.5 % of its link-load bound (the 3x3 mesh's allreduce) is
    the cause named, before the pipeline's fill."""
    details = {"timetable_algbw": Fraction(7, 8) * 64, "bottleneck_link": ["a", "b"]}
    line = shortfall_line("tacos", Fraction(78, 100), "1G", details, 8, 57, Fraction(64))
    assert line == ("tacos runs at 78.0% of its own bound at 1G: its timetable of whole "
                    "chunks leaves links idle while their next chunk is on its way, so even "
                    "without latency it takes 1.14x the busiest link's time (87.5% of the "
                    "bound).")
    assert "filling" in shortfall_line("tacos", Fraction(78, 100), "1G",
                                       {**details, "timetable_algbw": Fraction(64)}, 8, 2,
                                       Fraction(64))


@pytest.mark.parametrize("dims", ["4x4", "3x4"])
def test_rings_on_a_torus_take_direct_links_only(dims):
    """A torus has Hamiltonian cycles of direct links, so the ring search relays through
    no GPU (it once relayed 6 of the 4x4 torus's 48 hops, 160 GB/s bound) and the rings
    run within 1 % of their bound, above the former rings' bound."""
    from canopy.engine.comparison.table import compare
    from canopy.engine.generators import generate

    topo = generate("torus", {"dims": dims})
    result = ring_baseline(topo, "allgather")
    assert result.details["relayed_hops"] == [] and result.algbw > 200
    row = compare(topo, sizes=(1 << 30,), algorithms=("ring",)).row("ring")
    assert row.algbw_at(1 << 30) >= Fraction(99, 100) * row.algbw
