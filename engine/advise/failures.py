"""The optimum after each single link or switch failure, worst first.

A failed link or switch carries nothing, so the optimum after it fails is x* of the
network without it (Zhao et al., "ForestColl", arXiv:2402.06787, §3.1 eq. (1)); a
failure that cuts compute nodes apart leaves x* = 0. Elements that an automorphism of
the network maps onto each other fail alike, so one of each class is solved: the
automorphisms used are the swaps of identical servers
(:func:`canopy.engine.network.servers.identical_groups`), which map a link to the link between
the images of its ends. Each solve starts from today's bottleneck cut, whose ratio
after the failure bounds the new optimum from above, so it usually takes one or two
rounds of maxflows.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from canopy.engine.advise.parametric import ParametricNetwork, min_ratio_scaled
from canopy.engine.network.indexed import Network
from canopy.engine.network.servers import identical_groups


@dataclass(frozen=True)
class Failure:
    """One failed element (and the ``alike`` elements that fail the same way) and x*
    after it (GB/s per compute node) with the cut that limits it."""

    kind: str                   # "link" or "switch"
    name: str                   # "A-B" for a link, the switch's id for a switch
    members: tuple              # the alike elements: link indices, or switch ids
    ratio: Fraction
    cut: tuple[int, ...]

    @property
    def alike(self) -> int:
        """Elements that fail alike, itself included."""
        return len(self.members)

    @property
    def element(self) -> str:
        return f"{self.kind} {self.name}"


def link_bandwidth(pnet: ParametricNetwork, index: int,
                   bandwidths: list[Fraction]) -> Fraction:
    """The bandwidth of topology link ``index`` at class bandwidths ``bandwidths``."""
    link = pnet.topology.links[index]
    for c, lc in enumerate(pnet.classes):
        if index in lc.links:
            return link.bandwidth * bandwidths[c] / lc.bandwidth
    return link.bandwidth


def failure_scan(pnet: ParametricNetwork, bandwidths: list[Fraction] | None = None,
                 start: tuple[int, ...] | None = None,
                 progress: Callable[[float], None] | None = None) -> list[Failure]:
    """x* after each single link and switch failure, lowest first (then by name).

    ``start``: a cut to start each solve from (today's bottleneck cut, or None).
    """
    bws = list(pnet.today() if bandwidths is None else bandwidths)
    caps = pnet.capacities(bws)
    assert all(c is not None for c in caps)
    # one scale for the network and every single link, so a failed link's bandwidth is
    # a whole number of units too (parallel links can add up to a coarser total)
    scale = math.lcm(*(c.denominator for c in caps if c is not None),
                     *(link_bandwidth(pnet, i, bws).denominator
                       for i in range(len(pnet.topology.links))))
    ints = [int(c * scale) for c in caps if c is not None]
    position = {e: j for j, e in enumerate(pnet.edges)}
    index = {name: i for i, name in enumerate(pnet.names)}
    symmetry = _Symmetry(pnet, caps)
    topology = pnet.topology
    dead = {n.id for n in topology.nodes if n.failed}
    chosen: dict[tuple, tuple[str, str, list]] = {}
    for i, link in enumerate(topology.links):
        if link.failed or link.source in dead or link.target in dead:
            continue
        ends = [symmetry.key(index[link.source]), symmetry.key(index[link.target])]
        if link.duplex:
            ends.sort()
        key: tuple = ("link", tuple(ends), link.bandwidth, link.duplex)
        if key in chosen:
            chosen[key][2].append(i)
        else:
            chosen[key] = ("link", f"{link.source}-{link.target}", [i])
    for node in topology.nodes:
        if node.failed or node.is_compute:
            continue
        key = ("switch", symmetry.key(index[node.id]))
        if key in chosen:
            chosen[key][2].append(node.id)
        else:
            chosen[key] = ("switch", node.id, [node.id])
    failures = []
    for done, (kind, name, members) in enumerate(chosen.values()):
        after = list(ints)
        if kind == "link":
            link = topology.links[members[0]]
            b = link_bandwidth(pnet, members[0], bws) * scale
            assert b.denominator == 1
            touched = [index[link.source], index[link.target]]
            for u, v in link.directions():
                after[position[(index[u], index[v])]] -= int(b)
        else:
            s = index[name]
            touched = [s]
            for j, (a, t) in enumerate(pnet.edges):
                if s in (a, t):
                    after[j] = 0
        cut = min_ratio_scaled(pnet.n, pnet.compute, pnet.edges, after,
                               symmetry.sinks_after(touched), start)
        assert cut is not None
        failures.append(Failure(kind, name, tuple(members), cut.ratio / scale, cut.nodes))
        if progress is not None:
            progress((done + 1) / len(chosen))
    failures.sort(key=lambda f: (f.ratio, f.kind, f.name))
    return failures


class _Symmetry:
    """Swaps of identical servers (:func:`canopy.engine.network.servers.identical_groups`) of
    the network as it is, and what is left of them after one element fails."""

    def __init__(self, pnet: ParametricNetwork, caps: list) -> None:
        view = Network(pnet.names, pnet.compute, dict(zip(pnet.edges, caps, strict=True)),
                       frozenset(pnet.compute), pnet.groups)
        self.where: dict[int, tuple] = {}
        self.classes = identical_groups(view)
        self.group_of: dict[int, tuple[int, tuple[int, ...]]] = {}
        images: set[int] = set()
        for k, members in enumerate(self.classes):
            for group in members:
                for p, node in enumerate(group):
                    self.where[node] = ("class", k, p)
                    self.group_of[node] = (k, group)
            for group in members[1:]:
                images.update(group)
        self.compute_set = frozenset(pnet.compute)
        self.representatives = [c for c in pnet.compute if c not in images]

    def key(self, node: int) -> tuple:
        """Equal for nodes that the swaps map onto each other."""
        return self.where.get(node, ("node", node, 0))

    def sinks_after(self, touched: list[int]) -> list[int]:
        """Compute nodes that need a flow once an element touching the nodes ``touched``
        fails: the swaps that move a touched node's server are lost, the others stay
        (they fix the failed element), so that server and one other of its class join
        the representatives."""
        sinks = list(self.representatives)
        seen = set(sinks)
        for node in touched:
            if node not in self.group_of:
                continue
            k, group = self.group_of[node]
            other = next(g for g in self.classes[k] if g != group)
            for member in (*group, *other):
                if member in self.compute_set and member not in seen:
                    seen.add(member)
                    sinks.append(member)
        return sinks


