"""Link classes: the links of a network grouped by the role they play.

A design question is asked of a class of links, not of one link: "how far can the
leaf-spine uplinks drop", "what if every GPU-NIC link were doubled". A class is found
from the roles of a link's two ends and its bandwidth: a compute node's role is its kind
("gpu" unless its name says otherwise), a switch's role is the last word of its name
without digits ("n0.nic3" is a "nic", "leaf1.0" a "leaf", "spine0" a "spine"), so the
classes of a generated cluster are gpu-nvswitch, gpu-nic, nic-leaf and leaf-spine.
Roles are ordered by their distance in hops from the nearest compute node, so a class
is named from the GPUs outwards. Links of one role pair but different bandwidths form
one class each, named with the bandwidth.

A user can name a class: a link whose ``class`` key (saved with the link in
canopy-topology JSON and GraphML, where older versions keep it as an unknown key) holds
a name belongs to that class, whatever its role.

Each class has one bandwidth, the per-link, per-direction bandwidth of its widest link
(GB/s). Changing the class bandwidth to B scales every link of the class by B over that
bandwidth, so a class of equal links (every automatic class) is set to B link by link.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from fractions import Fraction

from canopy.engine.model.errors import TopologyError
from canopy.engine.model.topology import Topology, format_gbps

CLASS_KEY = "class"
"""The link key that names a link's class in canopy-topology JSON and GraphML."""
MAX_CLASS_NAME = 100
"""Characters of the longest class name Canopy reads."""
_WORD = re.compile(r"[A-Za-z][A-Za-z_-]*")


@dataclass(frozen=True)
class LinkClass:
    """A class of links: indices into ``Topology.links`` and the class bandwidth (GB/s)."""

    name: str
    links: tuple[int, ...]
    bandwidth: Fraction
    named: bool = False          # named by the user (the links' ``class`` key)

    def link_pairs(self, topology: Topology) -> list[tuple[str, str]]:
        return [(topology.links[i].source, topology.links[i].target) for i in self.links]


def node_role(node_id: str, is_compute: bool) -> str:
    """The role of a node from its name: the last word of two or more letters, lower case
    ("n0.nic3" -> "nic"); a compute node without such a word is a "gpu", a switch a
    "switch"."""
    words = [w.lower().strip("_-") for w in _WORD.findall(node_id)]
    words = [w for w in words if len(w) >= 2]
    if words:
        return words[-1]
    return "gpu" if is_compute else "switch"


def _role_depths(topology: Topology, roles: dict[str, str]) -> dict[str, int]:
    """Each role's smallest distance in hops from a compute node (unreached: a large one)."""
    adjacent: dict[str, list[str]] = {n: [] for n in topology.node_ids()}
    for link in topology.links:
        if link.source in adjacent and link.target in adjacent:
            adjacent[link.source].append(link.target)
            adjacent[link.target].append(link.source)
    depth = {n: 0 for n in topology.compute_nodes()}
    queue = deque(depth)
    while queue:
        u = queue.popleft()
        for v in adjacent[u]:
            if v not in depth:
                depth[v] = depth[u] + 1
                queue.append(v)
    best: dict[str, int] = {}
    for node, role in roles.items():
        best[role] = min(best.get(role, 1 << 30), depth.get(node, 1 << 30))
    return best


def link_class_name(link_extra: dict, index: int, where: str = "") -> str | None:
    """The user's class name of a link (its ``class`` key), checked; None when unnamed."""
    name = link_extra.get(CLASS_KEY)
    if name is None or name == "":
        return None
    at = f"{where}: " if where else ""
    if not isinstance(name, str):
        raise TopologyError(f"{at}link {index} has class {name!r}; a class name is text.")
    if len(name) > MAX_CLASS_NAME or any(ord(ch) < 32 for ch in name):
        raise TopologyError(f"{at}link {index} has a class name longer than "
                            f"{MAX_CLASS_NAME} characters or with a control character.")
    return name


def link_classes(topology: Topology, where: str = "") -> list[LinkClass]:
    """The classes of the live links of ``topology``, named ones first, then by role.

    Failed links and links of failed switches belong to no class (they carry nothing).
    """
    kinds = {n.id: n.is_compute for n in topology.nodes}
    roles = {n.id: node_role(n.id, n.is_compute) for n in topology.nodes}
    depths = _role_depths(topology, roles)
    dead = {n.id for n in topology.nodes if n.failed}
    named: dict[str, list[int]] = {}
    auto: dict[tuple, list[int]] = {}
    for i, link in enumerate(topology.links):
        if link.failed or link.source in dead or link.target in dead \
                or link.source not in kinds or link.target not in kinds:
            continue
        name = link_class_name(link.extra, i, where)
        if name is not None:
            named.setdefault(name, []).append(i)
            continue
        ends = sorted((roles[link.source], roles[link.target]),
                      key=lambda r: (depths.get(r, 1 << 30), r))
        auto.setdefault((ends[0], ends[1], link.bandwidth), []).append(i)
    classes = [LinkClass(name, tuple(ids), max(topology.links[i].bandwidth for i in ids), True)
               for name, ids in named.items()]
    per_pair: dict[tuple[str, str], int] = {}
    for a, b, _ in auto:
        per_pair[(a, b)] = per_pair.get((a, b), 0) + 1
    taken = set(named)
    for (a, b, bandwidth), ids in sorted(
            auto.items(), key=lambda kv: (depths.get(kv[0][0], 0), depths.get(kv[0][1], 0),
                                          kv[0][0], kv[0][1], kv[0][2])):
        name = f"{a}-{b}"
        if per_pair[(a, b)] > 1:
            name += f" {format_gbps(bandwidth)} GB/s"
        while name in taken:
            name += "'"
        taken.add(name)
        classes.append(LinkClass(name, tuple(ids), bandwidth))
    return classes


def find_class(classes: list[LinkClass], name: str, where: str = "") -> LinkClass:
    """The class called ``name``; a TopologyError listing the classes when none is."""
    for c in classes:
        if c.name == name:
            return c
    at = f"{where} has " if where else "there is "
    known = ", ".join(f"'{c.name}'" for c in classes) or "none"
    raise TopologyError(f"{at}no link class '{name}' (its classes: {known}).")


def name_class(topology: Topology, link_indices: list[int], name: str | None) -> None:
    """Put the links ``link_indices`` in the class ``name`` (None or "": back to their
    role's class), by their ``class`` key."""
    if name:
        link_class_name({CLASS_KEY: name}, link_indices[0] if link_indices else 0)
    for i in link_indices:
        if name:
            topology.links[i].extra[CLASS_KEY] = name
        else:
            topology.links[i].extra.pop(CLASS_KEY, None)
