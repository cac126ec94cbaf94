"""A schedule's trees as XML for people (``canopy solve ... --trees-xml OUT``)::

    <trees collective="allgather" ngpus="16" k="13" nchunksperloop="208">
      <tree root="n0.gpu0" rank="0" index="0" nchunks="3" first_chunk="0" height="2"
            phases="allgather">
        <send src="n0.gpu0" dst="n1.gpu0" path="n0.gpu0 n0.nic0 ib0 n1.nic0 n1.gpu0"/>

``nchunks`` is the tree's multiplicity: the chunks ``first_chunk`` … ``first_chunk +
nchunks − 1`` of the MSCCL XML it moves (same layout as :mod:`canopy.engine.msccl.writer`).
``phases`` says how the collective uses the tree: ``allgather`` sends along the arrows,
``reduce-scatter`` reduces against them. ``path`` lists the physical route, node ids
separated by spaces. Sends are listed parents first.
"""

from __future__ import annotations

import os

from lxml import etree

from canopy.engine.io.topology_json import atomic_write_bytes
from canopy.engine.model.schedule import Schedule, Tree


def _phases(schedule: Schedule) -> list[tuple[list[Tree], str]]:
    c = schedule.collective
    reduce_trees = schedule.reduce_trees
    if c == "allgather":
        return [(schedule.trees, "allgather")]
    if c == "reduce-scatter":
        return [(reduce_trees or schedule.trees, "reduce-scatter")]
    if reduce_trees:
        return [(reduce_trees, "reduce-scatter"), (schedule.trees, "allgather")]
    return [(schedule.trees, "reduce-scatter allgather")]


def trees_element(schedule: Schedule) -> etree._Element:
    """The ``<trees>`` element of ``schedule``."""
    rank = {name: r for r, name in enumerate(schedule.compute_nodes)}
    n, k = len(schedule.compute_nodes), schedule.k
    top = etree.Element("trees")
    for key, value in [("collective", schedule.collective), ("ngpus", n), ("k", k),
                       ("nchunksperloop", n * k)]:
        top.set(key, str(value))
    for trees, phases in _phases(schedule):
        offsets: dict[str, int] = {}
        for tree in sorted(trees, key=lambda t: (rank.get(t.root, n), t.index)):
            first = rank.get(tree.root, -1) * k + offsets.get(tree.root, 0)
            offsets[tree.root] = offsets.get(tree.root, 0) + tree.multiplicity
            elem = etree.SubElement(top, "tree")
            for key, value in [("root", tree.root), ("rank", rank.get(tree.root, -1)),
                               ("index", tree.index), ("nchunks", tree.multiplicity),
                               ("first_chunk", first), ("height", tree.height),
                               ("phases", phases)]:
                elem.set(key, str(value))
            for edge in tree.edges:
                send = etree.SubElement(elem, "send")
                send.set("src", edge.src)
                send.set("dst", edge.dst)
                send.set("path", " ".join(edge.path))
    return top


def trees_xml(schedule: Schedule) -> bytes:
    """The tree listing as UTF-8 XML bytes (written with lxml)."""
    return etree.tostring(trees_element(schedule), pretty_print=True, xml_declaration=True,
                          encoding="utf-8")


def write_trees_xml(path: str | os.PathLike[str], schedule: Schedule) -> None:
    """Write :func:`trees_xml` to ``path`` atomically."""
    atomic_write_bytes(path, trees_xml(schedule))
