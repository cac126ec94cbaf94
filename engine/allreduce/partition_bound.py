"""An exact upper bound on ForestColl's allreduce LP from a partition of the network.

ForestColl (Zhao et al., "ForestColl: Throughput-Optimal Collective Communications on
Heterogeneous Network Fabrics", arXiv:2402.06787), App. E: LP (6) splits every link into
a reduce budget c^RE and a broadcast budget c^BC (c^RE + c^BC <= b) and asks, per phase,
a flow of Σ x_v to every compute node; Σ x_v is the allreduce's algbw. By maxflow-mincut
the broadcast condition is c^BC(δ-(A)) >= x(V_c - A) for every node set A holding a
compute node (everything outside A must reach A), and the reduce condition, run against
the arrows, is c^RE(δ+(A)) >= x(V_c - A). Canopy's LP also balances each phase's budget
at every switch (:mod:`canopy.engine.allreduce.lp`).

Take disjoint node sets A_1 .. A_m (m >= 2) that together hold every compute node. Adding
both conditions over all parts,

    Σ_i c^BC(δ-(A_i)) + Σ_i c^RE(δ+(A_i)) >= 2 (m - 1) Σ_v x_v.

A budget balanced at every switch has c(δ+(A)) - c(δ-(A)) = Σ_{v ∈ A ∩ V_c} net_v (net_v
the budget leaving compute node v minus the budget entering it), and Σ over all compute
nodes of net_v is 0 (each link leaves one node and enters one, switches net 0). The parts
hold every compute node, so Σ_i c^RE(δ+(A_i)) = Σ_i c^RE(δ-(A_i)) and, as a link enters at
most one part, the left side is at most Σ_i b(δ-(A_i)). In the same way (moving c^BC to
the out-links) it is at most Σ_i b(δ+(A_i)). Hence

    Σ_v x_v <= min(Σ_i b(δ-(A_i)), Σ_i b(δ+(A_i))) / (2 (m - 1)).

Reduce-scatter + allgather (§4.6) is feasible in the LP, so the bound is never below it.
When m identical parts are each the complement of an allgather bottleneck cut S* (x* =
b(δ-(A))/(N - |A ∩ V_c|) with |A ∩ V_c| = N/m), the bound is N x*/2, reduce-scatter +
allgather's algbw, exactly: no allreduce of the LP's form is faster, which certifies the
optimum without solving the LP. The candidates tried are every compute node alone (the
classic 2(N-1)/N bound of allreduce on a GPU's own links), every server (node group)
with its switches, and the tight sets of the allgather optimum: for each compute node v
the smallest set A ∋ v with b(δ-(A)) = x*(N - |A ∩ V_c|) (the sink side of a minimum cut
of value N·x* in Thm 1's network, §4.2), when these are disjoint and cover V_c. Any
partition whose every part is tight gives exactly N x*/2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from canopy.engine.network.indexed import Network
from canopy.engine.network.maxflow import FlowNetwork


@dataclass(frozen=True)
class PartitionBound:
    """The bound of one partition: its value (GB/s) and what the parts are."""

    value: Fraction
    parts: int
    kind: str            # "compute nodes", "servers" or "tight sets"

    def describe(self) -> str:
        return (f"a partition into {self.parts} {self.kind} bounds App. E's LP by "
                f"{float(self.value):.4f} GB/s")


def partition_value(net: Network, parts: list[frozenset[int]]) -> Fraction:
    """min(Σ b(δ-(A_i)), Σ b(δ+(A_i))) / (2 (m - 1)) for disjoint ``parts`` (see the
    module doc); ValueError when they are not a valid partition of the compute nodes."""
    owner: dict[int, int] = {}
    for i, part in enumerate(parts):
        if not any(net.is_compute(v) for v in part):
            raise ValueError("every part must hold a compute node")
        for v in part:
            if v in owner:
                raise ValueError("parts must be disjoint")
            owner[v] = i
    if len(parts) < 2 or any(v not in owner for v in net.compute):
        raise ValueError("at least two parts must hold every compute node")
    into = out = Fraction(0)
    for (a, b), c in net.capacity.items():
        pa, pb = owner.get(a), owner.get(b)
        if pa == pb:
            continue
        if pb is not None:
            into += c
        if pa is not None:
            out += c
    return min(into, out) / (2 * (len(parts) - 1))


def candidate_partitions(net: Network) -> list[tuple[str, list[frozenset[int]]]]:
    """(kind, parts): every compute node alone; every server (node group) with its
    switches, compute nodes outside servers alone."""
    found = []
    if len(net.compute) >= 2:
        found.append(("compute nodes", [frozenset([v]) for v in net.compute]))
    members: dict[str, set[int]] = {}
    for v, group in enumerate(net.groups):
        if group is not None:
            members.setdefault(group, set()).add(v)
    parts = [frozenset(m) for m in members.values() if any(net.is_compute(v) for v in m)]
    parts += [frozenset([v]) for v in net.compute if net.groups[v] is None]
    if len(members) >= 2 and len(parts) >= 2:
        found.append(("servers", parts))
    return found


def tight_partition(net: Network, x: Fraction) -> list[frozenset[int]] | None:
    """The smallest tight set of every compute node at the allgather optimum ``x`` (see
    the module doc), or None when some compute node has none or two of them overlap.

    The smallest sink side of a minimum s-v cut is the source side of a minimum v-s cut
    in the reversed network (links reversed, an arc v -> s of capacity x per compute
    node), which the maxflow returns."""
    scale = math.lcm(x.denominator, *(c.denominator for c in net.capacity.values()))
    flow = FlowNetwork(net.n + 1)
    for (a, b), c in net.capacity.items():
        flow.add_arc(b, a, int(c * scale))
    for v in net.compute:
        flow.add_arc(v, net.source, int(x * scale))
    need = len(net.compute) * x * scale
    parts: list[frozenset[int]] = []
    covered: set[int] = set()
    for v in net.compute:
        if v in covered:
            continue
        value, side = flow.min_cut(v, net.source)
        part = frozenset(side)
        if value != need or part & covered:
            return None
        covered |= part
        parts.append(part)
    return parts if len(parts) >= 2 else None


def best_partition_bound(net: Network, rs_ag: Fraction | None = None
                         ) -> PartitionBound | None:
    """The lowest bound over :func:`candidate_partitions` (None with one compute node);
    given reduce-scatter + allgather's algbw ``rs_ag`` (N x*/2), also the partition into
    tight sets (:func:`tight_partition`) when the others do not reach it."""
    best = None
    for kind, parts in candidate_partitions(net):
        value = partition_value(net, parts)
        if best is None or value < best.value:
            best = PartitionBound(value, len(parts), kind)
    if rs_ag is not None and best is not None and best.value != rs_ag:
        tight = tight_partition(net, 2 * rs_ag / len(net.compute))
        if tight is not None:
            value = partition_value(net, tight)
            if value < best.value:
                best = PartitionBound(value, len(tight), "tight sets")
    return best
