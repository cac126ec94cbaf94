"""The allgather optimum: bottleneck cut S*, x*, k and tree bandwidth y; and fixed-k U*.

ForestColl (arXiv:2402.06787) §3.1 eq. (1): the best allgather time is (M/N)·max |S∩V_c| / B+(S)
over
cuts S ⊉ V_c. §4.2 / App. C.1 Thm 1 tests a candidate x with one maxflow per compute
node on the auxiliary network G⃗_x. Instead of the paper's bisection (Alg. 1) we iterate
on the ratio of the violated cut (Dinkelbach/Newton): when x fails, the minimum cut is a
cut whose ratio beats 1/x; we move 1/x to that ratio and test again. Every iterate is the
ratio of a real cut, so the loop ends exactly on 1/x* with the cut S* that attains it,
usually in two or three rounds. F(s, v) is the same for all v of one orbit of the
network's automorphisms, so identical servers need flows to one server's compute nodes
only (:attr:`canopy.engine.network.indexed.Network.sink_representatives`).

k and y follow Prop. 3. Fixed k follows §4.5 / App. C.4 (Thms 13-15), again by jumping
to the smallest U that satisfies the violated cut rather than by bisection.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from fractions import Fraction

from canopy.engine.model.collectives import collective_algbw
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.topology import Topology
from canopy.engine.network.indexed import Network, source_network, weakest_sink


def rational_gcd(values: list[Fraction]) -> Fraction:
    """Largest g such that every value / g is an integer."""
    num = 0
    den = 1
    for v in values:
        num = math.gcd(num, v.numerator)
        den = den * v.denominator // math.gcd(den, v.denominator)
    return Fraction(num, den)


@dataclass(frozen=True)
class Optimum:
    """The exact optimum of a topology (ForestColl (arXiv:2402.06787) §4.2, Prop. 3)."""

    network: Network
    inverse_x: Fraction          # 1/x* = |S*∩V_c| / B+(S*), in 1/(GB/s)
    bottleneck_cut: tuple[int, ...]
    rounds: int                  # Dinkelbach rounds (each: one maxflow per orbit of GPUs)

    @property
    def x(self) -> Fraction:
        return 1 / self.inverse_x

    @property
    def cut_bandwidth(self) -> Fraction:
        return self.network.egress_of(set(self.bottleneck_cut))

    @property
    def tree_bandwidth(self) -> Fraction:
        """y = gcd(x*, {b_e}): the largest bandwidth with x*/y and every b_e/y integral."""
        return rational_gcd([self.x, *self.network.capacity.values()])

    @property
    def k(self) -> int:
        k = self.x / self.tree_bandwidth
        assert k.denominator == 1
        return int(k)

    def algbw(self, collective: str = "allgather") -> Fraction:
        return collective_algbw(collective, len(self.network.compute), self.x)

    def cut_names(self) -> list[str]:
        return [self.network.names[i] for i in self.bottleneck_cut]


def find_optimum(net: Network) -> Optimum:
    """Exact 1/x* and a bottleneck cut S* (Thm 1 test, Dinkelbach iteration)."""
    n = len(net.compute)
    scale = math.lcm(*(c.denominator for c in net.capacity.values()))
    bw = {e: int(c * scale) for e, c in net.capacity.items()}
    # Start from the cut V - {v} of the compute node with least ingress (App. C.1 bound).
    into = net.ingresses()
    v_min = min(net.compute, key=into.__getitem__)
    cut = tuple(i for i in range(net.n) if i != v_min)
    ratio = Fraction(n - 1, int(into[v_min] * scale))
    rounds = 0
    while True:
        rounds += 1
        p, q = ratio.numerator, ratio.denominator
        # x = q/p: links carry p·b_e, source arcs q; x feasible iff every F(s,v) >= N·q.
        flow = source_network(net, {e: p * b for e, b in bw.items()}, q)
        value, _, side = weakest_sink(flow, net)
        if value >= n * q:
            return Optimum(net, ratio * scale, cut, rounds)
        s_cut = [i for i in side if i != net.source]
        s_set = set(s_cut)
        out = sum(b for (a, t), b in bw.items() if a in s_set and t not in s_set)
        new_ratio = Fraction(sum(1 for c in net.compute if c in s_set), out)
        assert new_ratio > ratio
        ratio, cut = new_ratio, tuple(sorted(s_cut))



def optimum(topology: Topology, where: str = "") -> Optimum:
    """The exact allgather optimum of a topology and its bottleneck cut.

    Parameters
    ----------
    topology : Topology
        The network; every compute node must reach every other one.
    where : str, optional
        Names the input (a file name) in error messages.

    Returns
    -------
    Optimum
        ``inverse_x`` is 1/x* = max |S ∩ V_c| / B+(S) over cuts (ForestColl (arXiv:2402.06787) §3,
        Thm 1),
        ``bottleneck_cut`` a maximising S*, ``k`` and ``tree_bandwidth`` Prop. 3's k and y;
        ``algbw(collective)`` is the optimal algbw in GB/s.

    Raises
    ------
    TopologyError
        When the topology cannot be solved (no compute node, unreachable nodes, an
        unbalanced switch), with one sentence naming the node at fault.

    Examples
    --------
    >>> from canopy.engine import load_sample
    >>> opt = optimum(load_sample("forestcoll-fig2.json"))
    >>> opt.algbw("allreduce") == opt.algbw("allgather") / 2
    True
    """
    return find_optimum(Network.from_topology(topology, where))

# ------------------------------------------------------------------ fixed k (§4.5)


@dataclass(frozen=True)
class FixedK:
    """Best schedule with exactly k trees per compute node (App. C.4, Thms 13-15).

    Each link e can carry floor(U*·b_e) trees; each tree then moves its 1/k shard at
    bandwidth y = 1/U*, and the algbw is N·k/U*.
    """

    network: Network
    k: int
    u_star: Fraction
    rounds: int

    @property
    def tree_bandwidth(self) -> Fraction:
        return 1 / self.u_star

    @property
    def x(self) -> Fraction:
        return self.k / self.u_star

    def algbw(self, collective: str = "allgather") -> Fraction:
        return collective_algbw(collective, len(self.network.compute), self.x)

    def tree_capacities(self) -> dict[tuple[int, int], int]:
        return floored(self.network, self.u_star)


def floored(net: Network, u: Fraction) -> dict[tuple[int, int], int]:
    """Trees each link can carry at U: floor(U·b_e) (Thm 13)."""
    return {e: math.floor(u * b) for e, b in net.capacity.items()}


def _smallest_u_for_cut(bws: list[Fraction], demand: int, start: Fraction) -> Fraction:
    """Smallest U >= start with sum floor(U·b) >= demand over the cut's links ``bws``."""
    total = sum(bws)
    u = max(start, Fraction(demand) / total)
    have = sum(math.floor(u * b) for b in bws)
    heap = [(Fraction(math.floor(u * b) + 1) / b, i) for i, b in enumerate(bws)]
    heapq.heapify(heap)
    while have < demand:
        u, i = heapq.heappop(heap)
        have += 1
        count = u * bws[i]
        heapq.heappush(heap, (Fraction(count + 1) / bws[i], i))
    return u


def find_fixed_k(net: Network, k: int, optimum: Optimum | None = None) -> FixedK:
    """Smallest U* such that capacities floor(U*·b_e) hold k out-trees per compute node."""
    if k < 1:
        raise ScheduleError(f"k must be a positive integer, not {k}.")
    n = len(net.compute)
    inverse_x = (optimum or find_optimum(net)).inverse_x
    u = k * inverse_x           # floor(U b) <= U b, so U/k >= 1/x* (Thm 15 lower side)
    rounds = 0
    while True:
        rounds += 1
        flow = source_network(net, floored(net, u), k)
        value, _, side = weakest_sink(flow, net, stop_below=n * k)
        if value >= n * k:
            return FixedK(net, k, u, rounds)
        s_set = set(side) - {net.source}
        demand = k * sum(1 for c in net.compute if c in s_set)
        bws = [b for (a, t), b in net.capacity.items() if a in s_set and t not in s_set]
        new_u = _smallest_u_for_cut(bws, demand, u)
        assert new_u > u
        u = new_u
