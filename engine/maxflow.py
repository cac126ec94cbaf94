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
import numpy as np
from ortools.graph.python import max_flow as ortools_max_flow

from canopy.engine.errors import CanopyError

INT64_SAFE = 2**62


class FlowNetwork:
    """A directed network on nodes ``0 .. num_nodes-1`` with integer arc capacities.

    Arcs live in numpy arrays; the C++ solver is rebuilt from them in one vectorised call
    whenever capacities changed, so one network serves many maxflow questions.
    """

    def __init__(self, num_nodes: int) -> None:
        self.num_nodes = num_nodes
        self._tails: list[int] = []
        self._heads: list[int] = []
        self._caps: list[int] = []
        self._arrays: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._solver: ortools_max_flow.SimpleMaxFlow | None = None

    @classmethod
    def from_arrays(cls, num_nodes: int, tails: np.ndarray, heads: np.ndarray,
                    caps: np.ndarray) -> FlowNetwork:
        """A network from parallel arrays of arc tails, heads and capacities."""
        net = cls(num_nodes)
        net._arrays = (np.asarray(tails, dtype=np.int32), np.asarray(heads, dtype=np.int32),
                       np.asarray(caps, dtype=object if _too_big(caps) else np.int64))
        return net

    def add_arc(self, tail: int, head: int, capacity: int) -> int:
        """Add an arc and return its index."""
        self._materialise_lists()
        if capacity < 0:
            raise CanopyError(f"internal error: negative arc capacity {capacity}.")
        self._tails.append(tail)
        self._heads.append(head)
        self._caps.append(capacity)
        self._solver = None
        return len(self._caps) - 1

    def set_capacity(self, arc: int, capacity: int) -> None:
        self._materialise_lists()
        self._caps[arc] = capacity
        self._solver = None

    def _materialise_lists(self) -> None:
        if self._arrays is not None:
            t, h, c = self._arrays
            self._tails, self._heads, self._caps = t.tolist(), h.tolist(), [int(x) for x in c]
            self._arrays = None

    def _current(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._arrays is None:
            big = _too_big(self._caps)
            self._arrays = (np.asarray(self._tails, dtype=np.int32),
                            np.asarray(self._heads, dtype=np.int32),
                            np.asarray(self._caps, dtype=object if big else np.int64))
            self._tails, self._heads, self._caps = [], [], []
        return self._arrays

    def _ortools(self) -> ortools_max_flow.SimpleMaxFlow | None:
        """The C++ solver, or None when capacities need Python's big integers."""
        tails, heads, caps = self._current()
        if caps.dtype == object:
            return None
        if self._solver is None:
            self._solver = ortools_max_flow.SimpleMaxFlow()
            if len(caps):
                self._solver.add_arcs_with_capacity(tails, heads, caps)
        return self._solver

    def max_flow(self, source: int, sink: int) -> int:
        """Value of a maximum flow from ``source`` to ``sink``."""
        return self.min_cut(source, sink, want_cut=False)[0]

    def min_cut(self, source: int, sink: int, want_cut: bool = True) -> tuple[int, list[int]]:
        """Maxflow value and the source side of a minimum cut (it contains ``source``)."""
        solver = self._ortools()
        if solver is None:
            value, (side, _) = nx.minimum_cut(self._nx_graph(), source, sink)
            return int(value), sorted(side)
        if self.num_nodes and solver.num_nodes() < self.num_nodes:
            # Nodes without arcs are unknown to OR-Tools: the flow to them is 0.
            if max(source, sink) >= solver.num_nodes():
                return 0, [source]
        status = solver.solve(source, sink)
        if status != solver.OPTIMAL:
            raise CanopyError(f"internal error: maxflow backend returned status {status}.")
        side = list(solver.get_source_side_min_cut()) if want_cut else []
        return int(solver.optimal_flow()), side

    def _nx_graph(self) -> nx.DiGraph:
        tails, heads, caps = self._current()
        g = nx.DiGraph()
        g.add_nodes_from(range(self.num_nodes))
        for t, h, c in zip(tails.tolist(), heads.tolist(), caps.tolist(), strict=True):
            if g.has_edge(t, h):
                g[t][h]["capacity"] += int(c)
            else:
                g.add_edge(t, h, capacity=int(c))
        return g


def _too_big(caps: object) -> bool:
    """True when capacities could overflow int64 sums inside the C++ solver."""
    if isinstance(caps, np.ndarray) and caps.dtype != object:
        return bool(len(caps)) and int(caps.max()) >= INT64_SAFE // len(caps)
    return sum(int(c) for c in caps) >= INT64_SAFE  # type: ignore[attr-defined]
