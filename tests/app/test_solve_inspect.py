"""Solving from the Compute menu: results, the bottleneck cut, progress, cancel, errors,
fixed k and stale marking after edits."""

import time
from fractions import Fraction

from bench.clusters import dgx_a100_cluster
from canopy.app.canvas.overlays import CUT_LINK
from canopy.app.commands import MoveNodes, edit_links
from canopy.app.solve_controller import FixedKDialog
from canopy.engine.model.topology import Link, Node, Topology


def solve_in(window, qtbot, action="solve_allgather"):
    inspector = window.solver
    window.named_actions[action].trigger()
    assert inspector.controller.busy
    qtbot.waitUntil(lambda: not inspector.controller.busy, timeout=60000)
    inspector.settle()
    return inspector.controller.solution


def cut_keys(doc, cut):
    """Keys of the links that carry data out of the node set ``cut``."""
    keys = set()
    for key in doc.link_keys():
        link = doc.link(key)
        if any(a in cut and b not in cut for a, b in link.directions()):
            keys.add(key)
    return keys


def test_solve_fills_the_results_dock_and_shows_the_cut(window, qtbot):
    phases = []
    window.solver.controller.progress.connect(lambda phase, f: phases.append(phase))
    solution = solve_in(window, qtbot)
    assert solution is not None
    for phase in ("optimum", "switch removal", "tree packing", "mapping back",
                  "verification"):
        assert phase in phases
    results = window.solver.results
    assert results.windowTitle() == "Results"
    assert results.text("allgather").startswith("<b>346.67 GB/s")
    assert results.text("allreduce").startswith("173.33 GB/s")
    assert results.text("inverse_x").startswith("3/65")
    assert results.text("k") == "13 trees per GPU reach the optimum"
    assert "<td align='right'>7</td><td align='right'>346.39</td>" in results.text("tradeoff")
    assert results.text("y").startswith("5/3 GB/s")
    assert results.text("n") == "16 compute nodes"
    assert results.text("trees").startswith("32 distinct (208 with repeats)")
    cut = set(solution.schedule.optimum.bottleneck_cut)
    inside = len(cut & set(solution.schedule.compute_nodes))
    assert f"= {inside} / 325 GB/s = 3/65 = 1/x*" in results.text("ratio")
    assert results.text("cut").startswith(f"S* holds {inside} of 16 GPUs")
    assert "325 GB/s leave it over" in results.text("cut")
    overlays = window.solver.overlays
    rest = set(window.doc.node_ids()) - cut
    assert overlays.halo_nodes() == (cut if len(cut) <= len(rest) else rest)  # smaller side
    assert overlays.cut_link_keys() == cut_keys(window.doc, cut)
    tree_keys = overlays.tree_link_keys()
    for key in cut_keys(window.doc, cut) - tree_keys:
        item = window.scene.link_item(key)
        assert item.highlight[0] == CUT_LINK
        assert {towards for towards, _ in item.marks} <= set(window.doc.node_ids()) - cut
    for key in cut_keys(window.doc, cut) & tree_keys:
        assert window.scene.link_item(key).outline == CUT_LINK
    assert "Solved allgather" in window.statusBar().currentMessage()
    assert not window.solver.progress.isVisible()


def test_the_cut_toggle_hides_and_shows_the_cut(window, qtbot):
    solve_in(window, qtbot)
    overlays = window.solver.overlays
    cut = overlays.cut_link_keys()
    assert cut and overlays.halo_nodes()
    window.solver.results.show_cut.setChecked(False)
    assert not window.named_actions["show_cut"].isChecked()
    assert overlays.halo_nodes() == set() and overlays.cut_link_keys() == set()
    for key in cut - overlays.tree_link_keys():
        assert window.scene.link_item(key).highlight is None
    window.named_actions["show_cut"].setChecked(True)
    assert window.solver.results.show_cut.isChecked()
    assert overlays.cut_link_keys() == cut


