"""One server of a topology as an ``NCCL_TOPO_FILE`` that ``canopy import-nccl`` reads back.

The file is written in the terms :mod:`canopy.engine.io.nccl_topology_import` reads (NCCL's own
rules,
``src/graph/topo.cc``), each bandwidth chosen so that NCCL's formula gives it back exactly:

* the PCI tree: ``<cpu>`` roots, PCI switches as ``<pci class="0x060400">``, GPUs as
  ``<pci class="0x030200"><gpu .../></pci>``, NICs as ``<pci class="0x020000"><nic>``;
  a link's bandwidth is ``link_width x lane_speed / 80`` with a PCI generation and
  width that give it exactly (a NIC hanging off a CPU at LOC_BW is a bare ``<nic>``);
* NVLink: ``<nvlink target count tclass>`` under each GPU, towards GPUs (0x030200), the
  NVSwitch (0x068000) or its CPU (0x068001), ``count`` links at the per-link bandwidth
  of the GPU's ``sm`` (ncclTopoNVLinkBw), the ``sm`` chosen so every count is whole;
* a NIC's scale-out bandwidth as one ``<net>`` port of ``speed`` Mb/s (``bw x 8000``);
* CPU sockets' attributes (arch, vendor, family, model) chosen so that NCCL's inter-CPU
  bandwidth is the one between them.

A server is a ``group`` whose nodes are named as ``canopy import-nccl`` names them
(``cpu0``, ``pcie3``, ``gpu1``, ``nic0``, ``nvswitch0`` after the group's prefix).
:func:`as_nccl_server` first restates a server drawn or generated in Canopy's own terms
in those (GPUs are compute nodes; NVSwitches, NICs, PCIe switches and CPUs are known by
their names or labels), adding what NCCL's format requires and the drawing leaves out,
each addition said in a note: a CPU at the root of the PCI tree, a PCIe switch where a
GPU links to its NIC directly, a NIC where a GPU links out of the server. Anything else,
or a bandwidth no NCCL attribute can state, is refused with one sentence.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from fractions import Fraction

import networkx as nx
from lxml import etree

from canopy.engine.io.nccl_topology_import import (
    LOC_BW,
    PCI_GEN,
    inter_cpu_bandwidth,
    nvlink_bandwidth,
)
from canopy.engine.io.topology_json import atomic_write_bytes
from canopy.engine.model.errors import CanopyError
from canopy.engine.model.topology import Link, Node, Topology, format_gbps

ROLES = ("cpu", "pcie", "gpu", "nic", "nvswitch")
WIDTHS = (16, 8, 4, 2, 1, 32, 12)
SMS = (80, 90, 100, 86, 60)
"""Compute capabilities tried for a GPU's NVLink, NCCL's per-link bandwidth for each."""
CPU_KINDS = [
    {"arch": "x86_64", "vendor": "GenuineIntel", "familyid": "6", "modelid": "0xcf"},
    {"arch": "x86_64", "vendor": "GenuineIntel", "familyid": "6", "modelid": "0x8f"},
    {"arch": "x86_64", "vendor": "GenuineIntel", "familyid": "6", "modelid": "0x55"},
    {"arch": "x86_64", "vendor": "GenuineIntel", "familyid": "6", "modelid": "0x3f"},
    {"arch": "x86_64", "vendor": "AuthenticAMD", "familyid": "23", "modelid": "49"},
    {"arch": "ppc64"},
    {"arch": "arm64"},
    {"arch": "x86_64", "vendor": "other"},
]
CLASS = {"pcie": "0x060400", "gpu": "0x030200", "nic": "0x020000", "nvswitch": "0x068000",
         "cpu": "0x068001"}


class NcclTopoExportError(CanopyError):
    """A server that NCCL's topology format cannot state."""


def _role(node_id: str, group: str) -> tuple[str, int] | None:
    match = re.fullmatch(rf"{re.escape(group)}\.({'|'.join(ROLES)})(\d+)", node_id)
    return (match.group(1), int(match.group(2))) if match else None


