"""Rings as NCCL/RCCL build them: several rings (channels) with the data split evenly.

Each ring is a Hamiltonian cycle over the compute nodes; each hop is routed over the
physical network (:class:`~canopy.engine.network.routing.Router`). As NCCL does, a ring keeps
every server's GPUs contiguous (servers are the ``group`` of compute nodes, visited in
file order) and different rings leave and enter servers through different NICs.

With R rings each carrying 1/R of the data, a ring's hop carries N-1 of the N pieces of
its 1/R share, so for allgather (message size M, the nccl-tests convention)

    T = max_e  C_e · (N-1)/N · M/R / b_e,      algbw = N·R / ((N-1) · max_e C_e / b_e)

where C_e counts ring hops routed over directed link e. Reduce-scatter has the same
bound; allreduce moves twice the data (reduce-scatter then allgather), so half of it.
Check (ForestColl (arXiv:2402.06787) §5.3): on 2 x DGX A100, 8 rings, one per NIC pair, reach
M/T = 16·8·25/15 = 213.33 GB/s, and no ring set does better, because each of the 16
GPUs but two must cross the IB in both directions.

The search: rings are added one at a time. Each is found by a depth-first search over
Hamiltonian cycles (servers contiguous) that minimises the most congested link given
the rings already placed, branch-and-bound with an expansion budget. Every prefix of
the ring list is scored and the best number of rings kept (the fewest among equals).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from canopy.engine.baselines.shortfall import relayed_hops
from canopy.engine.execution.simulate import plan_bound
from canopy.engine.model.plan import (
    BaselineResult,
    Edge,
    Path,
    path_links,
    ring_plan,
)
from canopy.engine.model.topology import Topology
from canopy.engine.network.routing import Router
from canopy.engine.network.servers import compute_nodes_by_server

DEFAULT_MAX_RINGS = 32
DEFAULT_BUDGET = 4000          # DFS hop evaluations per ring
STALE_RINGS = 8                # stop adding rings after this many without improvement

Ring = tuple[list[str], dict[Edge, Path]]
EXACT_BELOW = 1 << 62         # congestions the gateway stage computes in int64 (else Python)


@dataclass(frozen=True)
class _Level:
    """Every route of every hop from one server to the next, as arrays, so the gateway
    stage scores them all at once: per route its pair (index into ``pairs``), its links'
    ids (padded with a link never loaded) and inverse capacities (padded with 0, which
    changes neither the max nor the sum), and whether it relays."""

    pairs: list[tuple[str, str]]
    paths: list[Path]
    pair: np.ndarray
    ids: np.ndarray
    inverse: np.ndarray
    relays: np.ndarray
    rot_b: np.ndarray           # per pair, the node order of its entry
    order_a: np.ndarray         # per pair, the node order of its exit
    limit: int                  # loads below this keep every congestion within int64


class _RingSearch:
    """Branch-and-bound search for one ring given the hops of the rings placed so far.

    A ring is found in two stages: the gateways (the hop leaving each server and the
    node it enters in the next), then, server by server, a Hamiltonian path from the
    server's entry to its exit. Both stages minimise the most congested link; paths in
    different servers are searched independently, which keeps the search small.
    """

    GATEWAY_TRIES = 6

    def __init__(self, router: Router, servers: list[list[str]], budget: int) -> None:
        self.router = router
        self.servers = servers
        self.budget = budget
        # Congestion (hops / bandwidth) in exact integer units of 1/scale, so the search
        # compares integers: inverse[e] = scale / b_e.
        scale = math.lcm(*(c.numerator for c in router.capacity.values()))
        self.inverse = {e: int(scale / c) for e, c in router.capacity.items()}
        self.loads: dict[Edge, int] = {}
        # the same loads by link id, for the gateway stage (:meth:`_scores`); the last id
        # pads routes and is never loaded
        self.link_id = {e: i for i, e in enumerate(router.capacity)}
        self.counts = [0] * (len(self.link_id) + 1)
        self.levels: dict[int, _Level] = {}
        self.compute = {v for server in servers for v in server}
        self.direct = False           # only hops that relay through no other GPU
        # Per hop u -> v its routes, each with its links and their inverse capacities and
        # whether it relays through another compute node (:meth:`hop` scores them
        # thousands of times per ring).
        self.routes: dict[Edge, list[tuple[Path, list[tuple[Edge, int]], bool]]] = {}
        # Warnsdorff's rule on each server's nearest-neighbour graph steers the path
        # search towards Hamiltonian paths in sparse (direct-connect) servers.
        self.near: dict[str, set[str]] = {}
        for server in servers:
            for u in server:
                lengths = {v: len(paths[0]) for v in server
                           if v != u and (paths := router.paths(u, v))}
                shortest = min(lengths.values(), default=0)
                self.near[u] = {v for v, n in lengths.items() if n == shortest}

    def _load(self, path: Path, sign: int) -> None:
        for e in path_links(path):
            self.loads[e] = self.loads.get(e, 0) + sign
            self.counts[self.link_id[e]] += sign

    def _set_loads(self, loads: dict[Edge, int]) -> None:
        self.loads = dict(loads)
        self.counts = [0] * len(self.counts)
        for e, count in loads.items():
            self.counts[self.link_id[e]] = count

    def _routes(self, u: str, v: str) -> list[tuple[Path, list[tuple[Edge, int]], bool]]:
        routes = self.routes.get((u, v))
        if routes is None:
            routes = self.routes[(u, v)] = [
                (path, [(e, self.inverse[e]) for e in path_links(path)],
                 any(x in self.compute for x in path[1:-1]))
                for path in self.router.paths(u, v)]
        return routes

    def _level(self, k: int) -> _Level:
        """The routes from server k to server k + 1 (cyclically) as arrays."""
        level = self.levels.get(k)
        if level is None:
            src, dst = self.servers[k], self.servers[(k + 1) % len(self.servers)]
            pairs = [(a, b) for a in src for b in dst]
            rows = [(p, path, links, relays) for p, (a, b) in enumerate(pairs)
                    for path, links, relays in self._routes(a, b)]
            width = max((len(links) for *_, links, _ in rows), default=1)
            pad = len(self.link_id)
            ids = np.full((len(rows), width), pad, np.int64)
            inverse = np.zeros((len(rows), width), np.int64)
            top = 1
            for r, (_, _, links, _) in enumerate(rows):
                for j, (e, w) in enumerate(links):
                    ids[r, j] = self.link_id[e]
                    inverse[r, j] = w
                    top = max(top, w)
            level = self.levels[k] = _Level(
                pairs, [path for _, path, _, _ in rows],
                np.array([p for p, *_ in rows], np.int64), ids, inverse,
                np.array([relays for *_, relays in rows], np.bool_),
                np.array([self.router.order[b] for _, b in pairs], np.int64),
                np.array([self.router.order[a] for a, _ in pairs], np.int64),
                EXACT_BELOW // (top * width) - 1)
        return level

    def _scores(self, k: int, index: int, skip: set[tuple[str, str]]
                ) -> list[tuple[str, str, Path]] | None:
        """The hops from server k to the next but those in ``skip``, each by its best
        route (:meth:`hop`), ordered by (max, sum, rotation) as :meth:`_gateways` orders
        them; None where the loads are too high for int64 (the caller scores in Python)."""
        level = self._level(k)
        if max(self.counts) >= level.limit:
            return None
        ratios = (np.array(self.counts, np.int64)[level.ids] + 1) * level.inverse
        high = ratios.max(axis=1)
        total = ratios.sum(axis=1)
        rows = np.flatnonzero(~level.relays) if self.direct else np.arange(len(high))
        pair = level.pair[rows]
        rows = rows[np.lexsort((rows, total[rows], high[rows], pair))]
        pair = level.pair[rows]
        firsts = np.ones(len(rows), np.bool_)       # each pair's best route: its first
        firsts[1:] = pair[1:] != pair[:-1]
        best, pair = rows[firsts], pair[firsts]
        rot_a = (level.order_a[pair] - index) % len(self.router.order)
        ranked = np.lexsort((level.rot_b[pair], rot_a, total[best], high[best]))
        return [(*level.pairs[p], level.paths[r])
                for p, r in zip(pair[ranked].tolist(), best[ranked].tolist(), strict=True)
                if level.pairs[p] not in skip]

    def hop(self, u: str, v: str) -> tuple[int, int, Path] | None:
        """(max, sum) congestion of the best route u -> v with one more hop on it (with
        ``direct``, among routes through no other compute node only)."""
        routes = self._routes(u, v)
        best = None
        get = self.loads.get
        direct = self.direct
        for path, links, relays in routes:
            if direct and relays:
                continue
            ratios = [(get(e, 0) + 1) * inverse for e, inverse in links]
            high = max(ratios)
            total = sum(ratios)
            if best is None or high < best[0] or high == best[0] and total < best[1]:
                best = (high, total, path)
        return best

    def find(self, loads: dict[Edge, int], index: int) -> tuple[int, Ring] | None:
        """The ring minimising the resulting most congested link (ties rotate by index),
        among rings whose hops relay through no other GPU where there is one within the
        budget, else among all: a relaying GPU stores and forwards each message and every
        ring step waits for the one before it, so a ring of direct hops runs at its bound
        and a relayed one far below it (a 4x4 torus has two Hamiltonian cycles of direct
        links in each direction)."""
        self.direct = True
        found = self._find(loads, index)
        self.direct = False
        return found if found is not None else self._find(loads, index)

    def _find(self, loads: dict[Edge, int], index: int) -> tuple[int, Ring] | None:
        floor = _max_congestion(loads, self.inverse)
        self._set_loads(loads)
        if len(self.servers) == 1:
            server = self.servers[0]
            start = server[index % len(server)]
            found = self._path(server, start, start, floor, None)
            if found is None:
                return None
            value, edges, paths = found
            return value, ([start] + [v for _, v in edges[:-1]], dict(zip(edges, paths,
                                                                          strict=True)))
        best: tuple[int, Ring] | None = None
        for gates in self._gateways(index):
            for _, _, path in gates:
                self._load(path, +1)
            value = max([floor] + [self._worst(path) for _, _, path in gates])
            placed: list[Path] = []
            hops = {(a, b): path for a, b, path in gates}
            order: list[str] = []
            for k, server in enumerate(self.servers):
                if best is not None and value >= best[0]:
                    break
                entry = gates[k - 1][1]
                exit_ = gates[k][0]
                found = self._path(server, entry, exit_, value,
                                   None if best is None else best[0])
                if found is None:
                    break
                value = max(value, found[0])
                placed += found[2]
                hops.update(zip(found[1], found[2], strict=True))
                order += [entry] + [v for _, v in found[1]]
            else:
                best = (value, (order, hops))
            for path in placed + [path for _, _, path in gates]:
                self._load(path, -1)
            if best is not None and best[0] <= floor:
                break
        return best

    def _worst(self, path: Path) -> int:
        return max(self.loads[e] * self.inverse[e] for e in path_links(path))

    def _gateways(self, index: int) -> list[list[tuple[str, str, Path]]]:
        """Up to GATEWAY_TRIES gateway lists [(exit of server k, entry of k+1, route)],
        cheapest first. A server of several nodes must be entered and left at
        different nodes."""
        m = len(self.servers)
        n = len(self.router.order)
        found: list[list[tuple[str, str, Path]]] = []
        chosen: list[tuple[str, str, Path]] = []

        def dfs(k: int) -> None:
            src, dst = self.servers[k], self.servers[(k + 1) % m]
            skip = {(a, b) for a in src for b in dst
                    if k > 0 and len(src) > 1 and a == chosen[k - 1][1]
                    or k == m - 1 and len(dst) > 1 and b == chosen[0][0]}
            options = self._scores(k, index, skip)
            if options is None:
                scored = []
                for a, b in itertools.product(src, dst):
                    h = None if (a, b) in skip else self.hop(a, b)
                    if h is not None:
                        rot = ((self.router.order[a] - index) % n, self.router.order[b])
                        scored.append((h[0], h[1], rot, a, b, h[2]))
                scored.sort(key=lambda o: o[:3])
                options = [(a, b, path) for *_, a, b, path in scored]
            for a, b, path in options:
                if len(found) >= self.GATEWAY_TRIES:
                    return
                chosen.append((a, b, path))
                self._load(path, +1)
                if k == m - 1:
                    found.append(list(chosen))
                else:
                    dfs(k + 1)
                self._load(path, -1)
                chosen.pop()

        dfs(0)
        return found

    def _path(self, nodes: list[str], entry: str, exit_: str, floor: int,
              bound: int | None) -> tuple[int, list[Edge], list[Path]] | None:
        """A Hamiltonian path entry -> exit over ``nodes`` (a cycle back to entry when
        entry == exit) minimising max(floor, worst hop), below ``bound`` if given.

        On success the path's hops stay loaded in ``self.loads``.
        """
        total = len(nodes)
        if total == 1:
            return floor, [], []
        cycle = entry == exit_
        left = self.budget
        best: tuple[int, list[Edge], list[Path]] | None = None
        edges: list[Edge] = []
        paths: list[Path] = []
        visited = {entry}

        def dfs(u: str, worst: int) -> None:
            nonlocal left, best
            if len(visited) == total:
                candidates = [exit_] if cycle else []
            else:
                candidates = [v for v in nodes if v not in visited
                              and (v != exit_ or len(visited) == total - 1)]
            options = []
            for v in candidates:
                left -= 1
                h = self.hop(u, v)
                if h is not None:
                    onward = sum(1 for w in self.near[v] if w not in visited)
                    options.append((max(worst, h[0]), h[1], onward, self.router.order[v],
                                    v, h[2]))
            options.sort(key=lambda o: o[:4])
            for tried, (value, _, _, _, v, path) in enumerate(options):
                limit = best[0] if best is not None else bound
                if limit is not None and value >= limit:
                    return
                # Out of budget: stop, or with nothing found yet, finish greedily.
                if left <= 0 and (best is not None or bound is not None or tried > 0):
                    return
                self._load(path, +1)
                edges.append((u, v))
                paths.append(path)
                if v == exit_ and (cycle or len(visited) == total - 1):
                    best = (value, list(edges), list(paths))
                else:
                    visited.add(v)
                    dfs(v, value)
                    visited.discard(v)
                edges.pop()
                paths.pop()
                self._load(path, -1)
                if best is not None and best[0] <= floor:
                    return

        dfs(entry, floor)
        if best is None:
            return None
        for path in best[2]:
            self._load(path, +1)
        return best


def _max_congestion(loads: dict[Edge, int], inverse: dict[Edge, int]) -> int:
    return max((c * inverse[e] for e, c in loads.items()), default=0)


def _add(loads: dict[Edge, int], ring: Ring, sign: int) -> None:
    for path in ring[1].values():
        for e in path_links(path):
            loads[e] = loads.get(e, 0) + sign


def find_rings(topology: Topology, max_rings: int = DEFAULT_MAX_RINGS,
               budget: int = DEFAULT_BUDGET, progress: Callable[[float], None] | None = None
               ) -> list[Ring]:
    """The best ring set found (see the module docstring); empty if no ring exists.

    ``progress(fraction)`` is called after each ring placed; it may raise to stop.
    """
    router = Router(topology)
    servers = compute_nodes_by_server(topology)
    search = _RingSearch(router, servers, budget)
    loads: dict[Edge, int] = {}
    rings: list[Ring] = []
    best: tuple[Fraction, int] | None = None   # (max C_e/b_e per ring, ring count)
    for index in range(max_rings):
        if progress is not None:
            progress(index / max_rings / 2)
        found = search.find(loads, index)
        if found is None:
            break
        rings.append(found[1])
        _add(loads, found[1], +1)
        per_ring = Fraction(_max_congestion(loads, search.inverse), len(rings))
        if best is None or per_ring < best[0]:
            best = (per_ring, len(rings))
        elif len(rings) - best[1] >= STALE_RINGS:
            break
    if best is None:
        return []
    rings = rings[:best[1]]
    return _improve(search, rings, progress)


def _improve(search: _RingSearch, rings: list[Ring],
             progress: Callable[[float], None] | None = None) -> list[Ring]:
    """One rip-up-and-reroute pass: rebuild each ring against the others' loads."""
    loads: dict[Edge, int] = {}
    for ring in rings:
        _add(loads, ring, +1)
    for i, ring in enumerate(rings):
        if progress is not None:
            progress((1 + i / len(rings)) / 2)
        before = _max_congestion(loads, search.inverse)
        _add(loads, ring, -1)
        found = search.find(loads, i)
        if found is not None:
            _add(loads, found[1], +1)
            if _max_congestion(loads, search.inverse) < before:
                rings[i] = found[1]
                continue
            _add(loads, found[1], -1)
        _add(loads, ring, +1)
    return rings


def ring_baseline(topology: Topology, collective: str = "allgather",
                  max_rings: int = DEFAULT_MAX_RINGS, budget: int = DEFAULT_BUDGET,
                  progress: Callable[[float], None] | None = None) -> BaselineResult:
    """NCCL-style rings for ``collective`` and their bandwidth-only algbw
    (``progress`` as in :func:`find_rings`)."""
    compute = topology.compute_nodes()
    rings = find_rings(topology, max_rings, budget, progress)
    if not rings:
        return BaselineResult.not_applicable(
            "ring", collective, "no ring visits every compute node: some hop between "
            "consecutive GPUs has no route.")
    plan = ring_plan(collective, compute, rings)
    algbw, link = plan_bound(topology, plan)   # remembered: its row asks again
    relayed = [list(route) for route in relayed_hops(rings, set(compute))]
    return BaselineResult(
        "ring", collective, algbw, schedule=[order for order, _ in rings],
        details={"rings": len(rings), "bottleneck_link": list(link),
                 "hops": sum(len(hops) for _, hops in rings), "relayed_hops": relayed},
        plan_at=lambda size: plan)
