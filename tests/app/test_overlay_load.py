"""The link-load overlay: colours follow utilisation, tooltips give exact numbers, and the
legend shows only with fresh results."""

from fractions import Fraction

from canopy.app.canvas.overlays import LOAD_STOPS, TREE_LINK, UNUSED, utilisation_color
from canopy.app.commands import edit_links
from canopy.app.solve_controller import FixedKDialog
from canopy.engine.model.link_load import link_loads


def solve_fixed_k(window, qtbot, monkeypatch, k):
    monkeypatch.setattr(FixedKDialog, "ask", staticmethod(lambda *a: ("allgather", k)))
    window.named_actions["solve_fixed_k"].trigger()
    qtbot.waitUntil(lambda: not window.solver.controller.busy, timeout=30000)
    window.solver.settle()
    return window.solver.controller.solution


def utilisation_of(doc, loads, key):
    link = doc.link(key)
    return max(loads[d].utilisation for d in link.directions())


def test_colour_scale():
    assert utilisation_color(0) == UNUSED
    assert utilisation_color(1.0) == LOAD_STOPS[-1][1]
    assert utilisation_color(1e-9) != UNUSED
    assert utilisation_color(0.5) == LOAD_STOPS[1][1]
    low, high = utilisation_color(0.1), utilisation_color(0.9)
    assert high.red() > low.red() and high.blue() < low.blue()


def test_overlay_colours_follow_the_loads(window, qtbot, monkeypatch):
    # with k fixed to 1 the 2 x DGX A100 schedule leaves some bandwidth unused
    solution = solve_fixed_k(window, qtbot, monkeypatch, 1)
    window.named_actions["show_cut"].setChecked(False)
    window.solver.trees.table.selectionModel().clearSelection()
    window.solver.trees.table.selectionModel().clearCurrentIndex()
    assert all(item.highlight is None for item in window.scene.link_items())
    window.named_actions["show_load"].setChecked(True)
    loads = link_loads(solution.schedule, solution.topology)
    seen = set()
    for key in window.doc.link_keys():
        item = window.scene.link_item(key)
        expected = utilisation_color(float(utilisation_of(window.doc, loads, key)))
        assert item.highlight[0] == expected
        seen.add(expected.name())
    assert len(seen) >= 2
    assert window.solver.results.show_load.isChecked()
    window.named_actions["show_load"].setChecked(False)
    assert all(item.highlight is None for item in window.scene.link_items())


def test_hovering_a_link_gives_exact_load_bandwidth_and_trees(window, qtbot):
    window.named_actions["solve_allgather"].trigger()
    qtbot.waitUntil(lambda: not window.solver.controller.busy, timeout=30000)
    window.solver.settle()
    solution = window.solver.controller.solution
    key = next(k for k in window.doc.link_keys()
               if {window.doc.link(k).source, window.doc.link(k).target}
               == {"n0.gpu3", "n0.nvswitch"})
    item = window.scene.link_item(key)
    plain = item.toolTip()
    window.named_actions["show_load"].setChecked(True)
    tip = item.toolTip()
    load = solution.loads[("n0.gpu3", "n0.nvswitch")]
    assert load.used == 300 and load.utilisation == 1
    assert "n0.gpu3 → n0.nvswitch: 300 of 300 GB/s, 100.0 % used, " \
           f"{load.unit_trees} unit trees" in tip
    assert "n0.nvswitch → n0.gpu3:" in tip
    names = [f"{solution.schedule.trees[p].root} #{solution.schedule.trees[p].index}"
             for p in load.trees]
    assert "trees: " + ", ".join(names[:12]) in tip
    window.named_actions["show_load"].setChecked(False)
    assert item.toolTip() == plain


