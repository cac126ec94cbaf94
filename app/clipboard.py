"""Cut, copy, paste and duplicate of a selection together with its internal links.

A copied fragment is canopy-topology JSON (so it can be pasted into a text editor and
back, unknown keys included). Pasting renames nodes and groups predictably
(:mod:`canopy.app.naming`: ``n0.gpu0`` -> ``n1.gpu0``) and places the copy to the right of the
original, on the first free spot, so pasting a server seven times gives eight servers
side by side.
"""

from __future__ import annotations

import copy
import json

from PySide6.QtCore import QMimeData
from PySide6.QtGui import QClipboard

from canopy.app.commands import InsertItems
from canopy.app.document import Document
from canopy.app.naming import paste_names
from canopy.engine.io.topology_json import loads_topology, topology_to_dict
from canopy.engine.model.errors import TopologyError
from canopy.engine.model.topology import Topology

MIME = "application/x-canopy-topology"
GAP = 110.0
"""Horizontal free space between a pasted fragment and what it was copied from."""


def fragment(doc: Document, node_ids: list[str]) -> Topology:
    """The selected nodes and the links between two of them (deep copies)."""
    chosen = set(node_ids)
    nodes = [copy.deepcopy(n) for n in doc.topology.nodes if n.id in chosen]
    links = [copy.deepcopy(link) for link in doc.topology.links
             if link.source in chosen and link.target in chosen]
    return Topology(name="fragment", nodes=nodes, links=links)


def to_mime(part: Topology) -> QMimeData:
    text = json.dumps(topology_to_dict(part), indent=1)
    data = QMimeData()
    data.setData(MIME, text.encode("utf-8"))
    data.setText(text)
    return data


def from_mime(data: QMimeData | None) -> Topology | None:
    """The fragment on the clipboard, or None if it holds no topology (an empty
    clipboard has no data at all on some platforms)."""
    if data is None:
        return None
    if data.hasFormat(MIME):
        try:
            text = bytes(data.data(MIME).data()).decode("utf-8")
        except UnicodeDecodeError:
            return None
    elif data.hasText() and '"canopy-topology"' in data.text():
        text = data.text()
    else:
        return None
    try:
        part = loads_topology(text, "the clipboard")
    except TopologyError:
        return None
    return part if part.nodes else None


def copy_selection(doc: Document, node_ids: list[str], clipboard: QClipboard) -> bool:
    if not node_ids:
        return False
    clipboard.setMimeData(to_mime(fragment(doc, node_ids)))
    return True


def _free_offset(doc: Document, part: Topology) -> float:
    """Horizontal shift that puts ``part`` beside its original without covering any node."""
    xs = [n.x or 0.0 for n in part.nodes]
    ys = [n.y or 0.0 for n in part.nodes]
    left, right, top, bottom = min(xs), max(xs), min(ys), max(ys)
    step = right - left + GAP
    occupied = [(n.x or 0.0, n.y or 0.0) for n in doc.topology.nodes]
    shift = step
    while any(left + shift - GAP / 2 <= x <= right + shift + GAP / 2
              and top - GAP / 2 <= y <= bottom + GAP / 2 for x, y in occupied):
        shift += step
    return shift


def paste(doc: Document, part: Topology, text: str = "Paste") -> tuple[list[str], list[int]]:
    """Insert a renamed copy of ``part`` as one undoable step; return new node ids, link keys."""
    part = copy.deepcopy(part)
    id_map, group_map = paste_names(
        [n.id for n in part.nodes], {n.id: n.group for n in part.nodes},
        set(doc.node_ids()), set(doc.groups()))
    shift = _free_offset(doc, part)
    for node in part.nodes:
        if node.label == node.id:
            node.label = id_map[node.id]
        node.id = id_map[node.id]
        node.group = group_map.get(node.group, node.group) if node.group else None
        node.x = round((node.x or 0.0) + shift, 1)
        node.y = node.y or 0.0
    for link in part.links:
        link.source, link.target = id_map[link.source], id_map[link.target]
    count = len(part.nodes)
    what = part.nodes[0].id if count == 1 else f"{count} nodes"
    command = InsertItems(doc, part.nodes, part.links, f"{text} {what}")
    doc.undo_stack.push(command)
    return [n.id for n in part.nodes], list(command.keys)
