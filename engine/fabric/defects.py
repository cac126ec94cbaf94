"""What is broken in an imported InfiniBand fabric, and what each fault costs.

A production fabric is regular: every host has the same adapters, every leaf the same
uplinks, every cable of one level the same rate, and in a rail-optimised fabric adapter
``mlx5_k`` of every host of a pod goes to the pod's leaf ``k``. The faults found here are
departures from the fabric's own majority (nothing is assumed about what it should be):

- **slow link**: a cable slower or narrower than the most common rate of the cables at
  its level (host-leaf, leaf-spine, ...), e.g. 2x instead of 4x or HDR on an NDR fabric;
- **few uplinks**: a switch with fewer cables to the tier above than most of its tier;
- **few adapters**: a host with fewer cabled adapters than most hosts;
- **wrong switch**: an adapter cabled to a leaf other than the one the fabric's pattern
  gives it (the leaf of its rail in its pod, or the leaf of its host's other adapters).

Each fault's cost is measured on the hosts it touches (the host's pod, or the hosts
under the faulty switch and under one healthy peer of it) with the whole switch
network: the exact allgather optimum of those hosts (Zhao et al., "ForestColl:
Efficient Collective Communications on Heterogeneous Network Fabrics",
arXiv:2402.06787, §3.1 and §4.2) as imported, and again with the fault repaired (the
cable at the common rate, the missing uplinks or adapter added as its peers have them,
the cable moved). Each host counts as one compute node behind its adapters.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from fractions import Fraction

from canopy.engine.io.ib_fabric_import import IbImport, import_ib_fabric, natural_key
from canopy.engine.io.ibnetdiscover import IbCable
from canopy.engine.model.topology import Link, Node, Topology, find_problems, format_gbps

SLOW_LINK, FEW_UPLINKS, FEW_ADAPTERS, WRONG_SWITCH = (
    "slow link", "few uplinks", "few adapters", "wrong switch")
RAIL_SHARE = Fraction(4, 5)
"""Share of leaves (or hosts) that must follow a cabling pattern for it to be the rule."""


@dataclass(frozen=True)
class Defect:
    """One fault: one sentence, the hosts it touches and the optimum with and without it."""

    kind: str
    message: str
    hosts: tuple[str, ...]
    nodes: tuple[str, ...]
    with_defect: Fraction | None = None      # allgather algbw (GB/s) of ``hosts``
    repaired: Fraction | None = None

    def line(self) -> str:
        """The defect in one line with its cost when measured."""
        text = f"{self.kind}: {self.message}"
        if self.with_defect is not None and self.repaired is not None:
            loss = (1 - self.with_defect / self.repaired) * 100 if self.repaired else 0
            text += (f"; allgather of the {len(self.hosts)} hosts it touches: "
                     f"{format_gbps(self.with_defect)} GB/s, "
                     f"{format_gbps(self.repaired)} GB/s repaired ({float(loss):.1f} % lost)")
        return text


@dataclass
class _Repair:
    """Changes to the fabric-only topology: (a, b) -> added bandwidth (may be negative)."""

    changes: dict[tuple[str, str], Fraction]
    new_nodes: tuple[tuple[str, str], ...] = ()   # (node id, group) of added adapters


class _Fabric:
    """The imported fabric seen as cables between named ends, with hosts and tiers."""

    def __init__(self, result: IbImport) -> None:
        self._usual: tuple[dict, dict] | None = None
        self.result = result
        self.ids = result.node_ids
        self.nodes = result.fabric.nodes
        self.host_of: dict[str, str] = {g: h for h, gs in result.hosts.items() for g in gs}
        self.tier = {g: 0 for g in self.host_of} | dict(result.tiers)
        self.cables: list[IbCable] = [c for c in result.fabric.cables
                                      if c.a[0] in self.tier and c.b[0] in self.tier]
        self.leaf_hosts: dict[str, set[str]] = defaultdict(set)
        self.up: dict[str, list[IbCable]] = defaultdict(list)
        for c in self.cables:
            low, high = self.ends(c)
            if self.tier[high] == self.tier[low] + 1:
                self.up[low].append(c)
            if low in self.host_of and self.tier[high] == 1:
                self.leaf_hosts[high].add(self.host_of[low])

    def ends(self, cable: IbCable) -> tuple[str, str]:
        a, b = cable.a[0], cable.b[0]
        return (a, b) if self.tier[a] <= self.tier[b] else (b, a)

    def name(self, guid: str) -> str:
        return self.ids[guid]

    def hosts_below(self, switch: str) -> set[str]:
        if self.tier[switch] == 1:
            return set(self.leaf_hosts[switch])
        out: set[str] = set()
        for c in self.cables:
            low, high = self.ends(c)
            if high == switch and self.tier[low] == self.tier[switch] - 1 and low != switch:
                out |= self.hosts_below(low)
        return out

    def pod_of(self, host: str) -> set[str]:
        hosts = {host}
        for guid in self.result.hosts[host]:
            for c in self.up[guid]:
                hosts |= self.leaf_hosts[self.ends(c)[1]]
        return hosts

    def healthy(self, switch: str) -> bool:
        """Whether every cable of ``switch`` runs at its level's usual rate and it has its
        tier's usual number of uplinks (a peer to measure a fault against)."""
        if self._usual is None:
            rates: dict[tuple[int, int], Counter[Fraction | None]] = defaultdict(Counter)
            ups: dict[int, Counter[int]] = defaultdict(Counter)
            for c in self.cables:
                low, high = self.ends(c)
                rates[(self.tier[low], self.tier[high])][c.bandwidth] += 1
            for g, t in self.result.tiers.items():
                ups[t][len(self.up[g])] += 1
            self._usual = ({k: v.most_common(1)[0][0] for k, v in rates.items()},
                           {k: v.most_common(1)[0][0] for k, v in ups.items()})
        usual_rate, usual_up = self._usual
        if len(self.up[switch]) != usual_up[self.tier[switch]]:
            return False
        for c in self.cables:
            if switch in (c.a[0], c.b[0]):
                low, high = self.ends(c)
                if c.bandwidth != usual_rate[(self.tier[low], self.tier[high])]:
                    return False
        return True

    def peer(self, switch: str, avoid: set[str]) -> str | None:
        """A healthy switch of the same tier whose hosts are not in ``avoid`` (for a
        cross-switch collective that uses the faulty switch's uplinks)."""
        tier = self.tier[switch]
        for other in sorted(self.result.tiers, key=lambda g: natural_key(self.ids[g])):
            if other != switch and self.tier[other] == tier and \
                    not self.hosts_below(other) & avoid and self.healthy(other):
                return other
        return None