def test_editing_marks_results_stale_and_undo_makes_them_fresh(window, qtbot):
    solve_in(window, qtbot)
    inspector = window.solver
    overlays = inspector.overlays
    styled = overlays.tree_link_keys() | overlays.cut_link_keys()
    # moving a node is not a change of the network
    node = window.doc.node("ib0")
    window.doc.undo_stack.push(MoveNodes(window.doc, {"ib0": (node.x, node.y)},
                                         {"ib0": (node.x + 40, node.y)}))
    inspector.controller.check_now()
    assert not inspector.controller.stale
    key = window.doc.link_keys()[0]
    edit_links(window.doc, [key], "bandwidth", Fraction(400))
    qtbot.waitUntil(lambda: inspector.controller.stale, timeout=2000)
    for dock in (inspector.results, inspector.trees, inspector.plots):
        assert dock.windowTitle().endswith("— stale (topology edited)")
        assert dock.banner.isVisible() and dock.banner.state == "stale"
    assert not inspector.results.body.isEnabled()
    assert overlays.halo_nodes() == set() and overlays.tree_link_keys() == set()
    assert all(item.highlight is None for item in window.scene.link_items())
    assert not window.named_actions["export_json"].isEnabled()
    assert "stale" in window.statusBar().currentMessage()
    # selecting another tree while stale draws nothing on the canvas
    inspector.trees.select_position(3)
    assert all(item.highlight is None for item in window.scene.link_items())
    window.doc.undo_stack.undo()  # the bandwidth edit
    qtbot.waitUntil(lambda: not inspector.controller.stale, timeout=2000)
    assert inspector.results.windowTitle() == "Results"
    assert not inspector.results.banner.isVisible()
    assert overlays.tree_link_keys() and overlays.halo_nodes()
    assert window.named_actions["export_json"].isEnabled()
    assert styled


def test_editing_during_a_solve_gives_stale_results(window, qtbot):
    inspector = window.solver
    window.named_actions["solve_allgather"].trigger()
    edit_links(window.doc, [window.doc.link_keys()[0]], "bandwidth", Fraction(400))
    qtbot.waitUntil(lambda: not inspector.controller.busy, timeout=60000)
    assert inspector.controller.solution is not None
    assert inspector.controller.stale
    assert inspector.overlays.halo_nodes() == set()


def test_cancel_in_the_middle_of_a_long_solve(window, qtbot):
    window.doc.set_topology(dgx_a100_cluster(64))
    inspector = window.solver
    seen = {}

    def cancel_while_packing(phase, fraction):
        # (tree packing reports its start only: it takes 0.1 s at 128 GPUs since the
        # scale work, so the cancel comes at its start, in a 512-GPU solve)
        if phase == "tree packing" and not seen:
            seen["format"] = inspector.progress.format()
            seen["value"] = inspector.progress.value()
            seen["at"] = time.perf_counter()
            window.named_actions["cancel"].trigger()

    inspector.controller.progress.connect(cancel_while_packing)
    window.named_actions["solve_allgather"].trigger()
    assert window.named_actions["cancel"].isEnabled()
    assert not window.named_actions["solve_allgather"].isEnabled()
    assert inspector.progress.isVisible()
    qtbot.waitUntil(lambda: not inspector.controller.busy, timeout=60000)
    assert seen["format"] == "tree packing (3/5): %p%" and seen["value"] >= 0
    assert time.perf_counter() - seen["at"] < 2.0
    assert inspector.controller.solution is None
    assert window.statusBar().currentMessage() == "Cancelled."
    assert window.named_actions["solve_allgather"].isEnabled()
    assert not inspector.progress.isVisible()
    # the optimum came first from its own job (512 GPUs) and stays, marked unbuilt
    assert inspector.results.bound is not None
    assert inspector.results.text("achieved") == "<i>not built: cancelled</i>"
    assert "no schedule" in inspector.solved_label.text()


def test_large_drawings_show_the_bound_before_the_schedule(window, qtbot):
    window.doc.set_topology(dgx_a100_cluster(2))
    inspector = window.solver
    inspector.controller.bound_first_nodes = 16
    seen = []

    def bound_shown(bound):
        if bound is not None:
            seen.append((inspector.controller.busy, inspector.controller.solution,
                         inspector.results.text("allgather"), inspector.results.text("trees"),
                         inspector.trees.banner.text()))

    inspector.controller.bound_changed.connect(bound_shown)
    solution = solve_in(window, qtbot)
    (busy, before, algbw, trees, banner), = seen
    assert busy and before is None
    assert algbw == "<b>346.67 GB/s  allgather</b>" and trees == "<i>building…</i>"
    assert banner.startswith("Building the schedule")
    assert inspector.results.solution is solution
    assert inspector.results.bound is None and inspector.controller.bound is None
    assert inspector.results.text("trees").startswith(f"{len(solution.trees)} distinct")
    assert inspector.trees.banner.state == "fresh"


def test_cancel_before_the_bound_arrives_shows_nothing(window, qtbot):
    window.doc.set_topology(dgx_a100_cluster(2))
    inspector = window.solver
    inspector.controller.bound_first_nodes = 16
    window.named_actions["solve_allgather"].trigger()
    window.named_actions["cancel"].trigger()
    assert not inspector.controller.busy
    assert inspector.controller.bound is None and inspector.controller.solution is None
    assert inspector.results.banner.state == "empty"
    assert window.statusBar().currentMessage() == "Cancelled."


