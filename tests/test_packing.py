"""Tree packing (Alg. 5): capacities respected, k per root, work independent of k."""

from canopy.engine.network import Network
from canopy.engine.optimality import find_optimum
from canopy.engine.packing import pack_trees
from canopy.engine.splitting import remove_switches
from canopy.engine.topology_io import load_sample


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