def find_defects(result: IbImport, cost: bool = True, cost_limit: int = 20) -> list[Defect]:
    """Every departure from the fabric's regularity, one :class:`Defect` each; with
    ``cost``, the first ``cost_limit`` carry the optimum of their hosts with and without."""
    fabric = _Fabric(result)
    found: list[tuple[Defect, _Repair | None]] = []
    found += _slow_links(fabric)
    found += _few_uplinks(fabric)
    found += _few_adapters(fabric)
    found += _wrong_switches(fabric)
    if not cost or not found:
        return [d for d, _ in found]
    base = import_ib_fabric(result.fabric).topology
    out = []
    for i, (defect, repair) in enumerate(found):
        if i < cost_limit and repair is not None and len(defect.hosts) >= 2:
            before, after = _costs(base, defect.hosts, repair)
            defect = Defect(defect.kind, defect.message, defect.hosts, defect.nodes,
                            before, after)
        out.append(defect)
    return out


# ------------------------------------------------------------------ detection


def _slow_links(fabric: _Fabric) -> list[tuple[Defect, _Repair | None]]:
    by_level: dict[tuple[int, int], list[IbCable]] = defaultdict(list)
    out: list[tuple[Defect, _Repair | None]] = []
    for c in fabric.cables:
        if c.bandwidth is None:
            continue
        low, high = fabric.ends(c)
        by_level[(fabric.tier[low], fabric.tier[high])].append(c)
    for cables in by_level.values():
        rates = Counter((c.bandwidth, c.rate) for c in cables if c.bandwidth is not None)
        (usual, common_rate), count = rates.most_common(1)[0]
        common = Fraction(usual or 0)
        for c in cables:
            if c.bandwidth is None or c.bandwidth >= common:
                continue
            low, high = fabric.ends(c)
            what = "narrower" if c.width != _width(common_rate) else "slower"
            hosts = _touched(fabric, low, high)
            message = (f"the cable {fabric.name(low)} port {_port(c, low)} - "
                       f"{fabric.name(high)} port {_port(c, high)} runs {c.rate} "
                       f"({format_gbps(c.bandwidth)} GB/s), {what} than the {count} "
                       f"{common_rate} cables ({format_gbps(common)} GB/s) of its level")
            changes = {(fabric.name(low), fabric.name(high)): common - c.bandwidth}
            if low in fabric.host_of:        # the host's link to the adapter grows too
                changes[(fabric.host_of[low], fabric.name(low))] = common - c.bandwidth
            repair = _Repair(changes)
            out.append((Defect(SLOW_LINK, message, hosts, (fabric.name(low),
                                                           fabric.name(high))), repair))
    return out


