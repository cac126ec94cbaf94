"""The bottleneck cut S* in words, for people rather than for the verifier.

ForestColl's optimum is set by the cut S* minimising |S* ∩ V_c| / B+(S*)
(ForestColl (arXiv:2402.06787) §3.1 eq. (1)): the compute nodes inside S* must send
everything they hold
out over the links leaving S*. :func:`describe_cut` says how many GPUs S* holds, names the
smaller side (S* or everything outside it) by whole servers where it can, and says which
links carry the B+(S*) GB/s out, e.g. "S* holds 8 of 16 GPUs (the GPUs of server n0);
200 GB/s leave it over the 8 NIC uplinks of n0 (25 GB/s each)". Only GPUs are named as GPUs:
a server's CPUs, PCIe switches and NICs on either side are left out of the count.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from fractions import Fraction

from canopy.engine.model.topology import Topology, format_gbps
from canopy.engine.model.units import GBPS, from_gbps

NAMES_SHOWN = 4
"""Loose nodes named before "and N more"."""


def crossing_links(topology: Topology, cut: Iterable[str]) -> list[tuple[str, str, Fraction]]:
    """(inside end, outside end, bandwidth) of every link direction leaving ``cut``:
    the links of B+(S*)."""
    inside = set(cut)
    return [(u, v, link.bandwidth) for link in topology.links
            for u, v in link.directions() if u in inside and v not in inside]


def describe_nodes(topology: Topology, nodes: Iterable[str]) -> str:
    """A set of nodes by whole servers (groups) where possible, then by name."""
    chosen = set(nodes)
    members: dict[str, set[str]] = defaultdict(set)
    for node in topology.nodes:
        if node.group:
            members[node.group].add(node.id)
    whole = sorted((g for g, ids in members.items() if ids <= chosen), key=_natural)
    loose = [n for n in topology.node_ids()
             if n in chosen and not any(n in members[g] for g in whole)]
    return _servers_and_names(whole, loose, "node")


def describe_gpus(topology: Topology, gpus: Iterable[str]) -> str:
    """Some GPUs (compute nodes) in words: "the GPUs of server h1" where a server's GPUs
    are all there, then the other GPUs by name; switches, CPUs and NICs are never named."""
    compute = topology.compute_nodes()
    is_gpu = set(compute)
    chosen = set(gpus) & is_gpu
    members: dict[str, set[str]] = defaultdict(set)     # a server's GPUs
    for node in topology.nodes:
        if node.group and node.id in is_gpu:
            members[node.group].add(node.id)
    whole = sorted((g for g, ids in members.items() if ids <= chosen), key=_natural)
    loose = [n for n in compute if n in chosen and not any(n in members[g] for g in whole)]
    if whole and not loose:
        return "the GPUs of " + _servers_and_names(whole, [], "GPU")
    return _servers_and_names(whole, loose, "GPU")


def _servers_and_names(whole: list[str], loose: list[str], noun: str) -> str:
    parts = []
    if whole:
        parts.append(("server " if len(whole) == 1 else "servers ") + ", ".join(whole))
    if loose:
        shown = ", ".join(loose[:NAMES_SHOWN])
        more = len(loose) - NAMES_SHOWN
        parts.append(shown + (f" and {more} more {noun}{'s' if more != 1 else ''}"
                              if more > 0 else ""))
    return " and ".join(parts)


def describe_links(topology: Topology, links: list[tuple[str, str, Fraction]],
                   unit: str = GBPS) -> str:
    """The leaving links in a phrase: into one node, out of one node, or per server."""
    count = len(links)
    plural = "s" if count != 1 else ""
    bandwidths = {bw for _, _, bw in links}
    each = f" ({_bw(next(iter(bandwidths)), unit)} each)" \
        if len(bandwidths) == 1 and count > 1 else ""
    outside_ends = {v for _, v, _ in links}
    inside_ends = {u for u, _, _ in links}
    if len(outside_ends) == 1:
        return f"the {count} link{plural} into {next(iter(outside_ends))}{each}"
    if len(inside_ends) == 1:
        return f"the {count} link{plural} out of {next(iter(inside_ends))}{each}"
    group = {n.id: n.group for n in topology.nodes}
    label = {n.id: (n.label or n.id).lower() for n in topology.nodes}

    def is_nic(node: str) -> bool:
        return "nic" in node.lower() or "nic" in label[node]

    nic_groups = {group.get(v) for v in outside_ends}
    if all(is_nic(v) for v in outside_ends) and len(nic_groups) == 1 and None not in nic_groups:
        return f"the {count} links into the NICs of {next(iter(nic_groups))}{each}"
    by_group: dict[str | None, list[tuple[str, str]]] = defaultdict(list)
    for u, v, _ in links:
        by_group[group.get(u)].append((u, v))
    servers = None not in by_group and len(by_group) <= 3
    if not servers and len(outside_ends) <= NAMES_SHOWN:
        return f"the {count} links into {describe_nodes(topology, outside_ends)}{each}"
    if not servers and len(inside_ends) <= NAMES_SHOWN:
        return f"the {count} links out of {describe_nodes(topology, inside_ends)}{each}"
    phrases = []
    for g in sorted(by_group, key=lambda g: _natural(g or "")):
        pairs = by_group[g]
        n = len(pairs)
        s = "s" if n != 1 else ""
        if g is None:
            phrases.append(f"{n} link{s} from {describe_nodes(topology, {u for u, _ in pairs})}")
            continue
        nic = all(is_nic(u) for u, _ in pairs)
        up = all(group.get(v) != g for _, v in pairs)
        kind = ("NIC " if nic else "") + ("uplink" if up else "link")
        phrases.append(f"the {n} {kind}{s} of {g}")
    return _join(phrases) + each


def describe_cut(topology: Topology, cut: Iterable[str], cut_bandwidth: Fraction,
                 unit: str = GBPS) -> str:
    """One sentence: how many GPUs S* holds and which (by server where whole, the fewer
    named: those inside or all but those outside), and what leaves it, in ``unit``."""
    inside = set(cut)
    compute = topology.compute_nodes()
    held = [c for c in compute if c in inside]
    outside = [c for c in compute if c not in inside]
    if len(held) <= len(outside):
        side = f" ({describe_gpus(topology, held)})"
    else:
        side = f" (all but {describe_gpus(topology, outside)})"
    links = crossing_links(topology, inside)
    over = f" over {describe_links(topology, links, unit)}" if links else ""
    return (f"S* holds {len(held)} of {len(compute)} GPUs{side}; "
            f"{_bw(cut_bandwidth, unit)} leave it{over}.")


def _bw(value: Fraction, unit: str) -> str:
    return f"{format_gbps(from_gbps(value, unit))} {unit}"


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _natural(name: str) -> tuple:
    """Sort n2 before n10."""
    digits = "".join(ch for ch in name if ch.isdigit())
    return (name.rstrip("0123456789"), int(digits) if digits else -1, name)
