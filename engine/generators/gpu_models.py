"""GPU models: what a server of each common GPU brings, for ``--gpu`` in the generators.

A model fills the cluster generator's options a user would otherwise look up and convert by
hand (the GPU fabric's bandwidth per direction, the NICs, the GPUs per server) and records
what the exports need and a topology file cannot show: the SMs (compute units) per GPU,
which bound the MSCCL thread blocks resident at once, and the runtime that runs the XML.
The generator stores the model in the topology under the top-level key ``gpu``, so every
export and ``canopy compare`` read the same numbers (:func:`gpu_of`).

Bandwidths are GB/s per direction (10^9 bytes per second), from the vendors' published
figures for their reference servers:

- ``a100``: DGX A100, 8 A100 SXM on NVSwitch, NVLink 3 300 GB/s, a 200 Gb/s NIC per GPU,
  108 SMs;
- ``h100``: DGX H100, 8 H100 SXM on NVSwitch, NVLink 4 450 GB/s, a 400 Gb/s NIC per GPU,
  132 SMs;
- ``h200``: DGX H200, as the H100 (NVLink 4 450 GB/s, 400 Gb/s NICs, 132 SMs);
- ``b200``: DGX B200, 8 B200 on NVSwitch, NVLink 5 900 GB/s, a 400 Gb/s NIC per GPU,
  148 SMs;
- ``mi250``: 8 MI250 packages, 16 GCDs on Infinity Fabric (350 GB/s per GCD), a 200 Gb/s
  NIC per package, 104 compute units per GCD;
- ``mi300x``: 8 MI300X fully connected by Infinity Fabric (448 GB/s per GPU), a 400 Gb/s
  NIC per GPU, 304 compute units.

NVLink 3 is 12 links of 25 GB/s per direction, NVLink 4 18 of 25, NVLink 5 18 of 50. An
MI250 server holds 8 MI250 packages, 16 graphics compute dies (GCDs, each a GPU to the
runtime) joined by Infinity Fabric links as in ForestColl's AMD testbed (Zhao et al.,
"ForestColl: Throughput-Optimal Collective Communications on Heterogeneous Network
Fabrics", arXiv:2402.06787, §5.2): 350 GB/s per GCD over links of 50, 100 and 200 GB/s; a
200 Gb/s NIC is shared by the two GCDs of a package. An MI300X has 7 Infinity Fabric
links of 64 GB/s per direction, one to each other GPU of its server. SMs are NVIDIA's
streaming multiprocessors per GPU, compute units per GCD or GPU for AMD; the MSCCL (NVIDIA)
and RCCL (AMD) runtimes launch one thread block per SM at most.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from canopy.engine.model.topology import Topology

NONE = "none"


@dataclass(frozen=True)
class GpuModel:
    """One GPU model and the reference server built around it."""

    name: str
    title: str
    gpus: int                  # GPUs per server (GCDs for the MI250)
    fabric: str                # the cluster generator's fabric
    fabric_name: str           # "NVLink 4", "Infinity Fabric"
    gpu_bw: Fraction           # GB/s per direction per GPU inside the server
    nics_per_gpu: Fraction
    nic_bw: Fraction           # GB/s per NIC
    sms: int                   # SMs or compute units: the most resident thread blocks
    runtime: str               # the runtime that runs the exported XML: msccl or rccl

    def generator_values(self) -> dict[str, Any]:
        """The cluster generator's options this model sets."""
        return {"gpus": self.gpus, "fabric": self.fabric, "gpu_bw": self.gpu_bw,
                "nics_per_gpu": self.nics_per_gpu, "nic_bw": self.nic_bw}

    def record(self) -> dict[str, Any]:
        """What a topology keeps under ``gpu``."""
        return {"model": self.name, "title": self.title, "fabric": self.fabric_name,
                "sms": self.sms, "runtime": self.runtime}


GPU_MODELS: dict[str, GpuModel] = {m.name: m for m in (
    GpuModel("a100", "NVIDIA A100 SXM (DGX A100)", 8, "nvswitch", "NVLink 3", Fraction(300),
             Fraction(1), Fraction(25), 108, "msccl"),
    GpuModel("h100", "NVIDIA H100 SXM (DGX H100)", 8, "nvswitch", "NVLink 4", Fraction(450),
             Fraction(1), Fraction(50), 132, "msccl"),
    GpuModel("h200", "NVIDIA H200 SXM (DGX H200)", 8, "nvswitch", "NVLink 4", Fraction(450),
             Fraction(1), Fraction(50), 132, "msccl"),
    GpuModel("b200", "NVIDIA B200 (DGX B200)", 8, "nvswitch", "NVLink 5", Fraction(900),
             Fraction(1), Fraction(50), 148, "msccl"),
    GpuModel("mi250", "AMD MI250 (16 GCDs per server)", 16, "mi250", "Infinity Fabric",
             Fraction(350), Fraction(1, 2), Fraction(25), 104, "rccl"),
    GpuModel("mi300x", "AMD MI300X (8 per server)", 8, "mesh", "Infinity Fabric",
             Fraction(448), Fraction(1), Fraction(50), 304, "rccl"),
)}
GPU_CHOICES = (NONE, *GPU_MODELS)

DEFAULT_SMS = 108
"""Thread blocks per GPU when a topology names no GPU model: an A100's SMs."""


@dataclass(frozen=True)
class GpuInfo:
    """The SMs and runtime the exports use for a topology, and where they come from."""

    sms: int
    runtime: str
    source: str                # "the topology's H100" or "no GPU model given: an A100's"


def gpu_of(topology: Topology) -> GpuInfo:
    """The GPU facts of ``topology``: its stored model's, else an A100's, saying which."""
    record = topology.extra.get("gpu")
    if isinstance(record, dict) and isinstance(record.get("sms"), int) and record["sms"] > 0:
        runtime = str(record["runtime"]) if record.get("runtime") in ("msccl", "rccl") \
            else "msccl"
        name = str(record.get("title") or record.get("model") or "GPU model")
        return GpuInfo(record["sms"], runtime, f"the topology's {name}")
    return GpuInfo(DEFAULT_SMS, "msccl", "the topology names no GPU model, so an A100's")


# ForestColl's AMD testbed (arXiv:2402.06787 §5.2): the Infinity Fabric links among one
# server's 16 GCDs, (gcd, gcd, weight) with weights 4, 2 and 1 for 200, 100 and 50 GB/s;
# every GCD's weights add up to 7 (350 GB/s).
MI250_LINKS = (
    (0, 1, 4), (0, 4, 2), (0, 8, 1), (1, 5, 1), (1, 9, 1), (1, 10, 1), (2, 3, 4), (2, 6, 1),
    (2, 9, 1), (2, 10, 1), (3, 7, 2), (3, 11, 1), (4, 5, 4), (4, 6, 1), (5, 6, 1), (5, 7, 1),
    (6, 7, 4), (8, 9, 4), (8, 12, 2), (9, 13, 1), (10, 11, 4), (10, 14, 1), (11, 15, 2),
    (12, 13, 4), (12, 14, 1), (13, 14, 1), (13, 15, 1), (14, 15, 4))
MI250_WEIGHT = 7
