"""Import an NCCL topology file (``NCCL_TOPO_FILE`` / ``NCCL_TOPO_DUMP_FILE`` XML).

Every attribute is read the way NCCL itself reads it (src/graph/topo.cc and xml.h of
NVIDIA/nccl), so Canopy sees the machine NCCL sees. The rules, each with the NCCL
behaviour it mirrors:

- **PCI links** (``<pci link_speed link_width>``, the link from a device to its parent):
  NCCL's bandwidth is ``width x lane_speed / 80`` GB/s, where ``lane_speed`` (units of
  100 Mb/s per lane) comes from its generation table matched on the text's prefix:
  2.5 GT/s 15, 5 GT/s 30, 8 GT/s 60, 16 GT/s 120, 32 GT/s 240, 64 GT/s 480; text it does
  not know (an empty ``link_speed`` in VM dumps) falls back to 60 (Gen3). **A width of
  0 means 16 lanes** (ncclTopoAddPci: "Manage cases where speed was not indicated in
  /sys"), so a Gen5 x16 device is 48 GB/s and an unknown-speed device 12 GB/s. A missing
  width is treated like 0 with a warning (NCCL would refuse the file); a negative width
  is an error.
- **Device classes** (``class``, prefix match as NCCL's kvDictPciClass): 0x060400 and
  0x080100 are PCI switches, 0x068000 an NVSwitch, 0x068001 a CPU, 0x03 a GPU, 0x02 a
  NIC; any other class is a plain PCI node for NCCL (kept only when it leads to a GPU or
  NIC, with a warning). A ``<pci>`` holding a ``<gpu>`` or ``<nic>`` is that device.
- **GPUs**: ``rank`` (optional in static files: NCCL fills it at run time) must be unique,
  and so must every GPU's bus id (lower-cased, as busIdToInt64 reads hex); duplicates are
  errors. ``sm`` selects NCCL's per-link NVLink bandwidth (ncclTopoNVLinkBw): sm >= 100
  40.1, >= 90 20.6, 86 12, >= 80 20, >= 70 20, >= 60 18, else 20 GB/s.
- **NVLink** (``<nvlink target count tclass>`` under a GPU): ``count x per-link`` GB/s
  from this GPU towards the target (ncclTopoAddNvLinks); each end lists its own
  direction, so two ends that disagree give two one-way links. ``count`` must be a whole
  number >= 0 (negative or non-numeric counts are errors; 0 adds nothing). ``tclass`` 0x03
  is a GPU (found by bus id); 0x068001 the GPU's own CPU (both directions); any other
  class is the one NVSwitch node NCCL keeps per system (both directions), whatever the
  target bus id. A link to the GPU's own bus id or to a GPU not in the file is skipped.
- **NICs**: each ``<net>`` is one port: ``speed`` is Mb/s and NCCL's ``bw = speed / 8000``
  GB/s, with a missing or non-positive speed read as 10000 Mb/s ("Some NICs define speed
  = -1"); a ``<net>`` without ``dev`` is not a network device for NCCL and is skipped. A
  NIC's scale-out bandwidth is the sum over its ports. A NIC with no ``<net>`` (static
  files: NCCL's network plugin reports it at run time) gets ``--nic-bw``. A ``<nic>``
  directly under ``<cpu>`` hangs off the CPU at NCCL's LOC_BW (5000 GB/s).
- **CPU sockets** are joined pairwise at NCCL's inter-CPU bandwidth
  (ncclTopoGetInterCpuBw): ppc64 32, arm64 6; x86 Intel by family 6 model: >= 0xCF 40,
  >= 0x8F 22, >= 0x55 10, else 6; AMD 16; Zhaoxin 6 (family 7 model 0x5B: 9); else
  LOC_BW.

Where the file has no NVLink (most static files: NCCL finds it at run time) the options
supply the GPU fabric: one NVSwitch per host or a direct all-to-all NVLink mesh. N hosts
are copies of the file joined through rail switches or one switch. Anything odd gives a
warning naming the element and its line; what NCCL itself would refuse and Canopy cannot
guess (duplicate GPUs, bad NVLink counts, a file with no GPU) raises NcclImportError.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from lxml import etree

from canopy.engine.io.safe_xml import parse_xml_bytes, parse_xml_file
from canopy.engine.model.errors import CanopyError
from canopy.engine.model.limits import MAX_BUILT_NODES
from canopy.engine.model.topology import (
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

LOC_BW = Fraction(5000)
# kvDictPciGen: link_speed prefix -> per-lane speed in 100 Mb/s; 60 (Gen3) for anything else.
PCI_GEN = [("2.5 GT/s", 15), ("5 GT/s", 30), ("8 GT/s", 60), ("16 GT/s", 120),
           ("32 GT/s", 240), ("2.5 GT/s PCIe", 15), ("5.0 GT/s PCIe", 30),
           ("8.0 GT/s PCIe", 60), ("16.0 GT/s PCIe", 120), ("32.0 GT/s PCIe", 240),
           ("64.0 GT/s PCIe", 480)]
PCI_GEN_FALLBACK = 60
# kvDictPciClass, in NCCL's order (prefix match).
PCI_BRIDGE, NVSWITCH_CLASS, CPU_CLASS = "0x060400", "0x068000", "0x068001"
PCI, NVS, CPU, GPU, NIC = "pci", "nvswitch", "cpu", "gpu", "nic"
PCI_CLASSES = [(PCI_BRIDGE, PCI), ("0x080100", PCI), (NVSWITCH_CLASS, NVS),
               (CPU_CLASS, CPU), ("0x03", GPU), ("0x02", NIC)]
NIC_SPEED_FALLBACK_MBPS = 10000


def nccl_pci_bandwidth(link_speed: str, width: int) -> Fraction:
    """NCCL's PCI link bandwidth (GB/s): ``width`` lanes (0 means 16) at the per-lane speed
    of ``link_speed`` from kvDictPciGen (Gen3 when unknown), divided by 80."""
    return Fraction((width or 16) * pci_lane_speed(link_speed), 80)


def pci_lane_speed(link_speed: str) -> int:
    """kvConvertToInt over kvDictPciGen: the first key that prefixes ``link_speed``."""
    for key, value in PCI_GEN:
        if link_speed.startswith(key):
            return value
    return PCI_GEN_FALLBACK


def pci_class(cls: str) -> str:
    """kvConvertToInt over kvDictPciClass: the device type; PCI when nothing matches."""
    for key, kind in PCI_CLASSES:
        if cls.startswith(key):
            return kind
    return PCI


def nvlink_bandwidth(sm: int) -> Fraction:
    """ncclTopoNVLinkBw: NCCL's per-link NVLink bandwidth (GB/s) by compute capability."""
    if sm >= 100:
        return Fraction("40.1")
    if sm >= 90:
        return Fraction("20.6")
    if sm == 86:
        return Fraction(12)
    if sm >= 70:
        return Fraction(20)
    if sm >= 60:
        return Fraction(18)
    return Fraction(20)


