"""Editor performance on a 2,048-GPU topology; prints JSON.

The topology: 256 servers of 8 GPUs on an NVSwitch (300 GB/s per GPU), each GPU with a
25 GB/s rail link to a leaf switch (8 rails x 4 leaves), 32 leaves x 8 spines at 200 GB/s.
It has no coordinates, so opening it includes the automatic layout.

Measured (offscreen, so the numbers are CPU painting only):
- open: load the file, lay it out, build the scene, show the window, first full paint;
- frame times while panning and zooming, at zoom-to-fit and at 100 %, each frame a full
  repaint of the view (the worst case); and scrolling at 100 % the way Qt does it for a
  user, repainting only the strip that scrolled into view;
- one link edit at 100 %: the time until model and scene items are up to date, the
  repaint that follows, and proof that nothing was rebuilt (the scene's item set is
  unchanged and ``rebuild`` is never called);
- the live validation check.

Run: QT_QPA_PLATFORM=offscreen .venv/bin/python bench/gui_large_topology.py
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("CANOPY_RECOVERY_DIR", tempfile.mkdtemp(prefix="canopy-bench-"))

from PySide6.QtWidgets import QApplication  # noqa: E402

from canopy.app.commands import edit_links  # noqa: E402
from canopy.app.main_window import MainWindow  # noqa: E402
from canopy.engine.io.topology_json import save_topology  # noqa: E402
from canopy.engine.model.topology import Link, Node, Topology  # noqa: E402

SERVERS, GPUS, RAILS, LEAVES_PER_RAIL, SPINES = 256, 8, 8, 4, 8


def rail_optimised_cluster() -> Topology:
    nodes, links = [], []
    for s in range(SERVERS):
        group = f"n{s}"
        nodes.append(Node(f"{group}.nvswitch", "switch", "", group))
        for g in range(GPUS):
            gpu = f"{group}.gpu{g}"
            nodes.append(Node(gpu, "compute", "", group))
            links.append(Link(gpu, f"{group}.nvswitch", Fraction(300)))
            leaf = f"leaf{g}.{s * LEAVES_PER_RAIL // SERVERS}"
            links.append(Link(gpu, leaf, Fraction(25)))
    per_leaf = SERVERS // LEAVES_PER_RAIL
    for r in range(RAILS):
        for i in range(LEAVES_PER_RAIL):
            nodes.append(Node(f"leaf{r}.{i}", "switch"))
            for p in range(SPINES):
                links.append(Link(f"leaf{r}.{i}", f"spine{p}",
                                  Fraction(25 * per_leaf, SPINES)))
    nodes += [Node(f"spine{p}", "switch") for p in range(SPINES)]
    return Topology(name="256 x 8 GPUs, rail-optimised", nodes=nodes, links=links)


def frame_ms(window: MainWindow, step: object, frames: int) -> list[float]:
    """Apply ``step`` then repaint synchronously, ``frames`` times; milliseconds each."""
    viewport = window.view.viewport()
    times = []
    for _ in range(frames):
        start = time.perf_counter()
        step()  # type: ignore[operator]
        viewport.repaint()
        times.append((time.perf_counter() - start) * 1000)
    return times


def scroll_ms(app: QApplication, window: MainWindow, frames: int) -> list[float]:
    """Pan as a user does: scroll, then let Qt repaint only what scrolled into view."""
    times = []
    for _ in range(frames):
        start = time.perf_counter()
        window.view.pan_by(15, 0)
        app.processEvents()
        times.append((time.perf_counter() - start) * 1000)
    return times


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {"median_ms": round(statistics.median(ordered), 2),
            "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 2),
            "max_ms": round(ordered[-1], 2), "frames": len(ordered)}


def main() -> int:
    app = QApplication.instance() or QApplication(sys.argv[:1])
    topo = rail_optimised_cluster()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cluster.json"
        save_topology(topo, path)

        start = time.perf_counter()
        window = MainWindow()
        window.resize(1600, 1000)
        assert window.open_path(path)
        window.show()
        app.processEvents()
        window.view.viewport().repaint()
        open_s = time.perf_counter() - start

        view = window.view
        view.zoom_to_fit()
        fit_zoom = view.zoom()
        pan_fit = frame_ms(window, lambda: view.pan_by(12, 6), 60)
        zoom_in = frame_ms(window, lambda: view.set_zoom(1.06), 40)
        zoom_out = frame_ms(window, lambda: view.set_zoom(1 / 1.06), 40)
        view.reset_zoom()
        view.centerOn(window.scene.node_item("n100.gpu3").pos())
        pan_100 = frame_ms(window, lambda: view.pan_by(15, 0), 60)
        scroll_100 = scroll_ms(app, window, 60)

        doc, scene = window.doc, window.scene
        items_before = {id(i) for i in scene.items()}
        rebuilds = []
        original_rebuild = scene.rebuild
        scene.rebuild = lambda: rebuilds.append(1)  # type: ignore[method-assign]
        key = doc.link_keys()[1234]
        start = time.perf_counter()
        edit_links(doc, [key], "bandwidth", Fraction(50))
        edit_ms = (time.perf_counter() - start) * 1000
        start = time.perf_counter()
        app.processEvents()
        repaint_ms = (time.perf_counter() - start) * 1000
        unchanged = {id(i) for i in scene.items()} == items_before
        scene.rebuild = original_rebuild  # type: ignore[method-assign]

        window.validation.check_now()
        result = {
            "topology": {"nodes": len(doc.topology.nodes),
                         "compute": len(doc.topology.compute_nodes()),
                         "links": len(doc.topology.links),
                         "scene_items": len(scene.items())},
            "open_seconds": round(open_s, 3),
            "zoom_to_fit_factor": round(fit_zoom, 4),
            "pan_at_fit": summary(pan_fit),
            "zoom_in_from_fit": summary(zoom_in),
            "zoom_out": summary(zoom_out),
            "pan_at_100_percent": summary(pan_100),
            "scroll_at_100_percent_incremental": summary(scroll_100),
            "link_edit_model_and_scene_ms": round(edit_ms, 2),
            "link_edit_repaint_ms": round(repaint_ms, 2),
            "link_edit_rebuilt_scene": bool(rebuilds) or not unchanged,
            "validation_check_ms": round(window.validation.last_check_seconds * 1000, 1),
            "platform": QApplication.platformName(),
        }
        doc.undo_stack.setClean()
        window.close()
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
