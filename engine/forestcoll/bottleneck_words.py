"""The bottleneck cut S* in words, for people rather than for the verifier.

ForestColl's optimum is set by the cut S* minimising |S* ∩ V_c| / B+(S*)
(ForestColl (arXiv:2402.06787) §3.1 eq. (1)): the compute nodes inside S* must send
everything they hold
out over the links leaving S*. :func:`describe_cut` says how many GPUs S* holds, names the
smaller side (S* or everything outside it) by whole servers where it can, and says which
links carry the B+(S*) GB/s out, e.g. "S* holds 8 of 16 GPUs (server n0); 200 GB/s leave
it over the 8 NIC uplinks of n0 (25 GB/s each)."
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from fractions import Fraction

from canopy.engine.model.topology import Topology, format_gbps

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
    parts = []
    if whole:
        parts.append(("server " if len(whole) == 1 else "servers ") + ", ".join(whole))
    if loose:
        shown = ", ".join(loose[:NAMES_SHOWN])
        more = len(loose) - NAMES_SHOWN
        parts.append(shown + (f" and {more} more node{'s' if more != 1 else ''}"
                              if more > 0 else ""))
    return " and ".join(parts)


def describe_links(topology: Topology, links: list[tuple[str, str, Fraction]]) -> str:
    """The leaving links in a phrase: into one node, out of one node, or per server."""
    count = len(links)
    plural = "s" if count != 1 else ""
    bandwidths = {bw for _, _, bw in links}
    each = f" ({format_gbps(next(iter(bandwidths)))} GB/s each)" \
        if len(bandwidths) == 1 and count > 1 else ""
    outside_ends = {v for _, v, _ in links}
    inside_ends = {u for u, _, _ in links}
    if len(outside_ends) == 1:
        return f"the {count} link{plural} into {next(iter(outside_ends))}{each}"
    if len(inside_ends) == 1:
        return f"the {count} link{plural} out of {next(iter(inside_ends))}{each}"
    group = {n.id: n.group for n in topology.nodes}
    by_group: dict[str | None, list[tuple[str, str]]] = defaultdict(list)
    for u, v, _ in links:
        by_group[group.get(u)].append((u, v))
    servers = None not in by_group and len(by_group) <= 3
    if not servers and len(outside_ends) <= NAMES_SHOWN:
        return f"the {count} links into {describe_nodes(topology, outside_ends)}{each}"
    if not servers and len(inside_ends) <= NAMES_SHOWN:
        return f"the {count} links out of {describe_nodes(topology, inside_ends)}{each}"
    label = {n.id: (n.label or n.id).lower() for n in topology.nodes}
    phrases = []
    for g in sorted(by_group, key=lambda g: _natural(g or "")):
        pairs = by_group[g]
        n = len(pairs)
        s = "s" if n != 1 else ""
        if g is None:
            phrases.append(f"{n} link{s} from {describe_nodes(topology, {u for u, _ in pairs})}")
            continue
        nic = all("nic" in u.lower() or "nic" in label[u] for u, _ in pairs)
        up = all(group.get(v) != g for _, v in pairs)
        kind = ("NIC " if nic else "") + ("uplink" if up else "link")
        phrases.append(f"the {n} {kind}{s} of {g}")
    return _join(phrases) + each


def describe_cut(topology: Topology, cut: Iterable[str], cut_bandwidth: Fraction) -> str:
    """One sentence: how many GPUs S* holds, its smaller side, and what leaves it."""
    inside = set(cut)
    compute = topology.compute_nodes()
    held = sum(1 for c in compute if c in inside)
    rest = [n for n in topology.node_ids() if n not in inside]
    if len(inside) <= len(rest):
        side = f" ({describe_nodes(topology, inside)})"
    else:
        side = f": everything but {describe_nodes(topology, rest)}"
    links = crossing_links(topology, inside)
    over = f" over {describe_links(topology, links)}" if links else ""
    return (f"S* holds {held} of {len(compute)} GPUs{side}; "
            f"{format_gbps(cut_bandwidth)} GB/s leave it{over}.")


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _natural(name: str) -> tuple:
    """Sort n2 before n10."""
    digits = "".join(ch for ch in name if ch.isdigit())
    return (name.rstrip("0123456789"), int(digits) if digits else -1, name)
