"""A large drawing's canvas items are built a slice per turn of the event loop, so the
editor answers meanwhile: the result is the same scene, edits and undo meanwhile are not
lost, and looking an item up finishes the building first."""

from fractions import Fraction

import pytest
from PySide6.QtCore import QPointF
from PySide6.QtGui import QImage, QPainter
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem

from bench.clusters import dgx_a100_cluster
from canopy.app.canvas import overlays as overlays_module
from canopy.app.canvas import overview as overview_module
from canopy.app.canvas.labels import ScreenLabel
from canopy.app.canvas.scene import BUILD_AT_ONCE, STAGES_ALONE
from canopy.app.commands import InsertItems, RenameNode, delete, edit_links
from canopy.engine.model.topology import COMPUTE, Link, Node

SERVERS = 16


def build_slices(qtbot, scene) -> int:
    """Let the event loop build the scene; the number of turns it took."""
    turns = 0
    while scene.is_building():
        scene._build_some()
        turns += 1
        assert turns < 10000
    qtbot.wait(1)
    return turns


def assert_scene_matches(doc, scene):
    """Every node and link of the document has exactly one item, placed where it is."""
    nodes, links, groups = scene.items_so_far()
    assert {n.node_id for n in nodes} == set(doc.node_ids())
    assert sorted(item.key for item in links) == sorted(doc.link_keys())
    assert {g.name for g in groups} == set(doc.groups())
    for item in links:
        link = doc.link(item.key)
        assert (item.source, item.target) == (link.source, link.target)
        p1, p2 = item.ends()
        assert p1 == scene.node_item(link.source).pos()
        assert p2 == scene.node_item(link.target).pos()
    for item in nodes:
        node = doc.node(item.node_id)
        assert item.pos() == QPointF(node.x or 0.0, node.y or 0.0)


@pytest.fixture
def large(window):
    topo = dgx_a100_cluster(SERVERS)
    assert len(topo.nodes) + len(topo.links) >= BUILD_AT_ONCE
    window.doc.set_topology(topo, None, display_name="large")
    return window


def test_a_large_drawing_is_built_over_several_turns_into_the_same_scene(qtbot, large):
    doc, scene = large.doc, large.scene
    assert scene.is_building()
    built = []
    scene.built.connect(lambda: built.append(True))
    nodes, links, _groups = scene.items_so_far()
    assert len(nodes) + len(links) < len(doc.node_ids()) + len(doc.link_keys())
    assert build_slices(qtbot, scene) > 1
    assert built == [True]
    assert_scene_matches(doc, scene)
    assert large.view.viewport().updatesEnabled(), "painting resumes once built"
    # parallel links still bow apart and labels sit where they fit
    item = scene.link_items_between("n0.gpu0", "n0.nvswitch")[0]
    assert item.label_near == "n0.gpu0"


def test_the_heavy_building_stages_take_a_turn_each(qtbot, large):
    scene = large.scene
    alone = set(STAGES_ALONE)
    finished_per_turn = []
    while scene.is_building():
        before = [stage.__name__ for stage in scene._stages]
        scene._build_some()
        finished_per_turn.append(before[:len(before) - len(scene._stages)])
    heavy = [done for done in finished_per_turn if set(done) & alone]
    assert heavy == [["_build_groups"], ["_build_rect"], ["_build_index"]]


def test_a_small_drawing_is_built_at_once(window):
    window.doc.set_topology(dgx_a100_cluster(2), None, display_name="small")
    assert not window.scene.is_building()
    assert_scene_matches(window.doc, window.scene)


def test_edits_while_building_are_not_lost(qtbot, large):
    doc, scene = large.doc, large.scene
    scene._build_some()
    assert scene.is_building()
    doc.undo_stack.push(InsertItems(doc, [Node("extra", COMPUTE, x=-200.0, y=-200.0)],
                                    [Link("extra", "ib0", Fraction(50))], "Add"))
    last = doc.link_keys()[-2]      # a link built last, changed before it exists
    edit_links(doc, [last], "bandwidth", Fraction(40))
    first = doc.link_keys()[0]
    delete(doc, [], [first])
    doc.undo_stack.push(RenameNode(doc, "n15.gpu7", "n15.gpu7b"))
    build_slices(qtbot, scene)
    assert_scene_matches(doc, scene)
    assert scene.link_item(last).text == "40"
    assert first not in {item.key for item in scene.link_items()}
    assert scene.has_node_item("n15.gpu7b") and not scene.has_node_item("n15.gpu7")
    assert scene.link_items_between("extra", "ib0")[0].text == "50"


def test_undo_while_building_and_after(qtbot, large):
    doc, scene = large.doc, large.scene
    key = doc.link_keys()[100]
    edit_links(doc, [key], "bandwidth", Fraction(7))
    doc.undo_stack.undo()
    build_slices(qtbot, scene)
    assert_scene_matches(doc, scene)
    assert scene.link_item(key).text == "25"
    doc.undo_stack.redo()
    assert scene.link_item(key).text == "7"
    delete(doc, ["n3.gpu2"], [])
    doc.undo_stack.undo()
    assert_scene_matches(doc, scene)


def test_looking_an_item_up_finishes_the_building(large):
    scene = large.scene
    assert scene.is_building()
    item = scene.node_item("n15.gpu7")
    assert item.node_id == "n15.gpu7"
    assert not scene.is_building()
    assert_scene_matches(large.doc, scene)


