"""Time to highlight a tree on a 512-GPU drawing (64 DGX A100 servers); print JSON.

The schedule is solved once in the editor's background job (k = 1 trees per node, the
optimum here; about a minute), then trees spread over the list are selected one after
another. Reported, in milliseconds (median and worst):

* ``canvas_ms``: the canvas part, hop numbers of the tree computed afresh and only the
  links of the previous and the new tree recoloured (:meth:`Overlays.show_tree`);
* ``select_ms``: a whole selection in the Trees dock (list, canvas, tree diagram and
  outline);
* ``repaint_fit_ms`` / ``repaint_zoomed_ms``: repainting the canvas afterwards, with the
  whole drawing in view and at 100 %.

Also ``show_results_ms``: applying a new solution to the docks and the canvas.
Usage: QT_QPA_PLATFORM=offscreen python -m bench.gui_tree_highlight [SERVERS]
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from PySide6.QtWidgets import QApplication

from bench.clusters import dgx_a100_cluster
from canopy.app.solution import hop_orders

SAMPLES = 30


def _ms(seconds: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(seconds) * 1000, 1),
            "worst": round(max(seconds) * 1000, 1)}


def main(servers: int = 64) -> None:
    app = QApplication.instance() or QApplication([])
    from canopy.app.main_window import MainWindow

    window = MainWindow(dgx_a100_cluster(servers))
    window.resize(1600, 1000)
    window.show()
    app.processEvents()
    inspector = window.solver
    start = time.perf_counter()
    error = inspector.solve_and_wait("allgather", k=1)
    if error:
        raise SystemExit(error)
    solve_s = time.perf_counter() - start
    solution = inspector.controller.solution
    assert solution is not None
    app.processEvents()

    start = time.perf_counter()
    inspector.controller.solution_changed.emit(solution)
    inspector.settle()
    show_results = time.perf_counter() - start
    app.processEvents()

    count = len(solution.trees)
    positions = [i * count // SAMPLES for i in range(SAMPLES)]
    canvas, select, repaint_fit, repaint_zoomed = [], [], [], []
    viewport = window.view.viewport()
    window.view.zoom_to_fit()
    app.processEvents()
    for position in positions:
        t = time.perf_counter()
        inspector.overlays.show_tree(hop_orders(solution.trees[position]))
        canvas.append(time.perf_counter() - t)
        inspector.overlays.show_tree(None)
        t = time.perf_counter()
        inspector.trees.select_position(position)
        select.append(time.perf_counter() - t)
        t = time.perf_counter()
        viewport.repaint()
        repaint_fit.append(time.perf_counter() - t)
    window.view.reset_zoom()
    window.view.centerOn(window.scene.node_item(solution.trees[0].tree.root))
    app.processEvents()
    for position in positions[:10]:
        inspector.trees.select_position(position + 1)
        t = time.perf_counter()
        viewport.repaint()
        repaint_zoomed.append(time.perf_counter() - t)
    tree_links = len(inspector.overlays.tree_link_keys())
    print(json.dumps({
        "case": f"{servers}x DGX A100 ({len(solution.schedule.compute_nodes)} GPUs, "
                f"{len(window.doc.topology.links)} links)",
        "solve_s": round(solve_s, 1), "trees": count, "links_per_tree": tree_links,
        "show_results_ms": round(show_results * 1000, 1),
        "canvas_ms": _ms(canvas), "select_ms": _ms(select),
        "repaint_fit_ms": _ms(repaint_fit), "repaint_zoomed_ms": _ms(repaint_zoomed)}))
    window.doc.undo_stack.setClean()
    window.close()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 64)
