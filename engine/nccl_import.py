"""Import an NCCL topology file (``NCCL_TOPO_FILE`` / ``NCCL_TOPO_DUMP_FILE`` XML).

What is read, per host:

- the PCIe tree: ``<cpu>`` sockets, ``<pci>`` bridges (class 0x0604..) as PCIe switch
  nodes, GPUs (class 0x03.. or a ``<gpu>`` child) as compute nodes and NICs (class 0x02..
  or a ``<nic>`` child) as switch nodes. The link to a device's parent has the device's
  ``link_speed`` (GT/s per lane) x ``link_width`` (lanes) x encoding / 8 bits: 8b/10b up to
  5 GT/s, 128b/130b from 8 GT/s on. A NIC's scale-out bandwidth is the sum of its
  ``<net speed>`` values (Mb/s). Sockets are joined pairwise by their inter-socket link.
- ``<nvlink target count tclass>`` under each ``<gpu>``: ``count`` links of the GPU
  generation's per-link bandwidth (``sm`` attribute); a tclass 0x068000 target is an
  NVSwitch and becomes a switch node.

Where the file has no NVLink (most static files: NCCL finds it at run time) the options
supply the GPU fabric: one NVSwitch per host or a direct all-to-all NVLink mesh. N hosts
are copies of the file joined through rail switches or one switch. Anything odd (a link
to the GPU's own bus id, an unknown class, a missing speed...) gives a warning naming the
element and its line and is skipped or given a stated default; only a file with nothing
usable (not XML, unsafe XML, no GPU) raises NcclImportError.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from lxml import etree

from canopy.engine.errors import CanopyError
from canopy.engine.generators.builder import MAX_NODES
from canopy.engine.safe_xml import parse_xml_bytes, parse_xml_file
from canopy.engine.topology import (
    COMPUTE,
    SWITCH,
    Link,
    Node,
    Topology,
    format_gbps,
    format_number,
    parse_bandwidth,
)

MAX_ELEMENTS = 100_000
MAX_HOSTS = 4096
RAIL, SINGLE = "rail", "single"
NETS = (RAIL, SINGLE)

# Per-link NVLink bandwidth per direction (GB/s) by compute capability, from NVIDIA's
# datasheets: P100 NVLink1 20; V100 NVLink2 25 (6 links, 150 GB/s); Turing NVLink2 25;
# A100 NVLink3 25 (12 links, 300 GB/s); GA10x NVLink3 bridges 14.0625 (A40: 4 links,
# 112.5 GB/s both ways); H100 NVLink4 25 (18 links, 450 GB/s); B200 NVLink5 50 (18 links).
NVLINK_BW_BY_SM = {60: Fraction(20), 70: Fraction(25), 75: Fraction(25), 80: Fraction(25),
                   86: Fraction("14.0625"), 90: Fraction(25), 100: Fraction(50)}
DEFAULT_NVLINK_BW = Fraction(25)
# Inter-socket bandwidth (GB/s) by CPU vendor: NCCL's own estimates (SKL QPI, AMD, other).
CPU_BW_BY_VENDOR = {"GenuineIntel": Fraction(10), "AuthenticAMD": Fraction(16)}
DEFAULT_CPU_BW = Fraction(6)
NVSWITCH_CLASS = "0x068000"


class NcclImportError(CanopyError):
    """An NCCL topology file that holds nothing Canopy can use."""


def pcie_bandwidth(gt_per_s: Fraction, lanes: int) -> Fraction:
    """GB/s of a PCIe link: 8b/10b encoding up to 5 GT/s, 128b/130b from 8 GT/s on."""
    efficiency = Fraction(8, 10) if gt_per_s <= 5 else Fraction(128, 130)
    return gt_per_s * lanes * efficiency / 8


DEFAULT_PCIE_BW = pcie_bandwidth(Fraction(16), 16)     # Gen4 x16, 31.5 GB/s


@dataclass(frozen=True)
class NcclImportOptions:
    """How to complete what the file does not say.

    ``nvswitch_bw``: when the file has no NVLink, join each host's GPUs through one
    NVSwitch with this per-GPU bandwidth; ``nvlink_bw``: instead, link every GPU pair
    directly with this bandwidth. ``nic_bw`` is used for NICs without a ``<net speed>``.
    """

    hosts: int = 1
    net: str = RAIL
    nvlink_bw: Fraction | None = None
    nvswitch_bw: Fraction | None = None
    nic_bw: Fraction = Fraction(25)

    def __post_init__(self) -> None:
        """Bandwidths may come as ints, floats or text (a dialog's fields): make them exact."""
        for name in ("nvlink_bw", "nvswitch_bw", "nic_bw"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Fraction):
                try:
                    object.__setattr__(self, name, parse_bandwidth(value))
                except ValueError as exc:
                    raise NcclImportError(f"the {name.replace('_bw', '')} bandwidth "
                                          f"{value!r} {exc}.") from None


@dataclass
class NcclImport:
    topology: Topology
    warnings: list[str]


# ------------------------------------------------------------------ the host model


@dataclass
class _Device:
    key: str                      # node id within a host: cpu0, pcie1, gpu2, nic0, nvswitch0
    kind: str
    label: str
    parent: str | None = None
    up_bw: Fraction | None = None  # bandwidth of the link to ``parent``
    busid: str | None = None
    depth: int = 0


@dataclass
class _Host:
    """One host as read from the file; instantiated once per host."""

    devices: dict[str, _Device] = field(default_factory=dict)
    links: list[tuple[str, str, Fraction]] = field(default_factory=list)  # duplex extras
    nic_bw: dict[str, Fraction] = field(default_factory=dict)              # scale-out speed
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, role: str, kind: str, label: str, parent: str | None,
            up_bw: Fraction | None, busid: str | None, depth: int) -> _Device:
        key = f"{role}{self.counts[role]}"
        self.counts[role] += 1
        dev = _Device(key, kind, label, parent, up_bw, busid, depth)
        self.devices[key] = dev
        return dev

    def of_role(self, role: str) -> list[_Device]:
        return [d for k, d in self.devices.items() if re.fullmatch(rf"{role}\d+", k)]


