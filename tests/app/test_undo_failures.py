"""An undo or redo step that raises: no exception reaches Qt (inside ``QUndoStack.setIndex``
that crashed PySide), the user is told in a dialog, and the document stays whole."""

from fractions import Fraction

from PySide6.QtWidgets import QApplication

from canopy.app.commands import InsertItems, MoveNodes, edit_links
from canopy.engine.model.topology import Link, Node


def _whole(window):
    """The document's own tables, its topology and the canvas all agree."""
    doc, scene = window.doc, window.scene
    ids = [n.id for n in doc.topology.nodes]
    assert sorted(doc.node_ids()) == sorted(ids)
    assert len(doc.link_keys()) == len(doc.topology.links)
    assert sorted(item.node_id for item in scene.node_items()) == sorted(ids)
    assert len(scene.link_items()) == len(doc.topology.links)


def _settle():
    for _ in range(3):
        QApplication.processEvents()


def test_an_undo_that_raises_inside_set_index_is_caught(window, dialogs, monkeypatch):
    doc = window.doc
    first = doc.node_ids()[0]
    x, y = doc.node(first).x, doc.node(first).y
    doc.undo_stack.push(MoveNodes(doc, {first: (x, y)}, {first: (x + 40, y)}))
    keys = doc.link_keys()[:2]
    edit_links(doc, keys, "bandwidth", Fraction(7))

    def broken(positions):
        raise RuntimeError("the move broke")
    monkeypatch.setattr(doc, "move_nodes", broken)
    doc.undo_stack.setIndex(0)      # undoes the edit, then the move raises
    _settle()

    assert dialogs.kinds() == ["warning"]
    title, text = dialogs.calls[0][1:]
    assert title == "Canopy: undo failed"
    assert "the move broke" in text and "undo history was cleared" in text
    assert doc.undo_stack.count() == 0 and doc.modified
    assert all(doc.link(k).bandwidth != Fraction(7) for k in doc.link_keys()[:2])
    assert doc.node(first).x == x + 40       # the failed step left it where it was
    _whole(window)


def test_a_redo_that_stops_half_way_leaves_a_whole_document(window, dialogs, monkeypatch):
    doc = window.doc
    before = len(doc.topology.nodes)
    nodes = [Node(f"extra{i}", "compute", f"extra{i}", None, 10.0 * i, -300.0)
             for i in range(3)]
    links = [Link("extra0", "extra1", Fraction(25))]
    insert = doc.insert_node
    done = []

    def fails_on_the_second(index, node):
        if done:
            raise KeyError(node.id)
        done.append(node.id)
        insert(index, node)
    monkeypatch.setattr(doc, "insert_node", fails_on_the_second)
    doc.undo_stack.push(InsertItems(doc, nodes, links, "Add three"))
    _settle()

    assert dialogs.kinds() == ["warning"] and "redo failed" in dialogs.calls[0][1]
    assert len(doc.topology.nodes) == before + 1 and doc.has_node("extra0")
    assert doc.undo_stack.count() == 0 and doc.modified
    _whole(window)
    monkeypatch.setattr(doc, "insert_node", insert)
    doc.undo_stack.push(InsertItems(doc, [Node("later", "switch", "later")], [], "Add"))
    doc.undo_stack.undo()                   # editing and undo work again afterwards
    assert not doc.has_node("later") and dialogs.kinds() == ["warning"]
    _whole(window)
