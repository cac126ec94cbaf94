"""Copy/paste of a server, and editing through the Properties dock."""

from fractions import Fraction

from PySide6.QtCore import Qt

from canopy.app.naming import paste_names
from canopy.engine.model.topology import find_problems


def select_group(window, group):
    window.scene.select(window.doc.group_members(group))


def test_paste_names_are_predictable():
    ids = ["n0.gpu0", "n0.nvswitch", "ib0", "spare"]
    groups = {"n0.gpu0": "n0", "n0.nvswitch": "n0", "ib0": None, "spare": None}
    id_map, group_map = paste_names(ids, groups, set(ids) | {"n1.x", "ib1"}, {"n0"})
    assert group_map == {"n0": "n2"}
    assert id_map == {"n0.gpu0": "n2.gpu0", "n0.nvswitch": "n2.nvswitch", "ib0": "ib2",
                      "spare": "spare-2"}


def test_copy_paste_a_server_with_its_internal_links(window):
    doc = window.doc
    select_group(window, "n0")
    assert window.copy()
    new = window.paste()
    assert len(new) == 17
    assert "n2.gpu0" in new and "n2.nvswitch" in new and "n2.nic7" in new
    assert all(doc.node(n).group == "n2" for n in new)
    internal = [doc.link(k) for k in doc.link_keys() if doc.link(k).source.startswith("n2.")]
    assert len(internal) == 16, "GPU-NVSwitch and GPU-NIC links come along, NIC-IB do not"
    assert set(window.scene.selected_node_ids()) == set(new)
    xs_old = [doc.node(f"n0.gpu{i}").x for i in range(8)]
    xs_new = [doc.node(f"n2.gpu{i}").x for i in range(8)]
    assert min(xs_new) > max(doc.node(n).x for n in doc.group_members("n1")), \
        "the copy lands on free space beside the others"
    assert [b - a for a, b in zip(xs_old, xs_new, strict=True)] == [xs_new[0] - xs_old[0]] * 8
    doc.undo_stack.undo()
    assert not doc.has_node("n2.gpu0")


def test_duplicate_builds_eight_servers_from_one(window):
    doc = window.doc
    window.scene.select(doc.group_members("n1") + ["ib0", "ib1"])
    window.delete_selection()
    select_group(window, "n0")
    for _ in range(7):
        window.duplicate()
        select_group(window, "n0")
    assert doc.groups() == [f"n{i}" for i in range(8)]
    assert len(doc.topology.compute_nodes()) == 64
    assert len({(n.x, n.y) for n in doc.topology.nodes}) == len(doc.topology.nodes)


def test_cut_removes_and_paste_restores_names(window):
    doc = window.doc
    window.scene.select(doc.group_members("n1"))
    window.cut()
    assert not doc.has_node("n1.gpu0")
    new = window.paste()
    assert "n1.gpu0" in new, "the freed names are reused"


def test_link_bandwidth_edit_validates_as_you_type(window, qtbot):
    doc, dock = window.doc, window.properties
    key = doc.link_keys()[0]
    window.scene.select(link_keys=[key])
    dock.refresh()
    assert dock.link_box.isVisible() and not dock.node_box.isVisible()
    edit = dock.bandwidth_edit
    assert edit.text() == "300"
    edit.selectAll()
    qtbot.keyClicks(edit, "0")
    assert "background" in edit.styleSheet() and "positive" in dock.link_error.text()
    qtbot.keyClicks(edit, "abc")
    assert edit.text() == "0", "letters are refused"
    edit.selectAll()
    qtbot.keyClicks(edit, "12.5")
    assert edit.styleSheet() == ""
    qtbot.keyClick(edit, Qt.Key.Key_Return)
    assert doc.link(key).bandwidth == Fraction(25, 2)
    assert window.scene.link_item(key).text == "12.5"