class _Reader:
    """Walks the XML once, collecting devices, links and warnings."""

    def __init__(self, source: str, options: NcclImportOptions) -> None:
        self.source = source
        self.options = options
        self.warnings: list[str] = []
        self.host = _Host()
        self.gpu_by_busid: dict[str, _Device] = {}
        self.nvlinks: list[tuple[_Device, int | None, etree._Element]] = []
        self.cpu_bw: dict[str, Fraction] = {}

    def warn(self, elem: etree._Element, message: str) -> None:
        self.warnings.append(f"{self.source}, line {elem.sourceline}: {_describe(elem)} "
                             f"{message}")

    # -------------------------------------------------------------- tree walk

    def read(self, root: etree._Element) -> _Host:
        if root.tag != "system":
            raise NcclImportError(f"{self.source}: the root element is <{root.tag}>, not "
                                  "<system>, so this is not an NCCL topology file.")
        for elem in root:
            if not isinstance(elem.tag, str):
                continue
            if elem.tag == "cpu":
                self._cpu(elem)
            else:
                self.warn(elem, "is not a <cpu> and was skipped.")
        self._join_cpus()
        self._nvlinks()
        return self.host

    def _cpu(self, elem: etree._Element) -> None:
        numa = elem.get("numaid", str(self.host.counts["cpu"]))
        cpu = self.host.add("cpu", SWITCH, f"CPU {numa}", None, None, None, 0)
        self.cpu_bw[cpu.key] = CPU_BW_BY_VENDOR.get(elem.get("vendor", ""), DEFAULT_CPU_BW)
        self._children(elem, cpu)

    def _children(self, elem: etree._Element, parent: _Device) -> None:
        for child in elem:
            if not isinstance(child.tag, str):
                continue
            if child.tag == "pci":
                self._pci(child, parent)
            elif child.tag == "nic":
                self._nic(child, parent, up_bw=None)
            else:
                self.warn(child, f"is not expected inside <{elem.tag}> and was skipped.")

    def _pci(self, elem: etree._Element, parent: _Device) -> None:
        busid = _busid(elem.get("busid"))
        if not busid:
            self.warn(elem, "has no busid and was skipped.")
            return
        cls = (elem.get("class") or "").lower()
        gpu_elem = elem.find("gpu")
        nic_elem = elem.find("nic")
        if cls.startswith("0x03") or gpu_elem is not None:
            self._gpu(elem, busid, parent, gpu_elem)
        elif cls.startswith("0x02") or nic_elem is not None:
            for child in elem:
                if isinstance(child.tag, str) and child.tag != "nic":
                    self.warn(child, "is not expected inside a NIC's <pci> and was skipped.")
            up = self._link_bw(elem, parent)
            if nic_elem is None:
                self._nic(elem, parent, up, busid=busid)
            else:
                self._nic(nic_elem, parent, up, busid=busid)
        elif cls.startswith("0x0604") or (not cls and elem.find("pci") is not None):
            if not cls:
                self.warn(elem, "has no class but holds PCI devices; read as a PCIe switch.")
            up = self._link_bw(elem, parent)
            bridge = self.host.add("pcie", SWITCH, f"PCIe switch {busid}", parent.key, up,
                                   busid, parent.depth + 1)
            self._children(elem, bridge)
        elif cls.startswith("0x0680"):
            return                  # an NVSwitch in the tree: it comes in through <nvlink>
        elif not cls:
            self.warn(elem, "has no class, so it is neither a GPU, a NIC nor a PCIe switch; "
                            "skipped.")
        else:
            self.warn(elem, f"has class {cls}, which is not a GPU (0x03..), NIC (0x02..) or "
                            "PCIe switch (0x0604..); skipped.")

    def _gpu(self, elem: etree._Element, busid: str, parent: _Device,
             gpu_elem: etree._Element | None) -> None:
        up = self._link_bw(elem, parent)
        dev_no = gpu_elem.get("dev") if gpu_elem is not None else None
        index = self.host.counts["gpu"]
        label = f"GPU {dev_no if dev_no is not None else index} ({busid})"
        gpu = self.host.add("gpu", COMPUTE, label, parent.key, up, busid, parent.depth + 1)
        self.gpu_by_busid[busid] = gpu
        if gpu_elem is None:
            return
        sm = _int(gpu_elem.get("sm"))
        for child in gpu_elem:
            if not isinstance(child.tag, str):
                continue
            if child.tag == "nvlink":
                self.nvlinks.append((gpu, sm, child))
            else:
                self.warn(child, "is not expected inside <gpu> and was skipped.")
        for child in elem:
            if isinstance(child.tag, str) and child.tag != "gpu":
                self.warn(child, "is not expected inside a GPU's <pci> and was skipped.")

    def _nic(self, elem: etree._Element, parent: _Device, up_bw: Fraction | None,
             busid: str | None = None) -> None:
        speed = Fraction(0)
        nets = [n for n in elem if isinstance(n.tag, str) and n.tag == "net"]
        for net in nets:
            value = _number(net.get("speed"))
            if value is None or value <= 0:
                self.warn(net, "has no usable speed; it adds nothing to the NIC.")
            else:
                speed += value / 8000          # Mb/s -> GB/s
        if speed == 0:
            speed = self.options.nic_bw
            self.warn(elem, f"gives no <net speed>; assuming {format_gbps(speed)} GB/s "
                            "(set it with --nic-bw).")
        names = [n.get("name") for n in nets if n.get("name")]
        detail = " ".join(x for x in [busid, *names] if x)
        label = f"NIC {self.host.counts['nic']}" + (f" ({detail})" if detail else "")
        nic = self.host.add("nic", SWITCH, label, parent.key, up_bw if up_bw else speed,
                            busid, parent.depth + 1)
        self.host.nic_bw[nic.key] = speed

    def _link_bw(self, elem: etree._Element, parent: _Device) -> Fraction:
        speed_text = elem.get("link_speed") or ""
        width = _int(elem.get("link_width"))
        match = re.match(r"\s*(\d+(?:\.\d+)?)", speed_text)
        if match and width and width > 0:
            return pcie_bandwidth(Fraction(match.group(1)), width)
        fallback = parent.up_bw if parent.up_bw is not None else DEFAULT_PCIE_BW
        origin = "its parent's" if parent.up_bw is not None else "PCIe Gen4 x16"
        self.warn(elem, f"has no usable link_speed/link_width ('{speed_text}', "
                        f"'{elem.get('link_width', '')}'); assuming {origin} "
                        f"{format_gbps(fallback)} GB/s.")
        return fallback

    # -------------------------------------------------------------- links

    def _join_cpus(self) -> None:
        cpus = self.host.of_role("cpu")
        for i, a in enumerate(cpus):
            for b in cpus[i + 1:]:
                bw = min(self.cpu_bw[a.key], self.cpu_bw[b.key])
                self.host.links.append((a.key, b.key, bw))

    def _nvlinks(self) -> None:
        """GPU-GPU and GPU-NVSwitch NVLink; each GPU lists its own end of every link."""
        pair_bw: dict[tuple[str, str], dict[str, Fraction]] = defaultdict(dict)
        switch_bw: dict[tuple[str, str], Fraction] = defaultdict(Fraction)
        switches: dict[str, _Device] = {}
        warned_sm: set[str] = set()
        for gpu, sm, elem in self.nvlinks:
            target = _busid(elem.get("target"))
            tclass = (elem.get("tclass") or "").lower()
            count = _int(elem.get("count"))
            if not target:
                self.warn(elem, "has no target and was skipped.")
                continue
            if target == gpu.busid:
                self.warn(elem, f"links GPU {gpu.busid} to its own bus id; skipped.")
                continue
            if count is None or count < 1:
                self.warn(elem, f"has count '{elem.get('count', '')}'; assuming 1 link.")
                count = 1
            per_link = NVLINK_BW_BY_SM.get(sm) if sm is not None else None
            if per_link is None:
                per_link = DEFAULT_NVLINK_BW
                if gpu.key not in warned_sm:
                    warned_sm.add(gpu.key)
                    self.warn(elem.getparent(), f"has sm '{elem.getparent().get('sm', '')}', "
                              "an unknown GPU generation; assuming "
                              f"{format_gbps(per_link)} GB/s per NVLink.")
            bw = per_link * count
            if tclass.startswith("0x0680"):
                if target not in switches:
                    switches[target] = self.host.add(
                        "nvswitch", SWITCH, f"NVSwitch {target}", None, None, target, 0)
                switch_bw[(gpu.key, switches[target].key)] += bw
            elif target in self.gpu_by_busid and (not tclass or tclass.startswith("0x03")):
                peer = self.gpu_by_busid[target]
                key = tuple(sorted((gpu.key, peer.key)))
                pair_bw[key][gpu.key] = pair_bw[key].get(gpu.key, Fraction(0)) + bw
            elif tclass.startswith("0x03") or not tclass:
                self.warn(elem, f"targets {target}, which is not a GPU in this file; skipped.")
            else:
                self.warn(elem, f"targets class {tclass}, which is neither a GPU nor an "
                                "NVSwitch; skipped.")
        for (a, b), ends in pair_bw.items():
            values = set(ends.values())
            bw = min(values)
            if len(ends) == 2 and len(values) == 2:
                self.warnings.append(
                    f"{self.source}: the NVLink between {self.host.devices[a].label} and "
                    f"{self.host.devices[b].label} is listed as {format_gbps(ends[a])} and "
                    f"{format_gbps(ends[b])} GB/s from its two ends; using "
                    f"{format_gbps(bw)} GB/s both ways.")
            self.host.links.append((a, b, bw))
        for (g, s), bw in switch_bw.items():
            self.host.links.append((g, s, bw))

    def supply_fabric(self) -> None:
        """Apply --nvswitch-bw / --nvlink-bw where the file describes no NVLink."""
        opts = self.options
        gpus = self.host.of_role("gpu")
        has_nvlink = any(a.startswith("gpu") and (b.startswith("gpu") or
                                                  b.startswith("nvswitch"))
                         for a, b, _ in self.host.links)
        if has_nvlink:
            for flag, value in (("--nvlink-bw", opts.nvlink_bw),
                                ("--nvswitch-bw", opts.nvswitch_bw)):
                if value is not None:
                    self.warnings.append(f"{self.source} describes NVLink itself, so {flag} "
                                         "was not used.")
            return
        if opts.nvswitch_bw is not None:
            sw = self.host.add("nvswitch", SWITCH, "NVSwitch", None, None, None, 0)
            for g in gpus:
                self.host.links.append((g.key, sw.key, opts.nvswitch_bw))
        elif opts.nvlink_bw is not None:
            for i, a in enumerate(gpus):
                for b in gpus[i + 1:]:
                    self.host.links.append((a.key, b.key, opts.nvlink_bw))


