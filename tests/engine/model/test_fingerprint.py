"""A network's fingerprint follows every edit made in place, and is the same object while
nothing it reads changed (the memos hash it once)."""

from fractions import Fraction

from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.topology import Link


def test_the_fingerprint_follows_edits_in_place():
    topo = load_sample("dgx-a100-2x8.json")
    first = topo.fingerprint()
    assert topo.fingerprint() is first
    link = topo.links[0]
    old = link.bandwidth
    link.bandwidth = old * 2
    doubled = topo.fingerprint()
    assert doubled != first
    link.bandwidth = Fraction(old.numerator, old.denominator)    # equal, another object
    assert topo.fingerprint() == first
    link.latency = Fraction(3)
    assert topo.fingerprint() != first
    link.latency = None
    link.failed = True
    assert topo.fingerprint() != first
    link.failed = False
    topo.nodes[0].group = "elsewhere"
    assert topo.fingerprint() != first
    topo.nodes[0].group = load_sample("dgx-a100-2x8.json").nodes[0].group
    switch = next(n for n in topo.nodes if not n.is_compute)
    switch.failed = True
    assert topo.fingerprint() != first
    switch.failed = False
    topo.links.append(Link(topo.nodes[0].id, topo.nodes[1].id, Fraction(1)))
    assert topo.fingerprint() != first
    topo.links.pop()
    link.source, link.target = link.target, link.source
    assert topo.fingerprint() != first
    link.source, link.target = link.target, link.source
    link.duplex = not link.duplex
    assert topo.fingerprint() != first
    link.duplex = not link.duplex
    assert topo.fingerprint() == first
