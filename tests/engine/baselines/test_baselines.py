"""Baselines: published checks, postconditions, and ForestColl's bound above them all."""

import functools
import random
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from canopy.engine.allreduce.lp import cut_bound
from canopy.engine.baselines.blink import best_root, blink_baseline, root_images
from canopy.engine.baselines.lr_rings import (
    brute_force_hops,
    is_contention_free,
    lr1_order,
    lr3_order,
    lr_baseline,
    ring_hops,
    switch_tree,
)
from canopy.engine.baselines.ring import find_rings, ring_baseline
from canopy.engine.baselines.tacos import (
    best_of,
    check_timetable,
    tacos_baseline,
    timetable_trees,
    transpose,
    unwind,
)
from canopy.engine.execution.simulate import simulate
from canopy.engine.forestcoll.edge_splitting import remove_switches
from canopy.engine.forestcoll.optimum import find_optimum
from canopy.engine.forestcoll.tree_packing import pack_trees
from canopy.engine.io.topology_json import load_sample, sample_names
from canopy.engine.model.plan import bandwidth_bound, check_coverage, path_links, ring_plan
from canopy.engine.model.topology import Link, Node, Topology
from canopy.engine.network.indexed import Network
from canopy.engine.network.maxflow import FlowNetwork
from canopy.engine.network.routing import Router
from canopy.engine.network.servers import compute_nodes_by_server
from tests.strategies import topologies

# One worker runs the module: what its fixtures compute is kept per process.
pytestmark = pytest.mark.xdist_group("engine-baselines-test_baselines")

SAMPLES = ["dgx-a100-2x8.json", "mi250-2x16.json", "forestcoll-fig2.json"]
COLLECTIVES = ["allgather", "reduce-scatter", "allreduce"]
GIB = 2**30


@functools.cache
def sample(name):
    return load_sample(name)


@functools.cache
def sample_rings(name):
    return find_rings(sample(name))


def optimum_algbw(topo, collective):
    return find_optimum(Network.from_topology(topo)).algbw(collective)


# ------------------------------------------------------------------ rings


def test_dgx_rings_reach_213_and_8_rings_one_per_nic_pair():
    """ForestColl (arXiv:2402.06787) §5.3: rings reach at most 213.33 GB/s; 8 rings, one per NIC
    pair."""
    topo = sample("dgx-a100-2x8.json")
    result = ring_baseline(topo)
    # "At most": every ring crosses the cut around server n0 at least once each way, and
    # that hop carries (N-1)/N of its ring's data, so algbw <= N·B+(S)/(N-1).
    server = {n.id for n in topo.nodes if n.group == "n0"}
    exiting = sum(b for (u, v), b in topo.capacities().items()
                  if u in server and v not in server)
    assert exiting == 200
    assert result.algbw == Fraction(16, 15) * exiting == Fraction(640, 3)
    assert result.details["rings"] == 8
    assert optimum_algbw(topo, "allgather") / result.algbw == Fraction(13, 8)  # 62.5 % more
    # Each ring leaves each server once and enters it once; across the 8 rings every
    # NIC direction carries exactly one ring hop.
    nic_uses = {}
    for _order, hops in sample_rings("dgx-a100-2x8.json"):
        for path in hops.values():
            for a, b in path_links(path):
                if ".nic" in a + b and "nvswitch" not in a + b:
                    nic_uses[(a, b)] = nic_uses.get((a, b), 0) + 1
    assert set(nic_uses.values()) == {1}
    assert len(nic_uses) == 16 * 4      # 16 GPUs x (gpu->nic, nic->ib, ib->nic, nic->gpu)


@pytest.mark.parametrize("name", SAMPLES)
def test_rings_are_hamiltonian_with_servers_contiguous(name):
    topo = sample(name)
    compute = topo.compute_nodes()
    servers = compute_nodes_by_server(topo)
    for order, hops in sample_rings(name):
        assert sorted(order) == sorted(compute)
        # Each server's nodes form one contiguous run of the cycle.
        runs = sum(1 for a, b in zip(order, order[1:] + order[:1], strict=False)
                   if any(a in s and b not in s for s in servers))
        assert runs == len(servers) or len(servers) == 1
        for (a, b), path in hops.items():
            assert path[0] == a and path[-1] == b
            assert all(e in topo.capacities() for e in path_links(path))