def test_multi_selection_edits_all_at_once(window, qtbot):
    doc, dock = window.doc, window.properties
    keys = [k for k in doc.link_keys() if doc.link(k).bandwidth == 25][:5]
    window.scene.select(link_keys=keys)
    dock.refresh()
    assert dock.link_box.title() == "5 links"
    dock.direction_combo.activated.emit(1)
    assert all(not doc.link(k).duplex for k in keys)
    edit = dock.latency_edit
    edit.selectAll()
    qtbot.keyClicks(edit, "1.5")
    qtbot.keyClick(edit, Qt.Key.Key_Return)
    assert {doc.link(k).latency for k in keys} == {Fraction(3, 2)}
    assert doc.undo_stack.count() == 2
    doc.undo_stack.undo()
    doc.undo_stack.undo()
    assert all(doc.link(k).duplex and doc.link(k).latency is None for k in keys)


def test_node_fields_rename_kind_and_group(window, qtbot):
    doc, dock = window.doc, window.properties
    window.scene.select(["n0.gpu0"])
    dock.refresh()
    dock.id_edit.selectAll()
    qtbot.keyClicks(dock.id_edit, "n0.gpu1")
    qtbot.keyClick(dock.id_edit, Qt.Key.Key_Return)
    assert "already" in dock.node_error.text() and doc.has_node("n0.gpu0")
    dock.id_edit.selectAll()
    qtbot.keyClicks(dock.id_edit, "n0.a100")
    qtbot.keyClick(dock.id_edit, Qt.Key.Key_Return)
    assert doc.has_node("n0.a100") and window.scene.selected_node_ids() == ["n0.a100"]

    window.scene.select(["ib0", "ib1"])
    dock.refresh()
    assert dock.node_box.title() == "2 nodes" and not dock.id_edit.isEnabled()
    dock.group_combo.setCurrentText("fabric")
    dock.group_combo.lineEdit().editingFinished.emit()
    assert doc.node("ib0").group == doc.node("ib1").group == "fabric"
    dock.kind_combo.activated.emit(0)
    assert doc.node("ib0").kind == "compute"
    assert window.scene.node_item("ib0").kind == "compute"


def test_nothing_selected_shows_topology_name(window, qtbot):
    dock = window.properties
    window.scene.select()
    dock.refresh()
    assert dock.topology_box.isVisible() and dock.name_edit.text() == "2x DGX A100"
    dock.name_edit.selectAll()
    qtbot.keyClicks(dock.name_edit, "lab cluster")
    qtbot.keyClick(dock.name_edit, Qt.Key.Key_Return)
    assert window.doc.topology.name == "lab cluster"
    assert not find_problems(window.doc.topology)


def test_bandwidth_unit_is_chosen_shown_and_undone(window, qtbot):
    """The editor shows and takes bandwidths in the document's unit."""
    doc, dock = window.doc, window.properties
    key = doc.link_keys()[0]
    window.scene.select()
    dock.refresh()
    assert window.scene.link_item(key).text == "300"
    dock.unit_combo.activated.emit(dock.unit_combo.findText("Gb/s"))
    assert doc.topology.bandwidth_unit == "Gb/s" and doc.link(key).bandwidth == 300
    item = window.scene.link_item(key)   # the canvas labels follow the unit
    assert item.text == "2400 Gb/s" and "2400 Gb/s" in item.toolTip()
    window.scene.select(link_keys=[key])
    dock.refresh()
    assert dock.bandwidth_edit.text() == "2400"
    label = dock.link_box.layout().labelForField(dock.bandwidth_edit)
    assert label.text() == "Bandwidth (Gb/s)"
    dock.bandwidth_edit.selectAll()
    qtbot.keyClicks(dock.bandwidth_edit, "100")
    qtbot.keyClick(dock.bandwidth_edit, Qt.Key.Key_Return)
    assert doc.link(key).bandwidth == Fraction(25, 2)
    assert item.text == "100 Gb/s"
    doc.undo_stack.undo()
    doc.undo_stack.undo()
    assert doc.topology.bandwidth_unit == "GB/s" and doc.link(key).bandwidth == 300
    assert item.text == "300" and "300 GB/s" in item.toolTip()
