"""The Trees dock: the list, the root filter, keyboard stepping, the canvas highlight of
exactly the selected tree's links, and the tree view."""

from fractions import Fraction

from PySide6.QtCore import QEvent, QObject, Qt, QTimer

from canopy.app.canvas.overlays import TREE_LINK
from canopy.app.docks.tree_diagram import LEVEL
from canopy.app.docks.trees import ALL_ROOTS
from canopy.app.solution import hop_orders
from canopy.engine.model.topology import Link, Node, Topology


def solve_in(window, qtbot, action="solve_allgather"):
    window.named_actions[action].trigger()
    qtbot.waitUntil(lambda: not window.solver.controller.busy, timeout=60000)
    window.solver.settle()
    return window.solver.controller.solution


def expected_keys(doc, tree):
    """Link keys joining the consecutive nodes of every route of ``tree``."""
    keys = set()
    for edge in tree.edges:
        for a, b in zip(edge.path, edge.path[1:], strict=False):
            for key in doc.link_keys():
                link = doc.link(key)
                if (a, b) in link.directions():
                    keys.add(key)
    return keys


def test_the_list_shows_every_tree(window, qtbot):
    solution = solve_in(window, qtbot)
    dock = window.solver.trees
    assert dock.proxy.rowCount() == len(solution.schedule.trees) == 32
    assert dock.count.text() == "32 trees"
    model = dock.model
    row = [model.data(model.index(0, c)) for c in range(5)]
    tree = solution.schedule.trees[0]
    same_root = sum(1 for t in solution.schedule.trees if t.root == tree.root)
    assert row == [tree.root, f"{tree.index + 1} of {same_root}", str(tree.multiplicity),
                   f"{tree.multiplicity * 5 / 3:.2f}", str(tree.height)]  # y = 5/3 GB/s
    assert dock.table.isColumnHidden(5)  # one phase only
    assert dock.current_position() == 0  # the first tree is selected after a solve


def test_selecting_a_tree_highlights_exactly_its_links(window, qtbot):
    solution = solve_in(window, qtbot)
    window.named_actions["show_cut"].setChecked(False)
    dock = window.solver.trees
    overlays = window.solver.overlays
    for position in (0, 5, 17, 23):
        assert dock.select_position(position)
        tree = solution.schedule.trees[position]
        keys = expected_keys(window.doc, tree)
        assert overlays.tree_link_keys() == keys
        for item in window.scene.link_items():
            if item.key in keys:
                assert item.highlight[0] == TREE_LINK
            else:
                assert item.highlight is None
        # arrows point where data goes, with the hop numbers beside them
        hops = hop_orders(solution.trees[position])
        for key in keys:
            item = window.scene.link_item(key)
            for towards, text in item.marks:
                sender = item.source if towards == item.target else item.target
                assert (sender, towards) in hops
                assert text.split(",")[0] == str(hops[(sender, towards)][0])
    first_hop = solution.schedule.trees[23].edges[0].path[:2]
    assert hop_orders(solution.trees[23])[first_hop] == [1]


def test_deselecting_takes_the_tree_off_the_canvas(window, qtbot):
    solve_in(window, qtbot)
    window.named_actions["show_cut"].setChecked(False)
    dock = window.solver.trees
    dock.table.selectionModel().clearSelection()
    dock.table.selectionModel().setCurrentIndex(dock.proxy.index(-1, -1),
                                                dock.table.selectionModel().SelectionFlag.Clear)
    assert window.solver.overlays.tree_link_keys() == set()
    assert all(item.highlight is None for item in window.scene.link_items())
    assert dock.diagram.drawing is None


def test_filter_by_root(window, qtbot):
    solution = solve_in(window, qtbot)
    dock = window.solver.trees
    dock.root_filter.setCurrentText("n1.gpu3")
    assert dock.proxy.rowCount() == len(solution.schedule.trees_of("n1.gpu3"))
    assert all(dock.proxy.index(r, 0).data() == "n1.gpu3" for r in range(dock.proxy.rowCount()))
    assert dock.count.text() == f"{dock.proxy.rowCount()} of 32 trees"
    # a selection the filter hides is dropped; selecting it again clears the filter
    assert dock.current_position() == -1
    assert dock.select_position(0)
    assert dock.root_filter.currentText() == ALL_ROOTS