def test_ring_bound_formula():
    """algbw = N·R / ((N-1)·max_e C_e/b_e) for allgather, half for allreduce."""
    topo = sample("forestcoll-fig2.json")
    rings = sample_rings("forestcoll-fig2.json")
    n, r = len(topo.compute_nodes()), len(rings)
    counts = {}
    for _, hops in rings:
        for path in hops.values():
            for e in path_links(path):
                counts[e] = counts.get(e, 0) + 1
    worst = max(c / topo.capacities()[e] for e, c in counts.items())
    expected = Fraction(n * r) / ((n - 1) * worst)
    plan = ring_plan("allgather", topo.compute_nodes(), rings)
    assert bandwidth_bound(plan, topo.capacities())[0] == expected
    plan = ring_plan("allreduce", topo.compute_nodes(), rings)
    assert bandwidth_bound(plan, topo.capacities())[0] == expected / 2
    check_coverage(plan)


def test_router_prefers_the_gpus_own_nic():
    topo = sample("dgx-a100-2x8.json")
    path = Router(topo).route("n0.gpu2", "n1.gpu2", {})
    assert path == ("n0.gpu2", "n0.nic2", "ib0", "n1.nic2", "n1.gpu2")


# ------------------------------------------------------------------ TACOS


def mesh(width, height, bandwidth, latency):
    nodes = [Node(f"n{r}_{c}") for r in range(height) for c in range(width)]
    links = []
    for r in range(height):
        for c in range(width):
            if c + 1 < width:
                links.append(Link(f"n{r}_{c}", f"n{r}_{c + 1}", bandwidth, latency=latency))
            if r + 1 < height:
                links.append(Link(f"n{r}_{c}", f"n{r + 1}_{c}", bandwidth, latency=latency))
    return Topology("mesh", nodes, links)


def test_tacos_5x5_mesh_published_time():
    """TACOS repository test Mesh5x5: 50 GiB/s, 0.5 µs, 1 GiB allgather, 1 chunk/node.

    Expected about 9606 µs (the repository allows 1 %); the corner nodes need 24 chunks
    over 2 links, 12 steps of 0.5 + (1 GiB / 25) / (50 GiB/s) = 800.5 µs, so 9606 µs is
    also the least possible and we hit it exactly.
    """
    topo = mesh(5, 5, Fraction(50 * GIB, 10**9), Fraction(1, 2))
    table = best_of(unwind(topo), topo.compute_nodes(), 1, Fraction(GIB, 25), seeds=20)
    assert abs(table.time - 9606) <= Fraction(9606, 100)
    assert table.time == 9606
    check_timetable(table)
    # The execution model replays the timetable (ordered links): the 12 transfers of
    # 800 µs into a corner stream back to back and α is latency, hidden behind the next
    # transfer, so the replay lands between 9600 µs and TACOS's own 9606 µs.
    result = tacos_baseline(topo, chunks_per_node=(1,), seeds=20)
    replay = simulate(topo, result.plan_at(Fraction(GIB)), GIB, exact=True).time_us
    assert 9600 < replay <= 9606


@pytest.mark.parametrize("name", SAMPLES)
def test_tacos_satisfies_the_postcondition(name):
    topo = sample(name)
    links = unwind(topo)
    nodes = topo.compute_nodes()
    for table_links in (links, transpose(links)):
        table = best_of(table_links, nodes, 2, Fraction(1 << 20), seeds=1)
        check_timetable(table)
    result = tacos_baseline(topo, "allreduce", chunks_per_node=(2,), seeds=1)
    check_coverage(result.plan_at(Fraction(1 << 20)))


def test_tacos_reduce_trees_run_backwards():
    topo = sample("forestcoll-fig2.json")
    table = best_of(transpose(unwind(topo)), topo.compute_nodes(), 1, Fraction(1), seeds=1)
    for tree in timetable_trees(table, reduce=True):
        assert tree.reduce
        for e in tree.edges:
            assert e.path[0] == e.child and e.path[-1] == e.parent


# ------------------------------------------------------------------ LR1 / LR3


def random_tree(seed, bandwidth=Fraction(10)):
    rng = random.Random(seed)
    switches = rng.randint(1, 5)
    machines = rng.randint(2, 7)
    nodes = [Node(f"s{i}", "switch") for i in range(switches)]
    links = [Link(f"s{rng.randrange(i)}", f"s{i}", bandwidth) for i in range(1, switches)]
    for m in range(machines):
        nodes.append(Node(f"m{m}"))
        links.append(Link(f"m{m}", f"s{rng.randrange(switches)}", bandwidth))
    return Topology(f"tree{seed}", nodes, links)


