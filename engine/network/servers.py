"""Servers and their symmetry, defined once for every algorithm.

A *server* is the set of nodes that share a ``group`` in the topology (a DGX, one host of
an import, one server of a generator), in file order. Identical servers wired alike give
automorphisms of the network: swapping two of them position by position
(:func:`identical_groups`), or rotating all of them by one or by several, the switches
between them staying or moved alike (:func:`server_rotations`). The
optimum needs flows to one server's compute nodes only, the LP of ForestColl's App. E
(Zhao et al., arXiv:2402.06787) keeps one budget per link orbit, and the simulator runs one
send per orbit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from canopy.engine.model.topology import Topology

if TYPE_CHECKING:
    from canopy.engine.network.indexed import Network


def server_members(groups: Sequence[str | None]) -> list[list[int]]:
    """The nodes (indices into ``groups``, a group per node) of each server, servers in
    order of their first node: a server is the nodes that share a ``group``."""
    members: dict[str, list[int]] = {}
    for i, group in enumerate(groups):
        if group is not None:
            members.setdefault(group, []).append(i)
    return list(members.values())


def rotation_image(groups: Sequence[str | None], kinds: Sequence[object]
                   ) -> list[int] | None:
    """π on node indices: each node's image when the servers (:func:`server_members`) are rotated
    by one, or None when there are fewer than two servers, they differ in size or a node's
    image is of another kind. Whether π keeps the links is the caller's check."""
    members = server_members(groups)
    if len(members) < 2 or len({len(s) for s in members}) != 1:
        return None
    image = list(range(len(groups)))
    for k, server in enumerate(members):
        for v, w in zip(server, members[(k + 1) % len(members)], strict=True):
            if kinds[v] != kinds[w]:
                return None
            image[v] = w
    return image


def server_rotations(topology: Topology) -> list[tuple[dict[str, str], int]]:
    """Every (π, d) where π rotates the m servers by s (each server's i-th node to the
    i-th node of the server s further on), s dividing m and below it, and moves the nodes
    outside servers so that π is an automorphism: every link maps to a link of the same
    bandwidth and latency; d = m / s is π's order. Fewest servers first (the most
    folding: :mod:`canopy.engine.execution.folding`; the MSCCL layouts rank ties by
    server so as to be invariant under them: :mod:`canopy.engine.msccl.connection_counts`).
    Rotating by one keeps the outside nodes in place where a switch serves every server
    alike; a leaf-spine whose leaves each serve a pod of p servers has no such rotation,
    but rotating by p with the pods' leaves exchanged is one (:func:`_outside_images`)."""
    nodes = topology.nodes
    members = server_members([n.group for n in nodes])
    m = len(members)
    if m < 2 or len({len(server) for server in members}) != 1:
        return []
    caps, lats = topology.capacities(), topology.latencies()
    found = []
    for shift in range(1, m):
        if m % shift:
            continue
        image: dict[str, str] = {}
        for k, server in enumerate(members):
            for v, w in zip(server, members[(k + shift) % m], strict=True):
                image[nodes[v].id] = nodes[w].id
        if any(topology.node(a).kind != topology.node(b).kind for a, b in image.items()):
            continue
        rotation = _outside_images(topology, image)
        if rotation is not None and all(
                caps.get((rotation[a], rotation[b])) == cap
                and lats.get((rotation[a], rotation[b])) == lats.get((a, b))
                for (a, b), cap in caps.items()):
            found.append((rotation, m // shift))
    return found


def _outside_images(topology: Topology, image: dict[str, str]) -> dict[str, str] | None:
    """``image`` (the servers' nodes) extended to the nodes outside servers, or None where
    that is not one way: in rounds, a node whose neighbours include nodes already mapped
    goes to the node of its kind whose neighbours among the images are the images of its
    own (itself where it is one of them, else the only one), until every node is mapped.
    Whether the result keeps every link is the caller's check."""
    rotation = dict(image)
    neighbours: dict[str, set[str]] = {n.id: set() for n in topology.nodes}
    for a, b in topology.capacities():
        neighbours[a].add(b)
        neighbours[b].add(a)
    kind = {n.id: n.kind for n in topology.nodes}
    left = [n.id for n in topology.nodes if n.id not in rotation]
    while left:
        mapped, taken = set(rotation), set(rotation.values())
        by_key: dict[tuple[object, frozenset[str]], list[str]] = {}
        for v in left:
            if v not in taken:
                by_key.setdefault((kind[v], frozenset(neighbours[v] & taken)), []).append(v)
        still = []
        for u in left:
            known = neighbours[u] & mapped
            if not known:
                still.append(u)
                continue
            candidates = by_key.get((kind[u], frozenset(rotation[x] for x in known)), [])
            chosen = u if u in candidates else candidates[0] if len(candidates) == 1 else None
            if chosen is None:
                return None
            rotation[u] = chosen
            candidates.remove(chosen)
        if len(still) == len(left):
            return None
        left = still
    if len(set(rotation.values())) != len(rotation):
        return None
    return rotation


def compute_nodes_by_server(topology: Topology) -> list[list[str]]:
    """The compute nodes of each server (:func:`server_members`), in file order; compute
    nodes of no server form one more, in the place of the first of them."""
    groups: dict[str, list[str]] = {}
    for node in topology.nodes:
        if node.is_compute:
            groups.setdefault(node.group or "", []).append(node.id)
    return list(groups.values())


def network_rotation(net: Network) -> list[int] | None:
    """π on the indices of ``net``: :func:`rotation_image` of its servers (compute nodes
    onto compute nodes), or None when there is none or π is not an automorphism of ``net``
    (a link without an image of the same bandwidth)."""
    image = rotation_image(net.groups, [net.is_compute(v) for v in range(net.n)])
    if image is None:
        return None
    if any(net.capacity.get((image[a], image[b])) != c for (a, b), c in net.capacity.items()):
        return None
    return image


def identical_groups(net: Network) -> list[list[tuple[int, ...]]]:
    """Classes of interchangeable node groups (identical servers), members in index order.

    Two groups G and H of equal signature are interchangeable: the map swapping the i-th
    node of G with the i-th node of H and fixing every other node keeps every link and
    its bandwidth and the compute nodes (an automorphism). The signature lists each
    position's kind and every link touching the group, with an end inside written as its
    position and an end outside as its node: equal signatures mean every link of G has
    a twin of H with the same outside end, and there is no link between G and H (G's
    signature would name H's nodes, which H's writes as positions). Swaps of pairwise
    interchangeable groups compose, so a whole class is one orbit of its i-th nodes.
    """
    members: dict[str, list[int]] = {}
    for server in server_members(net.groups):
        group = net.groups[server[0]]
        assert group is not None          # server_members lists grouped nodes only
        members[group] = server
    position = {i: (g, p) for g, nodes in members.items() for p, i in enumerate(nodes)}
    links: dict[str, list[tuple]] = {g: [] for g in members}

    def end(node: int, group: str) -> tuple:
        where = position.get(node)
        return ("in", where[1]) if where is not None and where[0] == group else ("out", node)

    for (a, b), c in net.capacity.items():
        for g in {position[x][0] for x in (a, b) if x in position}:
            links[g].append((end(a, g), end(b, g), c))
    classes: dict[tuple, list[tuple[int, ...]]] = {}
    for g, nodes in members.items():
        kinds = tuple(net.is_compute(i) for i in nodes)
        key = (kinds, tuple(sorted(links[g])))
        classes.setdefault(key, []).append(tuple(nodes))
    return [c for c in classes.values() if len(c) > 1]
