"""The α-β simulator: exact link times, serialisation, cut-through switches, store-and-forward
GPUs, pipelining."""

from fractions import Fraction

import pytest

from canopy.engine.errors import ScheduleError
from canopy.engine.plan import CollectivePlan, FlowEdge, FlowTree
from canopy.engine.progress import Cancelled
from canopy.engine.simulate import (
    CHECK_EVERY,
    PIECES_PER_STAGE,
    algbw_gbps,
    busiest_link_floor,
    fastest,
    link_time,
    pipeline_stages,
    simulate,
)
from canopy.engine.topology import Link, Node, Topology


def line(n, bandwidth=Fraction(25), latency=None, switch_at=()):
    """Nodes v0 - v1 - ... - v{n-1}; those in ``switch_at`` are switches."""
    nodes = [Node(f"v{i}", "switch" if i in switch_at else "compute") for i in range(n)]
    links = [Link(f"v{i}", f"v{i + 1}", bandwidth, latency=latency) for i in range(n - 1)]
    return Topology("line", nodes, links)


def chain_plan(names, paths, share=Fraction(1), collective="allgather", reduce=False):
    pairs = zip(names, names[1:], strict=False)
    edges = tuple(FlowEdge(a, b, p) for (a, b), p in zip(pairs, paths, strict=True))
    tree = FlowTree("t", names[0], edges, share, reduce)
    if reduce:
        return CollectivePlan(collective, tuple(names), reduce_trees=(tree,))
    return CollectivePlan(collective, tuple(names), broadcast_trees=(tree,))


def test_one_message_over_one_link_takes_alpha_plus_n_over_b_exactly():
    topo = line(2, Fraction("53.6870912"), latency=Fraction(1, 2))
    plan = chain_plan(["v0", "v1"], [("v0", "v1")])
    size = 12345679
    result = simulate(topo, plan, size)
    expected = Fraction(1, 2) + Fraction(size) / (Fraction("53.6870912") * 1000)
    assert result.time_us == expected
    assert result.time_us == link_time(Fraction(size), Fraction("53.6870912"), Fraction(1, 2))
    assert result.algbw == algbw_gbps(size, expected)


def test_default_latency_is_one_microsecond_and_overridable():
    topo = line(2)
    plan = chain_plan(["v0", "v1"], [("v0", "v1")])
    assert simulate(topo, plan, 25000).time_us == 1 + 1
    assert simulate(topo, plan, 25000, default_latency=Fraction(3)).time_us == 3 + 1


def test_ordered_links_give_the_same_single_message_time():
    topo = line(2, latency=Fraction(2))
    tree = FlowTree("t", "v0", (FlowEdge("v0", "v1", ("v0", "v1")),), Fraction(1))
    plan = CollectivePlan("allgather", ("v0", "v1"), broadcast_trees=(tree,),
                          ordered_links=True)
    assert simulate(topo, plan, 50000).time_us == 2 + 2


def two_hops(b1, b2, a1, a2, middle="switch"):
    """v0 -> v1 -> v2 with v1 a switch (or a compute node relaying)."""
    nodes = [Node("v0"), Node("v1", middle), Node("v2")]
    links = [Link("v0", "v1", b1, latency=a1), Link("v1", "v2", b2, latency=a2)]
    return Topology("two hops", nodes, links)


@pytest.mark.parametrize("b1,b2", [(Fraction(10), Fraction(40)), (Fraction(40), Fraction(10)),
                                   (Fraction(25), Fraction(25))])
def test_cut_through_switch_costs_both_latencies_and_the_slower_link_once(b1, b2):
    a1, a2 = Fraction(1, 2), Fraction(3)
    topo = two_hops(b1, b2, a1, a2)
    plan = chain_plan(["v0", "v2"], [("v0", "v1", "v2")])
    n = 1234567
    expected = a1 + a2 + Fraction(n) / (min(b1, b2) * 1000)
    assert simulate(topo, plan, n).time_us == expected
    assert simulate(topo, plan, n, switch_mode="cut-through").time_us == expected


def test_store_and_forward_switch_mode_costs_each_link():
    a1, a2, b1, b2 = Fraction(1, 2), Fraction(3), Fraction(10), Fraction(40)
    topo = two_hops(b1, b2, a1, a2)
    plan = chain_plan(["v0", "v2"], [("v0", "v1", "v2")])
    n = 1234567
    expected = link_time(Fraction(n), b1, a1) + link_time(Fraction(n), b2, a2)
    assert simulate(topo, plan, n, switch_mode="store-and-forward").time_us == expected


def test_a_compute_node_on_a_route_stores_and_forwards():
    topo = two_hops(Fraction(25), Fraction(25), None, None, middle="compute")
    plan = chain_plan(["v0", "v2"], [("v0", "v1", "v2")])
    assert simulate(topo, plan, 25000).time_us == 2 * (1 + 1)


