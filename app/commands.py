"""Undoable edits of a :class:`~canopy.app.document.Document` (``QUndoCommand`` subclasses).

Every change a user makes goes through one of these, so each can be undone and redone
and the undo stack's clean state tells whether the file is saved.

No exception leaves a command's ``redo`` or ``undo``: Qt calls them from inside
``QUndoStack.push``, ``undo``, ``redo`` and ``setIndex``, and an exception raised through
those made the process crash. :class:`DocumentCommand` catches it (:func:`step_failed`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from PySide6.QtCore import QTimer
from PySide6.QtGui import QUndoCommand
from PySide6.QtWidgets import QApplication, QMessageBox

from canopy.app.document import Document
from canopy.app.memory_watch import MemoryBudgetExceeded
from canopy.engine.model.topology import Link, Node, Topology
from canopy.engine.process.internal_errors import report_internal_error

Position = tuple[float, float]


class DocumentCommand(QUndoCommand):
    """An undoable edit of ``self.doc``; its subclasses' ``redo`` and ``undo`` never let an
    exception reach Qt (each is wrapped by :func:`_guarded` when the subclass is made)."""

    doc: Document

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        for name in ("redo", "undo"):
            if name in cls.__dict__:
                setattr(cls, name, _guarded(cls.__dict__[name]))


def _guarded(method: Callable[[DocumentCommand], None]) -> Callable[[DocumentCommand], None]:
    @functools.wraps(method)
    def run(self: DocumentCommand) -> None:
        if self.doc.history_broken:
            return      # an earlier step of the same undo or redo failed: Qt goes on, we not
        try:
            method(self)
        except Exception as exc:  # noqa: BLE001 - raised into Qt it crashed the editor
            step_failed(self.doc, f"{method.__name__} of '{self.text()}'", exc)
    return run


def step_failed(doc: Document, what: str, exc: BaseException) -> None:
    """An undo or redo step raised ``exc``: log it, make the document whole again and
    say so; the undo history is dropped once Qt is done with it.

    The step may have stopped half way, so the document is rebuilt from its topology as
    it now is (the canvas, the docks and a save then agree on it), and every later step
    Qt runs in the same ``setIndex`` does nothing. The history no longer leads back to
    what it recorded, so it is cleared (after Qt has returned: clearing the stack from
    inside its own loop would free the command being run), and the document counts as
    modified until it is saved.
    """
    doc.history_broken = True
    sentence = str(exc) if isinstance(exc, MemoryBudgetExceeded) else \
        report_internal_error(what, exc)
    try:
        doc.swap_topology(doc.topology)
    except Exception as again:  # noqa: BLE001 - the document is still shown as it was
        report_internal_error(f"rebuilding the document after the {what}", again)
    QTimer.singleShot(0, functools.partial(_drop_history, doc, what, sentence))


def _drop_history(doc: Document, what: str, sentence: str) -> None:
    doc.undo_stack.clear()
    doc.undo_stack.resetClean()
    doc.history_broken = False
    doc.edited.emit()
    stopped = sentence if not sentence.startswith("internal error in ") else \
        f"Canopy stopped an {sentence.removeprefix('internal error in ')}"
    QMessageBox.warning(QApplication.activeWindow(), f"Canopy: {what.split()[0]} failed",
                        f"{stopped} The document stays as it is now, and the undo history "
                        "was cleared.")


class InsertItems(DocumentCommand):
    """Add nodes and links (add node, add link, paste, duplicate).

    Nodes and links are appended in the given order; ``keys`` are assigned on first redo
    and kept, so a link keeps its key across undo and redo.
    """

    def __init__(self, doc: Document, nodes: list[Node], links: list[Link], text: str):
        super().__init__(text)
        self.doc = doc
        self.nodes = nodes
        self.links = links
        self.keys = [doc.new_link_key() for _ in links]

    def redo(self) -> None:
        for node in self.nodes:
            self.doc.insert_node(len(self.doc.topology.nodes), node)
        for key, link in zip(self.keys, self.links, strict=True):
            self.doc.insert_link(len(self.doc.topology.links), key, link)

    def undo(self) -> None:
        for key in reversed(self.keys):
            self.doc.remove_link(key)
        for node in reversed(self.nodes):
            self.doc.remove_node(node.id)


class RemoveItems(DocumentCommand):
    """Delete nodes (with every link touching them) and links; undo puts each back in place."""

    def __init__(self, doc: Document, node_ids: list[str], link_keys: list[int], text: str):
        super().__init__(text)
        self.doc = doc
        doomed = set(node_ids)
        keys = set(link_keys)
        keys.update(k for k in doc.link_keys()
                    if {doc.link(k).source, doc.link(k).target} & doomed)
        self.link_keys = keys
        self.node_ids = node_ids
        self.removed_links: list[tuple[int, int, Link]] = []
        self.removed_nodes: list[tuple[int, Node]] = []

    def redo(self) -> None:
        index = self.doc.link_indices()
        order = sorted(self.link_keys, key=index.__getitem__, reverse=True)
        self.removed_links = [(k, *self.doc.remove_link(k, index[k])) for k in order]
        node_index = self.doc.node_indices()
        order_nodes = sorted(self.node_ids, key=node_index.__getitem__, reverse=True)
        self.removed_nodes = [self.doc.remove_node(n, node_index[n]) for n in order_nodes]

    def undo(self) -> None:
        for index, node in reversed(self.removed_nodes):
            self.doc.insert_node(index, node)
        for key, index, link in reversed(self.removed_links):
            self.doc.insert_link(index, key, link)


class MoveNodes(DocumentCommand):
    """Move nodes (a drag, a group drag, an auto layout)."""

    def __init__(self, doc: Document, old: dict[str, Position], new: dict[str, Position],
                 text: str = "Move"):
        super().__init__(text)
        self.doc = doc
        self.old = old
        self.new = new

    def redo(self) -> None:
        self.doc.move_nodes(self.new)

    def undo(self) -> None:
        self.doc.move_nodes(self.old)


class EditNodes(DocumentCommand):
    """Change label, kind or group of one or more nodes: ``{id: {attr: (old, new)}}``."""

    def __init__(self, doc: Document, changes: dict[str, dict[str, tuple[object, object]]],
                 text: str):
        super().__init__(text)
        self.doc = doc
        self.changes = changes

    def redo(self) -> None:
        for node_id, attrs in self.changes.items():
            self.doc.set_node_attrs(node_id, {a: new for a, (_, new) in attrs.items()})

    def undo(self) -> None:
        for node_id, attrs in self.changes.items():
            self.doc.set_node_attrs(node_id, {a: old for a, (old, _) in attrs.items()})


class EditLinks(DocumentCommand):
    """Change bandwidth, duplex or latency of one or more links: ``{key: {attr: (old, new)}}``."""

    def __init__(self, doc: Document, changes: dict[int, dict[str, tuple[object, object]]],
                 text: str):
        super().__init__(text)
        self.doc = doc
        self.changes = changes

    def redo(self) -> None:
        for key, attrs in self.changes.items():
            self.doc.set_link_attrs(key, {a: new for a, (_, new) in attrs.items()})

    def undo(self) -> None:
        for key, attrs in self.changes.items():
            self.doc.set_link_attrs(key, {a: old for a, (old, _) in attrs.items()})


class RenameNode(DocumentCommand):
    """Change a node's id; the links that name it follow."""

    def __init__(self, doc: Document, old: str, new: str):
        super().__init__(f"Rename {old} to {new}")
        self.doc = doc
        self.old = old
        self.new = new

    def redo(self) -> None:
        self.doc.rename_node(self.old, self.new)

    def undo(self) -> None:
        self.doc.rename_node(self.new, self.old)


