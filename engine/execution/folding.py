"""Identical servers simulated once: a program folded by the rotation of its servers.

When a topology's servers (the ``group`` of its nodes, in file order) are alike and wired
alike, the rotation π that moves each server's i-th node to the i-th node of the server s
further on (nodes outside servers staying, or moved alike: a leaf-spine's pods exchange
their leaves) can be an automorphism of the network of order m (the number of servers
over s): every link maps to a link of the same bandwidth and latency
(:func:`canopy.engine.network.servers.server_rotations` finds them). If π also maps a
program onto itself (connections onto connections of the same weight along the image
route, each connection's sends in the same order, dependencies onto dependencies:
:func:`fold` checks), the execution is invariant under π: send π(s) is delivered when s
is, as the rules of :mod:`canopy.engine.execution.simulate` treat every send by its connection,
links and dependencies only.

So one send per orbit is enough (the quotient of the program by π). Keep the sends of
one connection per orbit of connections; a dependency on a send becomes a dependency on
its orbit's kept send, delivered at the same time; a link stands for its orbit, with its
capacity divided by the number of members of one send orbit that cross it (m over the
link orbit's size, m the order of π): a link outside the servers that all m
copies of a send cross shares itself m ways, as in the whole program. With π of order m an
iteration of a ring or ForestColl plan on identical servers runs m times fewer sends. In
exact arithmetic the times equal the whole program's; in floats they agree to rounding
(tests). Programs that are not invariant (TACOS's randomised timetables, Blink's single
root), rotations with a fixed connection and routes that cross two links of one orbit
are not folded.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from canopy.engine.model.plan import CollectivePlan, Edge, path_links


def edge_permutation(plan: CollectivePlan, rotation: dict[str, str]) -> Any:
    """Per tree edge (all trees' edges in order) the index of its image under π, or None
    when some tree's image is not a tree of the plan (same root, share, direction and
    edges with their routes and priorities; channels are labels, and whether the images
    share connections as the originals do is :func:`fold`'s check).

    Each edge is coded as one integer (sender, receiver, route, priority), so a tree is its
    sorted codes and its image the sorted codes of the rotated edges: on 1024 GPUs the ring
    plan has 8 million edges, far too many to compare as Python tuples per edge."""
    trees = plan.trees
    routes = {e.path for tree in trees for e in tree.edges}
    if any(tuple(rotation[x] for x in p) not in routes for p in routes):
        return None           # some route's image is none: told before coding every edge
    nodes = {x: i for i, x in enumerate(rotation)}
    paths: dict[tuple[str, ...], int] = {}
    priorities: dict[tuple[int, int], int] = {}    # by (numerator, denominator): a
    # dict lookup by this pair costs far less than one by Fraction, over millions of edges
    parent, child, path, priority = [], [], [], []
    for tree in trees:
        for e in tree.edges:
            parent.append(nodes[e.parent])
            child.append(nodes[e.child])
            path.append(paths.setdefault(e.path, len(paths)))
            priority.append(priorities.setdefault((e.priority.numerator, e.priority.denominator),
                                                  len(priorities)))
    n, q = len(nodes), max(1, len(priorities))
    rotated_paths = [paths.get(tuple(rotation[x] for x in p), -1) for p in paths]
    if -1 in rotated_paths or (n * n * len(paths) * q) >= 1 << 62:
        return None
    node_image = np.array([nodes[rotation[x]] for x in rotation], dtype=np.int64)
    a, b = np.array(parent, dtype=np.int64), np.array(child, dtype=np.int64)
    r, w = np.array(path, dtype=np.int64), np.array(priority, dtype=np.int64)

    def code(a: Any, b: Any, r: Any) -> Any:
        return ((a * n + b) * len(paths) + r) * q + w

    codes = code(a, b, r)
    images = code(node_image[a], node_image[b], np.array(rotated_paths, dtype=np.int64)[r])
    sizes = np.array([len(t.edges) for t in trees], dtype=np.int64)
    base = np.concatenate([[0], np.cumsum(sizes)])
    tree_of = np.repeat(np.arange(len(trees), dtype=np.int64), sizes)
    order, image_order = np.lexsort((codes, tree_of)), np.lexsort((images, tree_of))
    ordered, image_ordered = codes[order], images[image_order]
    by_signature: dict[tuple, list[int]] = {}
    for i, tree in enumerate(trees):
        key = (tree.root, tree.share, tree.reduce,
               ordered[base[i]:base[i + 1]].tobytes())
        by_signature.setdefault(key, []).append(i)
    image = np.empty(len(codes), dtype=np.int64)
    for i, tree in enumerate(trees):
        candidates = by_signature.get((rotation[tree.root], tree.share, tree.reduce,
                                       image_ordered[base[i]:base[i + 1]].tobytes()))
        if not candidates:
            return None
        j = candidates.pop(0)
        image[image_order[base[i]:base[i + 1]]] = order[base[j]:base[j + 1]]
    return image


@dataclass
class Fold:
    """The quotient of one iteration: the slots kept (in order), the kept connections
    (old ids, renumbered 0.. in this order) and their slots' new connection ids, the
    dependencies between kept slots, and per link its orbit's representative with the
    capacity factor."""

    keep: Any
    connections: list[int]
    conn: Any
    src: Any
    dst: Any
    links: dict[Edge, tuple[Edge, Fraction]]


def fold(rotation: dict[str, str], m: int, perm: Any, conn: Any,
         routes: list[tuple[str, ...]], weights: list[Fraction], src: Any, dst: Any
         ) -> Fold | None:
    """The quotient of an iteration whose slot s has connection ``conn[s]`` and image
    slot ``perm[s]`` (``src[i]`` delivered before ``dst[i]`` starts), or None unless
    the iteration is invariant under π with every connection orbit of size m."""
    width = len(conn)
    nconn = len(routes)
    slots = np.arange(width, dtype=np.int64)
    if not np.array_equal(np.sort(perm), slots):
        return None
    image = np.full(nconn, -1, dtype=np.int64)
    image[conn] = conn[perm]
    if not np.array_equal(image[conn], conn[perm]) or \
            not np.array_equal(np.sort(image), np.arange(nconn, dtype=np.int64)):
        return None
    # each connection's image has its route's image and its weight (connections share a
    # few routes and weight objects: each compared once)
    route_id = {r: i for i, r in enumerate(dict.fromkeys(routes))}
    route_of = np.fromiter(map(route_id.__getitem__, routes), dtype=np.int64, count=nconn)
    moved = np.array([route_id.get(tuple(rotation[x] for x in r), -1) for r in route_id],
                     dtype=np.int64)
    objects = dict(zip(map(id, weights), weights, strict=True))
    value_id: dict[Fraction, int] = {}
    weight_id = {i: value_id.setdefault(w, len(value_id)) for i, w in objects.items()}
    weight_of = np.fromiter(map(weight_id.__getitem__, map(id, weights)), dtype=np.int64,
                            count=nconn)
    if not np.array_equal(route_of[image], moved[route_of]) or \
            not np.array_equal(weight_of[image], weight_of):
        return None
    by_conn = np.argsort(conn, kind="stable")
    same = conn[by_conn[:-1]] == conn[by_conn[1:]]
    if np.any(perm[by_conn[:-1]][same] >= perm[by_conn[1:]][same]):
        return None       # a connection's sends would change order
    codes = np.sort(src * width + dst)
    if not np.array_equal(codes, np.sort(perm[src] * width + perm[dst])):
        return None
    # Orbits of connections: all of size m; each represented by its smallest member.
    ids = np.arange(nconn, dtype=np.int64)
    rep = ids.copy()
    step = ids
    for _ in range(m - 1):
        step = image[step]
        if np.any(step == ids):
            return None
        rep = np.minimum(rep, step)
    if not np.array_equal(image[step], ids):
        return None
    is_rep = rep == ids
    # Each slot's representative: its image (under a power of π) on a kept connection.
    rep_slot = np.full(width, -1, dtype=np.int64)
    cur = slots
    for _ in range(m):
        hit = is_rep[conn[cur]] & (rep_slot < 0)
        rep_slot[hit] = cur[hit]
        cur = perm[cur]
    keep = np.nonzero(is_rep[conn])[0]
    new_slot = np.full(width, -1, dtype=np.int64)
    new_slot[keep] = np.arange(len(keep), dtype=np.int64)
    kept = np.nonzero(is_rep)[0]
    new_conn = np.full(nconn, -1, dtype=np.int64)
    new_conn[kept] = np.arange(len(kept), dtype=np.int64)
    into_kept = is_rep[conn[dst]]
    links: dict[Edge, tuple[Edge, Fraction]] = {}
    factor = {size: Fraction(size, m) for size in range(1, m + 1)}   # per orbit size
    for route in {routes[c]: None for c in kept.tolist()}:
        classes = set()
        for link in path_links(route):
            if link not in links:
                orbit = {link}
                x = link
                for _ in range(m - 1):
                    x = (rotation[x[0]], rotation[x[1]])
                    orbit.add(x)
                links[link] = (min(orbit), factor[len(orbit)])
            classes.add(links[link][0])
        if len(classes) < len(route) - 1:
            return None   # a route crossing two links of one orbit
    return Fold(keep, kept.tolist(), new_conn[conn[keep]],
                new_slot[rep_slot[src[into_kept]]], new_slot[dst[into_kept]], links)
