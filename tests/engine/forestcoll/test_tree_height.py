"""Low trees on rail clusters: rail switches split as chords, not rings.

A ring split of a d-port rail switch makes every tree cross the servers one by one
(height d - 1 + 7 on 8-GPU servers); chords 1, 2, 4, ... keep it near log2(d). The
chord split must keep every cut (Thm 5, checked by enumeration here), and when the
flow-free packings cannot use it the pipeline falls back to rings.
"""

from collections import Counter
from fractions import Fraction

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from canopy.engine.forestcoll import solve as forest
from canopy.engine.forestcoll.edge_splitting import CHORD_SERVERS, remove_switches
from canopy.engine.forestcoll.optimum import find_optimum
from canopy.engine.forestcoll.solve import solve
from canopy.engine.generators import generate
from canopy.engine.model.topology import COMPUTE, SWITCH, Link, Node, Topology
from canopy.engine.network.indexed import Network
from tests.engine.forestcoll.test_edge_splitting import all_cuts_hold


@st.composite
def rail_stars(draw: st.DrawFn) -> Topology:
    """One switch joined to CHORD_SERVERS + 1 or + 2 GPUs (one per server) at one bandwidth,
    plus a few random links between GPUs."""
    d = draw(st.integers(CHORD_SERVERS + 1, CHORD_SERVERS + 2))
    bw = Fraction(draw(st.sampled_from([1, 2, 3])))
    nodes = [Node("rail", SWITCH)] + [Node(f"g{i}", COMPUTE, group=f"s{i}") for i in range(d)]
    links = [Link(f"g{i}", "rail", bw) for i in range(d)]
    for a, b in draw(st.lists(st.tuples(st.integers(0, d - 1), st.integers(0, d - 1)),
                              max_size=3)):
        if a != b:
            links.append(Link(f"g{a}", f"g{b}", Fraction(draw(st.sampled_from([1, 2])))))
    return Topology("rail star", nodes, links)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rail_stars())
def test_chord_split_keeps_every_cut(topo):
    net = Network.from_topology(topo)
    opt = find_optimum(net)
    caps = {e: int(c / opt.tree_bandwidth) for e, c in net.capacity.items()}
    logical = remove_switches(net, caps, opt.k, chords=True)
    assert all_cuts_hold(net, logical.capacity, opt.k)
    for (a, b), pool in logical.routes.items():
        assert sum(count for _, count in pool.segments) == logical.capacity[(a, b)]
        assert all(path[0] == a and path[-1] == b for path, _ in pool.segments)


def test_rail_cluster_trees_are_low():
    """16 servers x 8 GPUs on 8 rails: trees of height 11, where rings gave 22."""
    topo = generate("cluster", {"servers": "16", "gpus": "8"})
    schedule = solve(topo)      # verified before it is returned
    assert schedule.algbw == schedule.optimal_algbw
    assert max(t.height for t in schedule.trees) <= 11
    net = Network.from_topology(topo)
    opt = find_optimum(net)
    caps = {e: int(c / opt.tree_bandwidth) for e, c in net.capacity.items()}
    assert remove_switches(net, caps, opt.k, chords=True).chords


def test_servers_with_several_ports_on_one_switch_get_chords_between_servers():
    """bench/clusters.py: GPUs 0, 2, 4, 6 of every server on ib0, the rest on ib1. Chords
    join a port only to the same port of other servers: height 12 at 32 servers, where
    rings gave 38."""
    from bench.clusters import dgx_a100_cluster

    topo = dgx_a100_cluster(32)
    net = Network.from_topology(topo)
    opt = find_optimum(net)
    caps = {e: int(c / opt.tree_bandwidth) for e, c in net.capacity.items()}
    logical = remove_switches(net, caps, opt.k, chords=True)
    assert logical.chords
    assert all(net.groups[a] != net.groups[b] for a, b in logical.capacity
               if len(logical.routes[(a, b)].segments[0][0]) > 3)   # through ib0 or ib1
    schedule = solve(topo)
    assert schedule.algbw == schedule.optimal_algbw
    assert max(t.height for t in schedule.trees) <= 12


def test_rings_when_chords_cannot_be_packed(monkeypatch):
    """If no flow-free packing takes the chords, switches are split again as rings."""
    topo = generate("cluster", {"servers": "12", "gpus": "4"})
    calls = Counter()
    real = forest.pack_symmetric

    def refuse_chords(compute, capacity, demands):
        calls["packings"] += 1
        return None if calls["packings"] == 1 else real(compute, capacity, demands)

    monkeypatch.setattr(forest, "pack_symmetric", refuse_chords)
    monkeypatch.setattr(forest, "greedy_packing", lambda *args: None)
    schedule = solve(topo)
    assert calls["packings"] == 2
    assert schedule.algbw == schedule.optimal_algbw
    assert max(t.height for t in schedule.trees) == 11 + 3    # rings: 11 servers, 3 GPUs


def test_an_unproven_split_runs_no_flow_and_alg5_gets_a_certified_one(monkeypatch):
    """The pipeline splits without the certificate's flows (a packing proves what it
    needs); when no flow-free packing exists it splits again with the certificate before
    Alg. 5, and the schedule is optimal and verified either way."""
    topo = generate("cluster", {"servers": "12", "gpus": "4"})
    net = Network.from_topology(topo)
    opt = find_optimum(net)
    caps = {e: int(c / opt.tree_bandwidth) for e, c in net.capacity.items()}
    quick = remove_switches(net, caps, opt.k, chords=True, unproven=True)
    assert quick.gamma_flows == 0 and not quick.certified
    assert remove_switches(net, caps, opt.k, chords=True).certified
    splits = []
    real = forest.remove_switches

    def recording(*args, **kwargs):
        logical = real(*args, **kwargs)
        splits.append((kwargs["chords"], logical.certified))
        return logical

    monkeypatch.setattr(forest, "remove_switches", recording)
    monkeypatch.setattr(forest, "pack_symmetric", lambda *args: None)
    monkeypatch.setattr(forest, "greedy_packing", lambda *args: None)
    schedule = solve(topo)
    assert splits == [(True, False), (False, False), (False, True)]
    assert schedule.algbw == schedule.optimal_algbw
