"""Labels placed over turns of the event loop (after a solve's zoom to fit) end where
placing them at once puts them; the canvas is not painted half labelled; an edit while
they are being placed stops the pass and places them again."""

from __future__ import annotations

from canopy.engine.io.topology_json import load_sample


def _labels(scene):
    """Every shown name, bandwidth and hub label, with where it sits."""
    names = {n.node_id: n.name_label.text for n in scene.node_items()}
    bandwidths = {(k.source, k.target, k.key): (k.bandwidth_label.text,
                                                round(k.bandwidth_label.pos().x(), 3),
                                                round(k.bandwidth_label.pos().y(), 3))
                  for k in scene.link_items() if k.bandwidth_label.isVisible()}
    hubs = {n.node_id: n.fan_label.text for n in scene.node_items()}
    return names, bandwidths, hubs


def _open(window, qtbot, sample):
    window.doc.set_topology(load_sample(sample), None, display_name=sample)
    window.resize(1280, 800)
    qtbot.wait(20)


def test_in_turns_ends_where_at_once_does(window, qtbot):
    _open(window, qtbot, "rail-leaf-spine-4x8")
    scene, view = window.scene, window.view
    view.zoom_to_fit()
    at_once = _labels(scene)
    view.set_zoom(0.6)                       # labels for another zoom first
    view.zoom_to_fit(labels_in_turns=True)
    assert scene._detail is not None          # not placed in this turn
    assert not view.viewport().updatesEnabled()
    qtbot.waitUntil(lambda: scene._detail is None, timeout=5000)
    assert view.viewport().updatesEnabled()
    assert _labels(scene) == at_once


def test_finish_labels_completes_a_pass(window, qtbot):
    _open(window, qtbot, "rail-leaf-spine-4x8")
    scene, view = window.scene, window.view
    view.zoom_to_fit()
    at_once = _labels(scene)
    view.set_zoom(0.6)
    view.zoom_to_fit(labels_in_turns=True)
    scene.finish_labels()
    assert scene._detail is None and view.viewport().updatesEnabled()
    assert _labels(scene) == at_once


def test_an_edit_stops_the_pass_and_labels_again(window, qtbot):
    _open(window, qtbot, "rail-leaf-spine-4x8")
    scene, view = window.scene, window.view
    view.set_zoom(0.6)
    view.zoom_to_fit(labels_in_turns=True)
    window.doc.remove_link(scene.link_items()[0].key)
    assert scene._detail is None and view.viewport().updatesEnabled()
    qtbot.wait(200)                          # the level-of-detail timer places them again
    placed = _labels(scene)
    scene.apply_zoom()
    assert _labels(scene) == placed


def test_showing_a_solution_leaves_the_canvas_painting(window, qtbot):
    assert window.solver.solve_and_wait("allgather") is None
    qtbot.waitUntil(lambda: window.scene._detail is None, timeout=5000)
    assert window.view.viewport().updatesEnabled() and not window.view._holds
    assert window.solver.results.updatesEnabled() and window.solver.trees.updatesEnabled()


def test_a_newer_solution_releases_a_hold_left_by_the_last(window, qtbot):
    solver = window.solver
    assert solver.solve_and_wait("allgather") is None
    solution = solver.controller.solution
    solver._sized_docks = False              # as before the first solve's docks
    solver._solution_changed(solution)
    while solver._steps and not window.view._holds:
        solver._next_step()
    assert window.view._holds                # the docks are being rearranged
    assert not solver.trees.updatesEnabled()
    solver._solution_changed(solution)       # replaced before its steps ended
    solver.settle()
    assert window.view.viewport().updatesEnabled() and not window.view._holds
    assert solver.results.updatesEnabled() and solver.trees.updatesEnabled()
