"""CPU time of the canvas's level-of-detail pass (names, bandwidths, collapsed servers);
prints JSON.

After every zoom the scene places every node name and link bandwidth without overlaps
(:mod:`canopy.app.canvas.lod`). This measures that pass with ``time.process_time()`` on
generated rail clusters of 128, 512 and 2,048 GPUs, at 100 % and at Zoom to Fit, in a
1280 x 800 window (drawings of more than 1,000 nodes are labelled only around the part on
screen, so "names" counts what was placed there).

Run: QT_QPA_PLATFORM=offscreen .venv/bin/python -m bench.label_placement
"""

from __future__ import annotations

import json
import os
import tempfile
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("CANOPY_RECOVERY_DIR", tempfile.mkdtemp(prefix="canopy-bench-"))

from PySide6.QtWidgets import QApplication  # noqa: E402

from canopy.app.main_window import MainWindow  # noqa: E402
from canopy.engine.generators.cluster import cluster  # noqa: E402

REPEATS = 3


def measure(window: MainWindow, zoom: float) -> dict:
    scene, view = window.scene, window.view
    view.set_zoom(zoom / view.zoom())
    times = []
    for _ in range(REPEATS):
        start = time.process_time()
        scene.set_zoom(zoom, view.label_area())
        times.append(time.process_time() - start)
    shown = sum(1 for n in scene.node_items() if n.name_label.text)
    bandwidths = sum(1 for link in scene.link_items() if link.bandwidth_label.text)
    collapsed = sum(1 for g in scene.group_items() if g.collapsed)
    return {"zoom": round(zoom, 3), "cpu_s": round(min(times), 4), "names": shown,
            "bandwidths": bandwidths, "collapsed_servers": collapsed}


def main() -> None:
    app = QApplication.instance() or QApplication([])
    results = []
    for servers in (16, 64, 256):
        topo = cluster(servers, 8, "nvswitch", 300, 1, 25, 32, "rail", 0, "rail", 2, 2, 1)
        window = MainWindow()
        window.doc.set_topology(topo, None, display_name=f"{servers * 8} GPUs")
        window.resize(1280, 800)
        window.show()
        app.processEvents()
        window.view.zoom_to_fit()
        fit = window.view.zoom()
        results.append({"gpus": servers * 8, "nodes": len(topo.nodes),
                        "links": len(topo.links),
                        "at_100": measure(window, 1.0), "at_fit": measure(window, fit)})
        window.doc.undo_stack.setClean()
        window.close()
    print(json.dumps({"label_placement": results}, indent=1))


if __name__ == "__main__":
    main()
