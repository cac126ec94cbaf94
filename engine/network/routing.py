"""Physical routing between compute nodes: shortest routes through switches, chosen to
keep the most congested link low (what NCCL's rings and TACOS's unwound links use).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from fractions import Fraction

from canopy.engine.model.plan import Edge, Path, path_links
from canopy.engine.model.topology import Topology


class Router:
    """Shortest physical routes between compute nodes, interior nodes switches only.

    Routes are shortest in hops. Among equal routes, :meth:`route` takes the one that
    keeps the most congested link lowest given current loads (so a GPU's ring hop leaves
    through its own NIC when loads are even), then the smallest sum of congestion, then
    the first in node order: deterministic. When no switch-only route exists (a
    direct-connect mesh between non-neighbours), compute nodes may relay.
    """

    MAX_ROUTES = 32

    def __init__(self, topology: Topology) -> None:
        self.capacity = topology.capacities()
        self.order = {n: i for i, n in enumerate(topology.node_ids())}
        self.switches = frozenset(topology.switch_nodes())
        self.compute = tuple(topology.compute_nodes())
        self.out: dict[str, list[str]] = {n: [] for n in topology.node_ids()}
        for u, v in sorted(self.capacity, key=lambda e: (self.order[e[0]], self.order[e[1]])):
            self.out[u].append(v)
        self._bfs_cache: dict[tuple[str, frozenset[str] | None, bool], dict[str, list[str]]] = {}
        self._paths_cache: dict[tuple[str, str, frozenset[str] | None], list[Path]] = {}

    def _bfs(self, src: str, through: frozenset[str] | None, relay: bool) -> dict[str, list[str]]:
        """Predecessors on shortest paths from ``src``; only allowed nodes are expanded."""
        key = (src, through, relay)
        if key in self._bfs_cache:
            return self._bfs_cache[key]
        allowed = self.switches if through is None else through
        dist = {src: 0}
        preds: dict[str, list[str]] = {src: []}
        queue = deque([src])
        while queue:
            u = queue.popleft()
            if u != src and u not in allowed and not (relay and u not in self.switches):
                continue  # a compute node (or a switch outside ``through``) ends a route
            for v in self.out[u]:
                if v not in dist:
                    dist[v] = dist[u] + 1
                    preds[v] = [u]
                    queue.append(v)
                elif dist[v] == dist[u] + 1:
                    preds[v].append(u)
        self._bfs_cache[key] = preds
        return preds

    def paths(self, src: str, dst: str, through: frozenset[str] | None = None) -> list[Path]:
        """Shortest routes src -> dst (at most MAX_ROUTES), switch interiors first.

        ``through`` restricts the interior to those switches. With no switch-only route
        and no restriction, routes relaying through compute nodes are returned.
        """
        key = (src, dst, through)
        if key in self._paths_cache:
            return self._paths_cache[key]
        found = self._enumerate(self._bfs(src, through, False), src, dst)
        if not found and through is None:
            found = self._enumerate(self._bfs(src, None, True), src, dst)
        self._paths_cache[key] = found
        return found

    def _enumerate(self, preds: dict[str, list[str]], src: str, dst: str) -> list[Path]:
        if dst not in preds or dst == src:
            return []
        out: list[Path] = []

        def walk(node: str, suffix: list[str]) -> None:
            if len(out) >= self.MAX_ROUTES:
                return
            if node == src:
                out.append(tuple(reversed(suffix + [src])))
                return
            for p in sorted(preds[node], key=self.order.__getitem__):
                walk(p, suffix + [node])

        walk(dst, [])
        return out

    def congestion(self, path: Path, loads: Mapping[Edge, Fraction], weight: Fraction
                   ) -> tuple[Fraction, Fraction]:
        """(largest, summed) load/capacity along ``path`` once ``weight`` is added."""
        ratios = [(loads.get(e, Fraction(0)) + weight) / self.capacity[e]
                  for e in path_links(path)]
        return max(ratios), sum(ratios, Fraction(0))

    def route(self, src: str, dst: str, loads: Mapping[Edge, Fraction],
              weight: Fraction = Fraction(1), through: frozenset[str] | None = None
              ) -> Path | None:
        """The least congested shortest route, or None when dst cannot be reached."""
        best: tuple[tuple[Fraction, Fraction], Path] | None = None
        for path in self.paths(src, dst, through):
            score = self.congestion(path, loads, weight)
            if best is None or score < best[0]:
                best = (score, path)
        return None if best is None else best[1]