def test_a_new_drawing_while_building_replaces_the_old_one(qtbot, large):
    large.scene._build_some()
    large.doc.set_topology(dgx_a100_cluster(20), None, display_name="larger")
    build_slices(qtbot, large.scene)
    assert_scene_matches(large.doc, large.scene)
    assert large.scene.has_node_item("n19.gpu7")


def test_empty_labels_are_hidden_so_painting_skips_them(window):
    ignores = QGraphicsItem.GraphicsItemFlag.ItemIgnoresTransformations
    labels = [item for item in window.scene.items() if isinstance(item, ScreenLabel)]
    assert any(label.text for label in labels) and not all(label.text for label in labels)
    for item in labels:
        assert item.isVisible() == bool(item.text)
        # Qt's index checks labels of a fixed pixel size one by one: only shown ones are
        assert bool(item.flags() & ignores) == bool(item.text)


def test_far_out_group_names_get_a_halo_over_the_overview(qtbot, large):
    build_slices(qtbot, large.scene)
    box = next(iter(large.scene.items_so_far()[2]))
    assert not box.block_label.halo
    large.view.set_zoom(0.05 / large.view.zoom())
    assert large.scene.overview_on and box.block_label.halo
    large.view.set_zoom(1.0 / large.view.zoom())
    assert not large.scene.overview_on and not box.block_label.halo


def test_far_out_the_overview_draws_every_link_of_a_drawing_built_in_slices(qtbot, large):
    scene = large.scene
    build_slices(qtbot, scene)
    large.view.set_zoom(0.05 / large.view.zoom())
    assert scene.overview_on
    under, _over = scene.overview._build()   # groups, links by colour and width | nodes
    segments = sum(path.elementCount() for path, _pen, _brush, _smooth in under[1:]) // 2
    assert segments == len(large.doc.link_keys())


def test_recolouring_a_large_tree_far_out_rebuilds_the_overview_once(qtbot, large,
                                                                     monkeypatch):
    monkeypatch.setattr(overlays_module, "RESTYLE_SLICE", 20)  # 128 GPUs: many slices
    build_slices(qtbot, large.scene)
    assert large.solver.solve_and_wait() is None
    scene, overlays = large.scene, large.solver.overlays
    large.view.set_zoom(0.05 / large.view.zoom())
    assert scene.overview_on
    updates = []
    scene.overview.update = lambda *args: updates.append(args)
    large.solver.trees.select_position(5)
    turns = 0
    while overlays._restyle:
        overlays._restyle_some()
        turns += 1
    assert turns > 1, "a large tree is recoloured over several turns"
    assert len(updates) == 1, "the overview is rebuilt once, after the last slice"
    assert overlays.tree_link_keys()
    # only the recoloured links' layer is rebuilt, from those links alone
    overview = scene.overview
    overview._layers = base = overview._build()
    overview._styled_layers = None
    image = QImage(8, 8, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    overview.paint(painter, QStyleOptionGraphicsItem())
    painter.end()
    assert overview._layers is base
    styled = {k for k in (overlays.tree_link_keys() | overlays.cut_link_keys())}
    segments = sum(p.elementCount() for p, _pen, _b, _s in overview._styled_layers) // 2
    assert segments == len(styled) == len(overview._styled)


def paint_overview(overview) -> None:
    image = QImage(8, 8, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    overview.paint(painter, QStyleOptionGraphicsItem())
    painter.end()


def test_a_new_large_drawing_gets_its_overview_paths_in_a_turn_of_their_own(
        qtbot, large, monkeypatch):
    monkeypatch.setattr(overview_module, "LARGE", 10)   # 128 GPUs count as large here
    scene = large.scene
    build_slices(qtbot, scene)
    large.view.set_zoom(0.05 / large.view.zoom())
    assert scene.overview_on
    overview = scene.overview
    large.doc.set_topology(dgx_a100_cluster(SERVERS), None, display_name="another")
    build_slices(qtbot, scene)
    overview._layers = None     # (whatever painted meanwhile)
    overview._fresh = True
    paint_overview(overview)
    assert overview._layers is None, "the first paint of a new drawing does not build"
    qtbot.waitUntil(lambda: overview._layers is not None, timeout=2000)
    # once built, an edit rebuilds in the paint as before
    overview.invalidate()
    paint_overview(overview)
    assert overview._layers is not None
    # screenshots and image exports get the paths at once
    overview.forget()
    scene.flush_groups()
    assert overview._layers is not None


def test_the_drawing_rect_follows_moves_edits_and_new_items(qtbot, large):
    scene, doc = large.scene, large.doc
    build_slices(qtbot, scene)
    assert scene._rect_cache is not None, "measured by the last stage, kept once built"
    before = scene.drawing_rect()
    assert scene.drawing_rect() == before
    x = before.right() + 5000.0
    doc.move_nodes({"n0.gpu0": (x, 0.0)})
    scene.flush_groups()
    assert scene.drawing_rect().right() > x
    scene.node_item("n0.gpu1").setPos(QPointF(0.0, before.bottom() + 7000.0))  # a drag
    scene.flush_groups()
    assert scene.drawing_rect().bottom() > before.bottom() + 7000.0
