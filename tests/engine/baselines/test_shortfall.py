"""Rings in the execution model: their latency term grows with the loop iterations, so
the fastest depth for a ring is the protocol's fewest; relayed hops are named, and so is a
TACOS timetable for one size that loads a link more than its best."""

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


def test_a_schedule_per_size_that_loads_a_link_more_is_named():
    """Where the schedule built for a size (TACOS's timetable synthesized with latency)
    has a lower bound than the row's best, the line names its busiest link and bound,
    and measures the rest against that bound."""
    details = {"timetable_algbw_at": {1 << 30: Fraction(4258, 100)},
               "chunks_by_size": {Fraction(1 << 30): 4}, "seeds": 4,
               "latency_free_bound": Fraction(48)}
    own = (Fraction(128, 3), ("h0.pcie1", "h0.nic1"))
    line = shortfall_line("tacos", Fraction(42, 48), "1G", details, 15, 30, Fraction(48),
                          own, 1 << 30)
    assert line == ("tacos runs at 87.5% of its own bound at 1G: its timetable for 1G, "
                    "synthesized with latency (4 chunks per node, the fastest of 4 seeds in "
                    "TACOS's own step times: 42.58 GB/s), loads h0.pcie1 -> h0.nic1 more "
                    "than its timetable without latency (bound 42.67 GB/s against 48.00), "
                    "and runs at 98.44% of that bound.")
    # below 95 % of that bound too: the cause follows, measured against it
    line = shortfall_line("tacos", Fraction(36, 48), "1G", {}, 15, 2, Fraction(48), own)
    assert line is not None and line.endswith(
        "and runs at 84.38% of that bound; its pieces cross 15 sends in a row, and at 2 "
        "loop iterations filling and draining that pipeline takes up to 87.5% of the time.")


def test_compare_names_tacos_s_heavier_schedule_at_1g_on_aws_p4d():
    """On aws-p4d-2x8 TACOS's allgather timetable for 1 GiB loads a PCIe link to 42.67
    GB/s, below the 48 GB/s of its latency-free one, and runs at its own bound: compare
    says so (it once read as a pipeline 31.8 % filling and draining)."""
    from canopy.engine.comparison.table import compare
    from canopy.engine.io.topology_json import load_sample

    comp = compare(load_sample("aws-p4d-2x8.json"), sizes=(1 << 30,), algorithms=("tacos",))
    row = comp.row("tacos")
    own, link = row.bounds[1 << 30]
    assert row.algbw == 48 and own == Fraction(128, 3) and link == ("h0.pcie1", "h0.nic1")
    assert row.algbw_at(1 << 30) >= Fraction(99, 100) * own
    [line] = comp.shortfalls()
    assert "loads h0.pcie1 -> h0.nic1 more than its timetable without latency (bound 42.67 " \
           "GB/s against 48.00)" in line


def test_tacos_allreduce_runs_at_its_bound_on_the_hypercube():
    """TACOS's allreduce timetable sends both phases over a link on one connection, one
    chunk at a time as TACOS's links do: on hypercube-3d it runs at its link-load bound
    (with a connection per phase it ran at exactly 10/11 of it)."""
    from canopy.engine.comparison.table import compare
    from canopy.engine.io.topology_json import load_sample

    comp = compare(load_sample("hypercube-3d.json"), "allreduce", sizes=(1 << 30,),
                   algorithms=("tacos",))
    row = comp.row("tacos")
    assert row.algbw == 80 and row.algbw_at(1 << 30) >= Fraction(999, 1000) * row.algbw
    assert comp.shortfalls() == []


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


def test_tacos_allreduce_phases_in_sequence_are_named():
    """On the 4x4 mesh TACOS's reduce-scatter loads n0 -> n1 most and its allgather
    n1 -> n0 (106.67 GB/s each), so their loads added per link bound the allreduce at
    66.67 GB/s; but each link sends its reduce-scatter chunks first, and in one loop
    iteration without latency the allreduce takes exactly the two phases' times added:
    53.33 GB/s. The shortfall line names that cause (not the generic one)."""
    from dataclasses import replace

    from canopy.engine.baselines.tacos import tacos_baseline
    from canopy.engine.execution.compiler import plan_program
    from canopy.engine.execution.kernel import run_program
    from canopy.engine.execution.simulate import plan_bound
    from canopy.engine.generators import generate

    topo = generate("mesh")
    result = tacos_baseline(topo, "allreduce")
    plan = result.plan_at(Fraction(1 << 30))
    bound, link = plan_bound(topo, plan)
    rs = plan_bound(topo, replace(plan, broadcast_trees=()))
    ag = plan_bound(topo, replace(plan, reduce_trees=()))
    assert (bound, rs, ag) == (Fraction(200, 3), (Fraction(320, 3), ("n0", "n1")),
                               (Fraction(320, 3), ("n1", "n0")))
    size = 1 << 20
    time_us = run_program(topo, plan_program(plan, size, 1), default_latency=Fraction(0),
                          exact=True)
    assert size / (time_us * 1000) == 1 / (1 / rs[0] + 1 / ag[0]) == Fraction(160, 3)
    line = shortfall_line("tacos", Fraction(827, 1000), "1G", result.details, 18, 256, bound,
                          (bound, link), 1 << 30)
    assert line is not None and line.startswith(
        "tacos runs at 82.7% of its own bound at 1G: TACOS runs its reduce-scatter timetable "
        "and then its allgather timetable")
    assert ("(106.67 GB/s with busiest link n0 -> n1, 106.67 with n1 -> n0: 53.33 GB/s in "
            "sequence, 80.0% of the bound") in line
