"""Slurm's topology.conf: a topology's switch hierarchy out, a Slurm file's hierarchy in.

**The file** (topology.conf(5); lines read as Slurm's configuration parser reads them,
src/common/parse_config.c): a ``#`` not escaped by a backslash starts a comment; a line
ending in an odd number of backslashes (trailing spaces aside) continues on the next;
``\\#`` is a literal ``#`` and ``\\\\`` a backslash; each line is ``Key=Value`` pairs
separated by spaces, a value either unquoted without spaces or in double quotes; keys
are case-insensitive. ``topology/tree`` lines are ``SwitchName=NAME`` with ``Nodes=``
(a leaf: the hosts under it) or ``Switches=`` (the child switches), never both, and an
optional integer ``LinkSpeed=``; ``topology/block`` lines are ``BlockName=NAME
Nodes=...`` and one ``BlockSizes=N,...`` (the base block size, then sizes a power of two
times larger). ``Nodes=`` and ``Switches=`` are hostlist expressions
(:mod:`canopy.engine.io.hostlist`). Switch names are unique and at most 64 characters,
every child switch is defined, and the switches form no cycle; breaking a rule raises
:class:`SlurmTopologyError` with one sentence naming the file and line.

**Export.** Slurm's nodes are a topology's hosts: its groups that hold compute nodes
(servers), and compute nodes outside any group. Slurm's switches are the switches
outside every group, in tiers by their distance from the hosts: tier-1 switches (leaves)
list the hosts cabled to them, higher ones the switches of the tier below they are
cabled to (a switch may be the child of several, as in a fat tree). Leaves with exactly
the same hosts (the rail leaves of one pod of a rail-optimised fabric) are written as
one, so that no host is under two leaves, which Slurm warns about; links between
switches of one tier have no place in a tree and are left out with a comment. For
``topology/block`` the blocks are the sets of hosts joined through shared leaves (a
pod, or the hosts of one switch), ``BlockSizes`` the smallest block's size and its
doublings up to the number of hosts. ``LinkSpeed`` is the switch's most common link
bandwidth towards its children in Gb/s (Slurm does not use it).

**Import.** Every Slurm node becomes a host (a group of one compute node) and every
switch or block a switch node; a link joins each child to its parent, with the
bandwidth given for its level: hosts to leaves the first, leaves to their parents the
second, and so on (the last repeats). Blocks are joined to one top switch.
"""

from __future__ import annotations

import os
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from canopy.engine.io.hostlist import (
    FORBIDDEN,
    HostlistError,
    compress_hostlist,
    expand_hostlist,
    hostlist_size,
)
from canopy.engine.model.errors import CanopyError
from canopy.engine.model.limits import MAX_BUILT_LINKS, MAX_BUILT_NODES
from canopy.engine.model.topology import COMPUTE, SWITCH, Link, Node, Topology

TREE, BLOCK = "tree", "block"
PLUGINS = (TREE, BLOCK)
MAX_NAME = 64
MAX_CONF_BYTES = 16 * 1024 * 1024

_PAIR = re.compile(r'\s*([A-Za-z0-9_.]+)\s*([-*+/]?)=\s*(?:"([^"]*)"|(\S+))(?=\s|$)')
_SWITCH_KEYS = {"switchname", "switches", "nodes", "linkspeed"}
_BLOCK_KEYS = {"blockname", "nodes"}


class SlurmTopologyError(CanopyError):
    """A topology.conf Canopy cannot read or a topology it cannot write as one."""


@dataclass
class SlurmSwitch:
    name: str
    line: int
    nodes: list[str] = field(default_factory=list)
    switches: list[str] = field(default_factory=list)
    link_speed: int | None = None


@dataclass
class SlurmBlock:
    name: str
    line: int
    nodes: list[str] = field(default_factory=list)


@dataclass
class SlurmTopology:
    """A parsed topology.conf: tree switches or blocks (and block sizes)."""

    plugin: str
    switches: list[SlurmSwitch] = field(default_factory=list)
    blocks: list[SlurmBlock] = field(default_factory=list)
    block_sizes: list[int] = field(default_factory=list)
    levels: dict[str, int] = field(default_factory=dict)   # switch -> level (0 = leaf)


