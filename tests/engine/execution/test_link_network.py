"""The links a program's connections cross: each route's links and α, and each link's
capacity, are remembered per network, and a network built with them equals one built
with none remembered; a route over a link the network lacks still fails."""

from fractions import Fraction

import pytest

from canopy.engine.execution import kernel
from canopy.engine.execution.kernel import link_network
from canopy.engine.execution.program import Connection
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.topology import Link, Node, Topology


def _star() -> Topology:
    nodes = [Node("sw", "switch"), *(Node(f"g{i}", "compute") for i in range(3))]
    links = [Link(f"g{i}", "sw", Fraction(10 * (i + 1)), latency=Fraction(i + 1, 3))
             for i in range(3)]
    return Topology("star", nodes, links)


def _fields(net):
    return net.cap, net.conn_ptr, net.conn_link, net.alpha, net.weight


@pytest.mark.parametrize("exact", [False, True])
def test_a_network_built_from_remembered_routes_is_the_one_built_fresh(monkeypatch, exact):
    topo = _star()
    first = [Connection(("g0", "sw", "g1")), Connection(("g1", "sw", "g2"), Fraction(2))]
    second = [Connection(("g1", "sw", "g2"), Fraction(1, 3)), Connection(("g0", "sw", "g1")),
              Connection(("g2", "sw", "g0"))]
    folded = {("g0", "sw"): (("g0", "sw"), Fraction(1, 2)),
              ("sw", "g1"): (("sw", "g1"), Fraction(1)),
              ("g1", "sw"): (("g0", "sw"), Fraction(1, 2)),
              ("sw", "g2"): (("sw", "g1"), Fraction(1)),
              ("g2", "sw"): (("g0", "sw"), Fraction(1, 2)),
              ("sw", "g0"): (("sw", "g1"), Fraction(1))}
    monkeypatch.setattr(kernel, "_FACTS", {})
    link_network(topo, first, Fraction(1), exact)
    remembered = [link_network(topo, second, Fraction(1), exact),
                  link_network(topo, second, Fraction(1), exact, folded)]
    assert len(kernel._FACTS) == 1
    for links, net in zip((None, folded), remembered, strict=True):
        monkeypatch.setattr(kernel, "_FACTS", {})
        fresh = link_network(topo, second, Fraction(1), exact, links)
        assert _fields(net) == _fields(fresh)
        assert all(type(x) is (Fraction if exact else float)
                   for x in [*net.cap, *net.alpha, *net.weight])
    # g1 -> sw -> g2: its links' latencies 2/3 and 1; folded, a link stands for its
    # class at its first member's capacity times the class's factor
    assert remembered[0].alpha[0] == (Fraction(5, 3) if exact else float(Fraction(5, 3)))
    assert remembered[1].cap == ([Fraction(10000), Fraction(30000)] if exact
                                 else [10000.0, 30000.0])


def test_a_route_over_a_missing_link_fails_after_others_were_remembered():
    topo = _star()
    link_network(topo, [Connection(("g0", "sw", "g1"))], Fraction(1), False)
    with pytest.raises(ScheduleError, match="g0 -> g1"):
        link_network(topo, [Connection(("g0", "sw", "g1")), Connection(("g0", "g1"))],
                     Fraction(1), False)
    with pytest.raises(ScheduleError, match="no link"):
        link_network(topo, [Connection(("g0",))], Fraction(1), False)
