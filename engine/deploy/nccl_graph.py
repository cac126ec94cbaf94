"""Canopy's best ring set as an ``NCCL_GRAPH_FILE`` that plain NCCL loads.

NCCL builds its rings from a *graph*: a list of channels, each naming, for one server,
the NIC the ring enters by, the order of the server's GPUs, and the NIC it leaves by.
Every server uses the same channels, and consecutive ranks' servers are joined NIC to
NIC (NCCL ``src/graph/search.cc``: ``ncclTopoGetGraphFromXml``; ``src/init.cc`` gives the
ring graph ``id`` 0 and ``pattern`` 4, ``NCCL_TOPO_PATTERN_RING``). The file is

.. code-block:: xml

    <graphs version="1">
      <graph id="0" pattern="4" crossnic="0" nchannels="2" speedintra="..."
             speedinter="..." latencyinter="0" typeintra="NVL" typeinter="PIX"
             samechannels="0">
        <channel><net dev="0x0"/><gpu dev="0x0"/>...<gpu dev="0x7"/><net dev="0x0"/></channel>
        ...

``dev`` values are read as hexadecimal (``strtol(..., 16)``), so they are written as NCCL
writes them, ``0x``-prefixed. A GPU's dev is its position among its server's GPUs in
file order (the order ``canopy import-nccl`` creates them, which is NCCL's dev order); a
NIC's dev is its position among the server's NICs (switches of the server linked to
anything outside it), in file order.

What the format cannot express, and is refused with one sentence:

* trees through switches (ForestColl's forests): the graph holds rings only;
* servers that differ (GPU or NIC counts): every server runs the same channels;
* servers that reach each other other than through NICs;
* more than 32 channels (``MAXCHANNELS / 2`` ring channels).

:func:`nccl_graph` takes the ring set of :func:`canopy.engine.baselines.ring.find_rings`
and makes it expressible: each ring keeps the channel it has on the first server, and
every server runs that channel. :func:`graph_rings` rebuilds the rings a graph makes
NCCL run, so a file read back can be checked against the rings it was written from.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from fractions import Fraction

import networkx as nx
from lxml import etree

from canopy.engine.baselines.ring import find_rings
from canopy.engine.io.safe_xml import parse_xml_bytes
from canopy.engine.io.topology_json import atomic_write_bytes
from canopy.engine.model.errors import CanopyError
from canopy.engine.model.plan import Edge, Path, add_path_load, bandwidth_bound, ring_plan
from canopy.engine.model.progress import Progress, report
from canopy.engine.model.topology import Topology
from canopy.engine.network.routing import Router
from canopy.engine.network.servers import compute_nodes_by_server

RING_GRAPH_ID = 0
PATTERN_RING = 4
MAX_CHANNELS = 32
LINK_TYPES = ("LOC", "NVL", "NVB", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS")
"""The path types NCCL accepts in ``typeintra``/``typeinter`` (``kvDictLinkType``)."""


class NcclGraphError(CanopyError):
    """A topology or ring set that an NCCL graph file cannot express, or a bad file."""


@dataclass(frozen=True)
class Channel:
    """One ring channel on one server: entry NIC, GPU order, exit NIC (devs)."""

    gpus: tuple[int, ...]
    net_in: int | None = None
    net_out: int | None = None


@dataclass(frozen=True)
class NcclGraph:
    """The ring graph NCCL reads from ``NCCL_GRAPH_FILE`` (bandwidths in GB/s)."""

    channels: tuple[Channel, ...]
    speed_intra: float
    speed_inter: float
    type_intra: str = "NVL"
    type_inter: str = "PIX"
    algbw: Fraction = Fraction(0)
    """The allgather bandwidth bound of the rings the graph makes NCCL run."""


@dataclass(frozen=True)
class _Server:
    gpus: list[str]
    nics: list[str]
    switches: frozenset[str]


def _servers(topology: Topology) -> list[_Server]:
    """The servers in file order, each with its GPUs and NICs; refuses unequal ones."""
    group_of = {n.id: n.group or "" for n in topology.nodes}
    servers = []
    for gpus in compute_nodes_by_server(topology):
        group = group_of[gpus[0]]
        switches = [n.id for n in topology.nodes if not n.is_compute and n.group == group
                    and group]
        inside = set(switches) | set(gpus)
        nics = [s for s in switches
                if any((link.source == s and link.target not in inside)
                       or (link.target == s and link.source not in inside)
                       for link in topology.links)]
        servers.append(_Server(gpus, nics, frozenset(switches)))
    first = servers[0]
    for server in servers[1:]:
        if (len(server.gpus), len(server.nics)) != (len(first.gpus), len(first.nics)):
            raise NcclGraphError(
                f"NCCL's graph file gives every server the same channels, but server "
                f"'{group_of[first.gpus[0]]}' has {len(first.gpus)} GPUs and "
                f"{len(first.nics)} NICs and '{group_of[server.gpus[0]]}' has "
                f"{len(server.gpus)} and {len(server.nics)}.")
    if len(servers) > 1 and not first.nics:
        raise NcclGraphError("NCCL reaches other servers only through NICs, and server "
                             f"'{group_of[first.gpus[0]]}' has none (no switch of the "
                             "server links outside it).")
    return servers


class _Routes:
    """Ring hops routed as :class:`~canopy.engine.network.routing.Router` does for the ring
    baseline:
    shortest, least congested given the hops routed so far; inside a server, when no
    switch leads there, relaying through its GPUs (NCCL's PXN: a GPU reaches a peer's
    NIC over NVLink)."""

    def __init__(self, topology: Topology) -> None:
        self.router = Router(topology)
        self.graph = nx.DiGraph(list(topology.capacities()))
        self.loads: dict[Edge, Fraction] = {}

    def find(self, a: str, b: str, server: _Server | None = None) -> Path | None:
        path = self.router.route(a, b, self.loads, through=server.switches if server else None)
        if path is None and server is not None:
            inside = self.graph.subgraph(server.switches | set(server.gpus))
            try:
                path = tuple(nx.shortest_path(inside, a, b))
            except (nx.NetworkXNoPath, nx.NodeNotFound):
                path = None
        return path

    def take(self, a: str, b: str, server: _Server | None = None) -> Path:
        path = self.find(a, b, server)
        if path is None:
            raise NcclGraphError(f"there is no route from '{a}' to '{b}' for an NCCL ring "
                                 "hop.")
        add_path_load(self.loads, path, Fraction(1))
        return path


def graph_rings(topology: Topology, graph: NcclGraph
                ) -> list[tuple[list[str], dict[Edge, Path]]]:
    """The rings NCCL runs for ``graph``: every server runs each channel, servers in file
    order, joined from one server's exit NIC to the next one's entry NIC."""
    servers = _servers(topology)
    routes = _Routes(topology)
    rings = []
    for channel in graph.channels:
        order: list[str] = []
        hops: dict[Edge, Path] = {}
        for s, server in enumerate(servers):
            gpus = [server.gpus[d] for d in channel.gpus]
            for a, b in zip(gpus, gpus[1:], strict=False):
                hops[(a, b)] = routes.take(a, b, server)
            if len(servers) > 1:
                assert channel.net_in is not None and channel.net_out is not None
                nxt = servers[(s + 1) % len(servers)]
                first = nxt.gpus[channel.gpus[0]]
                out_nic, in_nic = server.nics[channel.net_out], nxt.nics[channel.net_in]
                path = (routes.take(gpus[-1], out_nic, server)
                        + routes.take(out_nic, in_nic)[1:]
                        + routes.take(in_nic, first, nxt)[1:])
                hops[(gpus[-1], first)] = path
            order += gpus
        if len(servers) == 1:
            hops[(order[-1], order[0])] = routes.take(order[-1], order[0], servers[0])
        rings.append((order, hops))
    return rings


def _channels(topology: Topology, servers: list[_Server],
              rings: list[tuple[list[str], dict[Edge, Path]]]) -> tuple[Channel, ...]:
    """One channel per ring on one server; between servers, one channel per NIC.

    On one server a channel is the ring's GPU order. Between servers, channel ``a``
    enters and leaves by NIC ``a`` (``crossnic`` 0: a rail-optimised fabric joins only
    NICs of the same rail) and visits the GPUs in the order of ring ``a mod R``, turned
    to start at the GPU nearest NIC ``a``.
    """
    first = servers[0]
    position = {g: i for i, g in enumerate(first.gpus)}
    orders = [[g for g in order if g in position] for order, _ in rings]
    if len(servers) == 1:
        return tuple(dict.fromkeys(Channel(tuple(position[g] for g in o)) for o in orders))
    routes = _Routes(topology)
    channels = []
    for a, nic in enumerate(first.nics):
        order = orders[a % len(orders)]
        hops = [len(path) if path else len(topology.nodes)
                for path in (routes.find(nic, gpu, first) for gpu in order)]
        nearest = hops.index(min(hops))
        turned = order[nearest:] + order[:nearest]
        channels.append(Channel(tuple(position[g] for g in turned), a, a))
    return tuple(channels)


def _speeds(topology: Topology, rings: list[tuple[list[str], dict[Edge, Path]]],
            servers: list[_Server]) -> tuple[float, float]:
    """Per-channel bandwidth inside a server and between servers (GB/s), as NCCL's
    search would report them: the narrowest link the channel uses there."""
    caps = topology.capacities()
    inside = set().union(*(set(s.gpus) | s.switches for s in servers))
    group_of = {n.id: n.group for n in topology.nodes}
    intra: list[Fraction] = []
    inter: list[Fraction] = []
    for _, hops in rings:
        for (a, b), path in hops.items():
            links = list(zip(path, path[1:], strict=False))
            width = min(caps[link] for link in links)
            same = group_of[a] == group_of[b] and all(n in inside for n in path)
            (intra if same else inter).append(width)
    return (float(min(intra)) if intra else 0.0, float(min(inter)) if inter else 0.0)


def nccl_graph(topology: Topology) -> NcclGraph:
    """The best ring set NCCL's graph format can express on ``topology``.

    Raises
    ------
    NcclGraphError
        When the format cannot express the topology (see the module docstring).
    """
    servers = _servers(topology)
    rings = find_rings(topology)
    if not rings:
        raise NcclGraphError("no ring visits every GPU of this topology, so NCCL cannot "
                             "run rings on it.")
    multi = len(servers) > 1
    channels = _channels(topology, servers, rings)[:MAX_CHANNELS]
    graph = NcclGraph(channels, 0.0, 0.0)
    made = graph_rings(topology, graph)
    plan = ring_plan("allgather", topology.compute_nodes(), made)
    algbw, _ = bandwidth_bound(plan, topology.capacities())
    intra, inter = _speeds(topology, made, servers)
    return NcclGraph(channels, intra, inter if multi else intra, algbw=algbw)


def _hex(value: int) -> str:
    return f"{value:#x}"


def nccl_graph_xml(graph: NcclGraph) -> bytes:
    """The ``NCCL_GRAPH_FILE`` text of ``graph``."""
    root = etree.Element("graphs", version="1")
    elem = etree.SubElement(
        root, "graph", id=str(RING_GRAPH_ID), pattern=str(PATTERN_RING), crossnic="0",
        nchannels=str(len(graph.channels)), speedintra=f"{graph.speed_intra:g}",
        speedinter=f"{graph.speed_inter:g}", latencyinter="0", typeintra=graph.type_intra,
        typeinter=graph.type_inter, samechannels="0")
    for channel in graph.channels:
        ch = etree.SubElement(elem, "channel")
        if channel.net_in is not None:
            etree.SubElement(ch, "net", dev=_hex(channel.net_in))
        for gpu in channel.gpus:
            etree.SubElement(ch, "gpu", dev=_hex(gpu))
        if channel.net_out is not None:
            etree.SubElement(ch, "net", dev=_hex(channel.net_out))
    return etree.tostring(root, pretty_print=True, xml_declaration=False)


def write_nccl_graph(path: str | os.PathLike[str], graph: NcclGraph) -> None:
    atomic_write_bytes(path, nccl_graph_xml(graph))


def read_nccl_graph(data: bytes, source: str = "NCCL graph file") -> NcclGraph:
    """Parse the ring graph (id 0) of an ``NCCL_GRAPH_FILE``; one sentence on errors."""
    root = parse_xml_bytes(data, source)
    if root.tag != "graphs":
        raise NcclGraphError(f"{source}: the root element is <{root.tag}>, not <graphs>.")
    for elem in root.iter("graph"):
        if elem.get("id") != str(RING_GRAPH_ID):
            continue
        if elem.get("pattern") != str(PATTERN_RING):
            raise NcclGraphError(f"{source}: the ring graph has pattern "
                                 f"{elem.get('pattern')}, not {PATTERN_RING}.")
        channels = []
        for number, ch in enumerate(elem.iter("channel")):
            try:
                nets = [int(n.get("dev", ""), 16) for n in ch.iter("net")]
                gpus = tuple(int(g.get("dev", ""), 16) for g in ch.iter("gpu"))
            except ValueError:
                raise NcclGraphError(f"{source}: channel {number} has a dev that is not "
                                     "a hexadecimal number.") from None
            if len(nets) not in (0, 2):
                raise NcclGraphError(f"{source}: channel {number} names {len(nets)} NICs; "
                                     "a ring channel enters and leaves by one each.")
            channels.append(Channel(gpus, *nets) if nets else Channel(gpus))
        for key in ("typeintra", "typeinter"):
            if elem.get(key) not in LINK_TYPES:
                raise NcclGraphError(f"{source}: {key}='{elem.get(key)}' is not one of "
                                     f"{', '.join(LINK_TYPES)}.")
        return NcclGraph(tuple(channels), float(elem.get("speedintra", "0")),
                         float(elem.get("speedinter", "0")), elem.get("typeintra", ""),
                         elem.get("typeinter", ""))
    raise NcclGraphError(f"{source} holds no ring graph (<graph id=\"0\">).")


def export_nccl_graph(topology: Topology, path: str | os.PathLike[str],
                      progress: Progress | None = None) -> NcclGraph:
    """Write ``topology``'s NCCL graph to ``path``, read it back and check that it makes
    NCCL run the same rings; returns the graph written."""
    report(progress, "NCCL rings", 0.0)
    graph = nccl_graph(topology)
    write_nccl_graph(path, graph)
    report(progress, "reading back", 0.9)
    with open(path, "rb") as f:
        back = read_nccl_graph(f.read(), str(path))
    if [order for order, _ in graph_rings(topology, back)] != \
            [order for order, _ in graph_rings(topology, graph)]:
        raise NcclGraphError(f"{path} does not describe the rings it was written from "
                             "(a bug in Canopy).")
    return graph