# ------------------------------------------------------------------ reading


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each logical line: comments stripped, continuations
    joined, escapes removed, as Slurm's configuration parser does."""
    out: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _strip_comment(raw)
        if not pending:
            start = number
        stripped = line.rstrip()
        backslashes = len(stripped) - len(stripped.rstrip("\\"))
        if backslashes % 2 == 1:
            pending.append(stripped[:-1])
            continue
        pending.append(line)
        out.append((start, _unescape("".join(pending))))
        pending = []
    if pending:
        out.append((start, _unescape("".join(pending))))
    return out


def _strip_comment(line: str) -> str:
    backslashes = 0
    for i, ch in enumerate(line):
        if ch == "#" and backslashes % 2 == 0:
            return line[:i]
        backslashes = backslashes + 1 if ch == "\\" else 0
    return line


def _unescape(line: str) -> str:
    return re.sub(r"\\(.)", r"\1", line).replace("\\", "")


def read_topology_conf(path: str | os.PathLike[str]) -> SlurmTopology:
    """Read and check a topology.conf file (see the module docstring)."""
    p = Path(path)
    try:
        if p.stat().st_size > MAX_CONF_BYTES:
            raise SlurmTopologyError(f"{p} is larger than {MAX_CONF_BYTES // 2**20} MiB.")
        text = p.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise SlurmTopologyError(f"{p}: no such file.") from None
    except OSError as exc:
        raise SlurmTopologyError(f"{p} cannot be read ({exc.strerror or exc}).") from None
    return parse_topology_conf(text, str(p))


def parse_topology_conf(text: str, source: str = "topology.conf") -> SlurmTopology:
    """Parse topology.conf text into switches or blocks, checking Slurm's rules."""
    switches: dict[str, SlurmSwitch] = {}
    blocks: dict[str, SlurmBlock] = {}
    sizes: list[int] = []
    listed = 0
    for number, line in logical_lines(text):
        if not line.strip():
            continue
        where = f"{source}, line {number}"
        pairs = _pairs(line, where)
        try:
            listed += 1 + sum(hostlist_size(v) for k, v in pairs[1:]
                              if k.lower() in ("nodes", "switches"))
        except HostlistError as exc:
            raise SlurmTopologyError(f"{where}: {exc}") from None
        if listed > MAX_BUILT_LINKS:
            raise SlurmTopologyError(f"{where}: the lines so far list {listed:,} nodes and "
                                     f"switches; Canopy imports at most {MAX_BUILT_LINKS:,} "
                                     "links (one per name listed).")
        if len(switches) + len(blocks) >= MAX_BUILT_NODES:
            raise SlurmTopologyError(f"{where}: more than {MAX_BUILT_NODES:,} switches; "
                                     f"Canopy imports at most {MAX_BUILT_NODES:,} nodes.")
        first = pairs[0][0].lower()
        try:
            if first == "switchname":
                _switch(pairs, where, number, switches)
            elif first == "blockname":
                _block(pairs, where, number, blocks)
            elif first == "blocksizes" and len(pairs) == 1:
                sizes = _sizes(pairs[0][1], where)
            elif first in ("ringname", "blocksizes"):
                raise SlurmTopologyError(
                    f"{where}: {pairs[0][0]} is not a topology/tree or topology/block line "
                    "Canopy reads." if first == "ringname" else
                    f"{where}: BlockSizes stands on a line of its own.")
            else:
                raise SlurmTopologyError(f"{where}: '{pairs[0][0]}' is not a topology.conf "
                                         "key (SwitchName, BlockName or BlockSizes).")
        except HostlistError as exc:
            raise SlurmTopologyError(f"{where}: {exc}") from None
        if switches and (blocks or sizes):
            raise SlurmTopologyError(f"{where}: the file mixes SwitchName lines "
                                     "(topology/tree) with BlockName lines (topology/block).")
    if not switches and not blocks:
        raise SlurmTopologyError(f"{source} defines no SwitchName or BlockName.")
    if switches:
        conf = SlurmTopology(TREE, list(switches.values()))
        conf.levels = _check_tree(conf, source)
        return conf
    conf = SlurmTopology(BLOCK, blocks=list(blocks.values()), block_sizes=sizes)
    if sizes and any(len(b.nodes) < sizes[0] for b in conf.blocks):
        small = next(b for b in conf.blocks if len(b.nodes) < sizes[0])
        raise SlurmTopologyError(f"{source}, line {small.line}: block {small.name} has "
                                 f"{len(small.nodes)} nodes, fewer than the base block size "
                                 f"{sizes[0]}.")
    return conf


