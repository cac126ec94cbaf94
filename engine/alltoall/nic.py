"""The host-to-NIC bottleneck, modelled by augmenting the topology.

Basu et al. (arXiv:2309.13541), Fig. 2 ("Topology augmentation to model host-to-NIC
bottleneck"): on a direct-connect fabric every host reaches its links through a NIC, and the
host-NIC path (PCIe) can be narrower than the links. Each compute node ``v`` keeps its id
(the host, which sends and receives); its links move to NIC nodes joined to the host by
links of ``bandwidth`` GB/s each way. Two forwarding styles (Fig. 1, top left):

* ``"nic"`` — NIC-based forwarding: relayed data turns around in the NIC (a switch node
  ``v/nic``) and never crosses the host-NIC link; only the host's own traffic does.
* ``"host"`` — host-based forwarding: relayed data goes up to the host and back down, so
  it crosses the host-NIC link twice. The NIC is split into ``v/nic-in`` (the links into
  ``v`` end there; its only way on is up to the host) and ``v/nic-out`` (fed only by the
  host; the links out of ``v`` start there), so every relayed byte passes through ``v``.

The all-to-all LP then runs unchanged on the augmented topology; the host-NIC links show
up among the bottleneck links when they limit λ*.
"""

from __future__ import annotations

from fractions import Fraction

from canopy.engine.model.errors import TopologyError
from canopy.engine.model.topology import SWITCH, Link, Node, Topology

NIC_FORWARDING = ("nic", "host")


def augment_host_nic(topo: Topology, bandwidth: Fraction, forwarding: str = "nic"
                     ) -> Topology:
    """A copy of ``topo`` (failed links and switches dropped) with a NIC in front of every
    compute node, joined to it by ``bandwidth`` GB/s each way (module docstring)."""
    if forwarding not in NIC_FORWARDING:
        raise TopologyError(f"NIC forwarding must be one of {', '.join(NIC_FORWARDING)}, "
                            f"not '{forwarding}'.")
    if bandwidth <= 0:
        raise TopologyError(f"the host-to-NIC bandwidth must be positive, not {bandwidth}.")
    live = topo.reduced()
    ids = set(live.node_ids())
    nodes = list(live.nodes)
    links: list[Link] = []
    inn: dict[str, str] = {}
    out: dict[str, str] = {}
    for host in live.compute_nodes():
        node = live.node(host)
        names = [f"{host}/nic"] if forwarding == "nic" else [f"{host}/nic-in", f"{host}/nic-out"]
        for name in names:
            if name in ids:
                raise TopologyError(f"cannot add NIC node '{name}': a node of that name "
                                    "already exists.")
            nodes.append(Node(name, SWITCH, name, node.group, node.x, node.y))
        if forwarding == "nic":
            inn[host] = out[host] = names[0]
            links.append(Link(host, names[0], bandwidth))
        else:
            inn[host], out[host] = names
            links.append(Link(names[0], host, bandwidth, duplex=False))
            links.append(Link(host, names[1], bandwidth, duplex=False))
    for link in live.links:
        if forwarding == "nic" or not link.duplex:
            links.append(Link(out.get(link.source, link.source), inn.get(link.target,
                                                                        link.target),
                              link.bandwidth, link.duplex, link.latency))
            continue
        for u, v in link.directions():
            links.append(Link(out.get(u, u), inn.get(v, v), link.bandwidth, False,
                              link.latency))
    extra = {k: v for k, v in live.extra.items() if k != "generator"}
    return Topology(f"{live.name} + host-NIC {bandwidth} GB/s ({forwarding} forwarding)",
                    nodes, links, live.bandwidth_unit, extra)
