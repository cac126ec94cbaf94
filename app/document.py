"""The editor's document: one topology, its file, and the undo stack that edits it.

Views never change the topology themselves. They push :mod:`canopy.app.commands` onto
:attr:`Document.undo_stack`; the commands call the low-level mutators below, which
change the :class:`~canopy.engine.model.topology.Topology` and emit one fine-grained signal per
change, so the canvas and the docks update only what changed.

Links have no natural identity (parallel links between the same pair are allowed), so
the document gives each one an integer *key* that lives as long as the link does, even
across undo and redo.
"""

from __future__ import annotations

import hashlib
import pickle
from itertools import count
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QUndoStack

from canopy.engine.io.topology_json import (
    load_topology,
    remove_orphaned_temporaries,
    save_topology,
)
from canopy.engine.model.auto_layout import auto_layout
from canopy.engine.model.topology import Link, Node, Topology


def disk_digest(path: Path) -> str | None:
    """SHA-256 of the file at ``path``, or None when it cannot be read."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


NODE_ATTRS = ("kind", "label", "group", "x", "y", "failed")
LINK_ATTRS = ("bandwidth", "duplex", "latency", "failed", "link_class")
"""``link_class`` is the link's ``class`` key (:mod:`canopy.engine.advise.classes`)."""


class Document(QObject):
    """A topology being edited; signals tell listeners exactly what changed."""

    node_added = Signal(str)
    node_removed = Signal(str)
    node_changed = Signal(str)
    node_moved = Signal(str)
    node_renamed = Signal(str, str)
    link_added = Signal(int)
    link_removed = Signal(int)
    link_changed = Signal(int)
    name_changed = Signal(str)
    reset = Signal()
    """The whole topology was replaced (New, Open, restore): rebuild from scratch."""
    edited = Signal()
    """Emitted after every change, once per mutator call (for validation, status...)."""
    path_changed = Signal()

    def __init__(self, topology: Topology | None = None, parent: QObject | None = None):
        super().__init__(parent)
        self.undo_stack = QUndoStack(self)
        self.history_broken = False
        """True from an undo or redo step that failed until its history is dropped
        (:func:`canopy.app.commands.step_failed`)."""
        self.path: Path | None = None
        self.disk_digest: str | None = None
        """A digest of the file as this document last read or wrote it."""
        self.display_name = "untitled"
        self._keys = count(1)
        self.topology = Topology()
        self._key_of: dict[int, int] = {}
        self._nodes: dict[str, Node] = {}
        self._links: dict[int, Link] = {}
        self.set_topology(topology or Topology())

    # ------------------------------------------------------------ whole document

    def set_topology(self, topology: Topology, path: Path | None = None,
                     display_name: str | None = None) -> None:
        """Replace everything (not undoable): lays out nodes without coordinates."""
        self.swap_topology(topology)
        self.path = path
        self.disk_digest = None
        self.display_name = display_name or (path.name if path else topology.name)
        self.undo_stack.clear()
        self.undo_stack.setClean()
        self.path_changed.emit()

    def swap_topology(self, topology: Topology, keys: list[int] | None = None
                      ) -> tuple[Topology, list[int]]:
        """Put ``topology`` in place of the current one, keeping file and undo history.

        ``keys`` are the link keys to reuse (so later commands on the undo stack still
        find their links); returns the replaced topology and its link keys. Used by
        :class:`canopy.app.commands.ReplaceTopology` (restoring a recovery file).
        """
        old = (self.topology, self.link_keys())
        auto_layout(topology)
        self.topology = topology
        self._nodes = {n.id: n for n in topology.nodes}
        self._links = {}
        self._key_of = {}
        for i, link in enumerate(topology.links):
            self._register_link(link, keys[i] if keys else None)
        self.reset.emit()
        self.edited.emit()
        return old

    def load(self, path: Path) -> None:
        """Open ``path``; on a TopologyError the current document is left untouched."""
        topology = load_topology(path)
        self.set_topology(topology, Path(path))
        self.opened(Path(path))

    def opened(self, path: Path) -> None:
        """``path`` was just opened into this document: remember its contents (to notice
        another writer's save) and remove what saves of it killed mid-write left beside
        it (:func:`~canopy.engine.io.topology_json.remove_orphaned_temporaries`)."""
        self.disk_digest = disk_digest(path)
        remove_orphaned_temporaries(path)

    def save(self, path: Path) -> None:
        """Write atomically to ``path`` and mark the document clean."""
        save_topology(self.topology, path)
        self.disk_digest = disk_digest(Path(path))
        self.path = Path(path)
        self.display_name = self.path.name
        self.undo_stack.setClean()
        self.path_changed.emit()

    def changed_on_disk(self) -> bool:
        """Whether the document's file was changed by someone else (another editor, a
        command) since this document opened or last saved it: saving would lose that."""
        if self.path is None or self.disk_digest is None:
            return False
        now = disk_digest(self.path)
        return now is not None and now != self.disk_digest

    @property
    def modified(self) -> bool:
        return not self.undo_stack.isClean()

    def snapshot(self) -> Topology:
        """A deep copy of the topology (for recovery files and background work).

        Made by pickling, which is what background work does with it anyway, and faster than
        :func:`copy.deepcopy`."""
        return pickle.loads(pickle.dumps(self.topology, pickle.HIGHEST_PROTOCOL))

    # ------------------------------------------------------------ queries

    def node(self, node_id: str) -> Node:
        return self._nodes[node_id]

    def has_node(self, node_id: str) -> bool:
        return node_id in self._nodes

    def node_ids(self) -> list[str]:
        return list(self._nodes)

    def link(self, key: int) -> Link:
        return self._links[key]

    def has_link(self, key: int) -> bool:
        return key in self._links

    def link_keys(self) -> list[int]:
        """Keys in file order."""
        return [self._key_of[id(link)] for link in self.topology.links]

    def link_key(self, link: Link) -> int:
        return self._key_of[id(link)]

    def key_at(self, index: int) -> int:
        """The key of ``topology.links[index]`` (validation problems name links by index)."""
        return self._key_of[id(self.topology.links[index])]

    def links_of(self, node_id: str) -> list[int]:
        return [k for k, link in self._links.items() if node_id in (link.source, link.target)]

    def groups(self) -> list[str]:
        """Group names in first-use order."""
        return list(dict.fromkeys(n.group for n in self.topology.nodes if n.group))

    def group_members(self, group: str) -> list[str]:
        return [n.id for n in self.topology.nodes if n.group == group]

    # ------------------------------------------------------------ mutators (commands only)

    def _register_link(self, link: Link, key: int | None = None) -> int:
        key = next(self._keys) if key is None else key
        self._links[key] = link
        self._key_of[id(link)] = key
        return key

    def new_link_key(self) -> int:
        return next(self._keys)

    def insert_node(self, index: int, node: Node) -> None:
        self.topology.nodes.insert(index, node)
        self._nodes[node.id] = node
        self.node_added.emit(node.id)
        self.edited.emit()

    def remove_node(self, node_id: str, index: int | None = None) -> tuple[int, Node]:
        """Remove a node (its links must be gone); ``index`` is a hint for bulk removals."""
        node = self._nodes.pop(node_id)
        if index is None or self.topology.nodes[index] is not node:
            index = next(i for i, n in enumerate(self.topology.nodes) if n is node)
        del self.topology.nodes[index]
        self.node_removed.emit(node_id)
        self.edited.emit()
        return index, node

    def node_indices(self) -> dict[str, int]:
        return {n.id: i for i, n in enumerate(self.topology.nodes)}

    def insert_link(self, index: int, key: int, link: Link) -> None:
        self.topology.links.insert(index, link)
        self._register_link(link, key)
        self.link_added.emit(key)
        self.edited.emit()

    def remove_link(self, key: int, index: int | None = None) -> tuple[int, Link]:
        """Remove a link; ``index`` is a hint for bulk removals."""
        link = self._links.pop(key)
        del self._key_of[id(link)]
        if index is None or self.topology.links[index] is not link:
            index = next(i for i, item in enumerate(self.topology.links) if item is link)
        del self.topology.links[index]
        self.link_removed.emit(key)
        self.edited.emit()
        return index, link

    def link_indices(self) -> dict[int, int]:
        return {self._key_of[id(link)]: i for i, link in enumerate(self.topology.links)}

    def set_node_attrs(self, node_id: str, attrs: dict[str, object]) -> None:
        node = self._nodes[node_id]
        for name, value in attrs.items():
            if name not in NODE_ATTRS:
                raise AttributeError(name)
            setattr(node, name, value)
        if set(attrs) <= {"x", "y"}:
            self.node_moved.emit(node_id)
        else:
            self.node_changed.emit(node_id)
        self.edited.emit()

    def move_nodes(self, positions: dict[str, tuple[float, float]]) -> None:
        """Set many positions with a single ``edited`` signal (drags, layouts)."""
        for node_id, (x, y) in positions.items():
            node = self._nodes[node_id]
            node.x, node.y = x, y
            self.node_moved.emit(node_id)
        self.edited.emit()

    def rename_node(self, old: str, new: str) -> None:
        node = self._nodes.pop(old)
        node.id = new
        self._nodes[new] = node
        for key, link in self._links.items():
            changed = False
            if link.source == old:
                link.source, changed = new, True
            if link.target == old:
                link.target, changed = new, True
            if changed:
                self.link_changed.emit(key)
        self.node_renamed.emit(old, new)
        self.edited.emit()

    def set_link_attrs(self, key: int, attrs: dict[str, object]) -> None:
        link = self._links[key]
        for name, value in attrs.items():
            if name not in LINK_ATTRS:
                raise AttributeError(name)
            if name == "link_class":
                if value:
                    link.extra["class"] = value
                else:
                    link.extra.pop("class", None)
                continue
            setattr(link, name, value)
        self.link_changed.emit(key)
        self.edited.emit()

    def set_name(self, name: str) -> None:
        self.topology.name = name
        self.name_changed.emit(name)
        self.edited.emit()

    def set_bandwidth_unit(self, unit: str) -> None:
        """The unit the file is saved in and bandwidths are shown in (values stay the same)."""
        self.topology.bandwidth_unit = unit
        self.edited.emit()