def _pci_link(bw: Fraction, where: str) -> tuple[str, int]:
    """(link_speed, link_width) whose NCCL bandwidth is exactly ``bw``."""
    speeds = {value: key for key, value in reversed(PCI_GEN)}
    for width in WIDTHS:
        lane = bw * 80 / width
        if lane.denominator == 1 and int(lane) in speeds:
            return speeds[int(lane)], width
    raise NcclTopoExportError(f"{where} has {format_gbps(bw)} GB/s, which no PCI generation "
                              "and width give (NCCL's PCI bandwidth is width x lane speed "
                              "/ 80).")


def _cpu_attributes(bw: Fraction | None, where: str) -> dict[str, str]:
    if bw is None:
        return dict(CPU_KINDS[0])
    for attrs in CPU_KINDS:
        family, model = attrs.get("familyid"), attrs.get("modelid")
        if inter_cpu_bandwidth(attrs["arch"], attrs.get("vendor", ""),
                               int(family, 0) if family else None,
                               int(model, 0) if model else None) == bw:
            return dict(attrs)
    raise NcclTopoExportError(f"{where}: {format_gbps(bw)} GB/s between CPU sockets is not "
                              "a bandwidth NCCL gives any CPU pair.")


def _sm(bandwidths: list[Fraction], where: str) -> tuple[int, Fraction]:
    for sm in SMS:
        per_link = nvlink_bandwidth(sm)
        if all((bw / per_link).denominator == 1 for bw in bandwidths):
            return sm, per_link
    listed = ", ".join(format_gbps(b) for b in bandwidths)
    per = ", ".join(str(format_gbps(nvlink_bandwidth(sm))) for sm in SMS)
    raise NcclTopoExportError(f"{where}'s GPU-to-GPU bandwidths ({listed} GB/s) are not whole "
                              f"numbers of NVLinks: NCCL's format states NVLink as a count of "
                              f"links of {per} GB/s (by GPU generation), and it has no "
                              "Infinity Fabric or other GPU link.")


ROLE_WORDS = (("nvswitch", "nvswitch"), ("nvs", "nvswitch"), ("nic", "nic"), ("hca", "nic"),
              ("pcie", "pcie"), ("pci", "pcie"), ("cpu", "cpu"), ("socket", "cpu"))
"""Words in a switch's id or label that say its role in a server, first match wins."""
PCI_BANDWIDTHS = sorted({width * lane / Fraction(80) for width in WIDTHS
                         for _, lane in PCI_GEN})
"""Every bandwidth NCCL's PCI formula gives (width x lane speed / 80), smallest first."""
DEFAULT_PCI = Fraction(24)
"""PCIe Gen4 x16 as NCCL counts it: a GPU's link to a CPU the drawing does not give."""


def _guess_role(node_id: str, label: str, is_compute: bool) -> str | None:
    if is_compute:
        return "gpu"
    name = f"{node_id.rsplit('.', 1)[-1]} {label}".lower()
    return next((role for word, role in ROLE_WORDS if word in name), None)


def _pci_at_least(bw: Fraction) -> Fraction:
    """The smallest PCI bandwidth NCCL can state that is at least ``bw`` (or the largest)."""
    return next((b for b in PCI_BANDWIDTHS if b >= bw), PCI_BANDWIDTHS[-1])


