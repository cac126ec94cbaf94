"""Read an InfiniBand fabric dump in the topology-file format of ``ibnetdiscover``.

The format (infiniband-diags, ibnetdiscover(8), "TOPOLOGY FILE FORMAT") lists every node
as a record: a few ``key=value`` lines (``vendid``, ``devid``, ``sysimgguid``, then
``switchguid=0x...(portguid)``, ``caguid=0x...`` or ``rtguid=0x...``), a node line

    Switch  41 "S-b8cef60300e3f37a"   # "MF0;leaf01:MQM9700/U1" enhanced port 0 lid 5 lmc 0
    Ca      1 "H-b8cef60300e3f37c"    # "a08-p1-dgx-04-c01 mlx5_5"

(the type, the number of ports, the node GUID with S-, H- or R- before it, and after
``#`` the node description in quotes), and one line per connected port

    [1]     "H-b8cef60300e3f37c"[1](b8cef60300e3f37d)  # "a08-p1-dgx-04-c01 mlx5_5" lid 12 4xNDR
    [1](b8cef60300e3f37d)  "S-b8cef60300e3f37a"[1]  # lid 12 lmc 0 "MF0;leaf01:..." lid 5 4xNDR

(the local port, a CA's port GUID in parentheses, the peer's GUID and port, and at the
end of the comment the active width and speed). Fields are separated by tabs in
ibnetdiscover's own output and by runs of spaces in copies such as ibdiagnet's; both
read alike. Grouped output (``-g``: chassis headers, ``[ext N]`` port marks) and full
output (``-f``: ``s=.. w=.. v=..``) are accepted. A port that is down is not printed at
all, and a port whose width or speed the subnet manager could not read shows ``??`` or
``???``.

Each cable appears twice, once from each end; it is kept once. Its bandwidth is the
width (1x, 2x, 4x, 8x, 12x lanes) times the per-lane data rate after line encoding:

========  ==============================================================  ===========
speed     signalling per lane and encoding                                data Gb/s
========  ==============================================================  ===========
SDR       2.5 Gb/s, 8b/10b                                                2
DDR       5 Gb/s, 8b/10b                                                  4
QDR       10 Gb/s, 8b/10b                                                 8
FDR10     10.3125 Gb/s, 64b/66b                                           10
FDR       14.0625 Gb/s, 64b/66b                                           150/11
EDR       25.78125 Gb/s, 64b/66b                                          25
HDR       53.125 Gb/s PAM4, 256b/257b transcoding and RS(544,514) FEC     50
NDR       106.25 Gb/s PAM4, 256b/257b transcoding and RS(544,514) FEC     100
XDR       212.5 Gb/s PAM4, 256b/257b transcoding and RS(544,514) FEC      200
========  ==============================================================  ===========

(64b/66b keeps 64/66 of the signalling rate; the PAM4 speeds keep 514/544 of it after
the FEC and 256/257 of that after transcoding, which is exactly 512/544.) So 4xNDR is
400 Gb/s = 50 GB/s, 4xHDR 25 GB/s, 4xEDR 12.5 GB/s and 4xFDR 75/11 GB/s, exactly.

Bad input (a port line before any node, a line cut short, a speed or width that is
not InfiniBand's, a peer that has no record: a truncated dump) raises
:class:`IbDumpError` with one sentence naming the file and line.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from canopy.engine.model.errors import CanopyError
from canopy.engine.model.limits import number_text

SWITCH, CA, ROUTER = "switch", "ca", "router"
LANES = {"1x": 1, "2x": 2, "4x": 4, "8x": 8, "12x": 12}
"""Active link widths ibnetdiscover prints, as lanes."""
SIGNALLING = {
    "SDR": (Fraction(5, 2), Fraction(8, 10)),
    "DDR": (Fraction(5), Fraction(8, 10)),
    "QDR": (Fraction(10), Fraction(8, 10)),
    "FDR10": (Fraction("10.3125"), Fraction(64, 66)),
    "FDR": (Fraction("14.0625"), Fraction(64, 66)),
    "EDR": (Fraction("25.78125"), Fraction(64, 66)),
    "HDR": (Fraction("53.125"), Fraction(514, 544) * Fraction(256, 257)),
    "NDR": (Fraction("106.25"), Fraction(514, 544) * Fraction(256, 257)),
    "XDR": (Fraction("212.5"), Fraction(514, 544) * Fraction(256, 257)),
}
"""Per-lane signalling rate (Gb/s) and the fraction left after encoding, by speed."""
LANE_GBPS = {speed: rate * kept for speed, (rate, kept) in SIGNALLING.items()}
"""Per-lane data rate in Gb/s after line encoding (SDR 2 ... XDR 200)."""
UNKNOWN_WIDTH, UNKNOWN_SPEED = "??", "???"
MAX_DUMP_BYTES = 256 * 1024 * 1024
MAX_PORTS = 255                      # NodeInfo's NumPorts is an 8-bit field

_NAME_TYPES = {"S": SWITCH, "H": CA, "R": ROUTER}
_NODE_TYPES = {"switch": SWITCH, "ca": CA, "rt": ROUTER, "router": ROUTER}
_NODE = re.compile(r'^(Switch|Ca|Rt|Router)\s+(\d+)\s+"([SHR])-([0-9A-Fa-f]+)"\s*(.*)$')
_PORT = re.compile(
    r'^\[(\d+)\](?:\s*\[ext \d+\])?(?:\s*\(([0-9A-Fa-f]+)\))?\s+'
    r'"([SHR])-([0-9A-Fa-f]+)"\[(\d+)\](?:\s*\[ext \d+\])?(?:\s*\(([0-9A-Fa-f]+)\))?'
    r'\s*(.*)$')
_RATE = re.compile(r'(?:^|\s)(\d+x|\?\?)([A-Za-z0-9]+|\?\?\?)(?=\s|$)')
_QUOTED = re.compile(r'"([^"]*)"')
_KEY = re.compile(r'^([A-Za-z_]+)\s*=\s*(0x[0-9A-Fa-f]+|\S+)')


class IbDumpError(CanopyError):
    """An ibnetdiscover dump Canopy cannot read; the message names the file and line."""


@dataclass
class IbNode:
    """One switch, channel adapter or router of the dump."""

    guid: str                     # node GUID, 16 lower-case hex digits
    kind: str                     # SWITCH, CA or ROUTER
    ports: int                    # number of ports it reports
    description: str
    line: int
    sysimgguid: str | None = None
    lid: int | None = None
    port_guids: dict[int, str] = field(default_factory=dict)
    listed_ports: set[int] = field(default_factory=set)


@dataclass
class IbCable:
    """One cable between two ports; ``width``/``speed`` None when unknown (``??``)."""

    a: tuple[str, int]            # (node GUID, port)
    b: tuple[str, int]
    width: str | None
    speed: str | None
    line: int
    seen_from_both: bool = False

    @property
    def rate(self) -> str:
        """The rate as ibnetdiscover prints it: ``4xNDR`` (``??``/``???`` when unknown)."""
        return f"{self.width or UNKNOWN_WIDTH}{self.speed or UNKNOWN_SPEED}"

    @property
    def bandwidth(self) -> Fraction | None:
        """GB/s each way after line encoding, or None when width or speed is unknown."""
        if self.width is None or self.speed is None:
            return None
        return link_bandwidth(self.width, self.speed)


@dataclass
class IbFabric:
    """Every node and cable of a dump, with the warnings reading it gave."""

    source: str
    nodes: dict[str, IbNode] = field(default_factory=dict)
    cables: list[IbCable] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[IbNode]:
        return [n for n in self.nodes.values() if n.kind == kind]


def link_bandwidth(width: str, speed: str) -> Fraction:
    """GB/s of a link of ``width`` (``4x``) at ``speed`` (``NDR``): lanes x data rate / 8.

    >>> link_bandwidth("4x", "NDR"), link_bandwidth("4x", "HDR"), link_bandwidth("4x", "FDR")
    (Fraction(50, 1), Fraction(25, 1), Fraction(75, 11))
    """
    return LANES[width] * LANE_GBPS[speed] / 8


def read_ibnetdiscover(path: str | os.PathLike[str]) -> IbFabric:
    """Read an ibnetdiscover topology file (see the module docstring)."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_DUMP_BYTES:
            raise IbDumpError(f"{p} is {size / 2**20:.0f} MiB; Canopy reads fabric dumps of "
                              f"at most {MAX_DUMP_BYTES // 2**20} MiB.")
        data = p.read_bytes()
    except FileNotFoundError:
        raise IbDumpError(f"{p}: no such file.") from None
    except OSError as exc:
        raise IbDumpError(f"{p} cannot be read ({exc.strerror or exc}).") from None
    return parse_ibnetdiscover(data.decode("utf-8", errors="replace"), str(p))