@pytest.mark.parametrize("seed", range(25))
def test_lr3_is_optimal_and_lr1_no_better(seed):
    topo = random_tree(seed)
    lr1 = lr_baseline(topo, variant="lr1")
    lr3 = lr_baseline(topo, variant="lr3")
    assert lr1.details["contention_free"] and lr3.details["contention_free"]
    assert lr3.details["hops"] <= lr1.details["hops"]
    assert lr3.details["hops"] == brute_force_hops(topo)
    assert lr3_order(switch_tree(topo))[1] == lr3.details["hops"]


@pytest.mark.parametrize("seed", range(10))
def test_lr1_reaches_the_optimum_on_equal_bandwidth_trees(seed):
    topo = random_tree(seed)
    for collective in COLLECTIVES:
        assert lr_baseline(topo, collective, "lr1").algbw == optimum_algbw(topo, collective)


def test_lr_example_of_the_paper():
    """Fig. 5: 8 machines on a root switch with three sub-switches; LR1 has a 4-hop ring
    (machines 7 -> 0), the optimum is 2 hops (Theorem 2 holds at every switch)."""
    nodes = [Node(s, "switch") for s in ("r", "a", "b", "c")] + [Node(f"m{i}")
                                                                 for i in range(8)]
    links = [Link("r", "a", Fraction(1)), Link("a", "b", Fraction(1)),
             Link("r", "c", Fraction(1))]
    where = ["r", "r", "a", "a", "b", "b", "c", "c"]
    links += [Link(f"m{i}", s, Fraction(1)) for i, s in enumerate(where)]
    topo = Topology("fig5", nodes, links)
    tree = switch_tree(topo)
    hops1 = max(len([n for n in p if n in "rabc"])
                for p in ring_hops(lr1_order(tree), Router(topo)).values())
    assert hops1 == 4
    assert lr3_order(tree)[1] == 2
    assert is_contention_free(ring_hops(lr3_order(tree)[0], Router(topo)))


@pytest.mark.parametrize("name", SAMPLES)
def test_lr_rings_say_why_they_do_not_apply(name):
    result = lr_baseline(sample(name), variant="lr1")
    assert not result.applicable
    assert "not a tree" in result.not_applicable_reason


# ------------------------------------------------------------------ Blink


def test_blink_on_dgx():
    topo = sample("dgx-a100-2x8.json")
    result = blink_baseline(topo, "allreduce")
    # The IB cut (8 x 25 GB/s) caps any single root's broadcast rate.
    assert result.details["broadcast_gbps"] == 200
    assert result.algbw <= optimum_algbw(topo, "allreduce")
    check_coverage(result.plan_at(Fraction(1)), whole=True)


def switchless(name):
    """The sample's network and its switch-free logical capacities (units of the optimal
    tree bandwidth), as Blink+Switch packs on them."""
    net = Network.from_topology(sample(name))
    opt = find_optimum(net)
    y = opt.tree_bandwidth
    return net, remove_switches(net, {e: int(c / y) for e, c in net.capacity.items()},
                                opt.k).capacity


@pytest.mark.parametrize("name", ["dgx-a100-2x8.json", "forestcoll-fig2.json",
                                  "hypercube-3d.json"])
def test_single_root_packing_is_edmonds_optimal_and_within_capacity(name):
    """On the switch-free logical topology, as Blink+Switch packs."""
    net, capacity = switchless(name)
    root, count = best_root(net, capacity)
    batches = pack_trees(net.n, list(net.compute), capacity, {root: count}).batches
    assert sum(b.m for b in batches) == count
    used = {}
    for b in batches:
        assert b.vertices == set(net.compute)
        assert len(b.edges) == len(net.compute) - 1
        for e in b.edges:
            used[e] = used.get(e, 0) + b.m
    assert all(used[e] <= capacity[e] for e in used)


def _every_root(net, capacity):
    """K_r from every root by plain maxflows, and the root with the largest (first on
    ties): the reference best_root is checked against."""
    flow = FlowNetwork(net.n)
    for (a, b), c in capacity.items():
        if c:
            flow.add_arc(a, b, c)
    every = {r: min(flow.max_flow(r, v) for v in net.compute if v != r) for r in net.compute}
    return every, max(net.compute, key=lambda r: (every[r], -net.compute.index(r)))