# ------------------------------------------------------------------ helpers


def _describe(elem: etree._Element) -> str:
    keys = [k for k in ("busid", "target", "name", "numaid", "class", "dev") if elem.get(k)]
    attrs = " ".join(f'{k}="{elem.get(k)}"' for k in keys[:2])
    return f"<{elem.tag}{' ' + attrs if attrs else ''}>"


def _busid(text: str | None) -> str:
    return (text or "").strip().lower()


def _int(text: str | None) -> int | None:
    if text is None or not re.fullmatch(r"\s*\d+\s*", text):
        return None
    return int(text)


def _number(text: str | None) -> Fraction | None:
    if text is None or not re.fullmatch(r"\s*\d+(\.\d+)?\s*", text):
        return None
    return Fraction(text.strip())


# ------------------------------------------------------------------ building


def _prune(host: _Host) -> None:
    """Drop CPUs and PCIe switches that lead nowhere (no GPU or NIC behind them)."""
    while True:
        degree: dict[str, set[str]] = defaultdict(set)
        for d in host.devices.values():
            if d.parent is not None:
                degree[d.key].add(d.parent)
                degree[d.parent].add(d.key)
        for a, b, _ in host.links:
            degree[a].add(b)
            degree[b].add(a)
        dead = [k for k, d in host.devices.items()
                if k.startswith(("cpu", "pcie")) and len(degree[k]) <= 1]
        if not dead:
            return
        for k in dead:
            del host.devices[k]
        for d in host.devices.values():
            if d.parent in dead:
                d.parent, d.up_bw = None, None
        host.links = [(a, b, bw) for a, b, bw in host.links if a not in dead and b not in dead]