def parse_ibnetdiscover(text: str, source: str = "fabric dump") -> IbFabric:
    """Parse the text of an ibnetdiscover topology file into nodes and cables."""
    return _Parser(source).parse(text)


class _Parser:
    def __init__(self, source: str) -> None:
        self.fabric = IbFabric(source)
        self.source = source
        self.header: dict[str, str] = {}
        self.current: IbNode | None = None
        self.ports: dict[tuple[str, int], tuple[str, int, str | None, str | None, int]] = {}
        self.order: list[str] = []
        self.pending_header: int | None = None     # line of a header awaiting its node line
        self.peer_port_guids: dict[tuple[str, int], str] = {}
        self.peer_kinds: dict[str, str] = {}

    def fail(self, line: int, message: str) -> IbDumpError:
        return IbDumpError(f"{self.source}, line {line}: {message}")

    def parse(self, text: str) -> IbFabric:
        lines = text.splitlines()
        for number, raw in enumerate(lines, start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            node = _NODE.match(line) if line.startswith(("Switch", "Ca", "Rt", "Router")) \
                else None
            key = _KEY.match(line)
            if line.startswith("["):
                self._port(line, number)
            elif node is not None:
                self._node(node, number)
            elif line.startswith(("Switch", "Ca\t", "Ca ", "Rt\t", "Rt ")):
                raise self.fail(number, f"'{_short(line)}' is not a complete node line "
                                        "(type, port count, \"S-/H-/R-GUID\", description); "
                                        "the dump may be cut short.")
            elif key is not None:
                self._key(key, number)
            elif line.startswith(("Chassis", "Non-Chassis", "Hostname:")):
                continue
            else:
                self.fabric.warnings.append(f"{self.source}, line {number}: '{_short(line)}' "
                                            "is not part of the ibnetdiscover format; skipped.")
        if self.pending_header is not None:
            raise IbDumpError(f"{self.source} ends after the header of a node (line "
                              f"{self.pending_header}) without its node line: the dump is cut "
                              "short.")
        if not self.fabric.nodes:
            raise IbDumpError(f"{self.source} lists no Switch, Ca or Rt node, so it is not an "
                              "ibnetdiscover topology file.")
        self._cables()
        return self.fabric

    def _key(self, match: re.Match[str], number: int) -> None:
        if self.pending_header is None:
            self.pending_header = number
        self.header[match.group(1).lower()] = match.group(2)

    def _node(self, match: re.Match[str], number: int) -> None:
        kind = _NODE_TYPES[match.group(1).lower()]
        guid = _guid(match.group(4))
        if _NAME_TYPES[match.group(3)] != kind:
            raise self.fail(number, f"node {match.group(3)}-{match.group(4)} is a "
                                    f"{match.group(1)} but its name says otherwise.")
        if guid in self.fabric.nodes:
            raise self.fail(number, f"the {_shown(kind, guid)} is listed a second time (first "
                                    f"on line {self.fabric.nodes[guid].line}).")
        if int(match.group(2)) > MAX_PORTS:
            raise self.fail(number, f"the {_shown(kind, guid)} says it has "
                                    f"{number_text(int(match.group(2)))} "
                                    f"ports; an InfiniBand node has at most {MAX_PORTS} (the "
                                    "port count of its NodeInfo is 8 bits).")
        rest = match.group(5)
        quoted = _QUOTED.search(rest[rest.find("#"):]) if "#" in rest else None
        description = quoted.group(1).strip() if quoted else ""
        node = IbNode(guid, kind, int(match.group(2)), description, number,
                      sysimgguid=_hex_or_none(self.header.get("sysimgguid")))
        lid = re.search(r"\blid (\d+)", rest)
        if lid and kind == SWITCH:
            node.lid = int(lid.group(1))
        self.fabric.nodes[guid] = node
        self.order.append(guid)
        self.current = node
        self.header = {}
        self.pending_header = None

    def _port(self, line: str, number: int) -> None:
        match = _PORT.match(line)
        if match is None:
            raise self.fail(number, f"'{_short(line)}' is not a complete port line "
                                    "([port] \"S-/H-/R-GUID\"[port] # ... width speed); the "
                                    "dump may be cut short.")
        node = self.current
        if node is None:
            raise self.fail(number, f"the port line '{_short(line)}' comes before any Switch, "
                                    "Ca or Rt line, so it belongs to no node.")
        port = int(match.group(1))
        if port < 1 or port > node.ports:
            raise self.fail(number, f"{_shown(node.kind, node.guid)} has {node.ports} ports, "
                                    f"so it has no port {port}.")
        if port in node.listed_ports:
            raise self.fail(number, f"port {port} of {_shown(node.kind, node.guid)} is listed "
                                    "twice.")
        node.listed_ports.add(port)
        if match.group(2):
            node.port_guids[port] = _guid(match.group(2))
        comment = match.group(7)
        tail = comment[comment.rfind('"') + 1:] if '"' in comment else comment
        rate = _RATE.search(tail)
        width = speed = None
        if rate is None:
            self.fabric.warnings.append(
                f"{self.source}, line {number}: port {port} of {_shown(node.kind, node.guid)} "
                "gives no width and speed; its cable counts as unknown.")
        else:
            width, speed = rate.group(1), rate.group(2)
            if width == UNKNOWN_WIDTH:
                width = None
            elif width not in LANES:
                raise self.fail(number, f"width '{width}' is not an InfiniBand link width "
                                        f"({', '.join(LANES)}).")
            if speed == UNKNOWN_SPEED:
                speed = None
            elif speed.upper() not in LANE_GBPS:
                raise self.fail(number, f"speed '{speed}' is not an InfiniBand speed Canopy "
                                        f"knows ({', '.join(LANE_GBPS)}).")
            else:
                speed = speed.upper()
        peer = (_guid(match.group(4)), int(match.group(5)))
        peer_kind = _NAME_TYPES[match.group(3)]
        self.ports[(node.guid, port)] = (*peer, width, speed, number)
        self.peer_kinds[peer[0]] = peer_kind
        if match.group(6) and peer_kind != SWITCH:
            self.peer_port_guids.setdefault(peer, _guid(match.group(6)))

    def _cables(self) -> None:
        """Pair the two ends of every cable; check the peers exist (else: cut short)."""
        nodes = self.fabric.nodes
        last = self.order[-1]
        for (guid, port), (peer, peer_port, _w, _s, number) in self.ports.items():
            if peer not in nodes:
                raise self.fail(number, f"port {port} of {_shown(nodes[guid].kind, guid)} leads "
                                        f"to the {_shown(self.peer_kinds[peer], peer)}, which "
                                        "has no record in the dump (is the dump truncated?).")
            if peer_port > nodes[peer].ports:
                raise self.fail(number, f"port {port} of {_shown(nodes[guid].kind, guid)} leads "
                                        f"to port {peer_port} of {_shown(nodes[peer].kind, peer)}"
                                        f", which has only {nodes[peer].ports} ports.")
        seen: set[tuple[str, int]] = set()
        for (guid, port), (peer, peer_port, width, speed, number) in self.ports.items():
            if (guid, port) in seen:
                continue
            seen.add((guid, port))
            back = self.ports.get((peer, peer_port))
            both = back is not None
            if back is not None:
                if (back[0], back[1]) != (guid, port):
                    raise self.fail(number, f"port {port} of {_shown(nodes[guid].kind, guid)} "
                                            f"leads to port {peer_port} of "
                                            f"{_shown(nodes[peer].kind, peer)}, which the dump "
                                            f"connects elsewhere (line {back[4]}).")
                seen.add((peer, peer_port))
                width = width or back[2]
                speed = speed or back[3]
            elif peer == last:
                raise IbDumpError(f"{self.source} ends inside the record of "
                                  f"{_shown(nodes[last].kind, last)} (line {nodes[last].line}), "
                                  f"which does not list port {peer_port} that line {number} "
                                  "connects to: the dump is cut short.")
            else:
                self.fabric.warnings.append(
                    f"{self.source}, line {number}: the cable from port {port} of "
                    f"{_describe(nodes[guid])} to port {peer_port} of {_describe(nodes[peer])} "
                    "is listed from one end only.")
            if (peer, peer_port) in self.peer_port_guids:
                nodes[peer].port_guids.setdefault(peer_port,
                                                  self.peer_port_guids[(peer, peer_port)])
            self.fabric.cables.append(IbCable((guid, port), (peer, peer_port), width, speed,
                                              number, both))
        if not nodes[last].listed_ports and len(nodes) > 1:
            raise IbDumpError(f"{self.source} ends with the record of "
                              f"{_shown(nodes[last].kind, last)} (line {nodes[last].line}) "
                              "without any of its ports: the dump is cut short.")


def _guid(text: str) -> str:
    return text.lower().removeprefix("0x").rjust(16, "0")


def _hex_or_none(text: str | None) -> str | None:
    if not text or not text.lower().startswith("0x"):
        return None
    return _guid(text)


_KIND_WORDS = {SWITCH: ("switch", "S"), CA: ("adapter", "H"), ROUTER: ("router", "R")}


def _shown(kind: str, guid: str) -> str:
    word, letter = _KIND_WORDS[kind]
    return f"{word} {letter}-{guid}"


def _describe(node: IbNode) -> str:
    """A node as people know it: its description, or its GUID when it has none."""
    return f"'{node.description}'" if node.description else _shown(node.kind, node.guid)


def describe_node(node: IbNode) -> str:
    """The node's description in quotes with its kind, or its GUID if it has none."""
    return _describe(node)


def _short(line: str) -> str:
    return line if len(line) <= 60 else line[:57] + "..."