class RenameTopology(DocumentCommand):
    """Change the topology's name."""

    def __init__(self, doc: Document, new: str):
        super().__init__(f"Rename topology to {new}")
        self.doc = doc
        self.old = doc.topology.name
        self.new = new

    def redo(self) -> None:
        self.doc.set_name(self.new)

    def undo(self) -> None:
        self.doc.set_name(self.old)


class SetBandwidthUnit(DocumentCommand):
    """Change the unit bandwidths are shown and saved in (the bandwidths stay the same)."""

    def __init__(self, doc: Document, new: str):
        super().__init__(f"Show bandwidths in {new}")
        self.doc = doc
        self.old = doc.topology.bandwidth_unit
        self.new = new

    def redo(self) -> None:
        self.doc.set_bandwidth_unit(self.new)

    def undo(self) -> None:
        self.doc.set_bandwidth_unit(self.old)


class ReplaceTopology(DocumentCommand):
    """Swap in a whole topology (restoring unsaved changes after a crash)."""

    def __init__(self, doc: Document, topology: Topology, text: str):
        super().__init__(text)
        self.doc = doc
        self.other: tuple[Topology, list[int] | None] = (topology, None)

    def redo(self) -> None:
        self.other = self.doc.swap_topology(*self.other)

    def undo(self) -> None:
        self.other = self.doc.swap_topology(*self.other)


def edit_nodes(doc: Document, node_ids: list[str], attr: str, value: object) -> None:
    """Push one :class:`EditNodes` setting ``attr`` on every node that differs."""
    changes = {n: {attr: (getattr(doc.node(n), attr), value)} for n in node_ids
               if getattr(doc.node(n), attr) != value}
    if changes:
        what = node_ids[0] if len(changes) == 1 else f"{len(changes)} nodes"
        doc.undo_stack.push(EditNodes(doc, changes, f"Set {attr} of {what}"))


def edit_links(doc: Document, keys: list[int], attr: str, value: object) -> None:
    """Push one :class:`EditLinks` setting ``attr`` on every link that differs."""
    changes = {k: {attr: (getattr(doc.link(k), attr), value)} for k in keys
               if getattr(doc.link(k), attr) != value}
    if changes:
        what = (doc.link(next(iter(changes))).describe() if len(changes) == 1
                else f"{len(changes)} links")
        doc.undo_stack.push(EditLinks(doc, changes, f"Set {attr} of {what}"))


def delete(doc: Document, node_ids: list[str], link_keys: list[int]) -> None:
    """Push one :class:`RemoveItems` for a selection (no-op when empty)."""
    if not node_ids and not link_keys:
        return
    parts = []
    if node_ids:
        parts.append(node_ids[0] if len(node_ids) == 1 else f"{len(node_ids)} nodes")
    if link_keys:
        parts.append("1 link" if len(link_keys) == 1 else f"{len(link_keys)} links")
    doc.undo_stack.push(RemoveItems(doc, node_ids, link_keys, "Delete " + " and ".join(parts)))
