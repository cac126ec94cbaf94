"""One maxflow interface, several backends behind it.

Every algorithm in the engine (optimality test, γ of edge splitting, μ of tree packing)
asks the same two questions of a directed network with exact integer capacities: the
value of a maximum s-t flow, and the source side of a minimum s-t cut.
:class:`FlowNetwork` answers them through a backend:

``ortools``
    OR-Tools' ``SimpleMaxFlow`` (C++ push-relabel, int64). The fastest by measurement
    (``bench/maxflow_backends.py``: about 12 µs per flow on the networks ForestColl
    builds, ten times faster than scipy), and it keeps its graph between questions, so a
    capacity change costs one call instead of a rebuild. Optional: ``pip install
    'canopy-collectives[ortools]'`` (it pulls protobuf and pandas, about 170 MB).
``scipy``
    ``scipy.sparse.csgraph.maximum_flow`` (Dinic), always installed. It takes int32
    capacities only, so capacities are divided by their gcd first; when they still do
    not fit, the question goes to ``networkx``.
``networkx``
    networkx's preflow-push on Python integers: exact at any size, slow.

The caller picks one (``FlowNetwork(n, backend="scipy")``, or the ``CANOPY_MAXFLOW``
environment variable for the whole process); otherwise :func:`default_backend` takes the
fastest installed one. Any backend that cannot hold a network's capacities exactly
(int64 for OR-Tools, int32 after the gcd for scipy) hands that network to networkx and
says so in the ``canopy.engine.maxflow`` log at debug level. Every backend answers the
same tests (tests/test_maxflow.py).
"""

from __future__ import annotations

import importlib.util
import logging
import os
from typing import Any

import numpy as np

from canopy.engine.errors import CanopyError

BACKENDS = ("ortools", "scipy", "networkx")
INT64_SAFE = 2**62
INT32_SAFE = 2**31 - 1
_log = logging.getLogger(__name__)


def available_backends() -> list[str]:
    """The backends that can run here, fastest first."""
    names = ["ortools"] if importlib.util.find_spec("ortools") is not None else []
    return [*names, "scipy", "networkx"]


def default_backend() -> str:
    """``CANOPY_MAXFLOW`` when set, else the fastest installed backend."""
    chosen = os.environ.get("CANOPY_MAXFLOW")
    if chosen:
        _check_name(chosen)
        return chosen
    return available_backends()[0]


def _check_name(name: str) -> None:
    if name not in BACKENDS:
        raise CanopyError(f"unknown maxflow backend '{name}'; use one of "
                          f"{', '.join(BACKENDS)}.")
    if name not in available_backends():
        raise CanopyError(f"the maxflow backend '{name}' is not installed "
                          "(pip install 'canopy-collectives[ortools]').")


