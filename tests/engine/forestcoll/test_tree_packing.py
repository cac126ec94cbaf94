"""Tree packing (Alg. 5): capacities respected, k per root, work independent of k."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from canopy.engine.forestcoll.edge_splitting import remove_switches
from canopy.engine.forestcoll.optimum import find_optimum
from canopy.engine.forestcoll.tree_packing import _greedy, pack_trees
from canopy.engine.io.topology_json import load_sample
from canopy.engine.network.indexed import Network
from tests.strategies import topologies


def logical(name):
    net = Network.from_topology(load_sample(name))
    opt = find_optimum(net)
    caps = {e: int(c / opt.tree_bandwidth) for e, c in net.capacity.items()}
    return net, remove_switches(net, caps, opt.k).capacity, opt.k


def check_packing(net, capacity, k, packing):
    used = {}
    for batch in packing.batches:
        assert len(batch.vertices) == len(net.compute)
        for edge in batch.edges:
            used[edge] = used.get(edge, 0) + batch.m
    for edge, load in used.items():
        assert load <= capacity[edge]
    for root in net.compute:
        assert sum(b.m for b in packing.batches if b.root == root) == k


def test_packing_respects_capacities():
    net, capacity, k = logical("mi250-2x16")
    check_packing(net, capacity, k, pack_trees(net.n, list(net.compute), capacity,
                                                 dict.fromkeys(net.compute, k)))


def test_work_does_not_grow_with_k():
    net, capacity, k = logical("dgx-a100-2x8")
    small = pack_trees(net.n, list(net.compute), capacity, dict.fromkeys(net.compute, k))
    scale = 1000
    big_caps = {e: c * scale for e, c in capacity.items()}
    big = pack_trees(net.n, list(net.compute), big_caps,
                     dict.fromkeys(net.compute, k * scale))
    check_packing(net, big_caps, k * scale, big)
    assert len(big.batches) == len(small.batches)
    assert big.mu_flows == small.mu_flows


def check_trees(net, packing):
    """Every batch is an out-tree from its root (edges parents first) spanning V_c."""
    for batch in packing.batches:
        seen = {batch.root}
        for x, y in batch.edges:
            assert x in seen and y not in seen
            seen.add(y)
        assert seen == set(net.compute)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topologies(max_compute=6, max_switch=3), st.data())
def test_greedy_packing_is_a_packing_or_gives_up(topo, data):
    """The flow-free greedy returns a valid packing or None; pack_trees with groups returns
    a valid packing either way (Alg. 5 when the greedy gives up)."""
    net = Network.from_topology(topo)
    opt = find_optimum(net)
    caps = {e: int(c / opt.tree_bandwidth) for e, c in net.capacity.items()}
    capacity = remove_switches(net, caps, opt.k).capacity
    groups = [data.draw(st.sampled_from([None, "a", "b"])) for _ in range(net.n)]
    demands = dict.fromkeys(net.compute, opt.k)
    before = dict(capacity)
    quick = _greedy(list(net.compute), capacity, demands, groups)
    assert capacity == before
    if quick is not None:
        check_packing(net, capacity, opt.k, quick)
        check_trees(net, quick)
    full = pack_trees(net.n, list(net.compute), capacity, demands, groups=groups)
    check_packing(net, capacity, opt.k, full)
    check_trees(net, full)


def test_servers_pack_without_flows():
    """On a cluster of identical servers the greedy completes: no μ flow at all."""
    net, capacity, k = logical("dgx-a100-4x8")
    packing = pack_trees(net.n, list(net.compute), capacity, dict.fromkeys(net.compute, k),
                         groups=net.groups)
    assert packing.mu_flows == 0
    check_packing(net, capacity, k, packing)
    check_trees(net, packing)


def test_interleaved_packing_is_a_packing_with_lower_trees():
    """Alg. 5 with the batches grown together (Thm 12 holds in any order) packs within the
    capacities, k per root, and its trees are lower than batch by batch (2x MI250, k = 2)."""
    from canopy.engine.forestcoll.solve import solve
    from canopy.engine.model.plan import schedule_plan, tree_levels

    net, capacity, k = logical("mi250-2x16")
    check_packing(net, capacity, k, pack_trees(net.n, list(net.compute), capacity,
                                                 dict.fromkeys(net.compute, k),
                                                 interleave=True))
    topo = load_sample("mi250-2x16")

    def height(schedule):
        return max(max(tree_levels(t)) for t in schedule_plan(schedule).trees)

    plain, shallow = solve(topo, k=2), solve(topo, k=2, shallow=True)
    assert shallow.algbw == plain.algbw and shallow.extra["shallow"]
    assert height(shallow) <= 9 < 14 == height(plain)
