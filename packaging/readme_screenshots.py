"""Render the README's screenshots into resources/ (or another folder), offscreen.

    QT_QPA_PLATFORM=offscreen .venv/bin/python packaging/readme_screenshots.py [OUT_DIR] [WxH]

Writes screenshot-editor.png (the default sample), screenshot-solve.png (2 x DGX A100
solved: results, the cut in words, the first tree), screenshot-compare.png (Compare
Algorithms), screenshot-generator.png (New from Generator) and screenshot-cluster.png
(16 x 8 GPUs at fit: a grid of servers), all at 1280 x 800 unless a size is given.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QBuffer, QByteArray, QEventLoop, QIODevice, Qt, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication, QWidget  # noqa: E402

from canopy.app.main_window import MainWindow  # noqa: E402
from canopy.engine.generators.cluster import cluster  # noqa: E402
from canopy.engine.io.topology_json import DEFAULT_SAMPLE, load_sample  # noqa: E402


def grab(widget: QWidget, path: Path) -> None:
    QApplication.processEvents()
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    widget.grab().save(buffer, "PNG")
    buffer.close()
    path.write_bytes(bytes(data.data()))
    print(f"wrote {path}")


def wait(ms: int) -> None:
    loop = QEventLoop()
    QTimer.singleShot(ms, loop.quit)
    loop.exec()


def window_on(topology: object, name: str, size: tuple[int, int]) -> MainWindow:
    window = MainWindow()
    window.doc.set_topology(topology, None, display_name=name)
    window.resize(*size)
    window.show()
    QApplication.processEvents()
    window.view.zoom_to_fit()
    return window


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("resources")
    size = tuple(int(v) for v in sys.argv[2].split("x")) if len(sys.argv) > 2 else (1280, 800)
    out.mkdir(parents=True, exist_ok=True)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Canopy")

    editor = window_on(load_sample(), DEFAULT_SAMPLE, size)
    grab(editor, out / "screenshot-editor.png")

    solve = window_on(load_sample("dgx-a100-2x8"), "dgx-a100-2x8", size)
    failure = solve.solver.solve_and_wait("allgather")
    if failure:
        raise SystemExit(failure)
    wait(200)
    grab(solve, out / "screenshot-solve.png")

    compare = window_on(load_sample("dgx-a100-2x8"), "dgx-a100-2x8", size)
    dock = compare.compare.dock
    dock.start("allreduce")
    compare.solver.controller.wait(600000)
    dock.raise_()
    compare.resizeDocks([dock], [int(size[1] * 0.42)], Qt.Orientation.Vertical)
    wait(200)
    compare.view.zoom_to_fit()
    grab(compare, out / "screenshot-compare.png")

    generator = window_on(load_sample(), DEFAULT_SAMPLE, size)
    dialog = generator.library.new_from_generator()
    dialog.set_kind("cluster")
    dialog.current_form().set_texts({"servers": "4", "scale_out": "leaf-spine",
                                     "oversubscription": "2"})
    dialog.resize(1100, 700)
    for _ in range(50):
        if dialog.up_to_date():
            break
        wait(100)
    wait(200)
    grab(dialog, out / "screenshot-generator.png")
    dialog.reject()

    big = window_on(cluster(16, 8, "nvswitch", 300, 1, 25, 32, "rail", 0, "rail", 2, 2, 1),
                    "16 x 8 GPUs", size)
    grab(big, out / "screenshot-cluster.png")

    for window in (editor, solve, compare, generator, big):
        window.doc.undo_stack.setClean()
        window.close()
    return 0

if __name__ == "__main__":
    sys.exit(main())