def as_nccl_server(topology: Topology, group: str) -> tuple[Topology, list[str]]:
    """``topology`` with server ``group`` restated in ``canopy import-nccl``'s terms, and a
    note per change (none when it already is; see the module docstring)."""
    members = [n for n in topology.nodes if n.group == group]
    out = Topology(topology.name, [], [], bandwidth_unit=topology.bandwidth_unit)
    taken: dict[str, set[int]] = defaultdict(set)
    for n in members:
        role = _role(n.id, group)
        if role is not None:
            taken[role[0]].add(role[1])
    rename: dict[str, str] = {}

    def new_id(kind: str) -> str:
        number = next(i for i in range(len(taken[kind]) + 1) if i not in taken[kind])
        taken[kind].add(number)
        return f"{group}.{kind}{number}"

    for n in members:
        if _role(n.id, group) is None:
            guessed = _guess_role(n.id, n.label, n.is_compute)
            if guessed is None:
                raise NcclTopoExportError(
                    f"node '{n.id}' of server '{group}' is a switch that its name and label "
                    "do not call an NVSwitch, NIC, PCIe switch or CPU, so NCCL's format "
                    "has no place for it.")
            rename[n.id] = new_id(guessed)
    for n in topology.nodes:
        out.nodes.append(Node(rename.get(n.id, n.id), n.kind, n.label, n.group, n.x, n.y,
                              dict(n.extra), n.failed))
    server = {rename.get(n.id, n.id) for n in members}

    def role_of(node_id: str) -> str:
        role = _role(node_id, group)
        return role[0] if role else ""

    notes = [f"names {', '.join(f'{a} -> {b}' for a, b in list(rename.items())[:3])}"
             f"{' ...' if len(rename) > 3 else ''} as NCCL's terms"] if rename else []
    pending: list[Link] = []
    outside_gpu_links = 0
    for link in topology.links:
        a, b = rename.get(link.source, link.source), rename.get(link.target, link.target)
        copy = Link(a, b, link.bandwidth, link.duplex, link.latency, dict(link.extra),
                    link.failed)
        gpu_end = next((e for e in (a, b) if e in server and role_of(e) == "gpu"), None)
        other = b if gpu_end == a else a
        if gpu_end is not None and other not in server:
            nic = new_id("nic")       # a GPU linked out of the server: through a NIC
            out.nodes.append(Node(nic, "switch", f"{group} NIC for {gpu_end}", group))
            pending.append(Link(gpu_end, nic, link.bandwidth, link.duplex))
            pending.append(Link(nic, other, link.bandwidth, link.duplex, link.latency))
            outside_gpu_links += 1
            continue
        pending.append(copy)
    if outside_gpu_links:
        notes.append(f"adds a NIC for each of the {outside_gpu_links} links from a GPU out "
                     "of the server (in NCCL only NICs leave a server)")
    cpus = [n for n in server if role_of(n) == "cpu"]
    if not cpus:
        cpu = new_id("cpu")
        out.nodes.append(Node(cpu, "switch", f"{group} CPU", group))
        cpus = [cpu]
        notes.append(f"adds a CPU, {cpu}, at the root of the server's PCI tree")
    parent: dict[str, str] = {}
    for link in pending:
        for child, up in ((link.source, link.target), (link.target, link.source)):
            if link.duplex and role_of(up) in ("cpu", "pcie") \
                    and role_of(child) in ("gpu", "nic", "pcie"):
                parent.setdefault(child, up)
    links: list[Link] = []
    bridged: set[str] = set()
    for link in pending:
        ends = {role_of(link.source): link.source, role_of(link.target): link.target}
        if set(ends) == {"gpu", "nic"} and ends["nic"] not in parent:
            # a GPU linked to its NIC directly: both under one PCIe switch
            bw = _pci_at_least(link.bandwidth)
            pcie = parent.get(ends["gpu"])
            if pcie is None or role_of(pcie) != "pcie":
                pcie = new_id("pcie")
                out.nodes.append(Node(pcie, "switch", f"{group} PCIe switch", group))
                links += [Link(ends["gpu"], pcie, bw), Link(pcie, cpus[0], bw)]
                parent[ends["gpu"]], parent[pcie] = pcie, cpus[0]
            links.append(Link(ends["nic"], pcie, bw))
            parent[ends["nic"]] = pcie
            bridged.add(f"{format_gbps(link.bandwidth)} -> {format_gbps(bw)}")
            continue
        links.append(link)
    if bridged:
        notes.append("puts each GPU and the NICs it links to directly under a PCIe switch, "
                     "at the nearest PCIe bandwidth NCCL states, no less than the link's "
                     f"where one is (GB/s: {', '.join(sorted(bridged))})")
    has_parent = set(parent)
    loose = [n.id for n in out.nodes if n.group == group
             if role_of(n.id) in ("gpu", "nic", "pcie") and n.id not in has_parent]
    for node_id in loose:
        own = [link.bandwidth for link in links if node_id in (link.source, link.target)]
        bw = DEFAULT_PCI if role_of(node_id) == "gpu" \
            else _pci_at_least(max(own, default=DEFAULT_PCI))
        links.insert(0, Link(node_id, cpus[0], bw))
    if loose:
        notes.append(f"hangs the {len(loose)} devices with no PCI link off {cpus[0]} "
                     f"(GPUs at PCIe Gen4 x16, {format_gbps(DEFAULT_PCI)} GB/s)")
    stated = set(PCI_BANDWIDTHS) | {LOC_BW}
    rounded: set[str] = set()
    for link in links:      # a PCI link runs child -> parent, as the importer writes it
        if link.duplex and parent.get(link.source) != link.target \
                and parent.get(link.target) == link.source:
            link.source, link.target = link.target, link.source
        if parent.get(link.source) == link.target and link.bandwidth not in stated:
            bw = _pci_at_least(link.bandwidth)
            rounded.add(f"{format_gbps(link.bandwidth)} -> {format_gbps(bw)}")
            link.bandwidth = bw
    if rounded:
        notes.append("states PCIe links at the nearest bandwidth NCCL's formula gives, no "
                     f"less where one is (GB/s: {', '.join(sorted(rounded))})")
    out.links = links
    out.jobs, out.extra = list(topology.jobs), dict(topology.extra)
    return out, notes