def _layout(host: _Host) -> tuple[dict[str, tuple[float, float]], float]:
    """Tidy tree per socket (leaves in file order, parents over their children), NVSwitches
    in a row under the GPUs. Returns positions and the host's width."""
    step, level = 70.0, 90.0
    children: dict[str | None, list[str]] = defaultdict(list)
    for k, d in host.devices.items():
        if not k.startswith("nvswitch"):
            children[d.parent].append(k)
    pos: dict[str, tuple[float, float]] = {}
    slot = [0]

    def place(key: str) -> float:
        kids = children.get(key, [])
        if kids:
            xs = [place(c) for c in kids]
            x = sum(xs) / len(xs)
        else:
            x = slot[0] * step
            slot[0] += 1
        pos[key] = (x, host.devices[key].depth * level)
        return x

    for root in children[None]:
        place(root)
    width = max(slot[0], 1) * step
    bottom = (max((d.depth for d in host.devices.values()), default=0) + 1.3) * level
    switches = host.of_role("nvswitch")
    for i, sw in enumerate(switches):
        pos[sw.key] = ((i + 0.5) * width / len(switches), bottom)
    return pos, width


def _build(host: _Host, reader: _Reader, source: str) -> Topology:
    opts = reader.options
    nics = host.of_role("nic")
    if opts.hosts > 1 and not nics:
        raise NcclImportError(f"{source} has no NIC, so {opts.hosts} hosts cannot be joined.")
    count = opts.hosts * len(host.devices) + len(nics) + 1
    if count > MAX_NODES:
        raise NcclImportError(f"{source} with {opts.hosts} hosts makes {count} nodes; "
                              f"the limit is {MAX_NODES}.")
    pos, width = _layout(host)
    gap = 2 * 70.0
    topo = Topology(name=f"{Path(source).stem} x {opts.hosts}" if opts.hosts > 1
                    else Path(source).stem)
    topo.extra["imported_from"] = {
        "format": "nccl-topology", "file": Path(source).name, "hosts": opts.hosts,
        "net": opts.net, "nic_bw": str(format_number(opts.nic_bw)),
        **{k: str(format_number(v)) for k, v in (("nvlink_bw", opts.nvlink_bw),
                                                 ("nvswitch_bw", opts.nvswitch_bw))
           if v is not None}}
    for h in range(opts.hosts):
        prefix, dx = f"h{h}.", h * (width + gap)
        for key, dev in host.devices.items():
            x, y = pos[key]
            extra = {"busid": dev.busid} if dev.busid else {}
            topo.nodes.append(Node(prefix + key, dev.kind, f"h{h} {dev.label}", f"h{h}",
                                   round(x + dx, 3), round(y, 3), extra))
            if dev.parent is not None:
                topo.links.append(Link(prefix + key, prefix + dev.parent, dev.up_bw))
        for a, b, bw in host.links:
            topo.links.append(Link(prefix + a, prefix + b, bw))
    if opts.hosts > 1:
        total = opts.hosts * width + (opts.hosts - 1) * gap
        if opts.net == SINGLE:
            topo.nodes.append(Node("net", SWITCH, "network switch", None, total / 2, -150.0))
            targets = {nic.key: "net" for nic in nics}
        else:
            for r in range(len(nics)):
                topo.nodes.append(Node(f"rail{r}", SWITCH, f"rail switch {r}", None,
                                       (r + 0.5) * total / len(nics), -150.0))
            targets = {nic.key: f"rail{r}" for r, nic in enumerate(nics)}
        for h in range(opts.hosts):
            for nic in nics:
                topo.links.append(Link(f"h{h}.{nic.key}", targets[nic.key],
                                       host.nic_bw[nic.key]))
    return topo


