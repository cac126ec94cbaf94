"""Benchmark topologies: n DGX A100 servers wired like samples/dgx-a100-2x8.json.

Each server: 8 GPUs on an NVSwitch (300 GB/s), one 25 GB/s NIC per GPU; NIC i joins IB
switch ib(i mod 2), as in the reference topology of ForestColl §5.3.
"""

from __future__ import annotations

from fractions import Fraction

from canopy.engine.model.topology import COMPUTE, SWITCH, Link, Node, Topology


def dgx_a100_cluster(servers: int) -> Topology:
    nodes = [Node("ib0", SWITCH), Node("ib1", SWITCH)]
    links = []
    for s in range(servers):
        nvs = f"n{s}.nvswitch"
        nodes.append(Node(nvs, SWITCH, group=f"n{s}"))
        for g in range(8):
            gpu, nic = f"n{s}.gpu{g}", f"n{s}.nic{g}"
            nodes += [Node(gpu, COMPUTE, group=f"n{s}"), Node(nic, SWITCH, group=f"n{s}")]
            links += [Link(gpu, nvs, Fraction(300)), Link(gpu, nic, Fraction(25)),
                      Link(nic, f"ib{g % 2}", Fraction(25))]
    return Topology(f"{servers}x DGX A100", nodes, links)
