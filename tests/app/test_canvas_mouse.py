"""Drawing with the mouse: the tools, drags, group moves, zoom and panning."""

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QColor, QWheelEvent
from PySide6.QtWidgets import QApplication, QGraphicsItem

from canopy.app.canvas.link_item import LinkItem


def test_drag_moves_node_and_its_links_undoably(window, mouse):
    scene, doc = window.scene, window.doc
    start = scene.node_item("n0.gpu0").pos()
    end = start + QPointF(60, -40)
    key = next(k for k in doc.link_keys() if doc.link(k).source == "n0.gpu0")
    link_before = scene.link_item(key).path().pointAtPercent(0)
    mouse.show(start, end)
    mouse.drag(start, end)
    node = doc.node("n0.gpu0")
    assert (node.x, node.y) == (end.x(), end.y())
    assert scene.link_item(key).path().pointAtPercent(0) != link_before
    assert doc.undo_stack.count() == 1
    assert doc.undo_stack.undoText() == "Move n0.gpu0"
    doc.undo_stack.undo()
    assert scene.node_item("n0.gpu0").pos() == start
    assert (doc.node("n0.gpu0").x, doc.node("n0.gpu0").y) == (start.x(), start.y())


def test_click_without_moving_records_nothing(window, mouse):
    pos = window.scene.node_item("n0.gpu1").pos()
    mouse.show(pos)
    mouse.click(pos)
    assert window.scene.selected_node_ids() == ["n0.gpu1"]
    assert window.doc.undo_stack.count() == 0


def test_snap_to_grid_rounds_dragged_positions(window, mouse):
    window.named_actions["snap"].trigger()
    start = window.scene.node_item("n0.gpu2").pos()
    end = start + QPointF(33, 27)
    mouse.show(start, end)
    mouse.drag(start, end)
    node = window.doc.node("n0.gpu2")
    assert node.x % 20 == 0 and node.y % 20 == 0


def test_add_nodes_and_link_with_tools(window, mouse):
    scene, doc = window.scene, window.doc
    a, b = QPointF(200, -250), QPointF(420, -250)
    mouse.show(a, b)
    window.named_actions["tool_compute"].trigger()
    mouse.click(a)
    window.named_actions["tool_switch"].trigger()
    mouse.click(b)
    new = [n for n in doc.topology.nodes if n.id in ("gpu0", "sw0")]
    assert [(n.id, n.kind, n.group) for n in new] == [("gpu0", "compute", None),
                                                      ("sw0", "switch", None)]
    window.named_actions["tool_link"].trigger()
    window.new_link_bandwidth.setText("12.5")
    window.new_link_bandwidth.editingFinished.emit()
    mouse.drag(a, b)
    link = doc.topology.links[-1]
    assert (link.source, link.target, str(link.bandwidth)) == ("gpu0", "sw0", "25/2")
    assert scene.selected_link_keys() == [doc.link_keys()[-1]]
    assert doc.undo_stack.count() == 3


def test_link_drag_to_empty_space_adds_nothing(window, mouse):
    start = window.scene.node_item("ib0").pos()
    end = start + QPointF(0, -200)
    mouse.show(start, end)
    window.named_actions["tool_link"].trigger()
    mouse.drag(start, end)
    assert window.doc.undo_stack.count() == 0
    assert not [i for i in window.scene.items() if i.zValue() == 20], "rubber line removed"


def test_new_node_inside_a_group_box_joins_the_group(window, mouse):
    window.scene.flush_groups()
    box = window.scene.group_item("n1").sceneBoundingRect()
    inside = QPointF(box.left() + 25, box.bottom() - 20)
    mouse.show(inside)
    window.named_actions["tool_compute"].trigger()
    mouse.click(inside)
    node = window.doc.topology.nodes[-1]
    assert (node.id, node.group) == ("n1.gpu8", "n1")


def test_delete_tool_removes_node_with_links(window, mouse):
    pos = window.scene.node_item("n1.nvswitch").pos()
    mouse.show(pos)
    window.named_actions["tool_delete"].trigger()
    mouse.click(pos)
    assert not window.doc.has_node("n1.nvswitch")
    assert len(window.doc.topology.links) == 40
    window.doc.undo_stack.undo()
    assert len(window.scene.link_items_between("n1.nvswitch", "n1.gpu0")) == 1


def test_group_drag_moves_all_members_as_one_step(window, mouse):
    scene, doc = window.scene, window.doc
    scene.flush_groups()
    box = scene.group_item("n0").sceneBoundingRect()
    grip = QPointF(box.left() + 6, box.top() + 6)
    before = {n: scene.node_item(n).pos() for n in doc.group_members("n0")}
    mouse.show(grip, grip + QPointF(100, 50))
    mouse.drag(grip, grip + QPointF(100, 50))
    for node_id, pos in before.items():
        assert scene.node_item(node_id).pos() == pos + QPointF(100, 50)
    assert doc.undo_stack.count() == 1
    assert doc.undo_stack.undoText() == "Move group n0"
    assert scene.node_item("ib0").pos() != before.get("ib0"), "ib0 is not in the group"
    doc.undo_stack.undo()
    assert {n: scene.node_item(n).pos() for n in before} == before