def test_stepping_through_trees_with_the_keyboard(window, qtbot):
    solve_in(window, qtbot)
    dock = window.solver.trees
    overlays = window.solver.overlays
    assert dock.current_position() == 0
    window.named_actions["next_tree"].trigger()
    assert dock.current_position() == 1
    first = overlays.tree_link_keys()
    window.named_actions["next_tree"].trigger()
    assert dock.current_position() == 2
    assert overlays.tree_link_keys() != first
    window.named_actions["previous_tree"].trigger()
    assert dock.current_position() == 1
    assert window.named_actions["next_tree"].shortcut().toString() == "]"
    dock.table.setFocus()
    qtbot.keyClick(dock.table, Qt.Key.Key_Down)
    assert dock.current_position() == 2
    qtbot.keyClick(dock.table, Qt.Key.Key_End, Qt.KeyboardModifier.ControlModifier)
    assert dock.current_position() == 31
    window.named_actions["next_tree"].trigger()
    assert dock.current_position() == 31


def test_tree_view_draws_root_on_top_with_switch_hops(window, qtbot):
    solution = solve_in(window, qtbot)
    dock = window.solver.trees
    dock.select_position(8)
    tree = solution.schedule.trees[8]
    drawing = dock.diagram.drawing
    assert drawing is not None and drawing.shown.tree == tree
    depth = tree.depth()
    assert set(drawing.positions) == set(solution.schedule.compute_nodes)
    for node, point in drawing.positions.items():
        assert point.y() == depth[node] * LEVEL
    assert drawing.positions[tree.root].y() == 0
    for (line, hops, _label), edge in zip(drawing.edges, tree.edges, strict=True):
        assert hops == list(edge.path[1:-1])
        assert line.p1().y() < line.p2().y()  # parent above child
    # the outline lists every compute node under its parent, with the hops
    outline = dock.outline
    assert outline.topLevelItemCount() == 0  # filled when its tab opens
    dock.tabs.setCurrentWidget(outline)
    assert outline.topLevelItem(0).text(0) == tree.root
    items = []
    stack = [outline.topLevelItem(0)]
    while stack:
        item = stack.pop()
        items.append(item)
        stack.extend(item.child(i) for i in range(item.childCount()))
    assert len(items) == 16
    by_node = {item.text(0): item for item in items}
    for edge in tree.edges:
        assert by_node[edge.dst].parent().text(0) == edge.src
        assert by_node[edge.dst].text(1) == " → ".join(edge.path[1:-1])


def test_reduce_scatter_trees_run_towards_the_root(window, qtbot):
    solution = solve_in(window, qtbot, "solve_reduce_scatter")
    shown = solution.trees[0]
    assert shown.reverse and shown.phase == "reduce-scatter"
    hops = hop_orders(shown)
    tree = shown.tree
    for edge in tree.edges:
        last = edge.path[-2:]
        assert (last[1], last[0]) in hops  # data leaves the child first
    arriving = [numbers for (a, b), numbers in hops.items() if b == tree.root]
    assert max(n for numbers in arriving for n in numbers) == max(
        n for numbers in hops.values() for n in numbers)
    assert window.solver.trees.diagram.drawing.shown.reverse


def test_one_way_allreduce_lists_both_phases(window, qtbot):
    ring = Topology("one-way ring", [Node("a"), Node("b"), Node("c")],
                    [Link("a", "b", Fraction(10), duplex=False),
                     Link("b", "c", Fraction(10), duplex=False),
                     Link("c", "a", Fraction(10), duplex=False)])
    window.doc.set_topology(ring)
    solution = solve_in(window, qtbot, "solve_allreduce")
    assert solution.schedule.reduce_trees is not None
    assert [t.phase for t in solution.trees] == ["reduce"] * 3 + ["broadcast"] * 3
    dock = window.solver.trees
    assert not dock.table.isColumnHidden(5)
    # the reduce phase runs every one-way link forwards, like the broadcast phase
    for position, shown in enumerate(solution.trees):
        hops = hop_orders(shown)
        assert set(hops) <= {("a", "b"), ("b", "c"), ("c", "a")}
        assert dock.select_position(position)
        assert window.solver.overlays.tree_link_keys() == {
            window.doc.link_keys()[["a", "b", "c"].index(a)] for a, _b in hops}