def _pairs(line: str, where: str) -> list[tuple[str, str]]:
    pairs = []
    pos = 0
    while pos < len(line) and line[pos:].strip():
        match = _PAIR.match(line, pos)
        if match is None:
            raise SlurmTopologyError(f"{where}: '{line[pos:].strip()[:40]}' is not a "
                                     "Key=Value pair.")
        if match.group(2):
            raise SlurmTopologyError(f"{where}: '{match.group(1)}{match.group(2)}=' is not "
                                     "used in topology.conf; write Key=Value.")
        value = match.group(3) if match.group(3) is not None else match.group(4)
        pairs.append((match.group(1), value))
        pos = match.end()
    return pairs


def _switch(pairs: list[tuple[str, str]], where: str, number: int,
            switches: dict[str, SlurmSwitch]) -> None:
    name = _new_name(pairs, where, "switch", switches)
    switch = SlurmSwitch(name, number)
    keys = set()
    for key, value in pairs[1:]:
        k = key.lower()
        if k not in _SWITCH_KEYS - {"switchname"}:
            raise SlurmTopologyError(f"{where}: '{key}' is not a SwitchName option (Nodes, "
                                     "Switches, LinkSpeed).")
        if k in keys:
            raise SlurmTopologyError(f"{where}: {key} is given twice.")
        keys.add(k)
        if k == "nodes":
            switch.nodes = expand_hostlist(value)
        elif k == "switches":
            switch.switches = expand_hostlist(value)
        elif not value.isdigit():
            raise SlurmTopologyError(f"{where}: LinkSpeed '{value}' is not a whole number.")
        else:
            switch.link_speed = int(value)
    if "nodes" in keys and "switches" in keys:
        raise SlurmTopologyError(f"{where}: switch {name} has both Nodes and Switches; a "
                                 "switch has hosts or child switches, not both.")
    switches[name] = switch


def _new_name(pairs: list[tuple[str, str]], where: str, kind: str,
              defined: dict[str, SlurmSwitch] | dict[str, SlurmBlock]) -> str:
    """The name a SwitchName or BlockName line defines: 1 to MAX_NAME characters, not
    defined before (``defined``)."""
    name = pairs[0][1]
    if not name or len(name) > MAX_NAME:
        raise SlurmTopologyError(f"{where}: the switch name '{name[:70]}' must have 1 to "
                                 f"{MAX_NAME} characters.")
    if name in defined:
        raise SlurmTopologyError(f"{where}: {kind} {name} is already defined on line "
                                 f"{defined[name].line}.")
    return name


def _block(pairs: list[tuple[str, str]], where: str, number: int,
           blocks: dict[str, SlurmBlock]) -> None:
    name = _new_name(pairs, where, "block", blocks)
    block = SlurmBlock(name, number)
    for key, value in pairs[1:]:
        if key.lower() != "nodes":
            raise SlurmTopologyError(f"{where}: '{key}' is not a BlockName option (Nodes).")
        block.nodes = expand_hostlist(value)
    blocks[name] = block


def _sizes(value: str, where: str) -> list[int]:
    texts = [t.strip() for t in value.split(",")]
    if not all(t.isdigit() and int(t) > 0 for t in texts):
        raise SlurmTopologyError(f"{where}: BlockSizes '{value}' is not a list of positive "
                                 "whole numbers.")
    sizes = [int(t) for t in texts]
    for a, b in zip(sizes, sizes[1:], strict=False):
        ratio = Fraction(b, sizes[0])
        if b <= a or ratio.denominator != 1 or ratio.numerator & (ratio.numerator - 1):
            raise SlurmTopologyError(f"{where}: BlockSizes {value}: each size after the first "
                                     f"must be a larger power-of-two multiple of {sizes[0]}.")
    return sizes


