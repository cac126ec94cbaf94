"""The topology model: compute and switch nodes joined by links with exact bandwidths.

Bandwidths are :class:`fractions.Fraction` in GB/s, parsed from their decimal text
(docs/architecture.md, "The mathematics"). A duplex link is one link each way, each of the full
bandwidth; parallel links between the same pair add up. ForestColl (ForestColl (arXiv:2402.06787)
§4,
App. C) needs every node balanced: total ingress bandwidth equals total egress bandwidth.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from canopy.engine.model.errors import TopologyError
from canopy.engine.model.limits import MAX_EXPONENT, check_decimal, check_integer_text

if TYPE_CHECKING:
    import networkx as nx

    from canopy.engine.model.workloads import Job

COMPUTE = "compute"
SWITCH = "switch"
NODE_KINDS = (COMPUTE, SWITCH)


@dataclass
class Node:
    """A compute node (GPU, NPU) or a switch node (NVSwitch, PCIe switch, NIC, IB switch)."""

    id: str
    kind: str = COMPUTE
    label: str = ""
    group: str | None = None
    x: float | None = None
    y: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    failed: bool = False          # a failed switch carries nothing (what-if analysis)

    @property
    def is_compute(self) -> bool:
        return self.kind == COMPUTE


@dataclass
class Link:
    """A link; ``duplex`` means one link of ``bandwidth`` in each direction."""

    source: str
    target: str
    bandwidth: Fraction
    duplex: bool = True
    latency: Fraction | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    failed: bool = False          # a failed link carries nothing (what-if analysis)

    def directions(self) -> list[tuple[str, str]]:
        """The directed links this link stands for."""
        if self.duplex:
            return [(self.source, self.target), (self.target, self.source)]
        return [(self.source, self.target)]

    def describe(self) -> str:
        arrow = "<->" if self.duplex else "->"
        return f"{self.source} {arrow} {self.target}"


class Fingerprint(tuple):
    """A network's fingerprint (:meth:`Topology.fingerprint`), a tuple whose hash is worked
    out once: the memos look one up many times per computation, and hashing it anew hashes
    every link's Fraction bandwidth. Equal to, and hashed as, the plain tuple."""

    _hash: int | None = None

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = tuple.__hash__(self)
        return self._hash


@dataclass
class Topology:
    """A network: nodes, links, the jobs sharing it and any unknown top-level keys.

    Links and switches marked ``failed`` stay in the model (they are drawn and saved) but
    carry nothing: :meth:`capacities` and :meth:`latencies` leave them out, so every
    computation sees the reduced network (:meth:`reduced`).
    """

    name: str = "untitled"
    nodes: list[Node] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    bandwidth_unit: str = "GB/s"
    extra: dict[str, Any] = field(default_factory=dict)
    jobs: list[Job] = field(default_factory=list)
    # the last fingerprint given out, handed out again while equal (its hash kept), and
    # what it was worked out from (the fields of the nodes and links it reads)
    _fingerprint: Fingerprint | None = field(default=None, init=False, repr=False,
                                             compare=False)
    _read: tuple[Any, ...] | None = field(default=None, init=False, repr=False,
                                          compare=False)

    def node(self, node_id: str) -> Node:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)

    def node_ids(self) -> list[str]:
        return [n.id for n in self.nodes]

    def compute_nodes(self) -> list[str]:
        """Compute node ids in file order: this is the MSCCL rank order."""
        return [n.id for n in self.nodes if n.kind == COMPUTE]

    def switch_nodes(self) -> list[str]:
        return [n.id for n in self.nodes if n.kind == SWITCH]

    def live_links(self) -> list[Link]:
        """The links that carry traffic: not failed, and neither end a failed switch."""
        dead = {n.id for n in self.nodes if n.failed}
        return [link for link in self.links if not link.failed
                and link.source not in dead and link.target not in dead]

    def reduced(self) -> Topology:
        """A copy without the failed links and switches (the network a failure leaves)."""
        return Topology(self.name, [n for n in self.nodes if not n.failed], self.live_links(),
                        self.bandwidth_unit, dict(self.extra), list(self.jobs))

    def capacities(self) -> dict[tuple[str, str], Fraction]:
        """Directed link bandwidths of the live links with parallel links added up."""
        caps: dict[tuple[str, str], Fraction] = {}
        for link in self.live_links():
            b = link.bandwidth if type(link.bandwidth) is Fraction else Fraction(link.bandwidth)
            for d in link.directions():
                caps[d] = caps[d] + b if d in caps else b      # no 0 + b: simulate asks often
        return caps

    def latencies(self) -> dict[tuple[str, str], Fraction]:
        """Per directed link, the largest latency (µs) given on any of its parallel links."""
        lat: dict[tuple[str, str], Fraction] = {}
        for link in self.live_links():
            if link.latency is None:
                continue
            for d in link.directions():
                lat[d] = max(lat.get(d, link.latency), link.latency)
        return lat

    def fingerprint(self) -> Fingerprint:
        """What every computation on this network depends on, and nothing else: its nodes in
        file order (the rank order) with their kinds and servers, and its live directed links
        with their bandwidths and latencies. Positions, labels and the file's name are left
        out; a failed link or switch counts through what it removes. Every memo and every
        check whether a shown result is stale compares these. The fields it is worked out
        from are read at each call (a network edited in place gets its new one): while
        they are those of the last call (the same objects, as a computation's repeated
        calls find them), or the value equals the last one given out, that one is given
        again, its hash already known."""
        read = (tuple((n.id, n.kind, n.group, n.failed) for n in self.nodes),
                tuple((link.source, link.target, link.bandwidth, link.duplex, link.latency,
                       link.failed) for link in self.links))
        if self._fingerprint is not None and read == self._read:
            return self._fingerprint
        self._read = read
        value = Fingerprint((tuple((n.id, n.kind, n.group) for n in self.nodes if not n.failed),
                             tuple(self.capacities().items()),
                             tuple(self.latencies().items())))
        if self._fingerprint is not None and self._fingerprint == value:
            return self._fingerprint
        self._fingerprint = value
        return value

    def digraph(self) -> nx.DiGraph:
        """A networkx DiGraph with ``capacity`` (Fraction) on each directed link."""
        import networkx as nx

        g = nx.DiGraph()
        for n in self.nodes:
            g.add_node(n.id, kind=n.kind)
        for (u, v), c in self.capacities().items():
            g.add_edge(u, v, capacity=c)
        return g


