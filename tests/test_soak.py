"""Soak property: random topologies with awkward bandwidth mixes, one-way cycles and
switches always give the brute-force optimum, a verified schedule and no traceback.
``bench/soak.py`` runs the same pipeline on thousands of larger cases."""

from fractions import Fraction

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.soak import AWKWARD, brute_force_inverse_x
from canopy.engine.forestcoll.optimum import find_optimum
from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.topology_json import dumps_topology, loads_topology
from canopy.engine.model.errors import CanopyError
from canopy.engine.model.topology import COMPUTE, SWITCH, Link, Node, Topology, find_problems
from canopy.engine.model.units import UNITS
from canopy.engine.model.verification import verify
from canopy.engine.network.indexed import Network


@st.composite
def awkward_topologies(draw: st.DrawFn) -> Topology:
    n_compute = draw(st.integers(2, 4))
    n_switch = draw(st.integers(0, 2))
    names = [f"c{i}" for i in range(n_compute)] + [f"w{i}" for i in range(n_switch)]
    palette = draw(st.lists(st.sampled_from(AWKWARD), min_size=1, max_size=3))
    bw = st.sampled_from(palette)
    order = draw(st.permutations(names))
    links = [Link(a, b, draw(bw)) for a, b in zip(order, order[1:], strict=False)]
    pairs = st.tuples(st.sampled_from(names), st.sampled_from(names)).filter(
        lambda p: p[0] != p[1])
    links += [Link(a, b, draw(bw)) for a, b in draw(st.lists(pairs, max_size=3))]
    for cycle in draw(st.lists(st.lists(st.sampled_from(names), min_size=2, max_size=4,
                                        unique=True), max_size=2)):
        b = draw(bw)
        links += [Link(u, v, b, duplex=False)
                  for u, v in zip(cycle, cycle[1:] + cycle[:1], strict=True)]
    nodes = [Node(n, COMPUTE if n[0] == "c" else SWITCH) for n in names]
    return Topology("soak", nodes, links, bandwidth_unit=draw(st.sampled_from(UNITS)))


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(awkward_topologies(), st.sampled_from(["allgather", "reduce-scatter", "allreduce"]))
def test_awkward_topologies_solve_exactly_and_verify(topo, collective):
    topo = loads_topology(dumps_topology(topo), "soak")       # units round trip exactly
    if find_problems(topo):
        return
    net = Network.from_topology(topo)
    opt = find_optimum(net)
    assert opt.inverse_x == brute_force_inverse_x(net)
    try:
        schedule = solve(topo, collective)
    except CanopyError as exc:                                 # never expected here
        raise AssertionError(f"a valid topology was refused: {exc}") from None
    assert schedule.algbw == opt.algbw(collective)
    assert verify(topo, schedule) == schedule.algbw
    assert all(isinstance(link.bandwidth, Fraction) for link in topo.links)