class _Server:
    """The devices of one server, its PCI tree and its other links."""

    def __init__(self, topology: Topology, group: str) -> None:
        self.group = group
        self.nodes = {n.id: n for n in topology.nodes if n.group == group}
        if not any(n.is_compute for n in self.nodes.values()):
            raise NcclTopoExportError(f"there is no server '{group}' with GPUs.")
        self.role: dict[str, tuple[str, int]] = {}
        for node_id in self.nodes:
            role = _role(node_id, group)
            if role is None:
                raise NcclTopoExportError(
                    f"node '{node_id}' is not named as canopy import-nccl names a server's "
                    f"devices ({group}.cpu0, {group}.pcie0, {group}.gpu0, {group}.nic0, "
                    f"{group}.nvswitch0), so its place in NCCL's PCI tree is unknown.")
            self.role[node_id] = role
        self.links: list[Link] = []
        self.uplink: dict[str, Fraction] = defaultdict(Fraction)
        for link in topology.links:
            inside = (link.source in self.nodes, link.target in self.nodes)
            if all(inside):
                self.links.append(link)
            elif any(inside):
                nic = link.source if inside[0] else link.target
                if self.role[nic][0] != "nic":
                    raise NcclTopoExportError(f"node '{nic}' links outside the server; "
                                              "in NCCL only NICs do.")
                self.uplink[nic] += link.bandwidth
        self.parent: dict[str, tuple[str, Fraction]] = {}
        self.extra: list[Link] = []
        self._tree()

    def kind(self, node_id: str) -> str:
        return self.role[node_id][0]

    def ordered(self, kind: str) -> list[str]:
        return sorted((n for n in self.nodes if self.kind(n) == kind),
                      key=lambda n: self.role[n][1])

    def _tree(self) -> None:
        """Each device's PCI link: its first duplex link towards a CPU or PCI switch (the
        importer writes a device's link to its parent before any NVLink)."""
        used: set[int] = set()
        for i, link in enumerate(self.links):
            child, parent = link.source, link.target
            if link.duplex and child not in self.parent and self.kind(parent) in ("cpu", "pcie") \
                    and self.kind(child) in ("pcie", "gpu", "nic"):
                self.parent[child] = (parent, link.bandwidth)
                used.add(i)
        self.extra = [link for i, link in enumerate(self.links) if i not in used]
        for node_id in self.nodes:
            if self.kind(node_id) in ("pcie", "gpu", "nic") and \
                    self.kind(_cpu_of(self, node_id)) != "cpu":
                raise NcclTopoExportError(f"node '{node_id}' is not under a CPU in the "
                                          "server's PCI tree.")

    def busid(self, node_id: str) -> str:
        given = self.nodes[node_id].extra.get("busid")
        if given:
            return str(given)
        kinds = ("pcie", "gpu", "nic", "nvswitch", "cpu")
        return (f"0000:{kinds.index(self.kind(node_id)) * 0x20 + self.role[node_id][1]:02x}"
                ":00.0")


