"""Turn an ibnetdiscover dump into a topology: the cluster as it is cabled.

**Hosts.** A channel adapter's node description is ``<host> <device>`` on Linux (the
kernel writes the host name and the RDMA device, ``a08-p1-dgx-04-c01 mlx5_5``), so
adapters are grouped into hosts by the first word of their description. A description
that names no host (one word, or a last word without a digit such as the firmware's
default ``MT4123 ConnectX6 Mellanox Technologies``) makes the adapter a host of its own.
SHARP aggregation nodes (adapters inside switches, described ``... Aggregation Node``)
are not hosts: they and their cables are left out and counted.

**Each host** is, without a host topology, one compute node joined to each of its
adapters (switch nodes) by a link as fast as the adapter's cables together, so the
fabric alone solves: the optimum is that of the hosts over the InfiniBand network. With
a host topology (an NCCL topology XML of one host, read by
:mod:`canopy.engine.io.nccl_topology_import`), every host gets that host's GPUs, NVLink/NVSwitch and
PCIe; the XML's NICs are matched to the host's adapters by device name (the ``<net
name>`` against the description's device, ``mlx5_5``), or in order when no name
matches, and the adapters' cables leave from the matched NICs.

**The network.** Switches (and routers) are switch nodes named after their description
(``MF0;leaf01:MQM9700/U1`` is ``leaf01``; repeated descriptions get the GUID's last
digits). Every cable is one link of its bandwidth (:mod:`canopy.engine.io.ibnetdiscover`)
and parallel cables between the same two nodes are one link of their summed bandwidth.
A cable whose width or speed is unknown (``??``) on both ends is kept as a failed link
(drawn, carrying nothing) and reported. Node GUIDs, descriptions and cable rates are kept
in the saved topology (the node and link fields ``guid``, ``description``, ``rate``,
``cables``, ``ports``).

**Layout** as the cluster generator draws a leaf-spine cluster: hosts that share leaf
switches form a pod, each pod's hosts in a row under its leaves, pods in a grid close to
a 16:10 screen, and the higher tiers (spines, cores; a tier is the distance from the
hosts) in rows above the grid, each switch over the mean position of the switches it
joins below.
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from canopy.engine.io.ibnetdiscover import (
    CA,
    SWITCH,
    IbCable,
    IbFabric,
    IbNode,
    describe_node,
    read_ibnetdiscover,
)
from canopy.engine.model.disjoint_sets import DisjointSets
from canopy.engine.model.errors import CanopyError
from canopy.engine.model.limits import MAX_LINKS, MAX_NODES
from canopy.engine.model.topology import COMPUTE, Link, Node, Topology, format_gbps

SPACING = 80.0
ROW_GAP = 90.0
BLOCK_GAP = 40.0
POD_GAP = 120.0
TIER_GAP = 160.0
ASPECT = 1.6
POD_ROW = 16
"""Hosts per row of a pod (a pod under one switch of 2,000 hosts wraps)."""
REPORT_LIMIT = 8
"""Listed items per summary line (down ports, adapters without a host name)."""

_AGGREGATION = re.compile(r"aggregation\s+node", re.IGNORECASE)
_MANAGED_SWITCH = re.compile(r"^MF0;([^:]+):")


class IbImportError(CanopyError):
    """A fabric that cannot become a topology (too large, no host, bad host topology)."""


@dataclass
class IbImport:
    """A fabric as a topology, with what the import noticed."""

    topology: Topology
    fabric: IbFabric
    hosts: dict[str, list[str]]          # host name -> adapter GUIDs, in device-name order
    adapter_names: dict[str, str]        # adapter GUID -> device name (mlx5_5)
    node_ids: dict[str, str]             # switch or adapter GUID -> topology node id
    tiers: dict[str, int]                # switch GUID -> tier (1 = leaf)
    aggregation_nodes: list[str] = field(default_factory=list)
    reports: list[str] = field(default_factory=list)   # down and unknown ports
    warnings: list[str] = field(default_factory=list)


def natural_key(text: str) -> tuple:
    """Sort key putting ``node2`` before ``node10``."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))


