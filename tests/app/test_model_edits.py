"""Editing through the document and its undo commands; the scene follows incrementally."""

from fractions import Fraction

from PySide6.QtCore import QPointF

from canopy.app.canvas.link_item import LinkItem
from canopy.app.commands import InsertItems, MoveNodes, RenameNode, delete, edit_links, edit_nodes
from canopy.engine.io.topology_json import topology_to_dict
from canopy.engine.model.topology import Link, Node


def snapshot(window):
    return topology_to_dict(window.doc.topology)


def test_add_move_delete_node_and_link_with_undo_redo(window):
    doc, scene = window.doc, window.scene
    before = snapshot(window)
    node = Node("gpu_new", "compute", "gpu_new", None, 10.0, -300.0)
    doc.undo_stack.push(InsertItems(doc, [node], [], "Add gpu_new"))
    assert scene.node_item("gpu_new").pos().y() == -300.0
    link = Link("gpu_new", "ib0", Fraction(25))
    add_link = InsertItems(doc, [], [link], "Add link")
    doc.undo_stack.push(add_link)
    key = add_link.keys[0]
    assert scene.link_item(key).source == "gpu_new"
    assert [i.key for i in scene.link_items_between("ib0", "gpu_new")] == [key]

    doc.undo_stack.push(MoveNodes(doc, {"gpu_new": (10.0, -300.0)}, {"gpu_new": (50.0, -320.0)}))
    assert scene.node_item("gpu_new").pos().x() == 50.0
    assert doc.node("gpu_new").x == 50.0

    delete(doc, ["gpu_new"], [])
    assert not doc.has_node("gpu_new")
    assert key not in doc.link_keys(), "a deleted node takes its links with it"
    assert len(scene.link_items()) == len(before["links"])

    for _ in range(4):
        doc.undo_stack.undo()
    assert snapshot(window) == before
    for _ in range(4):
        doc.undo_stack.redo()
    assert not doc.has_node("gpu_new")
    for _ in range(4):
        doc.undo_stack.undo()
    assert snapshot(window) == before
    assert len(scene.node_items()) == len(before["nodes"])


def test_delete_puts_links_back_in_file_order(window):
    doc = window.doc
    before = snapshot(window)
    delete(doc, ["n0.nvswitch", "n1.gpu3"], [doc.link_keys()[5]])
    assert len(doc.topology.links) == 48 - 8 - 2 - 1
    doc.undo_stack.undo()
    assert snapshot(window) == before


def test_link_edit_touches_one_item_only(window, monkeypatch):
    doc, scene = window.doc, window.scene
    items = {id(i) for i in scene.items()}
    rebuilds = []
    monkeypatch.setattr(scene, "rebuild", lambda: rebuilds.append(1))
    key = doc.link_keys()[0]
    old_width = scene.link_item(key).width
    edit_links(doc, [key], "bandwidth", Fraction(1200))
    assert {id(i) for i in scene.items()} == items
    assert not rebuilds
    assert scene.link_item(key).width > old_width
    assert scene.link_item(key).text == "1200"
    doc.undo_stack.undo()
    assert scene.link_item(key).width == old_width


def test_width_grows_with_bandwidth_and_one_way_links_have_arrows(window):
    doc, scene = window.doc, window.scene
    widths = {}
    for key in doc.link_keys():
        widths[doc.link(key).bandwidth] = scene.link_item(key).width
    assert widths[Fraction(300)] > widths[Fraction(25)]
    key = doc.link_keys()[0]
    edit_links(doc, [key], "duplex", False)
    assert scene.link_item(key).duplex is False
    assert "one-way" in scene.link_item(key).toolTip()


def test_parallel_links_bow_apart(window):
    doc, scene = window.doc, window.scene
    command = InsertItems(doc, [], [Link("n0.gpu0", "n0.nvswitch", Fraction(50)),
                                    Link("n0.nvswitch", "n0.gpu0", Fraction(50), False)], "Add")
    doc.undo_stack.push(command)
    items = scene.link_items_between("n0.gpu0", "n0.nvswitch")
    assert len(items) == 3
    assert len({round(i.offset, 3) for i in items}) == 3
    shapes = [i.path().pointAtPercent(0.5) for i in items]
    assert len({(round(p.x()), round(p.y())) for p in shapes}) == 3
    directed = scene.link_items_between("n0.gpu0", "n0.nvswitch", directed=True)
    assert len(directed) == 2


def test_rename_node_updates_links_and_items(window):
    doc, scene = window.doc, window.scene
    doc.undo_stack.push(RenameNode(doc, "ib0", "spine0"))
    assert scene.node_item("spine0").node_id == "spine0"
    touching = [doc.link(k) for k in doc.link_keys()
                if "spine0" in (doc.link(k).source, doc.link(k).target)]
    assert len(touching) == 8
    assert len(scene.link_items_between("spine0", "n0.nic0")) == 1
    link = scene.link_items_between("spine0", "n0.nic0")[0]
    before = link.ends()
    scene.node_item("spine0").setPos(scene.node_item("spine0").pos() + QPointF(0, -50))
    assert link.ends() != before, "links still follow the renamed node"
    doc.undo_stack.undo()
    assert doc.has_node("ib0") and not doc.has_node("spine0")
    assert len(scene.link_items_between("ib0", "n0.nic0")) == 1


def test_group_change_updates_group_boxes(window):
    doc, scene = window.doc, window.scene
    edit_nodes(doc, ["ib0", "ib1"], "group", "fabric")
    scene.flush_groups()
    box = scene.group_item("fabric")
    assert box.boundingRect().contains(scene.node_item("ib0").pos())
    doc.undo_stack.undo()
    scene.flush_groups()
    assert "fabric" not in doc.groups()
    assert all(isinstance(i, LinkItem) or i.zValue() != -10 or i.name != "fabric"
               for i in scene.items())