def _width(rate: str) -> str:
    return rate[:rate.index("x") + 1] if "x" in rate else rate


def _port(cable: IbCable, guid: str) -> int:
    return cable.a[1] if cable.a[0] == guid else cable.b[1]


def _touched(fabric: _Fabric, low: str, high: str) -> tuple[str, ...]:
    """Hosts a fault between ``low`` and ``high`` touches (see the module docstring)."""
    if low in fabric.host_of:
        hosts = fabric.pod_of(fabric.host_of[low])
    else:
        hosts = fabric.hosts_below(low)
        peer = fabric.peer(low, hosts)
        if peer is not None:
            hosts = hosts | fabric.hosts_below(peer)
    return tuple(sorted(hosts, key=natural_key))


def _few_uplinks(fabric: _Fabric) -> list[tuple[Defect, _Repair | None]]:
    top = max(fabric.result.tiers.values(), default=0)
    out = []
    for tier in range(1, top):
        switches = [g for g, t in fabric.result.tiers.items() if t == tier]
        counts = Counter(len(fabric.up[g]) for g in switches)
        if not counts:           # no switch at this distance from the hosts
            continue
        usual, many = counts.most_common(1)[0]
        if many < 2:
            continue
        spine_counts = _usual_uplinks(fabric, switches, usual)
        words, plural = {1: ("leaf", "leaves"), 2: ("spine", "spines")}.get(
            tier, (f"tier-{tier} switch", f"tier-{tier} switches"))
        for g in switches:
            have = len(fabric.up[g])
            if have >= usual:
                continue
            mine = Counter(fabric.ends(c)[1] for c in fabric.up[g])
            missing = {s: n - mine[s] for s, (n, _) in spine_counts.items() if mine[s] < n}
            names = ", ".join(fabric.name(s) for s in sorted(
                missing, key=lambda s: natural_key(fabric.name(s)))[:6])
            message = (f"{words} {fabric.name(g)} has {have} uplinks where {many} of the "
                       f"{len(switches)} {plural} have {usual}"
                       + (f" (none or fewer to {names})" if names else ""))
            hosts = _touched(fabric, g, g)
            repair = _Repair({(fabric.name(g), fabric.name(s)): n * spine_counts[s][1]
                              for s, n in missing.items()}) if missing else None
            out.append((Defect(FEW_UPLINKS, message, hosts, (fabric.name(g),)), repair))
    return out