class FlowNetwork:
    """A directed network on nodes ``0 .. num_nodes-1`` with integer arc capacities.

    Arcs live in numpy arrays (object arrays of Python integers when int64 could
    overflow). The backend's own graph is kept between questions; capacity changes are
    passed on to it when it can take them (OR-Tools), otherwise it is rebuilt lazily.
    """

    def __init__(self, num_nodes: int, backend: str | None = None) -> None:
        if backend is not None:
            _check_name(backend)
        self.num_nodes = num_nodes
        self.backend = backend or default_backend()
        self._tails = np.zeros(0, dtype=np.int32)
        self._heads = np.zeros(0, dtype=np.int32)
        self._caps: np.ndarray = np.zeros(0, dtype=np.int64)
        self._pending: list[tuple[int, int, int]] = []
        self._solver: Any = None

    @classmethod
    def from_arrays(cls, num_nodes: int, tails: np.ndarray, heads: np.ndarray,
                    caps: np.ndarray, backend: str | None = None) -> FlowNetwork:
        """A network from parallel arrays of arc tails, heads and capacities."""
        net = cls(num_nodes, backend)
        net._tails = np.asarray(tails, dtype=np.int32)
        net._heads = np.asarray(heads, dtype=np.int32)
        caps = np.asarray(caps)
        net._caps = caps.astype(object if _too_big(caps) else np.int64)
        return net

    @property
    def num_arcs(self) -> int:
        return len(self._caps) + len(self._pending)

    def add_arc(self, tail: int, head: int, capacity: int) -> int:
        """Add an arc and return its index."""
        if capacity < 0:
            raise CanopyError(f"internal error: negative arc capacity {capacity}.")
        self._pending.append((tail, head, capacity))
        self._solver = None
        return self.num_arcs - 1

    def _flush(self) -> None:
        if self._pending:
            t, h, c = zip(*self._pending, strict=True)
            self._pending = []
            caps = list(self._caps) + list(c)
            big = _too_big(caps)
            self._tails = np.concatenate([self._tails, np.asarray(t, dtype=np.int32)])
            self._heads = np.concatenate([self._heads, np.asarray(h, dtype=np.int32)])
            self._caps = np.asarray([int(x) for x in caps] if big else caps,
                                    dtype=object if big else np.int64)

    def capacity(self, arc: int) -> int:
        self._flush()
        return int(self._caps[arc])

    def set_capacity(self, arc: int, capacity: int) -> None:
        """Change one arc's capacity (kept by the backend's graph when it can)."""
        self._flush()
        if self._caps.dtype != object and capacity >= INT64_SAFE // max(len(self._caps), 1):
            self._caps = np.asarray([int(x) for x in self._caps], dtype=object)
            self._solver = None
        if self._caps.dtype == object:
            self._caps[arc] = capacity
            return
        self._caps[arc] = capacity
        if self._solver is not None and self.backend == "ortools":
            self._solver.set_arc_capacity(arc, capacity)
        elif self.backend != "scipy":
            self._solver = None

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(tails, heads, capacities) of every arc."""
        self._flush()
        return self._tails, self._heads, self._caps

    def max_flow(self, source: int, sink: int) -> int:
        """Value of a maximum flow from ``source`` to ``sink``."""
        return self.min_cut(source, sink, want_cut=False)[0]

    def min_cut(self, source: int, sink: int, want_cut: bool = True) -> tuple[int, list[int]]:
        """Maxflow value and the source side of a minimum cut (it contains ``source``)."""
        self._flush()
        if source == sink:
            raise CanopyError("internal error: maxflow from a node to itself.")
        backend = self.backend
        if self._caps.dtype == object:
            backend = "networkx"
        if backend == "ortools":
            return self._ortools(source, sink, want_cut)
        if backend == "scipy":
            answer = self._scipy(source, sink, want_cut)
            if answer is not None:
                return answer
        return self._networkx(source, sink)

    # ---------------------------------------------------------------- backends

    def _ortools(self, source: int, sink: int, want_cut: bool) -> tuple[int, list[int]]:
        if self._solver is None:
            from ortools.graph.python import max_flow
            self._solver = max_flow.SimpleMaxFlow()
            if len(self._caps):
                self._solver.add_arcs_with_capacity(self._tails, self._heads, self._caps)
        solver = self._solver
        if source >= solver.num_nodes():
            return 0, [source]      # a source without arcs reaches nothing
        if sink >= solver.num_nodes():  # nothing enters a sink without arcs
            return 0, [v for v in range(self.num_nodes) if v != sink] if want_cut else []
        status = solver.solve(source, sink)
        if status != solver.OPTIMAL:
            raise CanopyError(f"internal error: maxflow backend returned status {status}.")
        side = list(solver.get_source_side_min_cut()) if want_cut else []
        return int(solver.optimal_flow()), side

    def _scipy(self, source: int, sink: int, want_cut: bool) -> tuple[int, list[int]] | None:
        """scipy's Dinic on gcd-scaled int32 capacities; None when they do not fit.

        The CSR structure (arcs merged per node pair, self-loops dropped) is built once;
        after capacity changes only its data array is recomputed.
        """
        import scipy.sparse as sp
        from scipy.sparse.csgraph import breadth_first_order, maximum_flow

        n = self.num_nodes
        if self._solver is None or self._solver[0] != len(self._caps):
            keep = self._tails != self._heads
            keys = self._tails[keep].astype(np.int64) * n + self._heads[keep]
            pairs, inverse = np.unique(keys, return_inverse=True)
            indptr = np.searchsorted(pairs // n, np.arange(n + 1)).astype(np.int32)
            matrix = sp.csr_matrix((np.zeros(len(pairs), np.int32),
                                    (pairs % n).astype(np.int32), indptr), shape=(n, n))
            self._solver = (len(self._caps), keep, inverse, matrix)
        _, keep, inverse, matrix = self._solver
        merged = np.zeros(len(matrix.data), np.int64)
        np.add.at(merged, inverse, self._caps[keep])
        scale = int(np.gcd.reduce(merged)) if len(merged) else 1
        scale = scale or 1
        merged //= scale
        if len(merged) and int(merged.max()) * n > INT32_SAFE:
            _log.debug("capacities exceed int32 for scipy; using networkx")
            return None
        matrix.data = merged.astype(np.int32)
        result = maximum_flow(matrix, source, sink, method="dinic")
        value = int(result.flow_value) * scale
        if not want_cut:
            return value, []
        residual = matrix - result.flow
        residual.data[residual.data < 0] = 0
        residual.eliminate_zeros()
        side = breadth_first_order(residual, source, directed=True, return_predecessors=False)
        return value, sorted(int(v) for v in side)

    def _networkx(self, source: int, sink: int) -> tuple[int, list[int]]:
        import networkx as nx
        g = nx.DiGraph()
        g.add_nodes_from(range(self.num_nodes))
        for t, h, c in zip(self._tails.tolist(), self._heads.tolist(), self._caps.tolist(),
                           strict=True):
            if t == h:
                continue
            if g.has_edge(t, h):
                g[t][h]["capacity"] += int(c)
            else:
                g.add_edge(t, h, capacity=int(c))
        value, (side, _) = nx.minimum_cut(g, source, sink)
        return int(value), sorted(side)


def _too_big(caps: Any) -> bool:
    """True when capacities could overflow int64 sums inside a C++ solver."""
    if isinstance(caps, np.ndarray) and caps.dtype != object:
        return bool(len(caps)) and int(caps.max()) >= INT64_SAFE // len(caps)
    return sum(int(c) for c in caps) >= INT64_SAFE
