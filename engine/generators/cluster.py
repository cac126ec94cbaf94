"""Multi-server GPU clusters: servers x GPUs, an intra-server fabric, NICs and a scale-out
network (one switch, rail-optimised switches, or a leaf-spine with oversubscription).

Per server: GPUs join an NVSwitch, a direct all-to-all mesh or a ring, with ``gpu_bw`` the
GPU's total intra-server bandwidth per direction (split evenly over its mesh or ring
links). Each GPU has ``nics_per_gpu`` NICs of ``nic_bw``, or, for 1/q, shares one NIC with
q-1 other GPUs behind a PCIe switch (as on AWS p4d). NICs are switch nodes, as in
ForestColl (arXiv:2402.06787) §5 (DGX A100: GPU - NIC 25 GB/s, NIC - IB switch 25 GB/s).

Scale-out: ``single`` puts every NIC on one switch; ``rail`` puts NIC j of every server on
rail switch j mod R; ``leaf-spine`` groups ``servers_per_leaf`` servers into pods whose
leaves are either rail leaves (one per NIC index, as in NVIDIA's rail-optimised
SuperPOD) or one top-of-rack leaf, and joins every leaf to every spine with a total uplink
of (leaf downlink bandwidth) / oversubscription.
"""

from __future__ import annotations

import math
from fractions import Fraction

from canopy.engine.generators.builder import SPACING, Builder, check_size
from canopy.engine.generators.gpu_models import GPU_CHOICES, MI250_LINKS, MI250_WEIGHT, NONE
from canopy.engine.generators.params import (
    BANDWIDTH,
    CHOICE,
    INT,
    RATIO,
    ParameterError,
    ParamSpec,
)
from canopy.engine.model.topology import Topology, format_gbps

NVSWITCH, MESH, RING, MI250 = "nvswitch", "mesh", "ring", "mi250"
FABRICS = (NVSWITCH, MESH, RING, MI250)
SINGLE, RAIL, LEAF_SPINE = "single", "rail", "leaf-spine"
SCALE_OUTS = (SINGLE, RAIL, LEAF_SPINE)
RAIL_LEAF, TOR_LEAF = "rail", "tor"
LEAF_STYLES = (RAIL_LEAF, TOR_LEAF)

_GAP = 1.5 * SPACING          # between server blocks
_NIC_Y = -1.2 * SPACING       # NIC row above the GPUs
_PCIE_Y = -0.6 * SPACING
_NET_Y = -3.2 * SPACING       # scale-out switches
_SPINE_Y = -5.0 * SPACING
_ROW_PITCH = 4.0 * SPACING    # between rows of servers in a grid
_GRID_FROM = 5
"""Clusters of this many servers or more (single switch or rails) are drawn as a grid of
servers under their switches rather than one long row."""
_ASPECT = 1.6