def _nvlinks(server: _Server) -> dict[str, list[tuple[str, str, Fraction]]]:
    """GPU -> (target bus id, target class, bandwidth) of every NVLink it lists."""
    out: dict[str, list[tuple[str, str, Fraction]]] = defaultdict(list)
    for link in server.extra:
        a, b = link.source, link.target
        ka, kb = server.kind(a), server.kind(b)
        if ka == kb == "cpu":
            continue                        # stated by the sockets' attributes
        if ka != "gpu" and kb == "gpu":
            a, b, ka, kb = b, a, kb, ka
        if ka != "gpu" or kb not in ("gpu", "nvswitch", "cpu"):
            raise NcclTopoExportError(f"the link {link.source} -> {link.target} is neither "
                                      "PCI nor NVLink, so NCCL's format cannot state it.")
        if kb == "cpu" and server.parent.get(a, ("",))[0] != b and \
                not _cpu_of(server, a) == b:
            raise NcclTopoExportError(f"GPU '{a}' has NVLink to CPU '{b}', which is not its "
                                      "own; NCCL links a GPU only to its own CPU.")
        if kb == "gpu" and not link.duplex and a != link.source:
            raise NcclTopoExportError(f"the one-way link {link.source} -> {link.target} "
                                      "cannot be NVLink listed by its sending GPU.")
        out[a].append((server.busid(b), CLASS[kb], link.bandwidth))
        if kb == "gpu" and link.duplex:
            out[b].append((server.busid(a), CLASS["gpu"], link.bandwidth))
    return out


def _cpu_of(server: _Server, node_id: str) -> str:
    """The root of ``node_id``'s PCI tree (itself when it has no parent)."""
    seen = {node_id}
    while node_id in server.parent:
        node_id = server.parent[node_id][0]
        if node_id in seen:
            raise NcclTopoExportError(f"the PCI links around '{node_id}' form a loop.")
        seen.add(node_id)
    return node_id


def first_server(topology: Topology) -> str:
    """The group of the first GPU that belongs to one."""
    group = next((n.group for n in topology.nodes if n.is_compute and n.group), None)
    if group is None:
        raise NcclTopoExportError("no GPU belongs to a server (a node group), so there is "
                                  "no server to write.")
    return group


