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
(``cpu0``, ``pcie3``, ``gpu1``, ``nic0``, ``nvswitch0`` after the group's prefix);
anything else, or a bandwidth no NCCL attribute can state, is refused with one sentence.
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
from canopy.engine.model.topology import Link, Topology, format_gbps

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
    raise NcclTopoExportError(f"{where}'s NVLink bandwidths ({listed} GB/s) are not whole "
                              "numbers of NVLinks for any GPU generation.")


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