# ---------------------------------------------------------------- bandwidth parsing


def parse_bandwidth(value: object) -> Fraction:
    """Parse a bandwidth from JSON (int, decimal, decimal string or "p/q") exactly.

    Raises ValueError with a short reason when the value is not a positive finite number
    or lies outside the documented range of :mod:`canopy.engine.model.limits` (checked before
    the exact value is built, so ``1e999999999`` is refused at once).
    """
    if isinstance(value, bool) or value is None:
        raise ValueError("is not a number")
    if isinstance(value, Fraction):
        result = value
    elif isinstance(value, int):
        result = Fraction(value)
    elif isinstance(value, (float, Decimal)):
        dec = Decimal(str(value)) if isinstance(value, float) else value
        if not dec.is_finite():
            raise ValueError("is not finite")
        check_decimal(dec)
        result = Fraction(dec)
    elif isinstance(value, str):
        result = _parse_text(value.strip())
    else:
        raise ValueError("is not a number")
    if result <= 0:
        raise ValueError("must be positive")
    if not _SMALLEST <= result <= _LARGEST:
        raise ValueError(f"is outside the range 1e-{MAX_EXPONENT} to 1e{MAX_EXPONENT}")
    return result


_SMALLEST = Fraction(1, 10**MAX_EXPONENT)
_LARGEST = Fraction(10**MAX_EXPONENT)


def _parse_text(text: str) -> Fraction:
    """A decimal or "p/q" string as an exact Fraction (digits and range checked first)."""
    try:
        if "/" in text:
            for part in text.split("/", 1):
                check_integer_text(part.strip())
            return Fraction(text)
        dec = Decimal(text)
    except (InvalidOperation, ZeroDivisionError) as exc:
        raise ValueError("is not a number") from exc
    except ValueError as exc:
        raise ValueError(str(exc) if "digits" in str(exc) else "is not a number") from exc
    if not dec.is_finite():
        raise ValueError("is not finite")
    check_decimal(dec)
    return Fraction(dec)


def format_number(value: Fraction) -> int | str:
    """JSON form of an exact number: an int, a decimal string, or "p/q" if not decimal."""
    if value.denominator == 1:
        return value.numerator
    den = value.denominator
    twos = fives = 0
    while den % 2 == 0:
        den //= 2
        twos += 1
    while den % 5 == 0:
        den //= 5
        fives += 1
    if den != 1:
        return f"{value.numerator}/{value.denominator}"
    places = max(twos, fives)
    text = f"{Decimal(value.numerator) / Decimal(value.denominator):.{places}f}"
    return text


def format_gbps(value: Fraction) -> str:
    """Human form of a bandwidth: exact when short, else rounded to 2 decimals."""
    formatted = format_number(value)
    if isinstance(formatted, int) and value < 10**15 or \
            isinstance(formatted, str) and "/" not in formatted and len(formatted) <= 8:
        return str(formatted)
    if Fraction(1, 100) <= abs(value) < 10**15:
        return f"{float(value):.2f}"
    return f"{Decimal(value.numerator) / Decimal(value.denominator):.4g}"


