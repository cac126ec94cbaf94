"""Identical servers: Thm 1's test flows only to one GPU per orbit.

``identical_groups`` claims that swapping two groups of a class position by position is
an automorphism; these tests check that claim link by link, check that every compute
node's flow equals its representative's, and check the optimum against brute force on
random clusters of replicated (and sometimes perturbed) servers.
"""

from fractions import Fraction

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from canopy.engine.forestcoll.optimum import find_optimum
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.topology import COMPUTE, SWITCH, Link, Node, Topology
from canopy.engine.network.indexed import Network, source_network
from canopy.engine.network.servers import identical_groups
from tests.engine.forestcoll.test_optimum import brute_force_inverse_x

BW = st.sampled_from([Fraction(1), Fraction(2), Fraction(5, 2), Fraction(4)])


@st.composite
def clusters(draw: st.DrawFn) -> Topology:
    """Copies of one random server on shared fabric switches; sometimes one copy is
    changed (a bandwidth, a link to another server, another fabric port)."""
    gpus = draw(st.integers(1, 2))
    inner = draw(st.integers(0, 1))
    fabric = [f"f{i}" for i in range(draw(st.integers(1, 2)))]
    local = [f"g{i}" for i in range(gpus)] + [f"w{i}" for i in range(inner)]
    ring = [(a, b, draw(BW)) for a, b in zip(local, local[1:], strict=False)]
    ports = [(draw(st.sampled_from(local)), f, draw(BW)) for f in fabric]
    servers = draw(st.integers(2, 3))
    change = draw(st.sampled_from(["none", "none", "bandwidth", "cross", "port"]))
    nodes = [Node(f, SWITCH) for f in fabric]
    links = [Link(fabric[0], f, Fraction(1)) for f in fabric[1:]]
    for s in range(servers):
        nodes += [Node(f"s{s}.{x}", COMPUTE if x[0] == "g" else SWITCH, group=f"s{s}")
                  for x in local]
        last = s == servers - 1
        for a, b, c in ring:
            links.append(Link(f"s{s}.{a}", f"s{s}.{b}", c * 2 if last and change ==
                              "bandwidth" else c))
        for i, (a, f, c) in enumerate(ports):
            target = fabric[-1 - i] if last and change == "port" else f
            links.append(Link(f"s{s}.{a}", target, c))
    if change == "cross":
        links.append(Link("s0.g0", f"s{servers - 1}.g0", Fraction(1)))
    return Topology("servers", nodes, links)


def swap_is_automorphism(net: Network, g: tuple[int, ...], h: tuple[int, ...]) -> bool:
    image = {**dict(zip(g, h, strict=True)), **dict(zip(h, g, strict=True))}
    moved = {(image.get(a, a), image.get(b, b)): c for (a, b), c in net.capacity.items()}
    return moved == dict(net.capacity) and all(
        net.is_compute(a) == net.is_compute(b) for a, b in image.items())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_identical_groups_are_automorphisms_and_the_optimum_is_exact(topo):
    net = Network.from_topology(topo)
    for members in identical_groups(net):
        for other in members[1:]:
            assert swap_is_automorphism(net, members[0], other)
    reps = set(net.sink_representatives)
    assert reps <= set(net.compute)
    flow = source_network(net, {e: int(c * 2) for e, c in net.capacity.items()}, 1)
    value = {v: flow.max_flow(net.source, v) for v in net.compute}
    for members in identical_groups(net):
        for other in members[1:]:
            for a, b in zip(members[0], other, strict=True):
                if net.is_compute(a):
                    assert a in reps and b not in reps and value[a] == value[b]
    opt = find_optimum(net)
    assert opt.inverse_x == brute_force_inverse_x(net)
    cut = set(opt.bottleneck_cut)
    assert Fraction(len(cut & net.compute_set)) / net.egress_of(cut) == opt.inverse_x


def test_changed_servers_are_not_merged():
    """A server with another bandwidth, a cross link, or another port is its own class."""
    nodes = [Node("f0", SWITCH), Node("f1", SWITCH)]
    links = [Link("f0", "f1", Fraction(1))]
    for s in range(4):
        nodes.append(Node(f"s{s}.g0", COMPUTE, group=f"s{s}"))
    links += [Link("s0.g0", "f0", Fraction(1)), Link("s1.g0", "f0", Fraction(1)),
              Link("s2.g0", "f0", Fraction(2)), Link("s3.g0", "f1", Fraction(1))]
    net = Network.from_topology(Topology("t", nodes, links))
    assert [[tuple(net.names[i] for i in g) for g in c] for c in identical_groups(net)] == [
        [("s0.g0",), ("s1.g0",)]]
    links.append(Link("s0.g0", "s1.g0", Fraction(1)))
    assert identical_groups(Network.from_topology(Topology("t", nodes, links))) == []


def test_dgx_sample_needs_one_server_of_flows():
    net = Network.from_topology(load_sample("dgx-a100-4x8"))
    assert len(net.sink_representatives) == 8
    assert find_optimum(net).inverse_x == Fraction(3, 25)