def _check_tree(conf: SlurmTopology, source: str) -> dict[str, int]:
    """Each switch's level (0 = leaf); unknown children, self-children and cycles fail."""
    by_name = {s.name: s for s in conf.switches}
    for s in conf.switches:
        for child in s.switches:
            if child == s.name:
                raise SlurmTopologyError(f"{source}, line {s.line}: switch {s.name} lists "
                                         "itself as a child.")
            if child not in by_name:
                raise SlurmTopologyError(f"{source}, line {s.line}: switch {s.name} lists "
                                         f"child {child}, which has no SwitchName line.")
    levels: dict[str, int] = {}
    for s in conf.switches:          # depth first without recursion: trees may be deep
        if s.name in levels:
            continue
        path = [s.name]
        on_path = {s.name}
        todo = [iter(s.switches)]
        while todo:
            step = next(todo[-1], None)
            if step is None:
                todo.pop()
                name = path.pop()
                on_path.discard(name)
                children = by_name[name].switches
                levels[name] = 1 + max(levels[c] for c in children) if children else 0
            elif step in on_path:
                cycle = path[path.index(step):] + [step]
                raise SlurmTopologyError(f"{source}, line {by_name[step].line}: the switches "
                                         f"{' -> '.join(cycle)} form a cycle; topology/tree "
                                         "needs a hierarchy.")
            elif step not in levels:
                path.append(step)
                on_path.add(step)
                todo.append(iter(by_name[step].switches))
    return levels


# ------------------------------------------------------------------ import


def topology_from_slurm(conf: SlurmTopology, bandwidths: list[Fraction],
                        name: str = "slurm") -> Topology:
    """Hosts and switches of ``conf`` joined with ``bandwidths[level]`` GB/s links."""
    from canopy.engine.model.auto_layout import auto_layout

    if not bandwidths:
        raise SlurmTopologyError("give at least one bandwidth.")
    bandwidths = [Fraction(b) for b in bandwidths]

    def bw(level: int) -> Fraction:
        return bandwidths[min(level, len(bandwidths) - 1)]

    topo = Topology(name=name)
    hosts: list[str] = []
    seen: set[str] = set()
    members = [(s.name, s.nodes) for s in conf.switches] + \
        [(b.name, b.nodes) for b in conf.blocks]
    for _, nodes in members:
        for host in nodes:
            if host not in seen:
                seen.add(host)
                hosts.append(host)
    if len(hosts) + len(members) > MAX_BUILT_NODES:
        raise SlurmTopologyError(f"the file names {len(hosts):,} hosts and {len(members):,} "
                                 f"switches; Canopy imports at most {MAX_BUILT_NODES:,} nodes.")
    for host in hosts:
        topo.nodes.append(Node(host, COMPUTE, host, host))
    ids = {}
    for switch_name, _ in members:
        node_id = switch_name if switch_name not in seen else f"{switch_name} (switch)"
        ids[switch_name] = node_id
    for switch_name, nodes in members:
        topo.nodes.append(Node(ids[switch_name], SWITCH, switch_name,
                               extra={"slurm": conf.plugin}))
        for host in dict.fromkeys(nodes):
            topo.links.append(Link(host, ids[switch_name], bw(0)))
    for s in conf.switches:
        for child in dict.fromkeys(s.switches):
            topo.links.append(Link(ids[child], ids[s.name], bw(conf.levels[child] + 1)))
    if conf.plugin == BLOCK and len(conf.blocks) > 1:
        top = "blocks" if "blocks" not in ids and "blocks" not in seen else "blocks (top)"
        topo.nodes.append(Node(top, SWITCH, "top of the blocks", extra={"slurm": BLOCK}))
        for b in conf.blocks:
            topo.links.append(Link(ids[b.name], top, bw(1)))
    if conf.plugin == BLOCK and conf.block_sizes:
        topo.extra["slurm_block_sizes"] = conf.block_sizes
    auto_layout(topo, only_missing=False)
    return topo


# ------------------------------------------------------------------ export


@dataclass
class SlurmExport:
    text: str
    warnings: list[str]