def import_nccl(root: etree._Element, source: str,
                options: NcclImportOptions = NcclImportOptions()) -> NcclImport:
    """Build a topology from a parsed NCCL topology tree (see the module docstring)."""
    if options.hosts < 1 or options.hosts > MAX_HOSTS:
        raise NcclImportError(f"the number of hosts must be between 1 and {MAX_HOSTS}, "
                              f"not {options.hosts}.")
    if options.net not in NETS:
        raise NcclImportError(f"the scale-out network must be 'rail' or 'single', "
                              f"not '{options.net}'.")
    if options.nvlink_bw is not None and options.nvswitch_bw is not None:
        raise NcclImportError("give either an NVSwitch bandwidth or an NVLink bandwidth, "
                              "not both.")
    elements = sum(1 for _ in root.iter())
    if elements > MAX_ELEMENTS:
        raise NcclImportError(f"{source} has {elements} XML elements; the limit is "
                              f"{MAX_ELEMENTS}.")
    reader = _Reader(source, options)
    host = reader.read(root)
    if not host.of_role("gpu"):
        raise NcclImportError(f"{source} describes no GPU (no <pci> of class 0x03.. and no "
                              "<gpu>), so there is nothing to schedule.")
    reader.supply_fabric()
    _prune(host)
    return NcclImport(_build(host, reader, source), reader.warnings)