def _usual_uplinks(fabric: _Fabric, switches: list[str], usual: int
                   ) -> dict[str, tuple[int, Fraction]]:
    """Upper switch -> (cables a regular switch has to it, their usual bandwidth)."""
    regular = [g for g in switches if len(fabric.up[g]) == usual]
    per: dict[str, Counter[int]] = defaultdict(Counter)
    rate: dict[str, Counter[Fraction]] = defaultdict(Counter)
    for g in regular:
        mine = Counter(fabric.ends(c)[1] for c in fabric.up[g])
        for c in fabric.up[g]:
            if c.bandwidth is not None:
                rate[fabric.ends(c)[1]][c.bandwidth] += 1
        for s in {fabric.ends(c)[1] for c in fabric.up[g]}:
            per[s][mine[s]] += 1
    out = {}
    for s, counter in per.items():
        n, seen = counter.most_common(1)[0]
        if seen * 2 >= len(regular) and rate[s]:
            out[s] = (n, rate[s].most_common(1)[0][0])
    return out


def _cabled(fabric: _Fabric, host: str) -> list[str]:
    return [g for g in fabric.result.hosts[host] if fabric.up[g]]


def _few_adapters(fabric: _Fabric) -> list[tuple[Defect, _Repair | None]]:
    hosts = fabric.result.hosts
    counts = Counter(len(_cabled(fabric, h)) for h in hosts)
    usual, many = counts.most_common(1)[0]
    if many < 2:
        return []
    names = Counter(fabric.result.adapter_names[g] for h in hosts
                    if len(_cabled(fabric, h)) == usual for g in _cabled(fabric, h))
    expected = {n for n, k in names.items() if k * 2 >= many}
    out = []
    for host in hosts:
        have = _cabled(fabric, host)
        if len(have) >= usual:
            continue
        mine = {fabric.result.adapter_names[g] for g in have}
        missing = sorted(expected - mine, key=natural_key)
        message = (f"host {host} has {len(have)} cabled adapters where {many} of the "
                   f"{len(hosts)} hosts have {usual}"
                   + (f" (missing {', '.join(missing[:8])})" if missing else ""))
        pod = fabric.pod_of(host)
        repair = _adapter_repair(fabric, host, pod, missing)
        out.append((Defect(FEW_ADAPTERS, message, tuple(sorted(pod, key=natural_key)),
                           (host,)), repair))
    return out


def _adapter_repair(fabric: _Fabric, host: str, pod: set[str], missing: list[str]
                    ) -> _Repair | None:
    """Add each missing adapter, cabled as the pod-mates' adapter of that name is."""
    changes: dict[tuple[str, str], Fraction] = {}
    new = []
    for device in missing:
        leaves: Counter[tuple[str, Fraction]] = Counter()
        for mate in pod - {host}:
            for g in fabric.result.hosts[mate]:
                if fabric.result.adapter_names[g] == device:
                    for c in fabric.up[g]:
                        if c.bandwidth is not None:
                            leaves[(fabric.ends(c)[1], c.bandwidth)] += 1
        if not leaves:
            continue
        (leaf, bandwidth), _ = leaves.most_common(1)[0]
        node_id = f"{host}.{device}"
        new.append((node_id, host))
        changes[(host, node_id)] = bandwidth
        changes[(node_id, fabric.name(leaf))] = bandwidth
    return _Repair(changes, tuple(new)) if changes else None


