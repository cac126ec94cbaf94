"""The directed, indexed view of a topology that the algorithms work on.

Node ``i`` is ``names[i]``; ``capacity[(u, v)]`` is the exact bandwidth of the directed
link u -> v with parallel links added up. The auxiliary source ``s`` of ForestColl's flow
networks (ForestColl (arXiv:2402.06787) §4.2, Fig. 3b) is node ``len(names)`` when a flow network is
built by :func:`source_network`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

from canopy.engine.model.topology import Topology, check
from canopy.engine.network.maxflow import FlowNetwork
from canopy.engine.network.servers import identical_groups


@dataclass(frozen=True)
class Network:
    """A validated topology as integers: node indices and directed link bandwidths."""

    names: tuple[str, ...]
    compute: tuple[int, ...]
    capacity: Mapping[tuple[int, int], Fraction]
    compute_set: frozenset[int]
    groups: tuple[str | None, ...]

    @classmethod
    def from_topology(cls, topo: Topology, where: str = "") -> Network:
        """Validate ``topo`` (raising TopologyError) and index it."""
        check(topo, where)
        names = tuple(topo.node_ids())
        index = {name: i for i, name in enumerate(names)}
        caps = {(index[u], index[v]): c for (u, v), c in topo.capacities().items()}
        compute = tuple(index[c] for c in topo.compute_nodes())
        groups = tuple(n.group for n in topo.nodes)
        return cls(names, compute, caps, frozenset(compute), groups)

    @property
    def n(self) -> int:
        return len(self.names)

    @property
    def source(self) -> int:
        return len(self.names)

    def is_compute(self, i: int) -> bool:
        return i in self.compute_set

    def ingresses(self) -> dict[int, Fraction]:
        """Total bandwidth into every node that has an in-link (one pass over the links)."""
        into: dict[int, Fraction] = {}
        for (_, b), c in self.capacity.items():
            into[b] = into.get(b, 0) + c
        return into

    @cached_property
    def sink_representatives(self) -> tuple[int, ...]:
        """Compute nodes such that every compute node is the image of one of them under
        an automorphism of the network
        (:func:`canopy.engine.network.servers.identical_groups`); F(s, v) is the same
        for v and its images, so Thm 1's test needs a flow to these only."""
        images: set[int] = set()
        for classes in identical_groups(self):
            for member in classes[1:]:
                images.update(member)
        return tuple(c for c in self.compute if c not in images)

    def egress_of(self, nodes: set[int]) -> Fraction:
        """B+(S): total bandwidth of links leaving ``nodes``."""
        return sum((c for (a, b), c in self.capacity.items() if a in nodes and b not in nodes),
                   Fraction(0))


def source_network(net: Network, link_caps: Mapping[tuple[int, int], int],
                   source_cap: int) -> FlowNetwork:
    """The flow network G⃗ of §4.2 / Thm 5: links with integer ``link_caps`` and an arc of
    ``source_cap`` from the added source s to every compute node."""
    flow = FlowNetwork(net.n + 1)
    for edge, cap in link_caps.items():
        if cap:
            flow.add_arc(edge[0], edge[1], cap)
    for c in net.compute:
        flow.add_arc(net.source, c, source_cap)
    return flow


def weakest_sink(flow: FlowNetwork, net: Network,
                 stop_below: int | None = None) -> tuple[int, int, list[int]]:
    """min over compute v of F(s, v), the v attaining it and its min cut's source side.

    ``flow`` must be built from ``net`` with capacities that depend on each link's
    bandwidth alone (:func:`source_network`), so that the network's automorphisms keep
    it: then only :attr:`Network.sink_representatives` need a flow. With
    ``stop_below``, return at the first v whose flow is below that value.
    """
    best: tuple[int, int, list[int]] | None = None
    for v in net.sink_representatives:
        value = flow.max_flow(net.source, v)
        if best is None or value < best[0]:
            best = (value, v, [])
            if stop_below is not None and value < stop_below:
                break
    assert best is not None
    value, v, _ = best
    _, side = flow.min_cut(net.source, v)
    return value, v, side