def host_and_device(description: str) -> tuple[str, str] | None:
    """``("a08-p1-dgx-04-c01", "mlx5_5")`` for ``"a08-p1-dgx-04-c01 mlx5_5"``; None when
    the description names no host (see the module docstring)."""
    words = description.split()
    if len(words) < 2 or not any(c.isdigit() for c in words[-1]):
        return None
    return words[0], " ".join(words[1:])


def switch_name(description: str) -> str:
    """``leaf01`` for a managed switch's ``MF0;leaf01:MQM9700/U1``, else the description."""
    match = _MANAGED_SWITCH.match(description)
    return (match.group(1) if match else description).strip()


def is_aggregation_node(node: IbNode) -> bool:
    """A SHARP aggregation node: an adapter inside a switch, not a host."""
    return node.kind == CA and bool(_AGGREGATION.search(node.description))


def import_ib_file(path: str | os.PathLike[str],
                   host_topology: str | os.PathLike[str] | None = None) -> IbImport:
    """Read the dump at ``path`` (and the NCCL XML ``host_topology``) into a topology."""
    return import_ib_fabric(read_ibnetdiscover(path), host_topology)


def import_ib_fabric(fabric: IbFabric,
                     host_topology: str | os.PathLike[str] | None = None) -> IbImport:
    """The topology of a parsed fabric (see the module docstring)."""
    aggregation = [g for g, n in fabric.nodes.items() if is_aggregation_node(n)]
    skip = set(aggregation)
    result = IbImport(Topology(name=Path(fabric.source).stem), fabric, {}, {}, {}, {},
                      aggregation, warnings=list(fabric.warnings))
    _group_hosts(result, skip)
    if not result.hosts:
        raise IbImportError(f"{fabric.source} has no channel adapter outside the switches, "
                            "so there is no host to schedule.")
    _name_switches(result, skip)
    result.tiers = _tiers(fabric, result, skip)
    template = _host_template(host_topology) if host_topology is not None else None
    _check_size(result, template)
    links = _cable_links(result, skip)
    _build(result, links, template)
    _report_ports(result, skip)
    topo = result.topology
    topo.extra["imported_from"] = {
        "format": "ibnetdiscover", "file": Path(fabric.source).name,
        "hosts": len(result.hosts), "switches": len(result.tiers),
        "cables": sum(1 for c in fabric.cables if c.a[0] not in skip and c.b[0] not in skip),
        **({"host_topology": Path(host_topology).name} if host_topology is not None else {})}
    return result


# ------------------------------------------------------------------ hosts and names


def _group_hosts(result: IbImport, skip: set[str]) -> None:
    nameless: list[IbNode] = []
    hosts: dict[str, list[IbNode]] = defaultdict(list)
    for node in result.fabric.nodes.values():
        if node.kind != CA or node.guid in skip:
            continue
        parsed = host_and_device(node.description)
        if parsed is None:
            nameless.append(node)
            host, device = f"{node.description.split()[0] if node.description else 'ca'}-" \
                           f"{node.guid[-6:]}", "port"
        else:
            host, device = parsed
        hosts[host].append(node)
        result.adapter_names[node.guid] = device
    if nameless:
        shown = ", ".join(describe_node(n) for n in nameless[:REPORT_LIMIT])
        more = f" and {len(nameless) - REPORT_LIMIT} more" if len(nameless) > REPORT_LIMIT else ""
        result.warnings.append(
            f"{result.fabric.source}: {len(nameless)} adapters have a description that names "
            f"no host ({shown}{more}); each is a host of its own, named by its GUID.")
    for host in sorted(hosts, key=natural_key):
        adapters = sorted(hosts[host], key=lambda n: natural_key(result.adapter_names[n.guid]))
        seen: Counter[str] = Counter()
        for node in adapters:
            device = result.adapter_names[node.guid]
            seen[device] += 1
            if seen[device] > 1:
                result.adapter_names[node.guid] = f"{device}-{node.guid[-6:]}"
        result.hosts[host] = [n.guid for n in adapters]
        for node in adapters:
            result.node_ids[node.guid] = f"{host}.{result.adapter_names[node.guid]}"


