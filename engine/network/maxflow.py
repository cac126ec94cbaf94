"""One maxflow interface, several backends behind it.

Every algorithm in the engine (optimality test, γ of edge splitting, μ of tree packing)
asks the same two questions of a directed network with exact integer capacities: the
value of a maximum s-t flow, and the source side of a minimum s-t cut.
:class:`FlowNetwork` answers them through a backend:

``ortools``
    OR-Tools' ``SimpleMaxFlow`` (C++ push-relabel, int64). The fastest by measurement
    (``bench/maxflow_backends.py``; docs/performance.md, "Maxflow backends"), and it keeps
    its graph between questions, so a capacity change costs one call instead of a rebuild.
    Optional: ``pip install 'canopy-collectives[ortools]'`` (it pulls protobuf and pandas, a
    large install).
``scipy``
    ``scipy.sparse.csgraph.maximum_flow`` (Dinic), always installed. It takes int32
    capacities only, so capacities are divided by their gcd first; when they still do
    not fit, the question goes to ``networkx``.
``python``
    Dinic's algorithm in plain Python on Python integers: exact at any size. Loading numpy
    and OR-Tools costs more CPU than a small solve takes, so without a named backend a
    network of at most ``SMALL_ARCS`` arcs uses it until the process has spent
    ``PYTHON_BUDGET`` arcs on such answers (about what the loading costs); then the fastest
    backend takes over. So a ``canopy solve`` of a small file never pays for the loading,
    and sweeps of many small solves stay fast. Where numpy is loaded already (``canopy
    compare``'s simulator loads it) only OR-Tools is left to load, which costs less, and the
    budget is ``LOADED_BUDGET``.
``networkx``
    networkx's preflow-push on Python integers: exact at any size, slow.

The caller picks one (``FlowNetwork(n, backend="scipy")``, or the ``CANOPY_MAXFLOW``
environment variable for the whole process); otherwise :func:`default_backend` takes the
fastest installed one. Any backend that cannot hold a network's capacities exactly
(int64 for OR-Tools, int32 after the gcd for scipy) hands that network to the python
backend and says so in the ``canopy.engine.network.maxflow`` log at debug level. Arcs are kept in
Python lists; numpy and OR-Tools are imported only when a backend needs them. Every
backend answers the same tests (tests/engine/network/test_maxflow.py).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence
from typing import Any

from canopy.engine.model.errors import CanopyError

BACKENDS = ("ortools", "scipy", "python", "networkx")
INT64_SAFE = 2**62
INT32_SAFE = 2**31 - 1
SMALL_ARCS = 600        # networks the python backend may answer without a named backend
PYTHON_BUDGET = 60_000  # arcs those answers scan per process: about numpy + OR-Tools' loading
LOADED_BUDGET = 20_000  # the same where numpy is loaded: about OR-Tools' loading
_python_spent = 0


def available_backends() -> list[str]:
    """The backends that can run here, fastest first (on networks past SMALL_ARCS)."""
    names = ["ortools"] if importlib.util.find_spec("ortools") is not None else []
    return [*names, "scipy", "python", "networkx"]


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


def _python_budget(backend: str) -> int:
    """Arcs of python answers a process spends before ``backend`` takes over: about what
    loading it costs (module docstring)."""
    return LOADED_BUDGET if backend == "ortools" and "numpy" in sys.modules else PYTHON_BUDGET


class FlowNetwork:
    """A directed network on nodes ``0 .. num_nodes-1`` with integer arc capacities.

    Arcs live in Python lists (exact at any size). The backend's own graph is kept
    between questions; capacity changes are passed on to it when it can take them
    (OR-Tools), otherwise it is rebuilt lazily. Without a named backend (argument or
    ``CANOPY_MAXFLOW``), small networks may use the python backend (module docstring).
    """

    def __init__(self, num_nodes: int, backend: str | None = None) -> None:
        if backend is not None:
            _check_name(backend)
        self.num_nodes = num_nodes
        self.backend = backend or default_backend()
        self._auto = backend is None and not os.environ.get("CANOPY_MAXFLOW")
        self._tails: list[int] = []
        self._heads: list[int] = []
        self._caps: list[int] = []
        self._solver: Any = None    # the backend's own graph, kept between questions
        self._kind = ""             # which backend built it
        self._sum = 0               # total capacity: past INT64_SAFE no C++ solver is exact

    @classmethod
    def from_arrays(cls, num_nodes: int, tails: Sequence[int], heads: Sequence[int],
                    caps: Sequence[int], backend: str | None = None) -> FlowNetwork:
        """A network from parallel sequences (lists or numpy arrays) of arc tails, heads
        and capacities; lists become the network's own."""
        net = cls(num_nodes, backend)
        net._tails = _as_list(tails)
        net._heads = _as_list(heads)
        net._caps = _as_list(caps)
        net._sum = sum(net._caps)
        return net

    def sibling(self, num_nodes: int, tails: list[int], heads: list[int],
                caps: list[int]) -> FlowNetwork:
        """Another network (it owns the lists given) with this one's choice of backend."""
        net = FlowNetwork.from_arrays(num_nodes, tails, heads, caps, self.backend)
        net._auto = self._auto
        return net

    @property
    def num_arcs(self) -> int:
        return len(self._caps)

    def add_arc(self, tail: int, head: int, capacity: int) -> int:
        """Add an arc and return its index."""
        if capacity < 0:
            raise CanopyError(f"internal error: negative arc capacity {capacity}.")
        self._tails.append(tail)
        self._heads.append(head)
        self._caps.append(capacity)
        self._solver, self._kind = None, ""
        self._sum += capacity
        return len(self._caps) - 1

    def capacity(self, arc: int) -> int:
        return self._caps[arc]

    def set_capacity(self, arc: int, capacity: int) -> None:
        """Change one arc's capacity (kept by the backend's graph when it can)."""
        self._sum += capacity - self._caps[arc]
        self._caps[arc] = capacity
        if self._kind == "ortools" and capacity < INT64_SAFE:
            self._solver.set_arc_capacity(arc, capacity)
        elif self._kind == "scipy" and capacity < INT64_SAFE:
            self._solver[0][arc] = capacity     # its capacity array follows
        else:
            self._solver, self._kind = None, ""

    def arrays(self) -> tuple[list[int], list[int], list[int]]:
        """(tails, heads, capacities) of every arc, as lists (do not modify them)."""
        return self._tails, self._heads, self._caps

    def max_flow(self, source: int, sink: int) -> int:
        """Value of a maximum flow from ``source`` to ``sink``."""
        return self.min_cut(source, sink, want_cut=False)[0]

    def min_cut(self, source: int, sink: int, want_cut: bool = True) -> tuple[int, list[int]]:
        """Maxflow value and the source side of a minimum cut (it contains ``source``)."""
        if source == sink:
            raise CanopyError("internal error: maxflow from a node to itself.")
        global _python_spent
        backend = self.backend
        if self._auto and len(self._caps) <= SMALL_ARCS and \
                _python_spent < _python_budget(backend):
            _python_spent += len(self._caps)
            backend = "python"
        if self._sum >= INT64_SAFE and backend in ("ortools", "scipy"):
            _debug("capacities exceed int64 sums; using the python backend")
            backend = "python"
        if backend == "ortools":
            return self._ortools(source, sink, want_cut)
        if backend == "scipy":
            answer = self._scipy(source, sink, want_cut)
            if answer is not None:
                return answer
            backend = "python"
        if backend == "networkx":
            return self._networkx(source, sink)
        return dinic(self.num_nodes, self._tails, self._heads, self._caps, source, sink)

    # ---------------------------------------------------------------- backends

    def _ortools(self, source: int, sink: int, want_cut: bool) -> tuple[int, list[int]]:
        solver = self._solver
        if self._kind != "ortools":
            import numpy as np
            from ortools.graph.python import max_flow
            solver = self._solver = max_flow.SimpleMaxFlow()
            self._kind = "ortools"
            if self._caps:
                solver.add_arcs_with_capacity(np.asarray(self._tails, np.int32),
                                              np.asarray(self._heads, np.int32),
                                              np.asarray(self._caps, np.int64))
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
        import numpy as np
        import scipy.sparse as sp
        from scipy.sparse.csgraph import breadth_first_order, maximum_flow

        n = self.num_nodes
        if self._kind != "scipy":
            tails = np.asarray(self._tails, dtype=np.int64)
            heads = np.asarray(self._heads, dtype=np.int64)
            keep = tails != heads
            keys = tails[keep] * n + heads[keep]
            pairs, inverse = np.unique(keys, return_inverse=True)
            indptr = np.searchsorted(pairs // n, np.arange(n + 1)).astype(np.int32)
            matrix = sp.csr_matrix((np.zeros(len(pairs), np.int32),
                                    (pairs % n).astype(np.int32), indptr), shape=(n, n))
            self._solver = (np.asarray(self._caps, dtype=np.int64), keep, inverse, matrix)
            self._kind = "scipy"
        caps, keep, inverse, matrix = self._solver
        merged = np.zeros(len(matrix.data), np.int64)
        np.add.at(merged, inverse, caps[keep])
        scale = int(np.gcd.reduce(merged)) if len(merged) else 1
        scale = scale or 1
        merged //= scale
        if len(merged) and int(merged.max()) * n > INT32_SAFE:
            _debug("capacities exceed int32 for scipy; using the python backend")
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
        for t, h, c in zip(self._tails, self._heads, self._caps, strict=True):
            if t == h:
                continue
            if g.has_edge(t, h):
                g[t][h]["capacity"] += int(c)
            else:
                g.add_edge(t, h, capacity=int(c))
        value, (side, _) = nx.minimum_cut(g, source, sink)
        return int(value), sorted(side)


def dinic(num_nodes: int, tails: Sequence[int], heads: Sequence[int], caps: Sequence[int],
          source: int, sink: int) -> tuple[int, list[int]]:
    """Maximum flow value and the source side of a minimum cut, by Dinic's algorithm
    (level graph by BFS, blocking flow by depth-first search) on Python integers."""
    head: list[int] = []
    residual: list[int] = []
    adj: list[list[int]] = [[] for _ in range(num_nodes)]
    for a, b, c in zip(tails, heads, caps, strict=True):
        if c and a != b:
            adj[a].append(len(head))
            head.append(b)
            residual.append(int(c))
            adj[b].append(len(head))
            head.append(a)
            residual.append(0)
    total = 0
    while True:
        level = [-1] * num_nodes
        level[source] = 0
        queue = [source]
        for u in queue:
            next_level = level[u] + 1
            for e in adj[u]:
                v = head[e]
                if residual[e] and level[v] < 0:
                    level[v] = next_level
                    queue.append(v)
        if level[sink] < 0:
            return total, sorted(queue)
        total += _blocking_flow(adj, head, residual, level, source, sink)


def _blocking_flow(adj: list[list[int]], head: list[int], residual: list[int],
                   level: list[int], source: int, sink: int) -> int:
    """Augment along level-graph paths until none is left; returns the flow added."""
    pointer = [0] * len(adj)
    added = 0
    path: list[int] = []
    u = source
    while True:
        if u == sink:
            push = min(residual[e] for e in path)
            for e in path:
                residual[e] -= push
                residual[e ^ 1] += push
            added += push
            path.clear()
            u = source
            continue
        edges, i = adj[u], pointer[u]
        want = level[u] + 1
        while i < len(edges) and not (residual[edges[i]] and level[head[edges[i]]] == want):
            i += 1
        pointer[u] = i
        if i < len(edges):
            path.append(edges[i])
            u = head[edges[i]]
        elif u == source:
            return added
        else:
            level[u] = -1               # a dead end: never enter it again this phase
            e = path.pop()
            u = head[e ^ 1]
            pointer[u] += 1


def _debug(message: str) -> None:
    """Log at debug level; logging is imported only then (it costs start-up otherwise)."""
    import logging
    logging.getLogger(__name__).debug(message)


def _as_list(values: Sequence[int]) -> list[int]:
    """A list of Python integers; a list is taken as it is (the network owns it)."""
    if isinstance(values, list):
        return values
    tolist = getattr(values, "tolist", None)
    return tolist() if tolist is not None else [int(v) for v in values]