def test_outline_follows_the_selection_while_open(window, qtbot):
    solution = solve_in(window, qtbot)
    dock = window.solver.trees
    dock.tabs.setCurrentWidget(dock.outline)
    dock.select_position(4)
    assert dock.outline.topLevelItem(0).text(0) == solution.schedule.trees[4].root
    dock.tabs.setCurrentWidget(dock.diagram)
    dock.select_position(9)
    dock.tabs.setCurrentWidget(dock.outline)
    assert dock.outline.topLevelItem(0).text(0) == solution.schedule.trees[9].root


def test_a_tree_chosen_right_after_the_solve_stays_selected(window, qtbot):
    window.named_actions["solve_allgather"].trigger()
    inspector = window.solver
    qtbot.waitUntil(lambda: not inspector.controller.busy, timeout=30000)
    inspector.trees.select_position(5)
    qtbot.waitUntil(lambda: inspector.plots.solution is inspector.controller.solution,
                    timeout=5000)
    qtbot.wait(50)
    assert inspector.trees.current_position() == 5


def test_the_diagram_is_drawn_in_a_turn_of_its_own(window, qtbot):
    """Selecting a tree recolours the canvas at once; its diagram follows in the next turn
    of the event loop (a 1024-GPU tree takes a while to lay out)."""
    solve_in(window, qtbot)
    dock = window.solver.trees
    qtbot.waitUntil(lambda: dock.diagram._drawing is not None)
    dock.select_position(3)
    assert dock.diagram._drawing.shown is not dock.model.trees[3]
    qtbot.waitUntil(lambda: dock.diagram._drawing.shown is dock.model.trees[3])


class _PaintTurns(QObject):
    """The turn of the event loop (counted by a timer that fires in every pass) in which
    each watched widget painted."""

    def __init__(self, **widgets):
        super().__init__()
        self.names = {id(w): name for name, w in widgets.items()}
        self.turn = 0
        self.painted: list[tuple[str, int]] = []
        self.timer = QTimer()
        self.timer.setInterval(0)
        self.timer.timeout.connect(self._count)
        self.timer.start()
        for w in widgets.values():
            w.installEventFilter(self)

    def _count(self):
        self.turn += 1

    def eventFilter(self, watched, event):
        if event.type() == QEvent.Type.Paint and id(watched) in self.names:
            self.painted.append((self.names[id(watched)], self.turn))
        return False


def test_the_first_diagram_and_the_canvas_are_painted_in_turns_apart(window, qtbot):
    """Showing a solve's results, the canvas is held unpainted until its first tree; the
    diagram of that tree is painted before it is let go, not in the same paint of the
    window (which paints every widget waiting for one)."""
    inspector = window.solver
    paints = _PaintTurns(canvas=window.view.viewport(),
                         diagram=inspector.trees.diagram.viewport())
    window.named_actions["solve_allgather"].trigger()
    qtbot.waitUntil(lambda: inspector.controller.solution is not None
                    and inspector.plots.solution is inspector.controller.solution
                    and not inspector._steps, timeout=30000)
    qtbot.wait(50)
    paints.timer.stop()
    shown = [turn for name, turn in paints.painted if name == "diagram"]
    canvas = [turn for name, turn in paints.painted if name == "canvas"]
    assert shown and canvas and max(canvas) > min(shown)
    assert not set(shown) & set(canvas), paints.painted


def test_restyled_links_are_where_a_full_rebuild_puts_them(window, qtbot):
    """A tree's highlight restyles its links without rebuilding their lines: bounds and
    badges are what rebuilding them from their ends gives, for the tree shown and after
    switching to another (which takes the first one's marks off); their bandwidth labels
    stay where the scene placed them, clear of the others (a rebuild would put each at its
    own preferred spot until the scene places them again)."""
    solve_in(window, qtbot)
    inspector = window.solver
    for position in (3, 0):
        before = inspector.overlays.tree_link_keys()
        all_links = window.scene.link_items()
        labels = [(item.bandwidth_label.pos(), item.bandwidth_label.text) for item in all_links]
        inspector.trees.select_position(position)
        inspector.overlays.finish_restyling()
        assert [(item.bandwidth_label.pos(), item.bandwidth_label.text)
                for item in all_links] == labels
        keys = before | inspector.overlays.tree_link_keys()
        items = [window.scene.link_item(key) for key in sorted(keys)]
        assert any(item.marks for item in items) and any(not item.marks for item in items)

        def geometry(item):
            return item.boundingRect(), item.badge_rects()

        restyled = [geometry(item) for item in items]
        for item in items:
            item._rebuild()
        assert [geometry(item) for item in items] == restyled