def _name_switches(result: IbImport, skip: set[str]) -> None:
    switches = [n for n in result.fabric.nodes.values() if n.kind != CA and n.guid not in skip]
    names = {n.guid: switch_name(n.description) or f"switch-{n.guid}" for n in switches}
    counts = Counter(names.values())
    taken = set(result.hosts) | set(result.node_ids.values())
    for node in switches:
        name = names[node.guid]
        if counts[name] > 1 or name in taken:
            name = f"{name}-{node.guid[-6:]}"
        if name in taken:
            name = f"{names[node.guid]}-{node.guid}"
        taken.add(name)
        result.node_ids[node.guid] = name


def _tiers(fabric: IbFabric, result: IbImport, skip: set[str]) -> dict[str, int]:
    """Each switch's distance from the adapters (1 = leaf); unreachable ones last."""
    adjacent: dict[str, set[str]] = defaultdict(set)
    for cable in fabric.cables:
        a, b = cable.a[0], cable.b[0]
        if a in skip or b in skip:
            continue
        adjacent[a].add(b)
        adjacent[b].add(a)
    switches = {g for g, n in fabric.nodes.items() if n.kind != CA and g not in skip}
    tiers: dict[str, int] = {}
    frontier = {g for guids in result.hosts.values() for g in guids}
    depth = 0
    while frontier:
        depth += 1
        frontier = {b for a in frontier for b in adjacent[a] if b in switches and b not in tiers}
        for g in frontier:
            tiers[g] = depth
    for g in switches - tiers.keys():
        tiers[g] = depth + 1
    return tiers


# ------------------------------------------------------------------ links


def _cable_links(result: IbImport, skip: set[str]) -> list[Link]:
    """One link per pair of nodes: its cables' bandwidths summed, rates and ports kept."""
    pairs: dict[tuple[str, str], list[IbCable]] = defaultdict(list)
    rates = Counter(c.bandwidth for c in result.fabric.cables if c.bandwidth is not None)
    typical = rates.most_common(1)[0][0] if rates else Fraction(1)
    for cable in result.fabric.cables:
        low, high = cable.a[0], cable.b[0]
        if low in skip or high in skip:
            continue
        if _order(result, high) < _order(result, low):
            low, high = high, low
        pairs[(low, high)].append(cable)
    links = []
    ids = result.node_ids
    for (a, b), cables in pairs.items():
        known = [c.bandwidth for c in cables if c.bandwidth is not None]
        rate_words = Counter(c.rate for c in cables)
        extra = {"rate": " + ".join(f"{n} x {r}" if n > 1 else r
                                    for r, n in sorted(rate_words.items())),
                 "cables": len(cables),
                 "ports": [[_port_of(c, a), _port_of(c, b)] for c in cables]}
        bandwidth = sum(known, Fraction(0)) if known else typical
        links.append(Link(ids[a], ids[b], bandwidth, extra=extra, failed=not known))
    return links


def _order(result: IbImport, guid: str) -> int:
    return 0 if result.fabric.nodes[guid].kind == CA else result.tiers.get(guid, 0)


def _port_of(cable: IbCable, guid: str) -> int:
    return cable.a[1] if cable.a[0] == guid else cable.b[1]


# ------------------------------------------------------------------ host topology


@dataclass
class _Template:
    """One host from an NCCL topology XML: nodes (key, kind, label, x, y, extra), links,
    and its NICs' device names in order."""

    source: str
    nodes: list[tuple[str, str, str, float, float, dict]]
    links: list[Link]
    nics: list[tuple[str, list[str]]]      # (key, net names)
    width: float
    height: float
    warnings: list[str]


def _host_template(path: str | os.PathLike[str]) -> _Template:
    from canopy.engine.io.nccl_topology_import import import_nccl_file

    imported = import_nccl_file(path)
    topo = imported.topology
    left = min((n.x or 0.0) for n in topo.nodes)
    top = min((n.y or 0.0) for n in topo.nodes)
    nodes = []
    nics = []
    for n in topo.nodes:
        key = n.id.removeprefix("h0.")
        label = n.label.removeprefix("h0 ")
        nodes.append((key, n.kind, label, (n.x or 0.0) - left, (n.y or 0.0) - top,
                      dict(n.extra)))
        if re.fullmatch(r"nic\d+", key):
            nics.append((key, _net_names(label, n.extra.get("busid"))))
    links = [Link(a.source.removeprefix("h0."), a.target.removeprefix("h0."), a.bandwidth,
                  a.duplex) for a in topo.links]
    if not nics:
        raise IbImportError(f"{path} describes no NIC, so its GPUs cannot reach the fabric.")
    width = max(x for _, _, _, x, _, _ in nodes) + SPACING
    height = max(y for _, _, _, _, y, _ in nodes)
    return _Template(str(path), nodes, links, nics, width, height, imported.warnings)