def import_nccl_bytes(data: bytes, source: str = "NCCL topology",
                      options: NcclImportOptions = NcclImportOptions()) -> NcclImport:
    """Parse ``data`` safely (canopy.engine.safe_xml) and import it."""
    return import_nccl(parse_xml_bytes(data, source), source, options)


def import_nccl_file(path: str | os.PathLike[str],
                     options: NcclImportOptions = NcclImportOptions()) -> NcclImport:
    """Read an NCCL topology file safely (size limit, no entities, no network)."""
    return import_nccl(parse_xml_file(path), str(path), options)


_LOCATED = re.compile(r"^(?P<file>.*), line (?P<line>\d+): <(?P<tag>[\w-]+)[^>]*> (?P<rest>.*)$")
_PLURAL = {"gives ": "give ", "has ": "have ", "is ": "are ", "names ": "name ",
           "points ": "point ", "lists ": "list "}


def summarise_warnings(warnings: list[str]) -> list[str]:
    """The same warnings with repeats folded: elements of one tag with the same complaint
    become one line naming all their lines ("8 <pci> elements (lines 5, 7, …) give no
    <net speed>; …"), so a file with eight speedless NICs prints one warning, not eight."""
    groups: dict[tuple[str, str, str], list[re.Match[str]]] = {}
    order: list[tuple[str, str, str] | str] = []
    for warning in warnings:
        found = _LOCATED.match(warning)
        if found is None:
            order.append(warning)
            continue
        key = (found["file"], found["tag"], found["rest"])
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(found)
    lines = []
    for entry in order:
        if isinstance(entry, str):
            lines.append(entry)
            continue
        found = groups[entry]
        if len(found) == 1:
            lines.append(found[0].string)
            continue
        file, tag, rest = entry
        for singular, plural in _PLURAL.items():
            if rest.startswith(singular):
                rest = plural + rest[len(singular):]
                break
        numbers = ", ".join(m["line"] for m in found[:6]) + (", …" if len(found) > 6 else "")
        lines.append(f"{file}, lines {numbers}: {len(found)} <{tag}> elements {rest}")
    return lines