def cluster(servers: int, gpus: int, fabric: str, gpu_bw: Fraction, nics_per_gpu: Fraction,
            nic_bw: Fraction, pcie_bw: Fraction, scale_out: str, rails: int, leaf: str,
            servers_per_leaf: int, spines: int, oversubscription: Fraction,
            gpu: str = NONE) -> Topology:
    """Build the cluster; node ids follow ``n<server>.gpu<i>``, ``n<s>.nic<j>``. ``gpu``
    names the GPU model whose values the options were filled from (its name only)."""
    if fabric == MI250 and gpus != 16:
        raise ParameterError(f"--fabric mi250 joins the 16 GCDs of an MI250 server; --gpus "
                             f"is {gpus}.")
    nics = _nic_count(gpus, nics_per_gpu, servers)
    check_size(servers * (gpus + 2 * nics + 1))
    b = Builder(_name(servers, gpus if gpu == NONE else f"{gpus} {gpu.upper()}", fabric,
                      gpu_bw, nics, nic_bw, scale_out))
    width = _server_width(gpus, nics, fabric)
    nic_ids: list[list[str]] = []
    for s in range(servers):
        x0 = s * (width + _GAP)
        nic_ids.append(_server(b, s, x0, width, gpus, fabric, gpu_bw, nics_per_gpu, nics,
                               nic_bw, pcie_bw))
    total_width = servers * width + (servers - 1) * _GAP
    uses_rails = scale_out == RAIL or (scale_out == LEAF_SPINE and leaf == RAIL_LEAF)
    if rails > nics and servers > 1 and uses_rails:
        raise ParameterError(f"--rails is {rails} but each server has only {nics} NICs; "
                             "use at most one rail per NIC.")
    if servers > 1:
        if scale_out == SINGLE:
            sw = b.switch("ib", total_width / 2, _NET_Y, label="IB switch")
            for ids in nic_ids:
                for nic in ids:
                    b.link(nic, sw, nic_bw)
        elif scale_out == RAIL:
            _rails(b, nic_ids, rails or nics, nic_bw, total_width)
        else:
            _leaf_spine(b, nic_ids, nic_bw, width, leaf, rails or nics, servers_per_leaf,
                        spines, oversubscription)
    if servers >= _GRID_FROM:
        per_unit = servers_per_leaf if scale_out == LEAF_SPINE else 1
        _grid(b.topology, -(-servers // per_unit), per_unit * (width + _GAP),
              _ROW_PITCH + (-_NET_Y if scale_out == LEAF_SPINE else 0.0), per_unit)
    return b.topology


def _grid(topology: Topology, units: int, cell: float, pitch: float, per_unit: int) -> None:
    """Rearrange a cluster built in one row into a grid of units (servers, or pods with
    their leaves) whose shape is closest to a 16:10 screen, under the switches shared by
    all units (single switch, rails, spines), which are spread over the grid's width."""

    def extent(columns: int) -> float:
        rows = -(-units // columns)
        return max(columns * cell / _ASPECT, rows * pitch - _SPINE_Y)

    columns = min(range(1, units + 1), key=extent)
    shared = []
    for node in topology.nodes:
        unit = _unit_of(node.id, node.group, per_unit)
        if unit is None:
            shared.append(node)
            continue
        row, column = divmod(unit, columns)
        node.x = round(float(node.x or 0.0) - (unit - column) * cell, 3)
        node.y = round(float(node.y or 0.0) + row * pitch, 3)
    width = columns * cell - _GAP
    tiers: dict[float, list] = {}
    for node in shared:
        tiers.setdefault(float(node.y or 0.0), []).append(node)
    for tier in tiers.values():
        tier.sort(key=lambda n: float(n.x or 0.0))
        for i, node in enumerate(tier):
            node.x = round(width * (i + 0.5) / len(tier), 3)


def _unit_of(node_id: str, group: str | None, per_unit: int) -> int | None:
    """The grid unit of a node: its server's (or pod's) index; None for shared switches."""
    if group:
        return int(group[1:]) // per_unit
    if node_id.startswith("leaf"):
        return int(node_id[4:].split(".")[0])
    return None


def _nic_count(gpus: int, nics_per_gpu: Fraction, servers: int) -> int:
    if nics_per_gpu == 0:
        if servers > 1:
            raise ParameterError("--nics-per-gpu is 0, so the servers cannot reach each "
                                 "other; give each GPU a NIC or use one server.")
        return 0
    if nics_per_gpu.denominator == 1:
        return gpus * nics_per_gpu.numerator
    q = nics_per_gpu.denominator
    if nics_per_gpu.numerator != 1 or gpus % q:
        raise ParameterError(f"--nics-per-gpu is {nics_per_gpu}; use a whole number, or 1/q "
                             f"with q dividing the {gpus} GPUs of a server.")
    return gpus // q


def _name(servers: int, gpus: int | str, fabric: str, gpu_bw: Fraction, nics: int,
          nic_bw: Fraction, scale_out: str) -> str:
    net = f", {nics} x {format_gbps(nic_bw)} GB/s NICs, {scale_out}" if nics else ""
    return (f"{servers} x {gpus} GPUs ({fabric} {format_gbps(gpu_bw)} GB/s{net})")


def _server_width(gpus: int, nics: int, fabric: str) -> float:
    if fabric == NVSWITCH:
        return SPACING * max(gpus, nics, 1)
    return max(2 * _radius(gpus) + SPACING, SPACING * nics)


def _radius(gpus: int) -> float:
    return max(0.8 * SPACING, SPACING * gpus / (2 * math.pi))


def _gpu_positions(gpus: int, fabric: str, x0: float, width: float) -> list[tuple[float, float]]:
    if fabric == NVSWITCH:
        left = x0 + (width - SPACING * gpus) / 2 + SPACING / 2
        return [(left + SPACING * g, 0.0) for g in range(gpus)]
    r = _radius(gpus)
    cx, cy = x0 + width / 2, r
    return [(cx + r * math.sin(2 * math.pi * (g + 0.5) / gpus),
             cy - r * math.cos(2 * math.pi * (g + 0.5) / gpus)) for g in range(gpus)]


def _server(b: Builder, s: int, x0: float, width: float, gpus: int, fabric: str,
            gpu_bw: Fraction, nics_per_gpu: Fraction, nics: int, nic_bw: Fraction,
            pcie_bw: Fraction) -> list[str]:
    group = f"n{s}"
    pos = _gpu_positions(gpus, fabric, x0, width)
    gpu = [b.compute(f"{group}.gpu{g}", x, y, label=f"{group} GPU {g}", group=group)
           for g, (x, y) in enumerate(pos)]
    if gpus > 1:
        if fabric == NVSWITCH:
            sw = b.switch(f"{group}.nvswitch", x0 + width / 2, 1.3 * SPACING,
                          label=f"{group} NVSwitch", group=group)
            for g in gpu:
                b.link(g, sw, gpu_bw)
        elif fabric == MESH:
            for i in range(gpus):
                for j in range(i + 1, gpus):
                    b.link(gpu[i], gpu[j], gpu_bw / (gpus - 1))
        elif fabric == MI250:
            for i, j, weight in MI250_LINKS:
                b.link(gpu[i], gpu[j], gpu_bw * weight / MI250_WEIGHT)
        else:
            pairs = [(i, (i + 1) % gpus) for i in range(gpus)] if gpus > 2 else [(0, 1)]
            share = gpu_bw / 2 if gpus > 2 else gpu_bw
            for i, j in pairs:
                b.link(gpu[i], gpu[j], share)
    ids = []
    nic_x = [x0 + (width - SPACING * nics) / 2 + SPACING * (j + 0.5) for j in range(nics)]
    if nics_per_gpu >= 1:
        per = int(nics_per_gpu)
        for j in range(nics):
            nic = b.switch(f"{group}.nic{j}", nic_x[j], _NIC_Y, label=f"{group} NIC {j}",
                           group=group)
            b.link(gpu[j // per], nic, nic_bw)
            ids.append(nic)
    elif nics:
        q = nics_per_gpu.denominator
        for j in range(nics):
            pcie = b.switch(f"{group}.pcie{j}", nic_x[j], _PCIE_Y,
                            label=f"{group} PCIe switch {j}", group=group)
            nic = b.switch(f"{group}.nic{j}", nic_x[j], _NIC_Y - 0.4 * SPACING,
                           label=f"{group} NIC {j}", group=group)
            for index in range(j * q, (j + 1) * q):
                b.link(gpu[index], pcie, pcie_bw)
            b.link(pcie, nic, nic_bw)
            ids.append(nic)
    return ids


def _rails(b: Builder, nic_ids: list[list[str]], rails: int, nic_bw: Fraction,
           total_width: float) -> None:
    step = total_width / rails
    for r in range(rails):
        b.switch(f"rail{r}", step * (r + 0.5), _NET_Y, label=f"rail switch {r}")
    for ids in nic_ids:
        for j, nic in enumerate(ids):
            b.link(nic, f"rail{j % rails}", nic_bw)


def _leaf_spine(b: Builder, nic_ids: list[list[str]], nic_bw: Fraction, width: float,
                leaf: str, rails: int, servers_per_leaf: int, spines: int,
                oversubscription: Fraction) -> None:
    servers = len(nic_ids)
    pods = -(-servers // servers_per_leaf)
    downlink: dict[str, Fraction] = {}
    for p in range(pods):
        members = range(p * servers_per_leaf, min(servers, (p + 1) * servers_per_leaf))
        x_left = members[0] * (width + _GAP)
        x_right = members[-1] * (width + _GAP) + width
        count = rails if leaf == RAIL_LEAF else 1
        step = (x_right - x_left) / count
        for r in range(count):
            name = f"leaf{p}.{r}" if leaf == RAIL_LEAF else f"leaf{p}"
            b.switch(name, x_left + step * (r + 0.5), _NET_Y, label=name.replace("leaf", "leaf "))
            downlink[name] = Fraction(0)
        for s in members:
            for j, nic in enumerate(nic_ids[s]):
                name = f"leaf{p}.{j % rails}" if leaf == RAIL_LEAF else f"leaf{p}"
                b.link(nic, name, nic_bw)
                downlink[name] += nic_bw
    if len(downlink) == 1:
        return                      # a single leaf needs no spine
    total_width = servers * width + (servers - 1) * _GAP
    for k in range(spines):
        b.switch(f"spine{k}", total_width * (k + 0.5) / spines, _SPINE_Y, label=f"spine {k}")
    for name, down in downlink.items():
        up = down / oversubscription / spines
        for k in range(spines):
            b.link(name, f"spine{k}", up)


CLUSTER_PARAMS = (
    ParamSpec("gpu", CHOICE, NONE,
              "GPU model: fills --gpus, --fabric, --gpu-bw, --nics-per-gpu and --nic-bw "
              "with its reference server's values (options given as well win) and records "
              "its SMs and runtime for the exports",
              choices=GPU_CHOICES),
    ParamSpec("servers", INT, 2, "number of servers", minimum=1),
    ParamSpec("gpus", INT, 8, "GPUs per server", minimum=1),
    ParamSpec("fabric", CHOICE, NVSWITCH,
              "intra-server fabric: nvswitch, mesh (direct all-to-all), ring or mi250 "
              "(the Infinity Fabric links of 16 MI250 GCDs)",
              choices=FABRICS),
    ParamSpec("gpu_bw", BANDWIDTH, Fraction(300),
              "each GPU's total intra-server bandwidth per direction (NVLink or Infinity "
              "Fabric), GB/s"),
    ParamSpec("nics_per_gpu", RATIO, Fraction(1),
              "NICs per GPU: a whole number, or 1/q for one NIC shared by q GPUs",
              minimum=0),
    ParamSpec("nic_bw", BANDWIDTH, Fraction(25), "bandwidth of one NIC, GB/s (25 = 200 Gb/s)"),
    ParamSpec("pcie_bw", BANDWIDTH, Fraction(32),
              "GPU to PCIe switch bandwidth when GPUs share a NIC, GB/s",
              relevant_when=lambda v: v.get("nics_per_gpu", 1) < 1),
    ParamSpec("scale_out", CHOICE, RAIL,
              "network between servers: single (one switch), rail, or leaf-spine",
              choices=SCALE_OUTS),
    ParamSpec("rails", INT, 0,
              "rail switches (or rail leaves per pod); NIC j uses rail j mod rails; "
              "0 = one per NIC", minimum=0,
              relevant_when=lambda v: v.get("scale_out") == RAIL
              or (v.get("scale_out") == LEAF_SPINE and v.get("leaf") == RAIL_LEAF)),
    ParamSpec("leaf", CHOICE, RAIL_LEAF,
              "leaf-spine leaves: rail (one leaf per NIC index per pod) or tor (one per pod)",
              choices=LEAF_STYLES, relevant_when=lambda v: v.get("scale_out") == LEAF_SPINE),
    ParamSpec("servers_per_leaf", INT, 2, "servers per pod (sharing its leaves)", minimum=1,
              relevant_when=lambda v: v.get("scale_out") == LEAF_SPINE),
    ParamSpec("spines", INT, 2, "number of spine switches", minimum=1,
              relevant_when=lambda v: v.get("scale_out") == LEAF_SPINE),
    ParamSpec("oversubscription", RATIO, Fraction(1),
              "leaf downlink : uplink bandwidth ratio (1 = non-blocking, 2 = 2:1)",
              relevant_when=lambda v: v.get("scale_out") == LEAF_SPINE),
)