def _net_names(label: str, busid: object) -> list[str]:
    """The ``<net name>`` devices the NCCL importer writes into a NIC's label."""
    found = re.search(r"\(([^()]*)\)\s*$", label)
    if not found:
        return []
    return [w for w in found.group(1).split() if w != busid]


def _match_nics(template: _Template, host: str, devices: list[str],
                warnings: list[str]) -> dict[str, int]:
    """NIC key -> index of the host's adapter; by device name, else in order."""
    by_name = {d: i for i, d in enumerate(devices)}
    matched: dict[str, int] = {}
    for key, names in template.nics:
        for name in names:
            if name in by_name and by_name[name] not in matched.values():
                matched[key] = by_name[name]
                break
    if not matched:
        matched = {key: i for i, (key, _) in enumerate(template.nics) if i < len(devices)}
        if devices:
            warnings.append(f"host {host}: no adapter name ({', '.join(devices[:4])}) is a "
                            f"NIC name of {Path(template.source).name}; NICs matched to "
                            "adapters in order.")
    return matched


# ------------------------------------------------------------------ building


def _check_size(result: IbImport, template: _Template | None) -> None:
    per_host = len(template.nodes) if template else 1
    adapters = sum(len(a) for a in result.hosts.values())
    count = len(result.hosts) * per_host + adapters + len(result.tiers)
    if count > MAX_NODES or len(result.fabric.cables) > MAX_LINKS:
        raise IbImportError(f"{result.fabric.source} makes {count} nodes and "
                            f"{len(result.fabric.cables)} cables; Canopy reads at most "
                            f"{MAX_NODES} nodes and {MAX_LINKS} links.")


def _build(result: IbImport, cable_links: list[Link], template: _Template | None) -> None:
    topo = result.topology
    nodes = result.fabric.nodes
    adapter_bw: dict[str, Fraction] = defaultdict(Fraction)
    for link in cable_links:
        if not link.failed:
            adapter_bw[link.source] += link.bandwidth
            adapter_bw[link.target] += link.bandwidth
    blocks: dict[str, dict[str, tuple[float, float]]] = {}
    if template is not None:
        result.warnings.extend(template.warnings)
    for host, guids in result.hosts.items():
        devices = [result.adapter_names[g] for g in guids]
        adapter_ids = [result.node_ids[g] for g in guids]
        block: dict[str, tuple[float, float]] = {}
        if template is None:
            topo.nodes.append(Node(host, COMPUTE, host, host))
            block[host] = ((len(guids) - 1) * SPACING / 2, ROW_GAP)
            for i, (guid, node_id) in enumerate(zip(guids, adapter_ids, strict=True)):
                topo.nodes.append(Node(node_id, "switch", f"{host} {devices[i]}", host,
                                       extra=_guid_extra(nodes[guid])))
                block[node_id] = (i * SPACING, 0.0)
                topo.links.append(Link(host, node_id, adapter_bw[node_id] or Fraction(1)))
        else:
            _fill_host(result, template, host, guids, block)
        blocks[host] = block
    topo.links.extend(cable_links)
    for guid, tier in sorted(result.tiers.items(), key=lambda t: (t[1], natural_key(
            result.node_ids[t[0]]))):
        node = nodes[guid]
        topo.nodes.append(Node(result.node_ids[guid], "switch", result.node_ids[guid],
                               extra={**_guid_extra(node), "tier": tier}))
    _layout(result, blocks)


def _guid_extra(node: IbNode) -> dict:
    extra: dict = {"guid": f"0x{node.guid}", "description": node.description}
    if node.lid is not None:
        extra["lid"] = node.lid
    return extra


