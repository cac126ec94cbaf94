"""A small maxflow interface with one fast backend.

Every algorithm in the engine (optimality test, γ of edge splitting, μ of tree packing)
asks the same two questions of a directed network with exact integer capacities: the
value of a maximum s-t flow, and the source side of a minimum s-t cut.

The backend is OR-Tools' ``SimpleMaxFlow`` (push-relabel in C++ on int64 capacities),
chosen by measurement: ``bench/maxflow_backends.py`` compares it with networkx,
``scipy.sparse.csgraph.maximum_flow`` and igraph on the auxiliary networks ForestColl
builds. scipy needs int32 capacities and igraph uses doubles; OR-Tools keeps exact
int64. When the total capacity could overflow int64, the network falls back to
networkx's preflow-push on Python integers, which is exact at any size.
"""

from __future__ import annotations

import networkx as nx
from ortools.graph.python import max_flow as ortools_max_flow

from engine.errors import CanopyError

INT64_SAFE = 2**62


class FlowNetwork:
    """A directed network on nodes ``0 .. num_nodes-1`` with integer arc capacities.

    Arcs are added once; capacities may change between solves (``set_capacity``), so
    one network serves many maxflow questions on the same structure.
    """

    def __init__(self, num_nodes: int) -> None:
        self.num_nodes = num_nodes
        self._tails: list[int] = []
        self._heads: list[int] = []
        self._caps: list[int] = []
        self._total = 0
        self._solver = ortools_max_flow.SimpleMaxFlow()

    def add_arc(self, tail: int, head: int, capacity: int) -> int:
        """Add an arc and return its index."""
        self._check(capacity)
        self._tails.append(tail)
        self._heads.append(head)
        self._caps.append(capacity)
        self._total += capacity
        return self._solver.add_arc_with_capacity(tail, head, min(capacity, INT64_SAFE))

    def set_capacity(self, arc: int, capacity: int) -> None:
        self._check(capacity)
        self._total += capacity - self._caps[arc]
        self._caps[arc] = capacity
        self._solver.set_arc_capacity(arc, min(capacity, INT64_SAFE))

    def capacity(self, arc: int) -> int:
        return self._caps[arc]

    @staticmethod
    def _check(capacity: int) -> None:
        if capacity < 0:
            raise CanopyError(f"internal error: negative arc capacity {capacity}.")

    def max_flow(self, source: int, sink: int) -> int:
        """Value of a maximum flow from ``source`` to ``sink``."""
        if self._total >= INT64_SAFE:
            return int(nx.maximum_flow_value(self._nx_graph(), source, sink))
        self._solve(source, sink)
        return int(self._solver.optimal_flow())

    def min_cut(self, source: int, sink: int) -> tuple[int, list[int]]:
        """Maxflow value and the source side of a minimum cut (it contains ``source``)."""
        if self._total >= INT64_SAFE:
            value, (side, _) = nx.minimum_cut(self._nx_graph(), source, sink)
            return int(value), sorted(side)
        self._solve(source, sink)
        return int(self._solver.optimal_flow()), list(self._solver.get_source_side_min_cut())

    def _solve(self, source: int, sink: int) -> None:
        status = self._solver.solve(source, sink)
        if status != self._solver.OPTIMAL:
            raise CanopyError(f"internal error: maxflow backend returned status {status}.")

    def _nx_graph(self) -> nx.DiGraph:
        g = nx.DiGraph()
        g.add_nodes_from(range(self.num_nodes))
        for t, h, c in zip(self._tails, self._heads, self._caps, strict=True):
            if g.has_edge(t, h):
                g[t][h]["capacity"] += c
            else:
                g.add_edge(t, h, capacity=c)
        return g