def test_selected_tree_is_drawn_over_the_load(window, qtbot):
    window.named_actions["solve_allgather"].trigger()
    qtbot.waitUntil(lambda: not window.solver.controller.busy, timeout=30000)
    window.solver.settle()
    window.named_actions["show_load"].setChecked(True)
    tree_keys = window.solver.overlays.tree_link_keys()
    assert tree_keys
    for item in window.scene.link_items():
        if item.key in tree_keys:
            assert item.highlight[0] == TREE_LINK
        else:
            assert item.highlight[0] == utilisation_color(1.0)


def test_legend_shows_with_fresh_results_only(window, qtbot):
    legend = window.solver.legend
    window.named_actions["show_load"].setChecked(True)
    assert not legend.isVisible()  # nothing solved yet
    window.named_actions["solve_allgather"].trigger()
    qtbot.waitUntil(lambda: not window.solver.controller.busy, timeout=30000)
    window.solver.settle()
    assert legend.isVisible()
    edit_links(window.doc, [window.doc.link_keys()[0]], "bandwidth", Fraction(100))
    qtbot.waitUntil(lambda: window.solver.controller.stale, timeout=2000)
    assert not legend.isVisible()
    assert all(item.highlight is None for item in window.scene.link_items())
    window.doc.undo_stack.undo()
    qtbot.waitUntil(lambda: not window.solver.controller.stale, timeout=2000)
    assert legend.isVisible()
    window.named_actions["show_load"].setChecked(False)
    assert not legend.isVisible()


def test_a_large_tree_is_recoloured_a_slice_per_turn(window, qtbot, monkeypatch):
    from canopy.app.canvas import overlays
    window.named_actions["solve_allgather"].trigger()
    qtbot.waitUntil(lambda: not window.solver.controller.busy, timeout=30000)
    window.solver.settle()
    monkeypatch.setattr(overlays, "RESTYLE_SLICE", 2)
    window.solver.trees.select_position(1)
    tree_keys = window.solver.overlays.tree_link_keys()
    assert len(tree_keys) > 4

    def purple() -> set[int]:
        return {i.key for i in window.scene.link_items()
                if i.highlight is not None and i.highlight[0] == TREE_LINK}

    assert purple() != tree_keys  # only the first slice so far
    qtbot.waitUntil(lambda: purple() == tree_keys, timeout=5000)


def test_hops_map_to_the_link_items_the_scene_names(window, qtbot, monkeypatch):
    """The overlays index every hop of the loads in one pass over the items; it gives the
    same items as asking the scene hop by hop (parallel links included)."""
    from canopy.engine.io.topology_json import load_sample
    from canopy.engine.model.topology import Link

    topo = load_sample("dgx-a100-2x8")
    topo.links.append(Link("n0.gpu0", "n0.nvswitch", Fraction(50)))   # a parallel link
    window.doc.set_topology(topo)
    solve_fixed_k(window, qtbot, monkeypatch, 1)
    overlays, scene = window.solver.overlays, window.scene
    assert overlays._hop_keys
    for hop, keys in overlays._hop_keys.items():
        expected = [item.key for item in scene.link_items_between(*hop, directed=True)]
        assert sorted(keys) == sorted(expected), hop
    assert len(overlays._hop_keys[("n0.gpu0", "n0.nvswitch")]) == 2


def test_recolouring_links_while_the_overview_is_held_rebuilds_only_their_layer(window):
    """Recolouring a large tree's links a slice per turn holds the overview; releasing it
    rebuilds the recoloured links' layer, not every link and node, unless the drawing itself
    changed meanwhile."""
    from PySide6.QtGui import QColor

    overview = window.scene.overview
    item = window.scene.link_items()[0]
    overview._layers, overview._styled_layers = ([], []), []
    overview.hold()
    item.set_highlight(QColor("#d62828"), 3.0)
    overview.release()
    assert overview._layers == ([], []) and overview._styled_layers is None
    overview._styled_layers = []
    overview.hold()
    item.set_highlight(None)
    overview.invalidate()
    overview.release()
    assert overview._layers is None and overview._styled_layers is None