# ---------------------------------------------------------------- validation


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a topology; ``nodes``/``links`` name the culprits."""

    message: str
    nodes: tuple[str, ...] = ()
    links: tuple[int, ...] = ()


def _short_set(names: list[str], limit: int = 6) -> str:
    shown = ", ".join(names[:limit])
    if len(names) > limit:
        shown += f", … ({len(names)} nodes)"
    return "{" + shown + "}"


def find_problems(topo: Topology) -> list[Problem]:
    """Every problem that stops ForestColl from running on ``topo``, most basic first.

    Structural problems (duplicates, unknown nodes, self-loops, bad bandwidths) come
    first; the graph checks (enough compute nodes, reachability, balance: ForestColl
    (arXiv:2402.06787)
    §4.3 needs in = out bandwidth at every switch) run only when the structure is sound.

    Parameters
    ----------
    topo : Topology
        The network as drawn or loaded.

    Returns
    -------
    list of Problem
        Each with a one-sentence ``message`` and the ``culprits`` (node ids) it names;
        empty when the topology can be solved.

    Examples
    --------
    >>> from canopy.engine import load_sample
    >>> find_problems(load_sample("dgx-a100-2x8.json"))
    []
    """
    problems: list[Problem] = []
    seen: set[str] = set()
    for n in topo.nodes:
        if n.id in seen:
            problems.append(Problem(f"node id '{n.id}' is used more than once.", (n.id,)))
        seen.add(n.id)
        if n.kind not in NODE_KINDS:
            problems.append(
                Problem(f"node '{n.id}' has kind '{n.kind}'; use 'compute' or 'switch'.", (n.id,))
            )
        elif n.failed and n.kind == COMPUTE:
            problems.append(Problem(f"compute node '{n.id}' is marked failed; only links and "
                                    "switches can fail (remove the node instead).", (n.id,)))
    for i, link in enumerate(topo.links):
        for end in (link.source, link.target):
            if end not in seen:
                problems.append(
                    Problem(f"link {i} ({link.describe()}) refers to unknown node '{end}'.",
                            links=(i,))
                )
        if link.source == link.target:
            problems.append(
                Problem(f"link {i} ({link.describe()}) connects node '{link.source}' to itself.",
                        (link.source,), (i,))
            )
        if not isinstance(link.bandwidth, Fraction) or link.bandwidth <= 0:
            problems.append(
                Problem(f"link {i} ({link.describe()}) has bandwidth {link.bandwidth}, "
                        "which is not a positive number.", links=(i,))
            )
    if problems:
        return problems

    compute = topo.compute_nodes()
    if len(compute) < 2:
        return [Problem(f"the topology has {len(compute)} compute node(s); "
                        "a collective needs at least 2.", tuple(compute))]
    problems.extend(_reachability_problems(topo, compute))
    problems.extend(_balance_problems(topo))
    return problems


def _reachability_problems(topo: Topology, compute: list[str]) -> list[Problem]:
    """A compute node cut off from the rest makes some cut S have B+(S) = 0 (§3.1)."""
    out: dict[str, list[str]] = defaultdict(list)
    inn: dict[str, list[str]] = defaultdict(list)
    for u, v in topo.capacities():
        out[u].append(v)
        inn[v].append(u)
    first = compute[0]
    reach_from = _reach(out, first)
    missing = [c for c in compute if c not in reach_from]
    if missing:
        cut = sorted(reach_from)
        return [Problem(
            f"compute node '{missing[0]}' cannot be reached from '{first}': the cut "
            f"{_short_set(cut)} has zero bandwidth leaving it.", (missing[0], *cut))]
    reach_to = _reach(inn, first)
    missing = [c for c in compute if c not in reach_to]
    if missing:
        cut = sorted(n for n in topo.node_ids() if n not in reach_to)
        return [Problem(
            f"compute node '{missing[0]}' cannot reach '{first}': the cut "
            f"{_short_set(cut)} has zero bandwidth leaving it.", (missing[0], *cut))]
    return []


def _reach(adjacent: dict[str, list[str]], first: str) -> set[str]:
    """Nodes reachable from ``first`` along ``adjacent`` (first included)."""
    seen = {first}
    stack = [first]
    while stack:
        for b in adjacent.get(stack.pop(), ()):
            if b not in seen:
                seen.add(b)
                stack.append(b)
    return seen


def _balance_problems(topo: Topology) -> list[Problem]:
    ingress: dict[str, Fraction] = defaultdict(Fraction)
    egress: dict[str, Fraction] = defaultdict(Fraction)
    for (u, v), c in topo.capacities().items():
        egress[u] += c
        ingress[v] += c
    problems = []
    for n in topo.nodes:
        if ingress[n.id] != egress[n.id]:
            problems.append(Problem(
                f"node '{n.id}' is unbalanced: ingress {format_gbps(ingress[n.id])} GB/s but "
                f"egress {format_gbps(egress[n.id])} GB/s (ForestColl needs them equal).",
                (n.id,)))
    return problems


def check(topo: Topology, where: str = "") -> None:
    """Raise :class:`TopologyError` with the first problem, prefixed by ``where``."""
    problems = find_problems(topo)
    if problems:
        prefix = f"{where}: " if where else ""
        raise TopologyError(prefix + problems[0].message)
