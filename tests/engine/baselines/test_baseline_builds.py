"""The baselines' builds reuse what they computed once, so that ``canopy compare`` stays
fast on large clusters; each shortcut gives what the plain computation gives."""

from fractions import Fraction

import pytest

from canopy.engine.model.plan import FlowEdge, FlowTree, chain_trees


def _chains_one_by_one(order, hops, share, key, reduce=False):
    """chain_trees as first written: a new edge object per chain and hop."""
    n = len(order)
    trees = []
    for j in range(n):
        edges = []
        for i in range(n - 1):
            if reduce:
                parent, child = order[(j - i) % n], order[(j - i - 1) % n]
                path = hops[(child, parent)]
            else:
                parent, child = order[(j + i) % n], order[(j + i + 1) % n]
                path = hops[(parent, child)]
            edges.append(FlowEdge(parent, child, path, channel=key))
        trees.append(FlowTree((key, order[j]), order[j], tuple(edges), share, reduce))
    return trees


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7])
@pytest.mark.parametrize("reduce", [False, True])
def test_ring_chains_share_one_edge_per_hop_and_equal_the_plain_chains(n, reduce):
    order = [f"g{i}" for i in (3, 0, 6, 1, 5, 2, 4)[:n]]
    hops = {(a, b): (a, f"sw{a}{b}", b) for a in order for b in order if a != b}
    share = Fraction(1, 5)
    trees = chain_trees(order, hops, share, 2, reduce)
    assert trees == _chains_one_by_one(order, hops, share, 2, reduce)
    assert len({id(e) for t in trees for e in t.edges}) == (n if n > 1 else 0)


@pytest.mark.parametrize("name", ["dgx-a100-2x8.json", "tacos-2d-switch-8x4.json"])
def test_a_timetables_link_loads_are_its_trees(name):
    """TACOS's bound (the α = 0 timetable's link congestion) is taken from the matches
    without building the trees; it is what the trees' plan gives."""
    from canopy.engine.baselines.tacos import (
        best_of,
        tacos_baseline,
        timetable_loads,
        timetable_trees,
        transpose,
        unwind,
    )
    from canopy.engine.io.topology_json import load_sample
    from canopy.engine.model.plan import CollectivePlan, bandwidth_bound, link_loads, loads_bound

    topo = load_sample(name)
    links, nodes = unwind(topo), topo.compute_nodes()
    ag = best_of(links, nodes, 2, Fraction(1), 1)
    rs = best_of(transpose(links), nodes, 2, Fraction(1), 1)
    for tables in ([(ag, False)], [(rs, True)], [(rs, True), (ag, False)]):
        plan = CollectivePlan("allreduce", tuple(nodes),
                              tuple(t for table, r in tables if r
                                    for t in timetable_trees(table, reduce=True)),
                              tuple(t for table, r in tables if not r
                                    for t in timetable_trees(table)))
        assert timetable_loads([*tables, (None, False)]) == link_loads(plan)
        assert loads_bound(timetable_loads(tables), topo.capacities()) == \
            bandwidth_bound(plan, topo.capacities())
    row = tacos_baseline(topo, "allreduce", chunks_per_node=(2,), seeds=1)
    rs, ag = row.schedule["reduce-scatter"], row.schedule["allgather"]
    plan = CollectivePlan("allreduce", tuple(nodes), tuple(timetable_trees(rs, reduce=True)),
                          tuple(timetable_trees(ag)))
    assert row.algbw == bandwidth_bound(plan, topo.capacities())[0]


def test_a_one_tree_schedule_is_not_searched_for_fewer_trees(monkeypatch):
    """runtime_schedule's search for fewer trees within TOLERANCES is skipped at k = 1
    (every such search would find k = 1 again, and seen schedules are not simulated)."""
    from canopy.engine.deploy.runtime_choice import TOLERANCES, _choose
    from canopy.engine.forestcoll.solve import solve
    from canopy.engine.io.topology_json import load_sample
    from canopy.engine.msccl.threadblocks import MscclLimits

    topo = load_sample("tacos-3d-rfs-2x4x8.json")
    schedule = solve(topo, "allgather")
    assert schedule.k == 1 and not schedule.split_budgets
    assert {solve(topo, "allgather", tolerance=t).k for t in TOLERANCES} == {1}
    calls = []
    monkeypatch.setattr("canopy.engine.forestcoll.solve.solve", lambda *a, **k: calls.append(a))
    choice = _choose(topo, schedule, MscclLimits())
    assert calls == [] and choice.schedule is schedule and choice.layout


@pytest.mark.parametrize("name", ["dgx-a100-2x8.json", "tacos-dragonfly-4x5.json"])
def test_tacos_link_times_per_kind_give_the_per_link_bound(name):
    """TACOS computes a chunk's time once per distinct (bandwidth, latency) of its
    logical links; its receive bound is still Σ over each node's links in of 1/t."""
    from canopy.engine.baselines.tacos import receive_bound, transpose, unwind
    from canopy.engine.execution.program import link_time
    from canopy.engine.io.topology_json import load_sample

    topo = load_sample(name)
    nodes = topo.compute_nodes()
    for links in (unwind(topo), transpose(unwind(topo, "mesh"))):
        for chunk in (Fraction(1), Fraction(3 << 20, 7)):
            rate = dict.fromkeys(nodes, Fraction(0))
            for x in links:
                rate[x.dst] += 1 / link_time(chunk, x.bandwidth, x.latency)
            assert receive_bound(links, nodes, 3, chunk) == \
                max((len(nodes) - 1) * 3 / r for r in rate.values())


def test_a_plans_connection_members_are_computed_once_and_each_caller_owns_its_lists():
    """Layout choice asks for one plan's connection members again and again; each caller
    gets its own lists (callers sort them), equal to a fresh computation."""
    from canopy.engine.forestcoll.solve import solve
    from canopy.engine.io.topology_json import load_sample
    from canopy.engine.model.plan import schedule_plan
    from canopy.engine.msccl import connection_counts

    plan = schedule_plan(solve(load_sample("dgx-a100-2x8.json"), "reduce-scatter"))
    first = connection_counts.connection_members(plan, 3)
    for items in first.values():
        items.reverse()                      # what a caller may do to its lists
    again = connection_counts.connection_members(plan, 3)
    connection_counts._MEMBERS.clear()
    fresh = connection_counts.connection_members(plan, 3)
    assert again == fresh and list(again) == list(fresh)
    assert all(again[key] is not fresh[key] for key in fresh)
    assert connection_counts.connection_members(plan, 1) != fresh


@pytest.mark.parametrize("name", ["dgx-a100-2x8.json", "mi250-2x16.json",
                                  "rail-leaf-spine-4x8.json"])
def test_ring_gateways_scored_in_int64_are_those_scored_in_python(name, monkeypatch):
    """The ring search scores a server's gateway hops as arrays; where the loads could
    overflow int64 it scores them hop by hop in Python, the same rings."""
    from canopy.engine.baselines import ring
    from canopy.engine.io.topology_json import load_sample

    topo = load_sample(name)
    arrays = ring.find_rings(topo)
    monkeypatch.setattr(ring, "EXACT_BELOW", 0)        # every level falls back
    assert ring.find_rings(topo) == arrays
