"""Switch removal by edge splitting (ForestColl (arXiv:2402.06787) §4.3, App. C.2, Alg. 4, Thms
6-8).

Input: integer capacities in trees (b_e / y) on an Eulerian digraph and k. Each switch w
is removed by replacing capacity of pairs (u, w), (w, t) with a direct logical edge
(u, t), never letting any compute node's connectivity from the source s of G⃗_k drop
below N·k (Thm 5), so k trees per compute node still exist afterwards.

γ, the largest safe amount for one pair (Thm 8), is found without the paper's 2N
auxiliary flows per pair:

* Splitting g units lowers exactly the s-v cuts A with u, t ∈ A ∌ w ("type 1") or
  w ∈ A ∌ u, t ("type 2"), each by exactly g; every other cut keeps its value.
* So we split g₀ = min(c(u,w), c(w,t)) tentatively and run two flows: from {s, u, t}
  to w and from {s, w} to {u, t}. They bound every type-1 and type-2 cut from below;
  if both stay ≥ N·k, γ = g₀.
* Otherwise one flow F(s, v) per compute node v gives γ exactly: a failing v has
  F(s, v) = (its smallest affected cut) - g₀, so γ = min(g₀, min_v F(s, v) + g₀ - N·k).
* A switch with at most two neighbours (a NIC between a GPU and a fabric switch) is split
  in closed form: after splitting, every cut equals the smaller of the two cuts with w
  on either side before, so no cut falls below N·k.

Every unit of a logical edge keeps the physical path it stands for ("routing", which may
be recursive in the paper); we keep the expanded paths directly, with counts.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.progress import Progress
from canopy.engine.network.capacity_graph import ArcTable
from canopy.engine.network.indexed import Network
from canopy.engine.network.maxflow import FlowNetwork

Path = tuple[int, ...]
CHORD_SERVERS = 8   # uniform stars joining more servers are split as chords, not as a ring


@dataclass
class RoutePool:
    """Physical paths standing for the units of one logical edge, with counts."""

    segments: deque[list]  # [path, count]

    @classmethod
    def single(cls, path: Path, count: int) -> RoutePool:
        return cls(deque([[path, count]]))

    def take(self, amount: int) -> list[tuple[Path, int]]:
        """Remove ``amount`` units from the front: a list of (path, count)."""
        out = []
        while amount:
            seg = self.segments[0]
            used = min(amount, seg[1])
            out.append((seg[0], used))
            seg[1] -= used
            amount -= used
            if seg[1] == 0:
                self.segments.popleft()
        return out

    def give(self, pieces: list[tuple[Path, int]]) -> None:
        for path, count in pieces:
            if self.segments and self.segments[-1][0] == path:
                self.segments[-1][1] += count
            else:
                self.segments.append([path, count])


@dataclass
class LogicalTopology:
    """D* = (V_c, E*): compute-only capacities in trees, with each unit's physical path."""

    capacity: dict[tuple[int, int], int]
    routes: dict[tuple[int, int], RoutePool]
    splits: int        # pair splits performed
    gamma_flows: int   # maxflows spent on γ
    chords: bool = False   # some switch was split as chords (_Splitter._remove_chords)
    certified: bool = True  # Thm 5 checked (remove_switches(unproven=True) may skip it)


def _pair_up(left: list[tuple[Path, int]], right: list[tuple[Path, int]]
             ) -> list[tuple[Path, int]]:
    """Concatenate unit paths u..w and w..t pairwise into paths u..w..t."""
    out: list[tuple[Path, int]] = []
    li = ri = 0
    lrem, rrem = left[0][1], right[0][1]
    while li < len(left):
        used = min(lrem, rrem)
        path = _without_cycles(left[li][0] + right[ri][0][1:])
        if out and out[-1][0] == path:
            out[-1] = (path, out[-1][1] + used)
        else:
            out.append((path, used))
        lrem -= used
        rrem -= used
        if lrem == 0:
            li += 1
            lrem = left[li][1] if li < len(left) else 0
        if rrem == 0:
            ri += 1
            rrem = right[ri][1] if ri < len(right) else 0
    return out


