"""The partition bound on ForestColl's allreduce LP (App. E): never below the LP, never
below RS + AG, and equal to RS + AG where it certifies the optimum without the LP."""

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from canopy.engine.allreduce.lp import RELATIVE_MARGIN, solve_allreduce_lp
from canopy.engine.allreduce.partition_bound import (
    best_partition_bound,
    candidate_partitions,
    partition_value,
    tight_partition,
)
from canopy.engine.forestcoll.optimum import collective_algbw, find_optimum
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.topology import COMPUTE, SWITCH, Link, Node, Topology
from canopy.engine.network.indexed import Network
from tests.strategies import topologies


def _rs_ag(net: Network) -> Fraction:
    return collective_algbw("allreduce", len(net.compute), find_optimum(net).x)


def test_switch_star_closed_form():
    """N GPUs on one switch, b each way: every GPU alone gives N·b / (2(N-1)), which is
    RS + AG's algbw."""
    nodes = [Node("w", SWITCH)] + [Node(f"c{i}", COMPUTE) for i in range(4)]
    net = Network.from_topology(
        Topology("switch", nodes, [Link("w", f"c{i}", Fraction(3)) for i in range(4)]))
    bound = best_partition_bound(net)
    assert bound.value == Fraction(4 * 3, 2 * 3) == _rs_ag(net)
    assert bound.kind == "compute nodes" and bound.parts == 4


def test_two_servers_with_switches_inside():
    """Two servers of two GPUs on a server switch, joined by one link of bandwidth 1:
    the servers as parts give (1 + 1) / 2 = 1 = RS + AG (4·x*/2 with x* = 1/2)."""
    nodes = [Node(f"s{s}", SWITCH, group=f"n{s}") for s in range(2)]
    nodes += [Node(f"g{s}{i}", COMPUTE, group=f"n{s}") for s in range(2) for i in range(2)]
    links = [Link(f"s{s}", f"g{s}{i}", Fraction(10)) for s in range(2) for i in range(2)]
    net = Network.from_topology(Topology("two", nodes, links + [Link("s0", "s1", Fraction(1))]))
    kinds = dict(candidate_partitions(net))
    assert partition_value(net, kinds["servers"]) == 1 == _rs_ag(net)
    assert best_partition_bound(net).kind == "servers"


def test_invalid_partitions_are_refused():
    nodes = [Node("w", SWITCH)] + [Node(f"c{i}", COMPUTE) for i in range(3)]
    net = Network.from_topology(
        Topology("switch", nodes, [Link("w", f"c{i}", Fraction(1)) for i in range(3)]))
    c0, c1, c2 = net.compute
    for parts in ([frozenset([c0, c1, c2])], [frozenset([c0]), frozenset([c1])],
                  [frozenset([c0, c1]), frozenset([c1, c2])],
                  [frozenset([c0, c1, c2]), frozenset([0])]):
        with pytest.raises(ValueError):
            partition_value(net, parts)


@pytest.mark.parametrize("name", ["dgx-a100-2x8", "hypercube-3d", "mesh-2d-3x3",
                                  "forestcoll-fig2", "mi250-8plus8"])
def test_samples_between_rs_ag_and_the_lp(name):
    """RS + AG <= LP (6) <= the partition bound; where the bound equals RS + AG so does
    the LP."""
    net = Network.from_topology(load_sample(name))
    bound, rs_ag = best_partition_bound(net).value, _rs_ag(net)
    lp = solve_allreduce_lp(net)
    assert rs_ag <= bound
    assert lp.value <= float(bound) * (1 + RELATIVE_MARGIN)
    if bound == rs_ag:
        assert not lp.beats_rs_ag


def test_tight_sets_certify_mi250_2x16():
    """On 2 x MI250 neither the GCDs nor the servers alone are tight; the allgather
    optimum's 16 smallest tight sets are, and give RS + AG's algbw exactly."""
    net = Network.from_topology(load_sample("mi250-2x16"))
    rs_ag = _rs_ag(net)
    assert all(partition_value(net, p) > rs_ag for _, p in candidate_partitions(net))
    bound = best_partition_bound(net, rs_ag)
    assert bound.kind == "tight sets" and bound.parts == 16 and bound.value == rs_ag


def test_no_tight_partition_where_the_lp_wins():
    """mi250-8plus8 and the 3x3 mesh, where the LP beats RS + AG: no tight partition."""
    for name in ("mi250-8plus8", "mesh-2d-3x3"):
        net = Network.from_topology(load_sample(name))
        assert tight_partition(net, find_optimum(net).x) is None
        assert best_partition_bound(net, _rs_ag(net)).value > _rs_ag(net)


@st.composite
def _with_partition(draw: st.DrawFn) -> tuple[Topology, list[int | None]]:
    topo = draw(topologies(max_compute=4, max_switch=3))
    n_compute = sum(1 for n in topo.nodes if n.kind == COMPUTE)
    m = draw(st.integers(2, n_compute))
    compute_parts = draw(st.permutations(list(range(m)) + draw(
        st.lists(st.integers(0, m - 1), min_size=n_compute - m, max_size=n_compute - m))))
    switch_parts = draw(st.lists(st.one_of(st.none(), st.integers(0, m - 1)),
                                 min_size=len(topo.nodes) - n_compute,
                                 max_size=len(topo.nodes) - n_compute))
    return topo, list(compute_parts) + switch_parts


@settings(max_examples=40, deadline=None)
@given(_with_partition())
def test_any_partition_bounds_the_lp(case):
    """Random topologies (switches, one-way links) and random partitions: the LP with
    switch-balanced budgets never passes the bound, which never falls below RS + AG."""
    topo, owner_by_position = case
    net = Network.from_topology(topo)
    names = [n.id for n in topo.nodes]
    parts: dict[int, set[int]] = {}
    for name, part in zip(names, owner_by_position, strict=True):
        if part is not None:
            parts.setdefault(part, set()).add(net.names.index(name))
    bound = partition_value(net, [frozenset(p) for p in parts.values()])
    rs_ag = _rs_ag(net)
    assert bound >= rs_ag
    lp = solve_allreduce_lp(net).value
    assert lp <= float(bound) * (1 + RELATIVE_MARGIN)
    tight = tight_partition(net, find_optimum(net).x)
    if tight is not None:
        assert partition_value(net, tight) == rs_ag
        assert lp <= float(rs_ag) * (1 + RELATIVE_MARGIN)
