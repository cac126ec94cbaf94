"""The Compare dock: background comparison, table and chart, stale marking, cancel, errors."""

import time
from fractions import Fraction

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialogButtonBox

from bench.clusters import dgx_a100_cluster
from canopy.app.commands import MoveNodes, edit_links
from canopy.app.compare_controller import CompareDialog
from canopy.app.docks.compare import display_name, short_reason
from canopy.engine.comparison.table import compare
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.topology import Link, Node, Topology

SIZES = (1 << 20, 1 << 30)


@pytest.fixture
def fig2(window):
    window.doc.set_topology(load_sample("forestcoll-fig2"), None, display_name="fig2")
    return window


def run(window, qtbot, **options):
    """Start a comparison from the dock's owner and wait until it has delivered."""
    dock = window.compare.dock
    with _finished(dock, qtbot):
        window.compare.start(**options)
    return dock


class _finished:
    """Wait until the dock's job (started inside the block) has delivered."""

    def __init__(self, dock, qtbot):
        self.dock, self.qtbot = dock, qtbot

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            self.qtbot.waitUntil(lambda: not self.dock.is_running(), timeout=60000)
        return False


def test_menu_entry_and_dialog_start_a_comparison(fig2, qtbot):
    action = fig2.named_actions["compare"]
    assert action in fig2.menus["compute"].actions()
    assert fig2.compare.dock.toggleViewAction() in fig2.menus["view"].actions()
    dialog = fig2.compare.open_dialog()
    assert isinstance(dialog, CompareDialog)
    assert dialog.sizes.text() == "1M,16M,128M,1G"
    dialog.sizes.setText("1M, 12Q")
    dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok).click()
    assert dialog.isVisible() and "12Q" in dialog.error.text()
    dialog.sizes.setText("1G,1M")
    dialog.collective.setCurrentText("reduce-scatter")
    with _finished(fig2.compare.dock, qtbot):
        dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok).click()
        assert fig2.compare.dock.is_running()
    comp = fig2.compare.dock.comparison
    assert comp.collective == "reduce-scatter" and comp.sizes == SIZES


def test_table_and_chart_match_the_engine_rows(fig2, qtbot):
    dock = run(fig2, qtbot, collective="allgather", sizes=SIZES)
    expected = compare(load_sample("forestcoll-fig2"), "allgather", SIZES)
    shown = dock.comparison
    assert [r.algorithm for r in shown.rows] == [r.algorithm for r in expected.rows]
    cells = dock.table_text()
    assert len(cells) == len(expected.rows)
    bars = {b.opts["name"]: b for b in dock.bars}
    for text, row in zip(cells, expected.rows, strict=True):
        assert text[0] == display_name(row.algorithm)
        if row.reason is not None:
            assert text[1] == f"n/a: {short_reason(row.reason)}"
            assert len(text[1]) < 90 or "(" not in row.reason
            index = dock.model.index(cells.index(text), 1)
            assert dock.model.data(index, Qt.ItemDataRole.ToolTipRole) == row.reason
            assert dock.table.columnSpan(cells.index(text), 1) == len(text) - 1
            assert display_name(row.algorithm) not in bars
            continue
        assert float(text[1].replace(",", "")) == pytest.approx(float(row.algbw), abs=0.005)
        ratio = expected.ratio(row)
        assert text[2] == f"{float(ratio):.2f}×"
        for k, size in enumerate(SIZES):
            assert float(text[3 + 2 * k].replace(",", "")) == pytest.approx(
                float(row.times_us[size]), abs=0.51)
            assert float(text[4 + 2 * k].replace(",", "")) == pytest.approx(
                float(row.algbw_at(size)), abs=0.005)
        heights = list(bars[display_name(row.algorithm)].opts["height"])
        assert heights == pytest.approx([float(row.algbw_at(s)) for s in SIZES]
                                        + [float(row.algbw)])
    # fig2 is not a tree: the LR rings do not apply, the other four have bars.
    assert len(dock.bars) == 4
    assert len(dock.legend.items) == 4
    assert not dock.stale and dock.stale_label.isHidden()
    assert fig2.statusBar().currentMessage().startswith("Compared 6 algorithms for allgather")


def test_network_edits_mark_the_comparison_stale_and_undo_clears_it(fig2, qtbot):
    dock = run(fig2, qtbot, sizes=(1 << 20,))
    doc = fig2.doc
    node = doc.node("c1.1")
    doc.undo_stack.push(MoveNodes(doc, {"c1.1": (node.x, node.y)},
                                  {"c1.1": (node.x + 40, node.y)}))
    dock.check_stale()
    assert not dock.stale
    edit_links(doc, [doc.link_keys()[0]], "bandwidth", Fraction(7))
    qtbot.waitUntil(lambda: dock.stale, timeout=3000)
    assert dock.stale_label.isVisible()
    assert "stale" in dock.windowTitle()
    assert all(b.opacity() < 1 for b in dock.bars)
    doc.undo_stack.undo()
    qtbot.waitUntil(lambda: not dock.stale, timeout=3000)
    assert dock.stale_label.isHidden()
    assert all(b.opacity() == 1 for b in dock.bars)
    doc.set_topology(load_sample("mesh-2d-3x3"), None, display_name="mesh")
    # another topology was opened, not edited: its comparison is dropped, not "stale"
    assert dock.comparison is None and not dock.stale and dock.stale_label.isHidden()
    assert dock.pages.currentIndex() == 0
    with _finished(dock, qtbot):
        dock.again_button.click()
    assert not dock.stale and dock.comparison.compute_nodes == 9
    assert dock.comparison.sizes == (1 << 20,)