def _without_cycles(path: Path) -> Path:
    """``path`` with every detour that comes back to a node it left cut out (a unit that
    went leaf, spine, leaf, spine, leaf goes leaf, spine, leaf): joining u..w to w..t can
    pass a switch twice, and the detour only loads links (every link's load stays within
    what the splitting allowed, so the trees stay within capacity)."""
    if len(set(path)) == len(path):
        return path
    out: list[int] = []
    at: dict[int, int] = {}
    for node in path:
        if node in at:
            for gone in out[at[node] + 1:]:
                del at[gone]
            del out[at[node] + 1:]
        else:
            at[node] = len(out)
            out.append(node)
    return tuple(out)


class _Splitter:
    """Alg. 4's state. ``trusting`` takes γ = g₀ for every pair without a flow; the
    result must then be certified by :meth:`certify`."""

    def __init__(self, net: Network, caps: dict[tuple[int, int], int], k: int,
                 trusting: bool = False, chords: bool = False) -> None:
        self.net = net
        self.trusting = trusting
        self.chords = chords
        self.k = k
        self.need = len(net.compute) * k
        self.s = net.source
        self.arcs = ArcTable(net.n + 2)          # + s, + a spare sink node z
        self.z = net.n + 1
        self.routes: dict[tuple[int, int], RoutePool] = {}
        for (a, b), c in caps.items():
            if c:
                self.arcs.add(a, b, c)
                self.routes[(a, b)] = RoutePool.single((a, b), c)
        for c in net.compute:
            self.arcs.add(self.s, c, k)
        self.inf = self.arcs.total() + 1
        self.splits = 0
        self.flows = 0
        self.chord_splits = 0

    # -- the split itself
    def split(self, u: int, w: int, t: int, amount: int) -> None:
        self.arcs.add(u, w, -amount)
        self.arcs.add(w, t, -amount)
        left = self.routes[(u, w)].take(amount)
        right = self.routes[(w, t)].take(amount)
        self.splits += 1
        if u == t:
            return  # a self-loop carries nothing: the capacity is dropped (safe by γ)
        self.arcs.add(u, t, amount)
        self.routes.setdefault((u, t), RoutePool(deque())).give(_pair_up(left, right))

    def _shift(self, u: int, w: int, t: int, amount: int) -> None:
        """Move ``amount`` capacity from (u, t) back onto (u, w), (w, t); negative splits."""
        self.arcs.add(u, w, amount)
        self.arcs.add(w, t, amount)
        if u != t:
            self.arcs.add(u, t, -amount)

    # -- γ of Thm 8
    def gamma(self, u: int, w: int, t: int) -> int:
        g0 = min(self.arcs.get(u, w), self.arcs.get(w, t))
        if self.trusting:
            return g0
        self._shift(u, w, t, -g0)  # tentative split of g0 (capacities only)
        try:
            s, inf = self.s, self.inf
            type1 = self.arcs.network([(s, u, inf), (s, t, inf)]).max_flow(s, w)
            type2 = self.arcs.network([(s, w, inf), (u, self.z, inf), (t, self.z, inf)]
                                      ).max_flow(s, self.z)
            self.flows += 2
            if min(type1, type2) >= self.need:
                return g0
            flow = self.arcs.network()
            gamma = g0
            for v in self.net.compute:
                value = flow.max_flow(s, v)
                self.flows += 1
                gamma = min(gamma, value + g0 - self.need)
            return max(gamma, 0)
        finally:
            self._shift(u, w, t, g0)

    def certify(self) -> bool:
        """Thm 5 on the current capacities: F(s, v) >= N·k for every compute node v."""
        flow = FlowNetwork(self.net.n + 1)
        for (a, b), c in self.arcs.items():
            flow.add_arc(a, b, c)
        for v in self.net.compute:
            self.flows += 1
            if flow.max_flow(self.s, v) < self.need:
                return False
        return True

    # -- removing one switch
    def remove(self, w: int) -> None:
        neighbours = self.arcs.out[w] | self.arcs.inn[w]
        ins = sum(self.arcs.get(u, w) for u in self.arcs.inn[w])
        outs = sum(self.arcs.get(w, t) for t in self.arcs.out[w])
        if len(neighbours) <= 2 and ins == outs:
            self._remove_small(w, sorted(neighbours))
        elif not (self.chords and self._remove_chords(w, sorted(neighbours))):
            self._remove_general(w)
        self._drop_dangling(w)
        if self.arcs.out[w] or self.arcs.inn[w]:
            raise ScheduleError(
                f"edge splitting could not isolate switch '{self.net.names[w]}': it keeps "
                f"{sum(self.arcs.get(u, w) for u in self.arcs.inn[w])} trees in and "
                f"{sum(self.arcs.get(w, t) for t in self.arcs.out[w])} out that no split "
                "can pair without losing connectivity.")

    def _drop_dangling(self, w: int) -> None:
        """Once w has no out-arcs its in-arcs lead nowhere, and once it has no in-arcs
        nothing reaches its out-arcs: either way no s-v flow uses them, so they go."""
        if self.arcs.out[w] and self.arcs.inn[w]:
            return
        for a, b in [*((u, w) for u in self.arcs.inn[w]), *((w, t) for t in self.arcs.out[w])]:
            amount = self.arcs.get(a, b)
            self.arcs.add(a, b, -amount)
            self.routes[(a, b)].take(amount)

    def _remove_small(self, w: int, nbrs: list[int]) -> None:
        """At most two neighbours: split straight through, the rest as self-loops."""
        for a in nbrs:
            for b in nbrs:
                if a != b:
                    amount = min(self.arcs.get(a, w), self.arcs.get(w, b))
                    if amount:
                        self.split(a, w, b, amount)
        for a in nbrs:
            amount = min(self.arcs.get(a, w), self.arcs.get(w, a))
            if amount:
                self.split(a, w, a, amount)

    def _remove_chords(self, w: int, nbrs: list[int]) -> bool:
        """A uniform star (every neighbour c in and c out) joining more than CHORD_SERVERS
        groups, m ports each (a rail switch: m = 1 GPU per server), split as a
        circulant: in index order, neighbour i sends its c units spread over i + m,
        i + 2m, i + 4m, ..., so every logical edge joins two servers, and any server
        reaches any other in at most log2(d / m) of them, where a ring needs d / m - 1: trees
        stay low (their height is latency). Every row and column sums to c, so w is
        isolated; whether connectivity holds is for the certificate (:func:`_bulk`).
        False when w is not such a star."""
        d = len(nbrs)
        c = self.arcs.get(nbrs[0], w)
        if d <= CHORD_SERVERS or any(self.arcs.get(u, w) != c or self.arcs.get(w, u) != c
                                     for u in nbrs):
            return False
        groups = [self.net.groups[u] for u in nbrs]
        m = 1
        while m < d and groups[m] is not None and groups[m] == groups[0]:
            m += 1
        blocks = [groups[i:i + m] for i in range(0, d, m)]
        named = [b[0] for b in blocks if b[0] is not None]
        if d % m or len(set(named)) < len(named) or any(len(set(b)) > 1 for b in blocks) \
                or d // m <= CHORD_SERVERS:
            return False    # unequal or scattered groups, or few servers: a ring is low
        offsets = [m << j for j in range((d // m - 1).bit_length())][:c]
        if not offsets:
            return False
        share, extra = divmod(c, len(offsets))
        for j, offset in enumerate(offsets):
            amount = share + (j < extra)
            for i, u in enumerate(nbrs):
                self.split(u, w, nbrs[(i + offset) % d], amount)
        self.chord_splits += 1
        return True

    def _remove_general(self, w: int) -> None:
        n = self.net.n
        group = self.net.groups
        for t in sorted(self.arcs.out[w]):
            # Prefer partners in another group (traffic that must cross this switch),
            # then a cyclic order so that star switches unwind into rings.
            def preference(u: int, t: int = t) -> tuple[bool, bool, int]:
                return u == t, group[u] is not None and group[u] == group[t], (u - t) % n

            order = sorted(self.arcs.inn[w], key=preference)
            for u in order:
                if not self.arcs.get(w, t):
                    break
                if not self.arcs.get(u, w):
                    continue
                amount = self.gamma(u, w, t)
                if amount:
                    self.split(u, w, t, amount)


def remove_switches(net: Network, caps: dict[tuple[int, int], int], k: int,
                    progress: Progress | None = None, bulk: bool = True,
                    chords: bool = False, unproven: bool = False) -> LogicalTopology:
    """Alg. 4: remove every switch node; return D* with physical routes per unit.

    ``caps`` are capacities in trees. Thm 7 guarantees that a balanced switch can be
    isolated. Floored capacities for a fixed k (Thm 13) may leave a switch unbalanced on
    one-way networks; γ is exact on any digraph, so splitting never loses connectivity
    there either, and once one side of the switch is used up the other side carries no
    flow and is dropped. If a switch keeps arcs on both sides, ScheduleError says so and
    the caller tries a larger U (:func:`canopy.engine.forestcoll.solve.build_fixed_k`).
    With ``bulk`` every switch is first split in one certified pass (:func:`_bulk`),
    with ``chords`` large uniform stars as chords first, then as rings, and pair by pair
    only when both fail; ``LogicalTopology.chords`` says whether chords were used.
    With ``unproven`` a bulk split that isolates every switch is returned without its
    certificate (``LogicalTopology.certified`` False): a packing found in it proves all
    it needs (k trees per node exist), and without one the caller must split again
    without ``unproven`` before Alg. 5, whose progress Thm 5 guarantees.
    """
    switches = [i for i in range(net.n) if not net.is_compute(i)]
    # Small switches first: their closed form needs no flows and shrinks the rest.
    neighbours: dict[int, set[int]] = {w: set() for w in switches}
    for a, b in caps:
        for w, other in ((a, b), (b, a)):
            if w in neighbours:
                neighbours[w].add(other)
    switches.sort(key=lambda w: (len(neighbours[w]), w))
    certified = not unproven
    splitter, chords = _bulk(net, caps, k, switches, chords, certified) if bulk \
        else (None, False)
    if splitter is None and chords:
        splitter, chords = _bulk(net, caps, k, switches, False, certified)
    if splitter is None:
        certified = True
        splitter = _Splitter(net, caps, k)
        for done, w in enumerate(switches):
            if progress:
                progress("switch removal", done / max(len(switches), 1))
            splitter.remove(w)
    capacity = {(a, b): c for (a, b), c in splitter.arcs.items()
                if a != splitter.s and net.is_compute(a) and net.is_compute(b)}
    routes = {e: splitter.routes[e] for e in capacity}
    return LogicalTopology(capacity, routes, splitter.splits, splitter.flows, chords,
                           certified)


def _bulk(net: Network, caps: dict[tuple[int, int], int], k: int,
          switches: list[int], chords: bool,
          certify: bool = True) -> tuple[_Splitter | None, bool]:
    """Every switch split in one pass with γ = g₀ (the pairs Alg. 4 would try, each
    split as far as it goes; with ``chords``, large uniform stars as circulants,
    :meth:`_Splitter._remove_chords`), certified at the end by one flow per compute node.

    Thm 5 asks only that F(s, v) >= N·k hold for the final D*, not how it was reached, so
    a certified bulk split is as good as a pair-by-pair one. Returns the splitter, or
    None when it fails (a switch left with unpaired capacity, or a compute node below
    N·k: the caller then splits without chords, or pair by pair with γ of Thm 8), and
    whether some switch was split as chords. Without ``certify`` no flow is run.
    """
    splitter = _Splitter(net, caps, k, trusting=True, chords=chords)
    try:
        for w in switches:
            splitter.remove(w)
    except ScheduleError:
        return None, splitter.chord_splits > 0
    proven = not certify or splitter.certify()
    return splitter if proven else None, splitter.chord_splits > 0