def nccl_topology_xml(topology: Topology, group: str | None = None) -> bytes:
    """The ``NCCL_TOPO_FILE`` of one server (the first with GPUs unless ``group``)."""
    group = group or first_server(topology)
    server = _Server(topology, group)
    cpus = server.ordered("cpu")
    between = {link.bandwidth for link in server.extra
               if server.kind(link.source) == "cpu" and server.kind(link.target) == "cpu"}
    if len(between) > 1:
        raise NcclTopoExportError(f"server '{group}' joins its CPU sockets at different "
                                  "bandwidths; NCCL gives every pair of one machine the same.")
    attrs = _cpu_attributes(next(iter(between), None), f"server '{group}'")
    nvlinks = _nvlinks(server)
    children: dict[str, list[str]] = defaultdict(list)
    for node_id, (parent, _) in server.parent.items():
        children[parent].append(node_id)
    root = etree.Element("system", version="1")
    dev = {g: i for i, g in enumerate(server.ordered("gpu"))}
    net = {n: i for i, n in enumerate(server.ordered("nic"))}

    def write(parent_elem: etree._Element, node_id: str) -> None:
        kind = server.kind(node_id)
        bw = server.parent[node_id][1]
        if kind == "nic" and bw == LOC_BW and server.kind(server.parent[node_id][0]) == "cpu":
            holder = parent_elem
        else:
            speed, width = _pci_link(bw, f"the PCI link of '{node_id}'")
            holder = etree.SubElement(parent_elem, "pci", busid=server.busid(node_id),
                                      **{"class": CLASS[kind]}, link_speed=speed,
                                      link_width=str(width))
        if kind == "gpu":
            links = nvlinks.get(node_id, [])
            sm, per_link = _sm([bw for _, _, bw in links] or [Fraction(20)], f"GPU '{node_id}'")
            gpu = etree.SubElement(holder, "gpu", dev=str(dev[node_id]), sm=str(sm),
                                   rank=str(dev[node_id]), gdr="1")
            for target, tclass, link_bw in links:
                etree.SubElement(gpu, "nvlink", target=target, count=str(link_bw / per_link),
                                 tclass=tclass)
        elif kind == "nic":
            mbps = server.uplink.get(node_id, Fraction(0)) * 8000
            if mbps.denominator != 1 or mbps <= 0:
                raise NcclTopoExportError(
                    f"NIC '{node_id}' has {format_gbps(mbps / 8000)} GB/s of scale-out "
                    "bandwidth, which is not a whole number of Mb/s for NCCL's <net speed>.")
            nic = etree.SubElement(holder, "nic")
            etree.SubElement(nic, "net", name=f"mlx5_{net[node_id]}", dev=str(net[node_id]),
                             speed=str(mbps), port="1", gdr="1")
        for child in sorted(children[node_id], key=lambda n: (ROLES.index(server.kind(n)),
                                                              server.role[n][1])):
            write(holder, child)

    for number, cpu in enumerate(cpus):
        elem = etree.SubElement(root, "cpu", numaid=str(number), **attrs)
        for child in sorted(children[cpu], key=lambda n: (ROLES.index(server.kind(n)),
                                                          server.role[n][1])):
            write(elem, child)
    return etree.tostring(root, pretty_print=True)


def write_nccl_topology(path: str | os.PathLike[str], topology: Topology,
                        group: str | None = None) -> None:
    atomic_write_bytes(path, nccl_topology_xml(topology, group))


def _server_graph(topology: Topology, group: str) -> nx.MultiDiGraph:
    """The server's devices and links, with each NIC's scale-out bandwidth on the NIC."""
    inside = {n.id for n in topology.nodes if n.group == group}
    g = nx.MultiDiGraph()
    for n in topology.nodes:
        if n.id in inside:
            g.add_node(n.id, kind=n.kind, uplink=Fraction(0))
    for link in topology.links:
        ends = [e for e in (link.source, link.target) if e in inside]
        if len(ends) == 2:
            g.add_edge(link.source, link.target, bw=link.bandwidth)
            if link.duplex:
                g.add_edge(link.target, link.source, bw=link.bandwidth)
        elif ends:
            g.nodes[ends[0]]["uplink"] += link.bandwidth
    return g


def same_server(a: Topology, group_a: str, b: Topology, group_b: str) -> bool:
    """Whether two servers are the same network: devices of the same kinds, joined by links
    of the same bandwidths, NICs with the same scale-out bandwidth (up to naming)."""
    return nx.is_isomorphic(
        _server_graph(a, group_a), _server_graph(b, group_b),
        node_match=lambda p, q: (p["kind"], p["uplink"]) == (q["kind"], q["uplink"]),
        edge_match=lambda p, q: sorted(e["bw"] for e in p.values())
        == sorted(e["bw"] for e in q.values()))
