"""The Design dock: advice in the background, curves, applying an upgrade as one undo
step, naming a class from the selection."""

from fractions import Fraction

from canopy.engine.advise.classes import link_classes
from canopy.engine.generators import generate


def _advise(window, qtbot):
    dock = window.design
    assert dock.start()
    qtbot.waitUntil(lambda: not window.solver.controller.busy, timeout=60000)
    assert dock.advice is not None
    return dock


def test_dock_advises_applies_an_upgrade_in_one_undo_step_and_advises_again(window, qtbot):
    topo = generate("cluster", {"servers": "2", "gpus": "4", "scale_out": "leaf-spine",
                                "oversubscription": "2"})
    window.doc.set_topology(topo, None, display_name="ls")
    assert window.design.toggleViewAction() in window.menus["view"].actions()
    dock = _advise(window, qtbot)
    before = Fraction(dock.advice["optimum_exact"])
    drawn = {c["name"]: Fraction(c["bandwidth"]) for c in dock.advice["classes"]}
    assert dock.classes.rowCount() == len(link_classes(topo)) == 4
    assert dock.plot.listDataItems()            # the selected class's curve is drawn
    best = dock.advice["upgrades"][0]
    assert Fraction(best["gain"]) > 0
    dock.upgrades.selectRow(0)
    undo_count = window.doc.undo_stack.count()
    assert dock.apply_selected()
    assert window.doc.undo_stack.count() == undo_count + 1
    qtbot.waitUntil(lambda: not window.solver.controller.busy, timeout=60000)
    assert Fraction(dock.advice["optimum_exact"]) == Fraction(best["optimum"]) > before
    raised = {c.name: c.bandwidth for c in link_classes(window.doc.topology)}
    assert all(raised[n] == Fraction(b) for n, b in best["bandwidths"].items())
    window.doc.undo_stack.undo()
    assert {c.name: c.bandwidth for c in link_classes(window.doc.topology)} == drawn


def test_name_class_from_the_selection_is_one_undoable_edit(window, qtbot):
    topo = generate("cluster", {"servers": "2", "gpus": "2"})
    window.doc.set_topology(topo, None, display_name="c")
    keys = window.doc.link_keys()[:3]
    window.scene.select(link_keys=keys)
    assert window.design.name_selection("my class")
    assert link_classes(window.doc.topology)[0].name == "my class"
    assert len(link_classes(window.doc.topology)[0].links) == 3
    window.doc.undo_stack.undo()
    assert all(c.name != "my class" for c in link_classes(window.doc.topology))
