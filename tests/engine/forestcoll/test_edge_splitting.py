"""Switch removal: γ is the exact largest safe split (Thm 8), and D* keeps k trees."""

from itertools import combinations

from hypothesis import HealthCheck, assume, given, settings

from canopy.engine.forestcoll.edge_splitting import _Splitter, remove_switches
from canopy.engine.forestcoll.optimum import find_optimum
from canopy.engine.io.topology_json import load_sample
from canopy.engine.network.indexed import Network
from tests.strategies import topologies


def tree_caps(net):
    opt = find_optimum(net)
    y = opt.tree_bandwidth
    return {e: int(c / y) for e, c in net.capacity.items()}, opt.k


def all_cuts_hold(net, caps, k):
    """Every s-v cut of G⃗_k (v compute) has capacity >= N·k (Thm 5), by enumeration."""
    n_k = len(net.compute) * k
    compute = set(net.compute)
    for size in range(0, net.n):
        for subset in combinations(range(net.n), size):
            a = set(subset)
            if compute <= a:
                continue
            value = k * len(compute - a) + sum(c for (x, y), c in caps.items()
                                                if x in a and y not in a)
            if value < n_k:
                return False
    return True


def split_caps(caps, u, w, t, g):
    out = dict(caps)
    out[(u, w)] -= g
    out[(w, t)] -= g
    if u != t:
        out[(u, t)] = out.get((u, t), 0) + g
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.filter_too_much])
@given(topologies(max_compute=3, max_switch=2))
def test_gamma_is_the_largest_safe_split(topo):
    net = Network.from_topology(topo)
    switches = [i for i in range(net.n) if not net.is_compute(i)]
    assume(switches)
    caps, k = tree_caps(net)
    w = switches[0]
    splitter = _Splitter(net, caps, k)
    for u in sorted(splitter.arcs.inn[w]):
        for t in sorted(splitter.arcs.out[w]):
            gamma = splitter.gamma(u, w, t)
            top = min(caps[(u, w)], caps[(w, t)])
            safe = [g for g in range(top + 1)
                    if all_cuts_hold(net, split_caps(caps, u, w, t, g), k)]
            assert gamma == max(safe), (u, w, t, gamma, safe)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topologies(max_compute=4, max_switch=3))
def test_logical_topology_keeps_connectivity_and_routes(topo):
    net = Network.from_topology(topo)
    caps, k = tree_caps(net)
    logical = remove_switches(net, caps, k)
    compute_only = {e: c for e, c in logical.capacity.items()}
    assert all(net.is_compute(a) and net.is_compute(b) for a, b in compute_only)
    sub = Network(net.names, net.compute, {e: c for e, c in compute_only.items()},
                  net.compute_set, net.groups)
    # every compute-node cut of D* still carries k trees per inside node (Thm 10)
    assert all_cuts_hold(sub, compute_only, k)
    for edge, pool in logical.routes.items():
        units = sum(count for _, count in pool.segments)
        assert units == logical.capacity[edge]
        for path, _ in pool.segments:
            assert path[0] == edge[0] and path[-1] == edge[1]
            assert all(not net.is_compute(p) for p in path[1:-1])
            assert all((a, b) in caps for a, b in zip(path, path[1:], strict=False))


def test_a100_nics_are_split_in_closed_form():
    net = Network.from_topology(load_sample("dgx-a100-2x8"))
    caps, k = tree_caps(net)
    splitter = _Splitter(net, caps, k)
    nics = [i for i, name in enumerate(net.names) if ".nic" in name]
    for w in nics:
        splitter.remove(w)
    assert splitter.flows == 0 and splitter.splits >= 2 * len(nics)
    for w in range(net.n):
        if not net.is_compute(w) and w not in nics:
            splitter.remove(w)
    assert splitter.flows < 32 * (2 + 16)   # the quick two-flow test settles many pairs