def _fill_host(result: IbImport, template: _Template, host: str, guids: list[str],
               block: dict[str, tuple[float, float]]) -> None:
    topo = result.topology
    devices = [result.adapter_names[g] for g in guids]
    matched = _match_nics(template, host, devices, result.warnings)
    rename = {key: result.node_ids[guids[i]] for key, i in matched.items()}
    used = set(matched.values())
    for key, kind, label, x, y, extra in template.nodes:
        node_id = rename.get(key, f"{host}.{key}")
        extra = dict(extra)
        if key in matched:
            extra.update(_guid_extra(result.fabric.nodes[guids[matched[key]]]))
        topo.nodes.append(Node(node_id, kind, f"{host} {label}", host, extra=extra))
        block[node_id] = (x, y + ROW_GAP)
    for link in template.links:
        topo.links.append(Link(rename.get(link.source, f"{host}.{link.source}"),
                               rename.get(link.target, f"{host}.{link.target}"),
                               link.bandwidth, link.duplex))
    extra_devices = [i for i in range(len(guids)) if i not in used]
    for n, i in enumerate(extra_devices):
        node_id = result.node_ids[guids[i]]
        topo.nodes.append(Node(node_id, "switch", f"{host} {devices[i]}", host,
                               extra=_guid_extra(result.fabric.nodes[guids[i]])))
        block[node_id] = (n * SPACING, 0.0)
    if extra_devices:
        result.warnings.append(
            f"host {host}: adapters {', '.join(devices[i] for i in extra_devices)} match no "
            f"NIC of {Path(template.source).name}; they join the fabric but no GPU.")


def _report_ports(result: IbImport, skip: set[str]) -> None:
    """Adapters with ports that are down (not listed) and cables of unknown rate."""
    down: list[str] = []
    for guids in result.hosts.values():
        for guid in guids:
            node = result.fabric.nodes[guid]
            missing = [p for p in range(1, node.ports + 1) if p not in node.listed_ports]
            down.extend(f"{describe_node(node)} port {p}" for p in missing)
    if down:
        shown = ", ".join(down[:REPORT_LIMIT])
        more = f" and {len(down) - REPORT_LIMIT} more" if len(down) > REPORT_LIMIT else ""
        result.reports.append(f"{len(down)} adapter ports are down or not cabled: "
                              f"{shown}{more}.")
    for cable in result.fabric.cables:
        if cable.a[0] in skip or cable.b[0] in skip:
            continue
        if cable.width is None or cable.speed is None:
            a, b = result.fabric.nodes[cable.a[0]], result.fabric.nodes[cable.b[0]]
            result.reports.append(
                f"line {cable.line}: the cable from {describe_node(a)} port {cable.a[1]} to "
                f"{describe_node(b)} port {cable.b[1]} runs at an unknown rate "
                f"({cable.rate}); it is kept as a failed link.")
    switch_ports = sum(n.ports for n in result.fabric.nodes.values()
                       if n.kind == SWITCH and n.guid not in skip)
    used = sum(len(n.listed_ports) for n in result.fabric.nodes.values()
               if n.kind == SWITCH and n.guid not in skip)
    result.topology.extra.setdefault("ib_ports", {"switch_ports": switch_ports,
                                                  "switch_ports_cabled": used})


def summary(result: IbImport) -> str:
    """One line: hosts, adapters, switches by tier, cables, left-out aggregation nodes."""
    tiers = Counter(result.tiers.values())
    words = {1: "leaf", 2: "spine", 3: "core"}
    tier_text = ", ".join(f"{n} {words.get(t, f'tier-{t}')}" for t, n in sorted(tiers.items()))
    adapters = sum(len(a) for a in result.hosts.values())
    topo = result.topology
    gbps = Counter(link.bandwidth for link in topo.links if "rate" in link.extra)
    common = gbps.most_common(1)[0][0] if gbps else None
    text = (f"{len(result.hosts)} hosts, {adapters} adapters, {len(result.tiers)} switches "
            f"({tier_text}), {topo.extra['imported_from']['cables']} cables")
    if common is not None:
        text += f" (mostly {format_gbps(common)} GB/s)"
    if result.aggregation_nodes:
        text += f"; {len(result.aggregation_nodes)} SHARP aggregation nodes left out"
    return text


# ------------------------------------------------------------------ layout


