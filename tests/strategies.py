"""Hypothesis strategies: small random balanced topologies with switches and one-way links."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import strategies as st

from canopy.engine.model.topology import COMPUTE, SWITCH, Link, Node, Topology

BANDWIDTHS = [Fraction(1), Fraction(2), Fraction(5, 2), Fraction(3), Fraction(10)]


@st.composite
def topologies(draw: st.DrawFn, max_compute: int = 4, max_switch: int = 3) -> Topology:
    """A connected topology; duplex links plus one-way cycles keep every node balanced."""
    n_compute = draw(st.integers(2, max_compute))
    n_switch = draw(st.integers(0, max_switch))
    names = [f"c{i}" for i in range(n_compute)] + [f"w{i}" for i in range(n_switch)]
    nodes = [Node(name, COMPUTE if name.startswith("c") else SWITCH) for name in names]
    order = draw(st.permutations(names))
    bw = st.sampled_from(BANDWIDTHS)
    links = [Link(a, b, draw(bw)) for a, b in zip(order, order[1:], strict=False)]
    pairs = st.tuples(st.sampled_from(names), st.sampled_from(names)).filter(
        lambda p: p[0] != p[1])
    for a, b in draw(st.lists(pairs, max_size=4)):
        links.append(Link(a, b, draw(bw)))
    for cycle in draw(st.lists(st.lists(st.sampled_from(names), min_size=2, max_size=4,
                                        unique=True), max_size=2)):
        b = draw(bw)
        for u, v in zip(cycle, cycle[1:] + cycle[:1], strict=True):
            links.append(Link(u, v, b, duplex=False))
    return Topology("random", nodes, links)