def test_cut_through_waits_for_a_busy_link_and_holds_it_one_message_at_a_time():
    # v0 -> s -> v2 and v1 -> s -> v2 at once: both headers reach s at 1 µs; the first
    # piece holds s -> v2 during [1, 3], the second during [3, 5] (α = 1, n/B = 1).
    nodes = [Node("v0"), Node("v1"), Node("s", "switch"), Node("v2")]
    links = [Link(v, "s", Fraction(25)) for v in ("v0", "v1")] + [Link("s", "v2", Fraction(25))]
    topo = Topology("star", nodes, links)
    trees = tuple(FlowTree(v, v, (FlowEdge(v, "v2", (v, "s", "v2")),), Fraction(1, 2))
                  for v in ("v0", "v1"))
    plan = CollectivePlan("allgather", ("v0", "v1", "v2"), broadcast_trees=trees)
    assert simulate(topo, plan, 50000).time_us == 5
    # Store-and-forward: both arrive whole at 2; s -> v2 serves them in [2, 4], [4, 6].
    assert simulate(topo, plan, 50000, switch_mode="store-and-forward").time_us == 6


def test_cut_through_pipeline_through_a_switch():
    # Two pieces of n/2 over a slow then a fast link: the fast link is held until each
    # piece's tail has crossed, so piece 2's tail leaves at its end on the slow link + α2.
    a1, a2, b1, b2 = Fraction(1), Fraction(2), Fraction(10), Fraction(40)
    topo = two_hops(b1, b2, a1, a2)
    plan = chain_plan(["v0", "v2"], [("v0", "v1", "v2")])
    n = Fraction(10**6)
    slow = link_time(n / 2, b1, a1)
    assert simulate(topo, plan, n, pieces=2).time_us == 2 * slow + a2


def test_unknown_switch_mode_is_an_error():
    topo = line(2)
    plan = chain_plan(["v0", "v1"], [("v0", "v1")])
    with pytest.raises(ScheduleError, match="switch mode"):
        simulate(topo, plan, 100, switch_mode="wormhole")


def test_pipeline_stages_count_gpu_relays_or_every_link():
    # A chain of 3 GPUs joined through one switch each: 2 tree edges, 4 links.
    nodes = [Node("g0"), Node("s0", "switch"), Node("g1"), Node("s1", "switch"), Node("g2")]
    names = [n.id for n in nodes]
    links = [Link(a, b, Fraction(25)) for a, b in zip(names, names[1:], strict=False)]
    topo = Topology("chain", nodes, links)
    plan = chain_plan(["g0", "g1", "g2"], [("g0", "s0", "g1"), ("g1", "s1", "g2")])
    assert pipeline_stages(topo, plan) == 2
    assert pipeline_stages(topo, plan, "store-and-forward") == 4


def test_a_link_sends_one_message_at_a_time():
    # Two trees both cross v0 -> v1: the second waits for the first.
    topo = line(2)
    edge = FlowEdge("v0", "v1", ("v0", "v1"))
    trees = tuple(FlowTree(i, "v0", (edge,), Fraction(1, 2)) for i in range(2))
    plan = CollectivePlan("allgather", ("v0", "v1"), broadcast_trees=trees)
    assert simulate(topo, plan, 50000).time_us == 2 * (1 + 1)


@pytest.mark.parametrize("pieces", [1, 2, 3, 8])
def test_pipelined_chain_time(pieces):
    # L hops, P pieces: (L + P - 1) steps of α + (n/P)/B.
    hops = 4
    topo = line(hops + 1)
    names = [f"v{i}" for i in range(hops + 1)]
    plan = chain_plan(names, [(a, b) for a, b in zip(names, names[1:], strict=False)])
    size = Fraction(10**6)
    step = 1 + size / pieces / (25 * 1000)
    assert simulate(topo, plan, size, pieces).time_us == (hops + pieces - 1) * step


def test_reduce_waits_for_all_children():
    # Star reduce into v1 from v0 and v2, then nothing else: both links run in parallel.
    nodes = [Node("v0"), Node("v1"), Node("v2")]
    topo = Topology("star", nodes, [Link("v0", "v1", Fraction(10)),
                                    Link("v2", "v1", Fraction(10))])
    # Chain reduce v2 -> v0 -> v1 (root v1): v0 sends after v2's data arrived.
    edges = (FlowEdge("v1", "v0", ("v0", "v1")), FlowEdge("v0", "v2", ("v2", "v1", "v0")))
    tree = FlowTree("t", "v1", edges, Fraction(1), reduce=True)
    plan = CollectivePlan("reduce-scatter", ("v0", "v1", "v2"), reduce_trees=(tree,))
    step = 1 + Fraction(10000, 10 * 1000)
    assert simulate(topo, plan, 10000).time_us == 3 * step


