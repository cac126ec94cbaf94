"""The exact optimum against the paper's numbers and against brute force."""

from fractions import Fraction
from itertools import combinations

import pytest
from hypothesis import HealthCheck, given, settings

from canopy.engine.forestcoll.optimum import find_fixed_k, find_optimum, rational_gcd
from canopy.engine.io.topology_json import load_sample
from canopy.engine.network.indexed import Network
from tests.strategies import topologies

REFERENCE = [
    # sample, 1/x*, allgather algbw, k
    ("dgx-a100-2x8", Fraction(3, 65), Fraction(1040, 3), 13),
    ("mi250-2x16", Fraction(15, 166), Fraction(5312, 15), 83),
    ("forestcoll-fig2", Fraction(1), Fraction(8), 1),
]


@pytest.mark.parametrize("name, inverse_x, algbw, k", REFERENCE)
def test_reference_optimum(name, inverse_x, algbw, k):
    net = Network.from_topology(load_sample(name))
    opt = find_optimum(net)
    assert opt.inverse_x == inverse_x
    assert opt.algbw("allgather") == algbw
    assert opt.algbw("reduce-scatter") == algbw
    assert opt.algbw("allreduce") == algbw / 2
    assert opt.k == k
    assert opt.x / opt.tree_bandwidth == k
    cut = set(opt.bottleneck_cut)
    assert Fraction(sum(1 for c in net.compute if c in cut)) / net.egress_of(cut) == inverse_x


@pytest.mark.parametrize("k, algbw", [(1, Fraction(320)), (2, Fraction(1024, 3))])
def test_mi250_fixed_k(k, algbw):
    net = Network.from_topology(load_sample("mi250-2x16"))
    assert find_fixed_k(net, k).algbw() == algbw


def test_fixed_k_never_beats_optimum_and_converges():
    net = Network.from_topology(load_sample("dgx-a100-2x8"))
    opt = find_optimum(net)
    values = [find_fixed_k(net, k, opt).algbw() for k in (1, 2, 5, 13)]
    assert all(v <= opt.algbw() for v in values)
    assert values[-1] == opt.algbw()


def test_rational_gcd():
    assert rational_gcd([Fraction(65, 3), Fraction(300), Fraction(25)]) == Fraction(5, 3)


def brute_force_inverse_x(net: Network) -> Fraction:
    nodes = range(net.n)
    compute = set(net.compute)
    best = Fraction(0)
    for size in range(1, net.n):
        for subset in combinations(nodes, size):
            s = set(subset)
            if compute <= s or not (compute & s):
                continue
            best = max(best, Fraction(len(compute & s)) / net.egress_of(s))
    return best


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topologies())
def test_optimum_equals_brute_force(topo):
    net = Network.from_topology(topo)
    assert find_optimum(net).inverse_x == brute_force_inverse_x(net)


def brute_force_u_star(net: Network, k: int) -> Fraction:
    """Smallest U among all breakpoints j/b_e at which every cut holds its trees."""
    import math
    compute = set(net.compute)
    cuts = []
    for size in range(1, net.n):
        for subset in combinations(range(net.n), size):
            s = set(subset)
            if compute <= s or not (compute & s):
                continue
            out = [b for (a, t), b in net.capacity.items() if a in s and t not in s]
            cuts.append((k * len(compute & s), out))
    top = math.ceil(max(net.capacity.values())) * k * len(compute) + 1
    candidates = sorted({Fraction(j) / b for b in net.capacity.values()
                         for j in range(1, top + 1)})
    for u in candidates:
        if all(sum(math.floor(u * b) for b in out) >= need for need, out in cuts):
            return u
    raise AssertionError("no breakpoint found")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topologies(max_compute=3, max_switch=2))
def test_fixed_k_equals_brute_force(topo):
    net = Network.from_topology(topo)
    for k in (1, 2):
        assert find_fixed_k(net, k).u_star == brute_force_u_star(net, k)