def inter_cpu_bandwidth(arch: str, vendor: str, family: int | None, model: int | None
                        ) -> Fraction:
    """ncclTopoGetInterCpuBw: the bandwidth NCCL gives the link between two sockets."""
    if arch.startswith("ppc64"):
        return Fraction(32)
    if arch.startswith("arm64"):
        return Fraction(6)
    if not arch.startswith("x86_64"):
        return LOC_BW
    if vendor.startswith("GenuineIntel"):
        if family == 6 and model is not None:
            for least, bw in ((0xCF, 40), (0x8F, 22), (0x55, 10)):
                if model >= least:
                    return Fraction(bw)
        return Fraction(6)
    if vendor.startswith("AuthenticAMD"):
        return Fraction(16)
    if vendor.startswith(("CentaurHauls", "  Shanghai  ")):
        return Fraction(9) if (family, model) == (7, 0x5B) else Fraction(6)
    return LOC_BW


class NcclImportError(CanopyError):
    """An NCCL topology file that holds nothing Canopy can use."""


@dataclass(frozen=True)
class NcclImportOptions:
    """How to complete what the file does not say.

    ``nvswitch_bw``: when the file has no NVLink, join each host's GPUs through one
    NVSwitch with this per-GPU bandwidth; ``nvlink_bw``: instead, link every GPU pair
    directly with this bandwidth. ``nic_bw`` is used for NICs without any ``<net>``.
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
    oneway: list[tuple[str, str, Fraction]] = field(default_factory=list)  # one-way NVLink
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

    def cpu_of(self, dev: _Device) -> _Device:
        while dev.parent is not None:
            dev = self.devices[dev.parent]
        return dev


class _Reader:
    """Walks the XML once, collecting devices, links and warnings."""

    def __init__(self, source: str, options: NcclImportOptions) -> None:
        self.source = source
        self.options = options
        self.warnings: list[str] = []
        self.host = _Host()
        self.gpu_by_busid: dict[str, _Device] = {}
        self.gpu_by_rank: dict[int, etree._Element] = {}
        self.nvlinks: list[tuple[_Device, int | None, etree._Element]] = []
        self.cpu_bw: dict[str, Fraction] = {}

    def warn(self, elem: etree._Element, message: str) -> None:
        self.warnings.append(f"{self.source}, line {elem.sourceline}: {_describe(elem)} "
                             f"{message}")

    def fail(self, elem: etree._Element, message: str) -> NcclImportError:
        return NcclImportError(f"{self.source}, line {elem.sourceline}: {_describe(elem)} "
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
        self.cpu_bw[cpu.key] = inter_cpu_bandwidth(
            elem.get("arch", ""), elem.get("vendor", ""), _strtol(elem.get("familyid")),
            _strtol(elem.get("modelid")))
        self._children(elem, cpu)

    def _children(self, elem: etree._Element, parent: _Device) -> None:
        for child in elem:
            if not isinstance(child.tag, str):
                continue
            if child.tag == "pci":
                self._pci(child, parent)
            elif child.tag == "nic":
                self._nic(child, parent, LOC_BW if parent.kind == SWITCH and
                          parent.key.startswith("cpu") else None)
            else:
                self.warn(child, f"is not expected inside <{elem.tag}> and was skipped.")

    def _pci(self, elem: etree._Element, parent: _Device) -> None:
        busid = _busid(elem.get("busid"))
        if not busid:
            self.warn(elem, "has no busid and was skipped.")
            return
        cls = (elem.get("class") or "").lower()
        kind = pci_class(cls) if cls else None
        gpu_elem = elem.find("gpu")
        nic_elem = elem.find("nic")
        if gpu_elem is not None or kind == GPU:
            self._gpu(elem, busid, parent, gpu_elem)
        elif nic_elem is not None or kind == NIC:
            for child in elem:
                if isinstance(child.tag, str) and child.tag != "nic":
                    self.warn(child, "is not expected inside a NIC's <pci> and was skipped.")
            up = self._link_bw(elem)
            self._nic(elem if nic_elem is None else nic_elem, parent, up, busid=busid)
        elif kind == NVS or kind == CPU:
            return                  # NVSwitches come in through <nvlink>
        elif kind is None and elem.find("pci") is None:
            self.warn(elem, "has no class, so it is neither a GPU, a NIC nor a PCI switch; "
                            "skipped.")
        else:
            if kind is None:
                self.warn(elem, "has no class but holds PCI devices; read as a PCI switch.")
            elif not cls.startswith(PCI_BRIDGE) and elem.find("pci") is None:
                self.warn(elem, f"has class {cls}, which holds no GPU or NIC (NCCL reads it "
                                "as a plain PCI device); skipped.")
                return
            up = self._link_bw(elem)
            bridge = self.host.add("pcie", SWITCH, f"PCIe switch {busid}", parent.key, up,
                                   busid, parent.depth + 1)
            self._children(elem, bridge)

    def _gpu(self, elem: etree._Element, busid: str, parent: _Device,
             gpu_elem: etree._Element | None) -> None:
        if busid in self.gpu_by_busid:
            raise self.fail(elem, f"repeats the bus id of another GPU ({busid}); NCCL "
                                  "identifies GPUs by bus id.")
        up = self._link_bw(elem)
        dev_no = gpu_elem.get("dev") if gpu_elem is not None else None
        index = self.host.counts["gpu"]
        label = f"GPU {dev_no if dev_no is not None else index} ({busid})"
        gpu = self.host.add("gpu", COMPUTE, label, parent.key, up, busid, parent.depth + 1)
        self.gpu_by_busid[busid] = gpu
        if gpu_elem is None:
            return
        rank_text = gpu_elem.get("rank")
        if rank_text is not None:
            rank = _strtol(rank_text)
            if rank is None or rank < 0:
                raise self.fail(gpu_elem, f"has rank '{rank_text}', which is not a rank.")
            if rank in self.gpu_by_rank:
                other = self.gpu_by_rank[rank].sourceline
                raise self.fail(gpu_elem, f"has rank {rank}, like the GPU on line {other}; "
                                          "each rank is one GPU.")
            self.gpu_by_rank[rank] = gpu_elem
        sm = _strtol(gpu_elem.get("sm"))
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
        ports = []
        for net in nets:
            if net.get("dev") is None:
                self.warn(net, "has no dev, so NCCL does not use it as a network device; "
                               "skipped.")
                continue
            ports.append(net)
            mbps = _strtol(net.get("speed"))
            if mbps is None or mbps <= 0:
                self.warn(net, f"has speed '{net.get('speed', '')}'; NCCL reads it as "
                               f"{NIC_SPEED_FALLBACK_MBPS} Mb/s.")
                mbps = NIC_SPEED_FALLBACK_MBPS
            speed += Fraction(mbps, 8000)          # Mb/s -> GB/s, NCCL's mbps / 8000
        if not ports:
            speed = self.options.nic_bw
            self.warn(elem, f"gives no <net> port; assuming {format_gbps(speed)} GB/s "
                            "(set it with --nic-bw).")
        names = [n.get("name") for n in ports if n.get("name")]
        detail = " ".join(x for x in [busid, *names] if x)
        label = f"NIC {self.host.counts['nic']}" + (f" ({detail})" if detail else "")
        nic = self.host.add("nic", SWITCH, label, parent.key, up_bw if up_bw else speed,
                            busid, parent.depth + 1)
        self.host.nic_bw[nic.key] = speed

    def _link_bw(self, elem: etree._Element) -> Fraction:
        """NCCL's PCI bandwidth of ``elem``'s link to its parent (see the module docstring)."""
        speed_text = elem.get("link_speed") or ""
        width_text = elem.get("link_width")
        width = _strtol(width_text)
        if width_text is None or width is None:
            self.warn(elem, f"has link_width '{width_text or ''}'; assuming 16 lanes as NCCL "
                            "does for 0.")
            width = 0
        if width < 0:
            raise self.fail(elem, f"has link_width {width}, a negative number of lanes.")
        if not any(speed_text.startswith(key) for key, _ in PCI_GEN):
            self.warn(elem, f"has link_speed '{speed_text}', which NCCL does not know; "
                            "reading it as 8 GT/s (PCIe Gen3) as NCCL does.")
        return nccl_pci_bandwidth(speed_text, width)

    # -------------------------------------------------------------- links

    def _join_cpus(self) -> None:
        cpus = self.host.of_role("cpu")
        for i, a in enumerate(cpus):
            for b in cpus[i + 1:]:
                bw = min(self.cpu_bw[a.key], self.cpu_bw[b.key])
                self.host.links.append((a.key, b.key, bw))

    def _nvlink_count(self, elem: etree._Element) -> int:
        text = elem.get("count")
        count = _strtol(text) if text is not None and re.fullmatch(r"\s*[+-]?\d+\s*", text) \
            else None
        if count is None or count < 0:
            shown = (text or "")[:20] + ("…" if len(text or "") > 20 else "")
            raise self.fail(elem, f"has count '{shown}'; an NVLink count is a whole "
                                  "number of links.")
        return count

    def _nvlinks(self) -> None:
        """GPU-GPU, GPU-CPU and GPU-NVSwitch NVLink (ncclTopoAddNvLinks)."""
        directed: dict[tuple[str, str], Fraction] = defaultdict(Fraction)
        duplex: dict[tuple[str, str], Fraction] = defaultdict(Fraction)
        switch: _Device | None = None
        warned_sm: set[str] = set()
        for gpu, sm, elem in self.nvlinks:
            target = _busid(elem.get("target"))
            tclass = (elem.get("tclass") or "").lower()
            count = self._nvlink_count(elem)
            if not target:
                self.warn(elem, "has no target and was skipped.")
                continue
            if count == 0:
                self.warn(elem, "has count 0 and adds no link.")
                continue
            if sm is None:
                sm = 0
                if gpu.key not in warned_sm:
                    warned_sm.add(gpu.key)
                    self.warn(elem.getparent(), "has no sm; using NCCL's default of 20 GB/s "
                                                "per NVLink.")
            bw = nvlink_bandwidth(sm) * count
            kind = pci_class(tclass) if tclass else (GPU if target in self.gpu_by_busid
                                                     else None)
            if kind == GPU:
                if target == gpu.busid:
                    self.warn(elem, f"links GPU {gpu.busid} to its own bus id; skipped.")
                elif target in self.gpu_by_busid:
                    directed[(gpu.key, self.gpu_by_busid[target].key)] += bw
                else:
                    self.warn(elem, f"targets {target}, which is not a GPU in this file; "
                                    "skipped.")
            elif kind == CPU:
                duplex[(gpu.key, self.host.cpu_of(gpu).key)] += bw
            elif kind is None:
                self.warn(elem, f"has no tclass and targets {target}, which is not a GPU in "
                                "this file; skipped.")
            else:
                if kind != NVS:
                    self.warn(elem, f"targets class {tclass}; NCCL links it to the NVSwitch "
                                    "as it does every class but GPU and CPU.")
                if switch is None:
                    switch = self.host.add("nvswitch", SWITCH, "NVSwitch", None, None, target, 0)
                duplex[(gpu.key, switch.key)] += bw
        for (a, b), bw in directed.items():
            back = directed.get((b, a))
            if back == bw:
                if a < b:
                    self.host.links.append((a, b, bw))
                continue
            if back is not None and a < b:
                self.warnings.append(
                    f"{self.source}: {self.host.devices[a].label} lists {format_gbps(bw)} GB/s "
                    f"of NVLink to {self.host.devices[b].label}, which lists "
                    f"{format_gbps(back)} GB/s back; each direction keeps its own, as in NCCL.")
            self.host.oneway.append((a, b, bw))
        for (g, t), bw in duplex.items():
            self.host.links.append((g, t, bw))

    def supply_fabric(self) -> None:
        """Apply --nvswitch-bw / --nvlink-bw where the file describes no NVLink."""
        opts = self.options
        gpus = self.host.of_role("gpu")
        has_nvlink = bool(self.host.oneway) or any(
            a.startswith("gpu") and (b.startswith("gpu") or b.startswith("nvswitch"))
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


def _strtol(text: str | None) -> int | None:
    """An integer as C's strtol(text, NULL, 0) reads it (decimal, 0x hex), or None when
    the text holds no number at all."""
    match = re.match(r"\s*([+-]?)(0x[0-9a-f]+|\d+)", (text or "").lower())
    if match is None or len(match.group(2)) > 18:
        return None                      # no number, or past what a C long holds
    value = int(match.group(2), 0) if match.group(2).startswith("0x") else int(match.group(2))
    return -value if match.group(1) == "-" else value


# ------------------------------------------------------------------ building


def _prune(host: _Host) -> None:
    """Drop CPUs and PCIe switches that lead nowhere (no GPU or NIC behind them)."""
    while True:
        degree: dict[str, set[str]] = defaultdict(set)
        for d in host.devices.values():
            if d.parent is not None:
                degree[d.key].add(d.parent)
                degree[d.parent].add(d.key)
        for a, b, _ in host.links + host.oneway:
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
        host.oneway = [(a, b, bw) for a, b, bw in host.oneway
                       if a not in dead and b not in dead]


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
    if count > MAX_BUILT_NODES:
        raise NcclImportError(f"{source} with {opts.hosts} hosts makes {count} nodes; "
                              f"the limit is {MAX_BUILT_NODES}.")
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
            if dev.parent is not None and dev.up_bw is not None:   # set together
                topo.links.append(Link(prefix + key, prefix + dev.parent, dev.up_bw))
        for a, b, bw in host.links:
            topo.links.append(Link(prefix + a, prefix + b, bw))
        for a, b, bw in host.oneway:
            topo.links.append(Link(prefix + a, prefix + b, bw, duplex=False))
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
    """Parse ``data`` safely (canopy.engine.io.safe_xml) and import it."""
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
        members = groups[entry]
        if len(members) == 1:
            lines.append(members[0].string)
            continue
        file, tag, rest = entry
        for singular, plural in _PLURAL.items():
            if rest.startswith(singular):
                rest = plural + rest[len(singular):]
                break
        numbers = ", ".join(m["line"] for m in members[:6]) + (", …" if len(members) > 6
                                                                 else "")
        lines.append(f"{file}, lines {numbers}: {len(members)} <{tag}> elements {rest}")
    return lines