def _wrong_switches(fabric: _Fabric) -> list[tuple[Defect, _Repair | None]]:
    leaves = [g for g, t in fabric.result.tiers.items() if t == 1]
    names = fabric.result.adapter_names
    on_leaf: dict[str, Counter[str]] = {}
    for leaf in leaves:
        on_leaf[leaf] = Counter(names[fabric.ends(c)[0]] for c in fabric.cables
                                if fabric.ends(c)[1] == leaf and fabric.ends(c)[0] in names)
    single = [leaf for leaf in leaves if len(on_leaf[leaf]) == 1]
    multi_adapter_hosts = [h for h, gs in fabric.result.hosts.items() if len(gs) > 1]
    if not leaves:
        return []
    if not multi_adapter_hosts:
        return _misplaced_by_name(fabric, leaves)
    out = []
    if len(single) >= RAIL_SHARE * len(leaves) and len(
            {next(iter(on_leaf[leaf])) for leaf in single}) > 1:
        rail_of = {leaf: on_leaf[leaf].most_common(1)[0][0] for leaf in leaves}
        for host in multi_adapter_hosts:
            for g in fabric.result.hosts[host]:
                for c in fabric.up[g]:
                    leaf = fabric.ends(c)[1]
                    expected = _expected_leaf(fabric, host, g, rail_of)
                    if expected is None or expected == leaf:
                        continue
                    if rail_of[leaf] != names[g]:
                        reason = f"whose other host cables come from {rail_of[leaf]} adapters"
                    elif len(fabric.leaf_hosts[leaf]) <= len(fabric.leaf_hosts[expected]):
                        continue          # the other end of the fault is the misplaced one
                    else:
                        reason = (f"a {names[g]} leaf of another pod than {host}'s other "
                                  "adapters")
                    out.append(_wrong(fabric, c, g, leaf, expected, reason))
        return out
    together = sum(1 for h in multi_adapter_hosts if len(_host_leaves(fabric, h)) == 1)
    if together < RAIL_SHARE * len(multi_adapter_hosts):
        return []
    for host in multi_adapter_hosts:
        per_leaf = _host_leaves(fabric, host)
        if len(per_leaf) < 2:
            continue
        main = per_leaf.most_common(1)[0][0]
        for g in fabric.result.hosts[host]:
            for c in fabric.up[g]:
                leaf = fabric.ends(c)[1]
                if leaf != main:
                    out.append(_wrong(fabric, c, g, leaf, main,
                                      f"while host {host}'s other adapters go to "
                                      f"{fabric.name(main)}, as every host's go to one leaf"))
    return out


def _misplaced_by_name(fabric: _Fabric, leaves: list[str]) -> list[tuple[Defect, _Repair | None]]:
    """Hosts of one adapter: where most leaves hold the same number of hosts, a leaf with
    one host too many and a leaf with one too few, and a host of the full leaf whose name
    sits among the short leaf's hosts (hosts are named in cabling order), point to a
    cable on the wrong switch."""
    counts = Counter(len(fabric.leaf_hosts[leaf]) for leaf in leaves)
    usual, many = counts.most_common(1)[0]
    if many * 2 <= len(leaves):
        return []
    order = {h: i for i, h in enumerate(fabric.result.hosts)}
    short = [leaf for leaf in leaves if 0 < len(fabric.leaf_hosts[leaf]) < usual]
    out = []
    for leaf in leaves:
        if len(fabric.leaf_hosts[leaf]) <= usual:
            continue
        for host in fabric.leaf_hosts[leaf]:
            others = [order[h] for h in fabric.leaf_hosts[leaf] if h != host]
            if min(others) <= order[host] <= max(others):
                continue
            home = next((u for u in short if min(order[h] for h in fabric.leaf_hosts[u]) - 1
                         <= order[host] <= max(order[h] for h in fabric.leaf_hosts[u]) + 1),
                        None)
            if home is None:
                continue
            adapter = next(g for g in fabric.result.hosts[host]
                           if any(fabric.ends(c)[1] == leaf for c in fabric.up[g]))
            cable = next(c for c in fabric.up[adapter] if fabric.ends(c)[1] == leaf)
            out.append(_wrong(fabric, cable, adapter, leaf, home,
                              f"which has {len(fabric.leaf_hosts[leaf])} hosts where most "
                              f"leaves have {usual}, while the name places it among the "
                              f"hosts of {fabric.name(home)}, which has "
                              f"{len(fabric.leaf_hosts[home])}"))
    return out


def _host_leaves(fabric: _Fabric, host: str) -> Counter[str]:
    return Counter(fabric.ends(c)[1] for g in fabric.result.hosts[host] for c in fabric.up[g])