def slurm_names(topo: Topology) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Hosts (name -> member node ids) and the Slurm name of every node id that is a host
    member or a switch outside hosts; names cleaned of characters Slurm cannot carry."""
    hosts: dict[str, list[str]] = defaultdict(list)
    with_compute = {n.group for n in topo.nodes if n.group and n.kind == COMPUTE}
    for n in topo.nodes:
        if n.group in with_compute:
            hosts[n.group].append(n.id)
        elif n.kind == COMPUTE:
            hosts[n.id].append(n.id)
    taken: set[str] = set()
    clean: dict[str, str] = {}

    def unique(text: str) -> str:
        base = FORBIDDEN.sub("_", text)[:MAX_NAME] or "_"
        name, i = base, 1
        while name in taken:
            i += 1
            name = f"{base[:MAX_NAME - len(str(i)) - 1]}_{i}"
        taken.add(name)
        return name

    host_name = {h: unique(h) for h in hosts}
    for h, ids in hosts.items():
        for node_id in ids:
            clean[node_id] = host_name[h]
    for n in topo.nodes:
        if n.kind == SWITCH and n.id not in clean and n.group not in with_compute:
            clean[n.id] = unique(n.id)
    return dict(hosts), clean


def export_slurm(topo: Topology, plugin: str = TREE,
                 block_sizes: list[int] | None = None) -> SlurmExport:
    """The topology.conf text of ``topo``'s switch hierarchy (module docstring)."""
    if plugin not in PLUGINS:
        raise SlurmTopologyError(f"the plugin must be 'tree' or 'block', not '{plugin}'.")
    hosts, names = slurm_names(topo)
    if not hosts:
        raise SlurmTopologyError(f"topology '{topo.name}' has no compute node, so Slurm "
                                 "would have no node to place.")
    warnings: list[str] = []
    renamed = [f"'{k}' as '{v}'" for k, v in names.items()
               if v != k and k in {n.id for n in topo.nodes if n.kind == SWITCH}
               and FORBIDDEN.search(k)]
    if renamed:
        warnings.append(f"switch names Slurm cannot carry are written {', '.join(renamed[:4])}"
                        + (" …" if len(renamed) > 4 else "") + ".")
    host_of = {node_id: names[node_id] for ids in hosts.values() for node_id in ids}
    switches = {n.id for n in topo.nodes if n.kind == SWITCH and n.id in names
                and n.id not in host_of}
    adjacent: dict[str, dict[str, Fraction]] = defaultdict(dict)
    for link in topo.live_links():
        for a, b in ((link.source, link.target), (link.target, link.source)):
            adjacent[a][b] = adjacent[a].get(b, Fraction(0)) + link.bandwidth
    host_leaves: dict[str, set[str]] = defaultdict(set)
    leaf_hosts: dict[str, set[str]] = defaultdict(set)
    leaf_bw: dict[str, Counter[Fraction]] = defaultdict(Counter)
    for node_id, host in host_of.items():
        for v, bandwidth in adjacent[node_id].items():
            if v in switches:
                host_leaves[host].add(v)
                leaf_hosts[v].add(host)
                leaf_bw[v][bandwidth] += 1
    tier = _switch_tiers(set(leaf_hosts), switches, adjacent)
    lonely = sorted(h for h in {names[i] for ids in hosts.values() for i in ids}
                    if not host_leaves[h])
    header = [f"# topology.conf for Slurm's topology/{plugin} plugin, written by Canopy",
              f"# from '{topo.name}': {len(hosts)} hosts, {len(tier)} switches."]
    if not tier:
        warnings.append(f"'{topo.name}' has no switch between its hosts; every host is "
                        "written under one switch named fabric.")
        every = compress_hostlist({names[i] for ids in hosts.values() for i in ids})
        body = [f"SwitchName=fabric Nodes={every}"] if plugin == TREE else \
            [f"BlockName=fabric Nodes={every}", f"BlockSizes={len(hosts)}"]
        return SlurmExport("\n".join(header + body) + "\n", warnings)
    if lonely:
        warnings.append(f"{len(lonely)} hosts reach no switch and are not written: "
                        f"{', '.join(lonely[:6])}.")
    if plugin == TREE:
        body = _tree_lines(tier, leaf_hosts, leaf_bw, adjacent, names, warnings)
    else:
        body = _block_lines(leaf_hosts, host_leaves, names, block_sizes, warnings)
    return SlurmExport("\n".join(header + body) + "\n", warnings)


def _switch_tiers(leaves: set[str], switches: set[str],
                  adjacent: dict[str, dict[str, Fraction]]) -> dict[str, int]:
    tier = {s: 1 for s in leaves}
    frontier = set(leaves)
    depth = 1
    while frontier:
        depth += 1
        frontier = {v for s in frontier for v in adjacent[s] if v in switches and v not in tier}
        for v in frontier:
            tier[v] = depth
    return tier