def test_allreduce_broadcast_waits_for_its_reduction():
    topo = line(2)
    up = FlowTree("k", "v1", (FlowEdge("v1", "v0", ("v0", "v1")),), Fraction(1), True)
    down = FlowTree("k", "v1", (FlowEdge("v1", "v0", ("v1", "v0")),), Fraction(1))
    plan = CollectivePlan("allreduce", ("v0", "v1"), (up,), (down,))
    assert simulate(topo, plan, 25000).time_us == 2 * (1 + 1)


def test_ordered_links_respect_the_plan_order():
    # On v1 -> v2, a's hop comes first in the plan but is ready only at 2 µs; b is ready
    # at once. FIFO sends b first; a compiled (ordered) schedule waits for a.
    topo = line(3)
    first = FlowTree("a", "v0", (FlowEdge("v0", "v1", ("v0", "v1"), Fraction(0)),
                                 FlowEdge("v1", "v2", ("v1", "v2"), Fraction(0))), Fraction(1))
    second = FlowTree("b", "v1", (FlowEdge("v1", "v2", ("v1", "v2"), Fraction(1)),),
                      Fraction(1))
    fifo = CollectivePlan("allgather", ("v0", "v1", "v2"), broadcast_trees=(first, second))
    ordered = CollectivePlan("allgather", ("v0", "v1", "v2"), broadcast_trees=(first, second),
                             ordered_links=True)
    step = 1 + 1
    assert simulate(topo, fifo, 25000).time_us == 2 * step
    assert simulate(topo, ordered, 25000).time_us == 3 * step


def test_deadlocking_order_is_reported():
    # A malformed plan: E2 (given E1's route) depends on E1 but comes first in the order
    # of that connection. Well-formed trees cannot do this.
    topo = line(3)
    tree = FlowTree("a", "v0", (FlowEdge("v0", "v1", ("v0", "v1"), Fraction(5)),
                                FlowEdge("v1", "v2", ("v0", "v1"), Fraction(0))),
                    Fraction(1))
    plan = CollectivePlan("allgather", ("v0", "v1", "v2"), broadcast_trees=(tree,),
                          ordered_links=True)
    with pytest.raises(ScheduleError, match="deadlock"):
        simulate(topo, plan, 25000)


def test_unknown_link_is_an_error():
    topo = line(2)
    plan = chain_plan(["v0", "v1"], [("v0", "v9")])
    with pytest.raises(ScheduleError):
        simulate(topo, plan, 100)


def test_fastest_is_no_slower_than_one_piece():
    topo = line(6)
    names = [f"v{i}" for i in range(6)]
    plan = chain_plan(names, [(a, b) for a, b in zip(names, names[1:], strict=False)])
    best = fastest(topo, plan, 10**8)
    assert best.pieces > 1
    assert best.time_us < simulate(topo, plan, 10**8).time_us


def test_fastest_pipelines_deep_enough_for_large_messages():
    topo = line(6)
    names = [f"v{i}" for i in range(6)]
    plan = chain_plan(names, [(a, b) for a, b in zip(names, names[1:], strict=False)])
    best = fastest(topo, plan, 1 << 30)
    assert best.pieces >= PIECES_PER_STAGE * pipeline_stages(topo, plan) == 4 * 5


@pytest.mark.parametrize("pieces", [1, 2, 5])
def test_busiest_link_floor_is_reached_by_one_busy_link(pieces):
    # Two trees over v0 -> v1 only: the link is busy all along, so the floor is the time.
    topo = line(2)
    edge = FlowEdge("v0", "v1", ("v0", "v1"))
    trees = tuple(FlowTree(i, "v0", (edge,), Fraction(1, 2)) for i in range(2))
    plan = CollectivePlan("allgather", ("v0", "v1"), broadcast_trees=trees)
    floor = busiest_link_floor(topo, plan, 50000, pieces)
    assert floor == 2 * pieces * 1 + 2
    assert simulate(topo, plan, 50000, pieces).time_us == floor


def test_check_is_called_during_long_simulations_and_may_stop_them():
    topo = line(2)
    plan = chain_plan(["v0", "v1"], [("v0", "v1")])
    calls = []
    simulate(topo, plan, 10**6, pieces=2 * CHECK_EVERY, check=lambda: calls.append(1))
    assert len(calls) == 2

    def stop():
        raise Cancelled("stopped")
    edge = FlowEdge("v0", "v1", ("v0", "v1"))
    trees = tuple(FlowTree(i, "v0", (edge,), Fraction(1, 100)) for i in range(100))
    many = CollectivePlan("allgather", ("v0", "v1"), broadcast_trees=trees)
    with pytest.raises(Cancelled):
        fastest(topo, many, 10**9, start=CHECK_EVERY // 100 + 1, check=stop)