def test_a_failed_link_marks_the_comparison_stale(fig2, qtbot):
    # The comparison runs on the live links only, so failing one changes what it would
    # show: the shown results are stale until the link is back.
    dock = run(fig2, qtbot, sizes=(1 << 20,))
    doc = fig2.doc
    edit_links(doc, [doc.link_keys()[0]], "failed", True)
    qtbot.waitUntil(lambda: dock.stale, timeout=3000)
    assert dock.stale_label.isVisible()
    doc.undo_stack.undo()
    qtbot.waitUntil(lambda: not dock.stale, timeout=3000)


def test_cancel_stops_the_comparison_promptly(window, qtbot):
    window.doc.set_topology(dgx_a100_cluster(16), None, display_name="16 DGX")
    dock = window.compare.dock
    controller = window.solver.controller
    seen = []
    controller.progress.connect(lambda phase, fraction: seen.append(phase))
    window.compare.start(collective="allgather", sizes=SIZES)
    assert dock.is_running() and not window.named_actions["compare"].isEnabled()
    assert not dock.progress.isHidden() and not dock.cancel_button.isHidden()
    assert window.compare.open_dialog() is None     # one engine job at a time
    qtbot.waitUntil(lambda: len(seen) >= 2, timeout=30000)
    start = time.perf_counter()
    with qtbot.waitSignal(controller.cancelled, timeout=10000):
        dock.cancel_button.click()
    assert time.perf_counter() - start < 2.0
    assert not dock.is_running() and dock.comparison is None
    assert dock.progress.isHidden() and "cancelled" in dock.summary.text()
    assert window.named_actions["compare"].isEnabled()


def test_engine_errors_appear_in_a_dialog(window, qtbot, dialogs):
    unbalanced = Topology("u", [Node("a"), Node("b")],
                          [Link("a", "b", Fraction(1), duplex=False),
                           Link("b", "a", Fraction(2), duplex=False)])
    window.doc.set_topology(unbalanced, None, display_name="u")
    run(window, qtbot, sizes=(1 << 20,))
    kind, title, text = dialogs.calls[-1]
    assert kind == "critical" and "unbalanced" in text and "Comparing" in title
    assert window.compare.dock.comparison is None
    assert "unbalanced" in window.compare.dock.summary.text()


def test_rows_left_out_for_time_can_be_run_in_full_from_the_dialog(fig2, qtbot, monkeypatch):
    """From SLOW_FROM GPUs compare leaves TACOS and Blink out; the table says how to run
    them from this window (not a command-line flag), and the dialog's check box does."""
    from dataclasses import replace

    from canopy.app.docks.compare import FULL_OPTION
    from canopy.engine.comparison.table import SLOW

    dock = run(fig2, qtbot, collective="allgather", sizes=(1 << 20,))
    comp = dock.comparison
    tacos = comp.row("tacos")
    left_out = replace(tacos, algbw=None, omitted=True, times_us={},
                       reason="omitted at 1024 GPUs: slow; ask for it by name (canopy "
                              "compare --algorithms tacos).")
    dock.show_comparison(replace(comp, rows=[r if r is not tacos else left_out
                                             for r in comp.rows]))
    shown = next(t for t in dock.table_text() if t[0] == display_name("tacos"))
    assert shown[1].startswith("n/a: omitted at 1024 GPUs (slow); tick")
    assert FULL_OPTION in shown[1] and "canopy" not in shown[1]
    started = {}
    monkeypatch.setattr(dock.controller, "run",
                        lambda *args, **kwargs: started.update(kwargs) or False)
    dialog = fig2.compare.open_dialog()
    assert not dialog.full.isChecked()
    dialog.full.setChecked(True)
    dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok).click()
    assert set(started["force"]) == {"forestcoll", *SLOW}


def test_no_stray_tab_bar_covers_the_compare_dock(window, qtbot):
    """Every shown dock tab bar is the only one holding its docks and names them by their
    titles now; none covers the Compare dock's title (Qt leaves a stray bar for a group
    tabified while the window is hidden: canopy.app.tab_bars)."""
    import shiboken6
    from PySide6.QtCore import QRect
    from PySide6.QtWidgets import QDockWidget, QTabBar

    window.resize(1280, 800)
    dock = window.compare.dock
    dock.show()
    dock.raise_()
    qtbot.waitUntil(lambda: dock.isVisible())
    titles = {shiboken6.getCppPointer(d)[0]: d.windowTitle()
              for d in window.findChildren(QDockWidget)}
    bars = [b for b in window.findChildren(QTabBar) if b.parent() is window and b.isVisible()]
    held = [b.tabData(i) for b in bars for i in range(b.count())]
    assert len(held) == len(set(held))
    assert all(b.tabText(i) == titles[b.tabData(i)] for b in bars for i in range(b.count()))
    title = QRect(dock.mapTo(window, dock.rect().topLeft()), dock.rect().size())
    title.setHeight(dock.widget().mapTo(dock, dock.widget().rect().topLeft()).y())
    assert title.height() > 0
    covering = [[b.tabText(i) for i in range(b.count())] for b in bars
                if QRect(b.mapTo(window, b.rect().topLeft()), b.size()).intersects(title)]
    assert covering == []