def test_engine_errors_appear_in_a_dialog(window, qtbot, dialogs):
    window.doc.set_topology(Topology("bad", [Node("a"), Node("b"), Node("s", "switch")],
                                     [Link("a", "s", Fraction(10), duplex=False),
                                      Link("s", "b", Fraction(10), duplex=False),
                                      Link("b", "a", Fraction(5), duplex=False)]))
    solve_in(window, qtbot)
    assert window.solver.controller.solution is None
    kind, title, text = dialogs.calls[-1]
    assert (kind, title) == ("critical", "Solving allgather failed")
    assert "unbalanced" in text and text.count(".") >= 1 and "\n" not in text


def test_fixed_k_from_the_dialog(window, qtbot, monkeypatch):
    monkeypatch.setattr(FixedKDialog, "ask", staticmethod(lambda *a: ("allgather", 2)))
    window.named_actions["solve_fixed_k"].trigger()
    qtbot.waitUntil(lambda: not window.solver.controller.busy, timeout=30000)
    window.solver.settle()
    solution = window.solver.controller.solution
    assert solution.schedule.fixed_k and solution.schedule.k == 2
    results = window.solver.results
    assert results.text("collective") == "allgather, k fixed to 2"
    assert results.text("achieved").startswith("342.86 GB/s with k = 2")
    assert results.text("k") == "2 trees per GPU, as asked, reach 98.90 % of the optimum"


def test_cancelled_fixed_k_dialog_starts_nothing(window, monkeypatch):
    monkeypatch.setattr(FixedKDialog, "ask", staticmethod(lambda *a: None))
    window.named_actions["solve_fixed_k"].trigger()
    assert not window.solver.controller.busy


def test_reduce_scatter_and_allreduce_from_the_menu(window, qtbot):
    solution = solve_in(window, qtbot, "solve_reduce_scatter")
    assert solution.collective == "reduce-scatter"
    assert window.solver.results.text("reduce-scatter").startswith("<b>346.67")
    solution = solve_in(window, qtbot, "solve_allreduce")
    assert solution.collective == "allreduce"
    assert window.solver.results.text("allreduce").startswith("<b>173.33")


def test_menus_hold_the_compute_and_export_entries(window):
    compute = [a.text() for a in window.menus["compute"].actions() if a.text()]
    assert compute[:4] == ["Solve &Allgather", "Solve &Reduce-Scatter", "Solve All&reduce",
                           "Solve with Fixed &k…"]
    assert "&Cancel" in compute
    file_items = window.menus["file"].actions()
    export = window.menus["export"]
    assert export.menuAction() in file_items
    assert file_items.index(export.menuAction()) < file_items.index(window.named_actions["quit"])
    assert [a.text() for a in export.actions() if not a.isSeparator()][-5:] == [
        "&MSCCL XML…", "&Trees Listing (XML)…", "&Schedule JSON…",
        "Canvas &Image (PNG or SVG)…", "&NCCL Graph File (rings for plain NCCL)…"]
    bar = window.menuBar().actions()
    assert bar.index(window.menus["compute"].menuAction()) < bar.index(
        window.menus["help"].menuAction())


def test_closing_the_window_during_a_solve_stops_it(qtbot):
    from canopy.app.main_window import MainWindow
    win = MainWindow(dgx_a100_cluster(16))
    qtbot.addWidget(win)
    win.show()
    win.named_actions["solve_allgather"].trigger()
    assert win.solver.controller.busy
    win.close()
    assert not win.solver.controller.busy



def test_gui_solve_screenshot(tmp_path):
    from PySide6.QtGui import QImage

    from canopy.cli import main
    out = tmp_path / "solved.png"
    assert main(["gui", "samples/forestcoll-fig2.json", "--solve", "--screenshot", str(out),
                 "--size", "1000x700"]) == 0
    image = QImage(str(out))
    assert image.size().toTuple() == (1000, 700)
    colours = {image.pixelColor(x, y).name() for x in range(0, 1000, 2)
               for y in range(0, 700, 2)}
    assert "#7b2cbf" in colours  # the first tree is drawn


