"""A network whose link bandwidths are linear in the bandwidths of its link classes, and
the exact minimum cut ratio of any setting of them.

The allgather optimum is N·x* with x* = min over cuts S (S ∩ V_c non-empty, V_c ⊄ S) of
B+(S) / |S ∩ V_c| (Zhao et al., "ForestColl: Throughput-Optimal Collective
Communications on Heterogeneous Network Fabrics", arXiv:2402.06787, §3.1 eq. (1)).
Here every directed link's bandwidth is ``fixed + Σ_c coefficient_c · B_c`` over the
class bandwidths B_c, so for each cut B+(S) is linear in them.

:func:`min_ratio` finds x* and a cut attaining it for given bandwidths, by ForestColl's
Thm 1 test (one maxflow per compute node of the network of §4.2 / Fig. 3b) iterated on
the ratio of the violated cut (Dinkelbach), as :mod:`canopy.engine.forestcoll.optimum` does;
it also takes links of unbounded bandwidth (a class "bought without limit") and may
start from a known cut. Only compute nodes that no automorphism of the parametrised
network maps onto each other need a flow (identical servers, with their links' classes).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from canopy.engine.advise.classes import LinkClass, link_classes
from canopy.engine.model.topology import Topology, check
from canopy.engine.network.indexed import Network
from canopy.engine.network.maxflow import FlowNetwork
from canopy.engine.network.servers import identical_groups

Edge = tuple[int, int]


@dataclass(frozen=True)
class Cut:
    """A cut S (node indices, sorted) with its exact ratio B+(S) / |S ∩ V_c| (GB/s)."""

    nodes: tuple[int, ...]
    ratio: Fraction


@dataclass
class ParametricNetwork:
    """Directed links whose bandwidth is ``fixed[e] + Σ terms[e][c] · B_c`` (GB/s)."""

    topology: Topology
    names: tuple[str, ...]
    compute: tuple[int, ...]
    edges: list[Edge]
    fixed: list[Fraction]
    terms: list[dict[int, Fraction]]
    classes: list[LinkClass]
    groups: tuple[str | None, ...]
    _representatives: tuple[int, ...] | None = None

    @classmethod
    def from_topology(cls, topology: Topology, where: str = "",
                      classes: list[LinkClass] | None = None) -> ParametricNetwork:
        """Validate ``topology`` (TopologyError) and parametrise it by its link classes."""
        check(topology, where)
        classes = link_classes(topology, where) if classes is None else classes
        names = tuple(topology.node_ids())
        index = {name: i for i, name in enumerate(names)}
        of_link = {i: c for c, lc in enumerate(classes) for i in lc.links}
        position: dict[Edge, int] = {}
        edges: list[Edge] = []
        fixed: list[Fraction] = []
        terms: list[dict[int, Fraction]] = []
        dead = {n.id for n in topology.nodes if n.failed}
        for i, link in enumerate(topology.links):
            if link.failed or link.source in dead or link.target in dead:
                continue
            for u, v in link.directions():
                e = (index[u], index[v])
                if e not in position:
                    position[e] = len(edges)
                    edges.append(e)
                    fixed.append(Fraction(0))
                    terms.append({})
                j = position[e]
                c = of_link.get(i)
                if c is None:
                    fixed[j] += link.bandwidth
                else:
                    terms[j][c] = terms[j].get(c, Fraction(0)) + \
                        link.bandwidth / classes[c].bandwidth
        compute = tuple(index[c] for c in topology.compute_nodes())
        groups = tuple(n.group for n in topology.nodes)
        return cls(topology, names, compute, edges, fixed, terms, classes, groups)

    @property
    def n(self) -> int:
        return len(self.names)

    def today(self) -> list[Fraction]:
        """The class bandwidths of the topology as drawn."""
        return [c.bandwidth for c in self.classes]

    def capacities(self, bandwidths: Sequence[Fraction | None]) -> list[Fraction | None]:
        """Each directed link's bandwidth at class bandwidths ``bandwidths``; a class of
        bandwidth None is unbounded, and so is every link it takes part in."""
        caps: list[Fraction | None] = []
        for base, terms in zip(self.fixed, self.terms, strict=True):
            total = base
            unbounded = False
            for c, coefficient in terms.items():
                b = bandwidths[c]
                if b is None:
                    unbounded = True
                    break
                total += coefficient * b
            caps.append(None if unbounded else total)
        return caps

    def representatives(self) -> tuple[int, ...]:
        """Compute nodes that every compute node is an automorphic image of (the
        automorphisms swap identical servers and keep every link's class)."""
        if self._representatives is None:
            signature = {e: (self.fixed[j], tuple(sorted(self.terms[j].items())))
                         for j, e in enumerate(self.edges)}
            self._representatives = representatives(self.names, self.compute, signature,
                                                    self.groups)
        return self._representatives

    def crossing(self, cut: Iterable[int]) -> list[int]:
        """Indices of the directed links leaving ``cut``."""
        inside = set(cut)
        return [j for j, (a, b) in enumerate(self.edges) if a in inside and b not in inside]

    def compute_in(self, cut: Iterable[int]) -> int:
        inside = set(cut)
        return sum(1 for c in self.compute if c in inside)


def representatives(names: tuple[str, ...], compute: tuple[int, ...], signature: dict,
                    groups: tuple[str | None, ...]) -> tuple[int, ...]:
    """:attr:`canopy.engine.network.indexed.Network.sink_representatives` of a network whose
    links carry ``signature`` values (anything sortable) instead of bandwidths."""
    view = Network(names, compute, signature, frozenset(compute), groups)
    images: set[int] = set()
    for classes in identical_groups(view):
        for member in classes[1:]:
            images.update(member)
    return tuple(c for c in compute if c not in images)


def min_ratio(n: int, compute: Sequence[int], edges: Sequence[Edge],
              caps: Sequence[Fraction | None], sinks: Sequence[int],
              start: Iterable[int] | None = None) -> Cut | None:
    """The least B+(S) / |S ∩ V_c| over cuts and a cut attaining it (exact).

    ``caps[j]`` is the bandwidth of ``edges[j]`` (None: unbounded); ``sinks`` are the
    compute nodes that need a flow (:func:`representatives`); ``start`` a cut to start
    the iteration from (its ratio an upper bound). Returns None when every cut crosses
    an unbounded link.
    """
    finite = [c for c in caps if c is not None]
    scale = math.lcm(*(c.denominator for c in finite)) if finite else 1
    ints = [None if c is None else int(c * scale) for c in caps]
    found = min_ratio_scaled(n, compute, edges, ints, sinks, start)
    return None if found is None else Cut(found.nodes, found.ratio / scale)


def min_ratio_scaled(n: int, compute: Sequence[int], edges: Sequence[Edge],
                     ints: Sequence[int | None], sinks: Sequence[int],
                     start: Iterable[int] | None = None) -> Cut | None:
    """:func:`min_ratio` on integer capacities (the ratio in their units)."""
    count = len(compute)
    compute_set = set(compute)

    def ratio_of(cut: set[int]) -> Fraction | None:
        total = 0
        for (a, b), cap in zip(edges, ints, strict=True):
            if a in cut and b not in cut:
                if cap is None:
                    return None
                total += cap
        return Fraction(total, sum(1 for c in compute if c in cut))

    cut: set[int] | None = None
    ratio: Fraction | None = None
    if start is None and all(c is not None for c in ints):
        ingress = dict.fromkeys(compute, 0)
        for (_, b), cap in zip(edges, ints, strict=True):
            if b in ingress and cap is not None:
                ingress[b] += cap
        weakest_node = min(compute, key=ingress.__getitem__)
        start = (i for i in range(n) if i != weakest_node)
    if start is not None:
        cut = set(start)
        ratio = ratio_of(cut)
    if ratio is None:
        # every finite cut has a ratio at most the total finite bandwidth: test above it
        cut, ratio = None, Fraction(sum(c for c in ints if c is not None) + 1)
    while True:
        p, q = ratio.numerator, ratio.denominator
        # x = p/q feasible iff every F(s, v) >= N·p with links q·b and source arcs p
        unbounded = count * p + 1
        tails, heads, arc_caps = [], [], []
        for (a, b), cap in zip(edges, ints, strict=True):
            c = unbounded if cap is None else q * cap
            if c:
                tails.append(a)
                heads.append(b)
                arc_caps.append(c)
        if p:
            tails += [n] * count
            heads += list(compute)
            arc_caps += [p] * count
        flow = FlowNetwork.from_arrays(n + 1, tails, heads, arc_caps)
        weakest, sink = None, None
        for v in sinks:
            value = flow.max_flow(n, v)
            if weakest is None or value < weakest:
                weakest, sink = value, v
                if value < count * p:
                    break
        assert weakest is not None and sink is not None
        if weakest >= count * p:
            if cut is None:
                return None
            return Cut(tuple(sorted(cut)), ratio)
        _, side = flow.min_cut(n, sink)
        cut = {i for i in side if i != n}
        new = ratio_of(cut)
        assert new is not None and new < ratio and compute_set & cut
        ratio = new


def cut_line(pnet: ParametricNetwork, cut: Iterable[int], bandwidths: Sequence[Fraction],
             c: int) -> tuple[Fraction, Fraction]:
    """(intercept, slope) of the cut's ratio as a function of class ``c``'s bandwidth,
    the other classes at ``bandwidths``: ratio(B) = intercept + slope · B."""
    nodes = tuple(cut)
    k = pnet.compute_in(nodes)
    intercept = Fraction(0)
    slope = Fraction(0)
    for j in pnet.crossing(nodes):
        intercept += pnet.fixed[j]
        for d, coefficient in pnet.terms[j].items():
            if d == c:
                slope += coefficient
            else:
                intercept += coefficient * bandwidths[d]
    return intercept / k, slope / k


def solve_ratio(pnet: ParametricNetwork, bandwidths: Sequence[Fraction | None],
                start: Iterable[int] | None = None) -> Cut | None:
    """:func:`min_ratio` of ``pnet`` at class bandwidths ``bandwidths``."""
    return min_ratio(pnet.n, pnet.compute, pnet.edges, pnet.capacities(bandwidths),
                     pnet.representatives(), start)