def _gbps_words(counter: Counter[Fraction]) -> str:
    if not counter:
        return ""
    common = counter.most_common(1)[0][0] * 8
    return f" LinkSpeed={common.numerator}" if common.denominator == 1 else ""


def _tree_lines(tier: dict[str, int], leaf_hosts: dict[str, set[str]],
                leaf_bw: dict[str, Counter[Fraction]], adjacent: dict[str, dict[str, Fraction]],
                names: dict[str, str], warnings: list[str]) -> list[str]:
    from canopy.engine.io.ib_fabric_import import natural_key

    def order(node_id: str) -> tuple:
        return natural_key(names[node_id])

    leaves = sorted((s for s, t in tier.items() if t == 1), key=order)
    merged: dict[str, str] = {}
    by_hosts: dict[frozenset[str], str] = {}
    lines: list[str] = []
    for leaf in leaves:
        key = frozenset(leaf_hosts[leaf])
        if key in by_hosts:
            merged[leaf] = by_hosts[key]
            continue
        by_hosts[key] = leaf
        merged[leaf] = leaf
    twins: dict[str, list[str]] = defaultdict(list)
    for leaf, kept in merged.items():
        if leaf != kept:
            twins[kept].append(names[leaf])
    multi = Counter(h for key in by_hosts for h in key)
    if any(n > 1 for n in multi.values()):
        shared = sorted((h for h, n in multi.items() if n > 1), key=natural_key)
        warnings.append(f"{len(shared)} hosts are under more than one leaf switch "
                        f"({', '.join(shared[:4])}…); Slurm warns about hosts on several "
                        "leaf switches.")
    for key, leaf in by_hosts.items():
        if twins[leaf]:
            lines.append(f"# {names[leaf]} stands also for {', '.join(twins[leaf])} "
                         "(the same hosts)")
        lines.append(f"SwitchName={names[leaf]} Nodes={compress_hostlist(key)}"
                     f"{_gbps_words(leaf_bw[leaf])}")
    lateral = 0
    for level in range(2, max(tier.values()) + 1):
        for s in sorted((s for s, t in tier.items() if t == level), key=order):
            children = {merged.get(v, v) for v in adjacent[s] if tier.get(v) == level - 1}
            bws = Counter(bw for v, bw in adjacent[s].items() if tier.get(v) == level - 1)
            lateral += sum(1 for v in adjacent[s] if tier.get(v) == level)
            lines.append(f"SwitchName={names[s]} Switches="
                         f"{compress_hostlist(names[c] for c in children)}{_gbps_words(bws)}")
    lateral += sum(1 for s in leaves for v in adjacent[s] if tier.get(v) == 1)
    if lateral:
        lines.append(f"# {lateral // 2} links between switches of one tier are not part of "
                     "a tree and are left out.")
        warnings.append(f"{lateral // 2} links between switches of one tier are left out "
                        "(a tree has none).")
    return lines


def _block_lines(leaf_hosts: dict[str, set[str]], host_leaves: dict[str, set[str]],
                 names: dict[str, str], block_sizes: list[int] | None,
                 warnings: list[str]) -> list[str]:
    from canopy.engine.io.ib_fabric_import import group_pods, natural_key

    hosts = sorted(host_leaves, key=natural_key)
    pods = sorted((sorted(p, key=natural_key) for p in group_pods(hosts, host_leaves)
                   if host_leaves[p[0]]), key=lambda p: natural_key(p[0]))
    width = len(str(len(pods)))
    lines = [f"BlockName=block{str(i + 1).zfill(width)} Nodes={compress_hostlist(pod)}"
             for i, pod in enumerate(pods)]
    smallest = min(len(p) for p in pods)
    if block_sizes is None:
        block_sizes = [smallest]
        while block_sizes[-1] * 2 <= sum(len(p) for p in pods):
            block_sizes.append(block_sizes[-1] * 2)
    else:
        _sizes(",".join(str(s) for s in block_sizes), "--block-sizes")
        if smallest < block_sizes[0]:
            raise SlurmTopologyError(f"a block has {smallest} hosts, fewer than the base "
                                     f"block size {block_sizes[0]}.")
    if len({len(p) for p in pods}) > 1:
        warnings.append(f"blocks have {smallest} to {max(len(p) for p in pods)} hosts; "
                        f"the base block size is {smallest}.")
    lines.append(f"BlockSizes={','.join(str(s) for s in block_sizes)}")
    return lines