def test_rubber_band_selects_a_region(window, mouse):
    scene = window.scene
    a = scene.node_item("n0.gpu0").pos() + QPointF(-30, -25)
    b = scene.node_item("n0.gpu2").pos() + QPointF(30, 25)
    mouse.show(a, b)
    mouse.drag(a, b)
    assert set(scene.selected_node_ids()) == {"n0.gpu0", "n0.gpu1", "n0.gpu2"}
    assert window.doc.undo_stack.count() == 0


def test_escape_returns_to_select_tool(window, qtbot):
    window.named_actions["tool_link"].trigger()
    qtbot.keyClick(window.view.viewport(), Qt.Key.Key_Escape)
    assert window.named_actions["tool_select"].isChecked()
    assert type(window.scene.interaction).__name__ == "SelectMove"


def test_wheel_zooms_around_the_cursor(window):
    view = window.view
    target = window.scene.node_item("n1.gpu5").pos()
    view.centerOn(target)
    cursor = view.mapFromScene(target)
    before = view.zoom()
    event = QWheelEvent(QPointF(cursor), QPointF(view.viewport().mapToGlobal(cursor)),
                        QPoint(), QPoint(0, 240), Qt.MouseButton.NoButton,
                        Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(view.viewport(), event)
    assert view.zoom() > before * 1.2
    after = view.mapToScene(cursor)
    assert abs(after.x() - target.x()) < 3 and abs(after.y() - target.y()) < 3


def test_middle_button_pans_and_fit_shows_everything(window, mouse):
    view = window.view
    view.zoom_in()
    h = view.horizontalScrollBar().value()
    centre = view.mapToScene(view.viewport().rect().center())
    mouse.press(centre, Qt.MouseButton.MiddleButton)
    mouse.move(centre + QPointF(-100 / view.zoom(), 0), Qt.MouseButton.MiddleButton)
    mouse.release(centre, Qt.MouseButton.MiddleButton)
    assert view.horizontalScrollBar().value() > h
    view.zoom_to_fit()
    visible = view.mapToScene(view.viewport().rect()).boundingRect()
    assert visible.contains(window.scene.drawing_rect())


def test_select_all_and_delete_key(window, qtbot):
    window.named_actions["select_all"].trigger()
    assert len(window.scene.selected_node_ids()) == 36
    assert all(isinstance(i, LinkItem) for i in window.scene.selectedItems()
               if not hasattr(i, "node_id"))
    window.named_actions["delete"].trigger()
    window.scene.flush_groups()
    scene = window.scene
    assert not window.doc.topology.nodes
    assert scene.node_items() == scene.link_items() == scene.group_items() == []
    assert window.doc.undo_stack.undoText() == "Delete 36 nodes and 48 links"
    window.doc.undo_stack.undo()
    assert len(window.doc.topology.nodes) == 36 and len(window.doc.topology.links) == 48


def test_far_zoom_draws_an_overview_that_still_takes_clicks(window, mouse):
    scene, view = window.scene, window.view
    view.set_zoom(0.1 / view.zoom())
    assert scene.overview_on and scene.overview.isVisible()
    node = scene.node_item("n1.gpu2")
    assert node.flags() & QGraphicsItem.GraphicsItemFlag.ItemHasNoContents
    mouse.show(node.pos())
    mouse.click(node.pos())
    # this far out the server is one block: a click selects all of it
    assert scene.group_item("n1").collapsed
    assert sorted(scene.selected_node_ids()) == sorted(window.doc.group_members("n1"))
    image = view.grab().toImage()
    colours = {image.pixel(x, y) for x in range(0, image.width(), 5)
               for y in range(0, image.height(), 5)}
    assert len(colours) > 5
    view.set_zoom(1.0 / view.zoom())
    assert not scene.overview_on and not scene.overview.isVisible()
    assert not node.flags() & QGraphicsItem.GraphicsItemFlag.ItemHasNoContents


def test_link_highlight_for_overlays(window):
    scene = window.scene
    items = scene.link_items_between("n0.gpu0", "n0.nvswitch", directed=True)
    item = items[0]
    item.set_highlight(QColor("#d62728"), 10)
    assert item.highlight[0] == QColor("#d62728") and item.pen_width() == 10
    assert item.boundingRect().width() > 0
    item.set_highlight(None)
    assert item.highlight is None and item.pen_width() == item.width