def _layout(result: IbImport, blocks: dict[str, dict[str, tuple[float, float]]]) -> None:
    topo = result.topology
    by_id = {n.id: n for n in topo.nodes}
    ids = result.node_ids
    leaf_of_host: dict[str, set[str]] = defaultdict(set)
    adjacent: dict[str, set[str]] = defaultdict(set)
    for link in topo.links:
        adjacent[link.source].add(link.target)
        adjacent[link.target].add(link.source)
    host_of = {node_id: host for host, block in blocks.items() for node_id in block}
    leaves = {ids[g] for g, t in result.tiers.items() if t == 1}
    for node_id, host in host_of.items():
        leaf_of_host[host].update(v for v in adjacent[node_id] if v in leaves)
    pods = group_pods(list(blocks), leaf_of_host)
    positions: dict[str, tuple[float, float]] = {}
    drawn = []
    block_w = max(max(x for x, _ in b.values()) for b in blocks.values()) + SPACING
    block_h = max(max(y for _, y in b.values()) for b in blocks.values()) + ROW_GAP
    for pod in pods:
        pod_pos: dict[str, tuple[float, float]] = {}
        per_row = min(len(pod), POD_ROW)
        for i, host in enumerate(pod):
            row, column = divmod(i, per_row)
            for node_id, (bx, by) in blocks[host].items():
                pod_pos[node_id] = (column * (block_w + BLOCK_GAP) + bx,
                                    row * (block_h + BLOCK_GAP) + by)
        width = per_row * (block_w + BLOCK_GAP) - BLOCK_GAP
        pod_leaves = sorted({v for h in pod for v in leaf_of_host[h]},
                            key=lambda v: (_mean_x(v, adjacent, pod_pos), natural_key(v)))
        for i, leaf in enumerate(pod_leaves):
            pod_pos[leaf] = ((i + 0.5) * width / len(pod_leaves) - SPACING / 2, -TIER_GAP)
        drawn.append((pod_pos, width))
    cell_w = max(w for _, w in drawn) + POD_GAP
    cell_h = max(max(y for _, y in p.values()) - min(y for _, y in p.values())
                 for p, _ in drawn) + POD_GAP + ROW_GAP
    columns = min(range(1, len(drawn) + 1),
                  key=lambda c: abs(math.log(c * cell_w / (-(-len(drawn) // c) * cell_h)
                                             / ASPECT)))
    for i, (pod_pos, _) in enumerate(drawn):
        ox, oy = (i % columns) * cell_w, (i // columns) * cell_h
        for node_id, (x, y) in pod_pos.items():
            positions[node_id] = (ox + x, oy + y)
    grid_w = columns * cell_w - POD_GAP
    upper: dict[int, list[str]] = defaultdict(list)
    for guid, tier in result.tiers.items():
        if ids[guid] not in positions:
            upper[tier].append(ids[guid])
    for rank, tier in enumerate(sorted(upper), start=1):
        switches = sorted(upper[tier], key=lambda v: (_mean_x(v, adjacent, positions),
                                                      natural_key(v)))
        span = max(grid_w, len(switches) * SPACING)
        left = (grid_w - span) / 2
        for i, node_id in enumerate(switches):
            positions[node_id] = (left + (i + 0.5) * span / len(switches) - SPACING / 2,
                                  -TIER_GAP * (rank + 1))
    for node_id, (x, y) in positions.items():
        by_id[node_id].x, by_id[node_id].y = round(x, 1), round(y, 1)


def group_pods(hosts: list[str], leaves: dict[str, set[str]]) -> list[list[str]]:
    """Hosts joined through shared leaves, each pod in host order, pods by first host."""
    sets = DisjointSets(hosts)
    owner: dict[str, str] = {}
    for h in hosts:
        for leaf in leaves[h]:
            if leaf in owner:
                sets.union(h, owner[leaf])
            else:
                owner[leaf] = h
    pods: dict[str, list[str]] = defaultdict(list)
    for h in hosts:
        pods[sets.find(h)].append(h)
    return list(pods.values())


def _mean_x(node_id: str, adjacent: dict[str, set[str]],
            positions: dict[str, tuple[float, float]]) -> float:
    xs = [positions[v][0] for v in adjacent[node_id] if v in positions]
    return sum(xs) / len(xs) if xs else math.inf