def _expected_leaf(fabric: _Fabric, host: str, adapter: str, rail_of: dict[str, str]
                   ) -> str | None:
    """The leaf of ``adapter``'s rail sharing the most hosts with the leaves of ``host``'s
    other adapters (those on a leaf of their own rail); None when nothing says."""
    names = fabric.result.adapter_names
    mates: Counter[str] = Counter()
    for g in fabric.result.hosts[host]:
        if g == adapter:
            continue
        for c in fabric.up[g]:
            leaf = fabric.ends(c)[1]
            if rail_of.get(leaf) == names[g]:
                mates.update(fabric.leaf_hosts[leaf] - {host})
    if not mates:
        return None
    candidates = [leaf for leaf, rail in rail_of.items() if rail == names[adapter]]
    score = {leaf: sum(mates[h] for h in fabric.leaf_hosts[leaf]) for leaf in candidates}
    best = max(candidates, key=lambda leaf: score[leaf], default=None)
    if best is None or score[best] == 0:
        return None
    return best


def _wrong(fabric: _Fabric, cable: IbCable, adapter: str, leaf: str, expected: str | None,
           reason: str) -> tuple[Defect, _Repair | None]:
    host = fabric.host_of[adapter]
    device = fabric.result.adapter_names[adapter]
    message = (f"host {host} {device} is cabled to {fabric.name(leaf)} port "
               f"{_port(cable, leaf)}, {reason}"
               + (f"; it belongs on {fabric.name(expected)}" if expected else ""))
    hosts = fabric.pod_of(host) | fabric.leaf_hosts[leaf]
    if expected is not None:
        hosts |= fabric.leaf_hosts[expected]
    repair = None
    if expected is not None and cable.bandwidth is not None:
        a = fabric.name(adapter)
        repair = _Repair({(a, fabric.name(leaf)): -cable.bandwidth,
                          (a, fabric.name(expected)): cable.bandwidth})
    return (Defect(WRONG_SWITCH, message, tuple(sorted(hosts, key=natural_key)),
                   (fabric.name(adapter), fabric.name(leaf))), repair)


# ------------------------------------------------------------------ costs


def _costs(base: Topology, hosts: tuple[str, ...], repair: _Repair
           ) -> tuple[Fraction | None, Fraction | None]:
    """Allgather algbw of ``hosts`` over the switch network, as is and repaired."""
    from canopy.engine.forestcoll.optimum import optimum

    keep = set(hosts)
    before = _sub_topology(base, keep, None)
    after = _sub_topology(base, keep, repair)
    results: list[Fraction | None] = []
    for topo in (before, after):
        if len(topo.compute_nodes()) < 2 or find_problems(topo):
            results.append(None)
        else:
            results.append(optimum(topo).algbw())
    return results[0], results[1]


def _sub_topology(base: Topology, hosts: set[str], repair: _Repair | None) -> Topology:
    """The hosts' nodes and every switch outside hosts, dead-end switches pruned."""
    nodes = [n for n in base.nodes if (n.group in hosts) or n.group is None]
    ids = {n.id for n in nodes}
    caps: dict[tuple[str, str], Fraction] = defaultdict(Fraction)
    for link in base.live_links():
        if link.source in ids and link.target in ids:
            caps[(link.source, link.target)] += link.bandwidth
    if repair is not None:
        for node_id, group in repair.new_nodes:
            if node_id not in ids:
                nodes.append(Node(node_id, "switch", node_id, group))
                ids.add(node_id)
        for (a, b), delta in repair.changes.items():
            if (b, a) in caps:
                a, b = b, a
            caps[(a, b)] += delta
    links = [Link(a, b, c) for (a, b), c in caps.items() if c > 0]
    compute = {n.id for n in nodes if n.kind == "compute"}
    while True:
        degree: dict[str, set[str]] = defaultdict(set)
        for link in links:
            degree[link.source].add(link.target)
            degree[link.target].add(link.source)
        dead = {i for i in ids if i not in compute and len(degree[i]) <= 1}
        if not dead:
            break
        ids -= dead
        links = [link for link in links if link.source in ids and link.target in ids]
    return Topology("defect", [n for n in nodes if n.id in ids], links)
