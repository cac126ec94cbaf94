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


def test_the_first_paint_after_a_hold_is_split_over_turns(window, qtbot, monkeypatch):
    """Let go after a hold, the canvas paints its left part in one turn and the rest in a
    later one (that paint draws every item anew); the two cover the whole viewport, and
    later paints are whole again."""
    from PySide6.QtCore import QTimer
    from PySide6.QtGui import QRegion
    from PySide6.QtWidgets import QGraphicsView

    from canopy.app.canvas.view import PAINT_PARTS

    view = window.view
    painted: list[tuple[int, QRegion]] = []
    turns = [0]
    ticker = QTimer()
    ticker.setInterval(0)
    ticker.timeout.connect(lambda: turns.__setitem__(0, turns[0] + 1))
    original = QGraphicsView.paintEvent

    def recorded(self, event):
        if self is view:
            painted.append((turns[0], QRegion(event.region())))
        original(self, event)

    monkeypatch.setattr(QGraphicsView, "paintEvent", recorded)
    view.hold_painting("test")
    qtbot.wait(20)
    ticker.start()
    view.hold_painting("test", False)
    qtbot.waitUntil(lambda: len(painted) >= PAINT_PARTS, timeout=2000)
    qtbot.wait(20)
    room = QRegion(view.viewport().rect())
    first, rest = painted[0][1], painted[1][1]
    assert first.boundingRect().width() == room.boundingRect().width() // PAINT_PARTS
    assert painted[1][0] > painted[0][0]                     # a later turn
    assert first.united(rest) == room and first.intersected(rest).isEmpty()
    view.viewport().update()
    qtbot.waitUntil(lambda: len(painted) > PAINT_PARTS, timeout=2000)
    assert painted[-1][1] == room
    ticker.stop()


def test_scripts_paint_the_canvas_whole(window, qtbot):
    """Settling the view for a screenshot takes back a split paint."""
    view = window.view
    view.hold_painting("test")
    view.hold_painting("test", False)
    assert view._in_parts > 1
    view.settle_labels()
    assert view._in_parts == 0