def test_gui_solve_screenshot_failure_is_one_sentence(tmp_path, capsys):
    from canopy.cli import main
    bad = tmp_path / "oneway.json"
    bad.write_text('{"format": "canopy-topology", "version": 1, "nodes": ['
                   '{"id": "a", "kind": "compute"}, {"id": "b", "kind": "compute"}], '
                   '"links": [{"source": "a", "target": "b", "bandwidth": 5, '
                   '"duplex": false}]}')
    out = tmp_path / "x.png"
    assert main(["gui", str(bad), "--solve", "--screenshot", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("canopy: cannot solve oneway.json: ") and err.count("\n") == 1
    assert not out.exists()


def test_first_tree_and_plots_follow_by_themselves(window, qtbot):
    window.named_actions["solve_allgather"].trigger()
    inspector = window.solver
    qtbot.waitUntil(lambda: inspector.trees.current_position() == 0
                    and inspector.plots.solution is inspector.controller.solution,
                    timeout=30000)
    assert inspector.overlays.tree_link_keys()


def test_cut_shading_follows_a_moved_node(window, qtbot):
    from PySide6.QtCore import QRectF
    from PySide6.QtGui import QColor, QImage, QPainter

    from canopy.app.canvas.overlays import CUT_HALO_BORDER
    solve_in(window, qtbot)
    node = next(iter(window.solver.overlays.halo_nodes()))  # the shaded (smaller) side
    old = window.doc.node(node)
    far = (old.x + 900.0, old.y + 900.0)
    window.doc.undo_stack.push(MoveNodes(window.doc, {node: (old.x, old.y)}, {node: far}))

    def border_pixels(x, y):
        image = QImage(200, 200, QImage.Format.Format_ARGB32)
        image.fill(QColor("white"))
        painter = QPainter(image)
        window.scene.render(painter, QRectF(0, 0, 200, 200), QRectF(x - 50, y - 50, 100, 100))
        painter.end()
        return sum(1 for i in range(200) for j in range(200)
                   if image.pixelColor(i, j).name() == CUT_HALO_BORDER.name())

    assert border_pixels(*far) > 20
    assert not window.solver.controller.stale


def test_reopening_the_same_topology_keeps_the_overlays(window, qtbot):
    from canopy.engine.io.topology_json import load_sample
    solve_in(window, qtbot)
    overlays = window.solver.overlays
    tree_links = len(overlays.tree_link_keys())
    window.doc.set_topology(load_sample("dgx-a100-2x8"))
    assert not window.solver.controller.stale
    assert len(overlays.tree_link_keys()) == tree_links
    assert overlays.halo_nodes()
    assert all(window.scene.link_item(k).highlight is not None
               for k in overlays.tree_link_keys())
    window.doc.set_topology(load_sample("forestcoll-fig2"))
    # another topology: its results are dropped (not shown as "stale", nothing was edited)
    controller = window.solver.controller
    assert controller.solution is None and not controller.stale
    assert overlays.tree_link_keys() == set() and overlays.halo_nodes() == set()
    assert window.solver.results.banner.state == "empty"
    assert "stale" not in window.solver.results.windowTitle()
    assert window.solver.solved_label.text() == ""


def test_a_k_too_long_to_print_shows_short(window, qtbot, dialogs):
    """Prop. 3's k of 4995 digits shows as an approximation, not a crash."""
    from canopy.engine.io.topology_json import loads_topology
    from canopy.engine.model.limits import digit_count
    from tests.test_guards import big_k_text

    window.doc.set_topology(loads_topology(big_k_text()))
    solution = solve_in(window, qtbot)
    assert solution is not None, dialogs.calls
    assert digit_count(solution.schedule.k) == 4995
    assert "k = about 1.33333e+4994 (an integer of 4995 digits)" in \
        window.solver.solved_label.text()
    assert "about 2.50000e+999" in window.solver.results.values["inverse_x"].text()
    assert "floating point" in window.solver.plots.time_plot.plotItem.titleLabel.text


def test_a_timer_due_during_a_steps_paint_fires_before_the_next_step(window, qtbot):
    """The showing steps leave the event loop a turn between them: the step after one is
    timed from that step's paint, so a timer that falls due as the window paints (the
    user's input, another view's work) fires before it, not after two steps."""
    from PySide6.QtCore import QEvent, QObject, QTimer

    qtbot.wait(50)
    seen = []
    other = QTimer()
    other.setSingleShot(True)
    other.setInterval(0)
    other.timeout.connect(lambda: seen.append("other"))

    class Paints(QObject):
        def eventFilter(self, watched, event):
            if event.type() == QEvent.Type.UpdateRequest and seen == ["first"]:
                seen.append("paint")
                other.start()
            return False

    paints = Paints()
    window.installEventFilter(paints)
    solver = window.solver

    def first():
        seen.append("first")
        window.statusBar().showMessage("a step that paints")

    solver._steps.extend([first, lambda: seen.append("second")])
    solver._step_timer.start()
    qtbot.waitUntil(lambda: "second" in seen, timeout=5000)
    window.removeEventFilter(paints)
    assert seen == ["first", "paint", "other", "second"]


def test_the_results_labels_are_measured_in_turns_before_the_form_is_shown(window, qtbot):
    """A new solution's Results labels get their size hints a slice a turn, between
    filling the dock and showing its form; each turn measures one label at least."""
    solver = window.solver
    order = []
    solver.controller.solution_changed.connect(lambda _s: order.extend(solver._steps))
    solution = solve_in(window, qtbot)
    assert order[1] == solver._measure_results
    results = solver.results
    results.fill(solution)
    labels = len(results.values)
    measured = 0
    while not results.measure_some(0.0):
        measured += 1
    assert measured == labels - 1
    assert results.measure_some(0.0)
    results.fill(None)
    assert results.measure_some(0.0)