@pytest.mark.parametrize("name", ["dgx-a100-4x8.json", "leaf-spine-jobs.json",
                                  "mi250-2x16.json", "tacos-dragonfly-4x5.json"])
def test_best_root_matches_every_root(name):
    """The root with the largest K_r (first on ties), K_r computed once per orbit of D*'s
    server automorphisms and not for roots that cannot beat the best, is the one K_r from
    every root picks; every orbit has one K_r."""
    net, capacity = switchless(name)
    every, root = _every_root(net, capacity)
    assert best_root(net, capacity) == (root, every[root])
    images = root_images(net, capacity)
    assert all(every[r] == every[images[r]] for r in net.compute)
    assert len(set(images.values())) < len(net.compute)


@settings(max_examples=60, deadline=None)
@given(topologies(max_compute=6, max_switch=2), st.randoms(use_true_random=False))
def test_best_root_matches_every_root_on_random_networks(topo, rng):
    """Also where roots differ: random integer capacities on random networks (one-way
    links too), against K_r from every root."""
    net = Network.from_topology(topo)
    capacity = {e: rng.randint(0, 4) for e in net.capacity}
    every, root = _every_root(net, capacity)
    assert best_root(net, capacity) == (root, every[root])


# ------------------------------------------------------------------ ForestColl above all


@functools.cache
def blink_bound(name):
    return blink_baseline(sample(name)).algbw   # Blink runs every collective as allreduce


@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize("name", sample_names())
def test_forestcoll_bound_is_at_least_every_baseline(name, collective):
    topo = sample(name)
    best = optimum_algbw(topo, collective)
    rings = ring_plan(collective, topo.compute_nodes(), sample_rings(name))
    bounds = {
        "ring": bandwidth_bound(rings, topo.capacities())[0],
        "blink": blink_bound(name),
        "tacos": tacos_baseline(topo, collective, chunks_per_node=(1, 2), seeds=1).algbw,
        "lr3": lr_baseline(topo, collective, "lr3").algbw,
    }
    # TACOS's allreduce pipelines its reduce-scatter into its allgather, which may load
    # the links in opposite directions: its bound may pass reduce-scatter + allgather's
    # optimum, never the allreduce cut bound (every cut carries the whole message)
    allreduce_cut = cut_bound(Network.from_topology(topo)) if collective == "allreduce" \
        else best
    for algorithm, bound in bounds.items():
        if algorithm != "lr3":
            assert bound is not None, algorithm
        assert bound is None or bound <= (allreduce_cut if algorithm == "tacos" else best), \
            algorithm


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topologies())
def test_no_allgather_baseline_beats_the_optimum_on_random_topologies(topo):
    best = optimum_algbw(topo, "allgather")
    results = [ring_baseline(topo, max_rings=4, budget=500),
               tacos_baseline(topo, chunks_per_node=(1,), seeds=1),
               blink_baseline(topo),
               lr_baseline(topo, variant="lr3")]
    for result in results:
        if result.applicable:
            assert result.algbw <= best, result.algorithm


@pytest.mark.parametrize("name", sample_names())
def test_lr_rings_name_the_cycle_networkx_finds_and_tacos_groups_switches_alike(name):
    """The LR rings' check that the network is a tree and TACOS's groups of switches run
    without networkx (its import would cost a comparison more than both): on every sample
    the cycle named is the one ``networkx.find_cycle`` finds, and the switch groups are
    networkx's connected components of the switch-to-switch links."""
    import networkx as nx

    from canopy.engine.baselines import tacos
    from canopy.engine.model.errors import ScheduleError

    topology = load_sample(name)
    graph = nx.Graph()
    graph.add_nodes_from(topology.node_ids())
    graph.add_edges_from((link.source, link.target) for link in topology.links)
    try:
        cycle = [u for u, _ in nx.find_cycle(graph)]
    except nx.NetworkXNoCycle:
        cycle = None
    if cycle is not None and all(link.duplex for link in topology.links):
        with pytest.raises(ScheduleError) as caught:
            switch_tree(topology)
        through = ", ".join(cycle[:6]) + (", …" if len(cycle) > 6 else "")
        assert f"cycle through {through})" in str(caught.value)
    switches = nx.Graph()
    switches.add_nodes_from(topology.switch_nodes())
    caps = topology.capacities()
    switches.add_edges_from((u, v) for u, v in caps if u in switches and v in switches)
    assert sorted(map(sorted, tacos._switch_groups(topology, caps))) == \
        sorted(map(sorted, nx.connected_components(switches)))
