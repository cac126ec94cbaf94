"""``canopy gui [FILE] [--solve [COLLECTIVE]] [--screenshot OUT.png] [--size WxH]``: the
topology editor.

Without FILE the editor opens the embedded default sample (2 x DGX A100). ``--solve``
starts solving (allgather unless another collective is named) as the window opens. With
``--screenshot`` the window is rendered to a PNG and the program exits, after the solve
if one was asked for (showing the bottleneck cut and the first tree); no display is
needed (Qt's offscreen platform is used when there is none).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from canopy.engine.io.topology_json import (
    DEFAULT_SAMPLE,
    atomic_write_bytes,
    load_sample,
    load_topology,
)
from canopy.engine.model.collectives import COLLECTIVES
from canopy.engine.model.errors import CanopyError
from canopy.engine.model.topology import Topology

if TYPE_CHECKING:
    from canopy.app.main_window import MainWindow


def parse_size(text: str) -> tuple[int, int]:
    try:
        width, height = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"size '{text}' is not WIDTHxHEIGHT, e.g. 1280x800") from None
    if not (200 <= width <= 8000 and 150 <= height <= 8000):
        raise argparse.ArgumentTypeError(f"size '{text}' is outside 200x150 .. 8000x8000")
    return width, height


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gui", help="open the topology editor (the default command)")
    p.add_argument("file", nargs="?", help="canopy-topology JSON file to open")
    p.add_argument("--solve", nargs="?", const="allgather", choices=(*COLLECTIVES, "alltoall"),
                   metavar="COLLECTIVE", help="solve on opening (allgather unless one of "
                   f"{', '.join(COLLECTIVES[1:])} is named)")
    p.add_argument("--advise", nargs="?", const="allgather", choices=COLLECTIVES,
                   metavar="COLLECTIVE", help="run the Design dock's advice on opening "
                   "and show the dock (allgather unless another collective is named)")
    p.add_argument("--screenshot", metavar="OUT.png",
                   help="render the window to this PNG and exit")
    p.add_argument("--size", type=parse_size, default=(1280, 800), metavar="WxH",
                   help="window size for --screenshot (default 1280x800)")
    p.set_defaults(run=run)


def need_display(screenshot: bool, what: str) -> None:
    """Render offscreen for a screenshot when there is no display; without a display and
    without a screenshot, say so in one sentence (Qt would abort with a library hint)."""
    headless = sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    if screenshot and headless:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    elif headless and not os.environ.get("QT_QPA_PLATFORM"):
        raise CanopyError(f"there is no display to open {what} on (DISPLAY is not set); "
                          "add --screenshot OUT.png to render it without one.")


def run(args: argparse.Namespace) -> int:
    need_display(bool(args.screenshot), "the editor")
    topology: Topology | None = None
    error = None
    if args.file:
        try:
            topology = load_topology(args.file)
        except CanopyError as exc:
            if args.screenshot:
                raise
            error = str(exc)

    from PySide6.QtGui import QIcon
    from PySide6.QtWidgets import QApplication, QMessageBox

    from canopy.app import heap, settings
    from canopy.app.error_hook import install_error_hook
    from canopy.app.job_runner import warm_up
    from canopy.app.main_window import MainWindow
    from canopy.app.memory_watch import install_memory_watch
    from canopy.app.resources import icon_path

    if os.environ.get("QT_QPA_PLATFORM") == "offscreen":
        _quiet_offscreen_warnings()
    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(sys.argv[:1])
    app.setApplicationName("Canopy")
    app.setOrganizationName("Canopy")
    app.setApplicationDisplayName("Canopy")
    app.setWindowIcon(QIcon(str(icon_path())))
    heap.settle_start_up()
    warm_up()
    window = MainWindow()
    install_error_hook(window)
    install_memory_watch()
    if topology is not None:
        window.doc.set_topology(topology, Path(args.file))
        if not args.screenshot:
            settings.add_recent_file(Path(args.file))
    else:
        window.doc.set_topology(load_sample(), None, display_name=DEFAULT_SAMPLE)
    solve = getattr(args, "solve", None)
    failure = None
    if args.screenshot:
        if solve:
            window.resize(*args.size)
            window.show()
            if solve == "alltoall":
                window.alltoall.solve()
                window.alltoall.wait()
                app.processEvents()
            else:
                failure = window.solver.solve_and_wait(solve)
        if getattr(args, "advise", None) and not failure:
            failure = advise_and_wait(window, args.advise, args.size)
        if not failure:
            write_screenshot(window, Path(args.screenshot), args.size)
            print(f"wrote {args.screenshot}")
        code = 0
    else:
        window.show()
        window.view.zoom_to_fit()
        if error:
            QMessageBox.critical(window, "Cannot open file", error)
        window.offer_recovery()
        if solve == "alltoall":
            window.alltoall.solve()
        elif solve:
            window.solver.controller.solve(solve)
        if getattr(args, "advise", None):
            show_design(window, args.advise)
            if not solve:
                window.design.start()
        code = app.exec()
    name = window.doc.display_name
    # tear the window down while Qt is still alive (avoids crashes at interpreter exit)
    window.close()
    window.deleteLater()
    app.processEvents()
    del window
    if failure:
        raise CanopyError(f"cannot solve {name}: {failure}")
    return code


def show_design(window: MainWindow, collective: str) -> None:
    """Raise the Design dock with ``collective`` chosen, a third of the window high."""
    from PySide6.QtCore import Qt

    window.design.collective.setCurrentText(collective)
    window.design.show()
    window.design.raise_()
    window.resizeDocks([window.design], [max(300, window.height() * 2 // 5)],
                       Qt.Orientation.Vertical)


def advise_and_wait(window: MainWindow, collective: str, size: tuple[int, int]) -> str | None:
    """Show the window at ``size``, run the Design dock's advice and wait for it; the
    engine's sentence when it failed, else None."""
    from PySide6.QtWidgets import QApplication

    window.resize(*size)
    window.show()
    show_design(window, collective)
    failures: list[str] = []
    window.solver.controller.failed.connect(lambda _what, message: failures.append(message))
    if window.design.start():
        window.solver.controller.wait(600_000)
    QApplication.processEvents()
    return failures[0] if failures else None


def _quiet_offscreen_warnings() -> None:
    """Drop the offscreen plugin's notice that it cannot resize windows to size hints."""
    from PySide6.QtCore import qInstallMessageHandler

    previous = None

    def handler(mode: object, context: object, message: str) -> None:
        if "propagateSizeHints" in message:
            return
        if previous is not None:
            previous(mode, context, message)
        else:
            print(message, file=sys.stderr)

    previous = qInstallMessageHandler(handler)


def write_screenshot(window: MainWindow, path: Path, size: tuple[int, int]) -> None:
    """Show ``window`` at ``size``, fit the drawing, and write it as a PNG atomically."""
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice
    from PySide6.QtWidgets import QApplication

    window.resize(*size)
    window.show()
    QApplication.processEvents()
    window.validation.check_now()
    window.view.zoom_to_fit()
    QApplication.processEvents()
    window.view.settle_labels()
    QApplication.processEvents()
    pixmap = window.grab()
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    pixmap.save(buffer, "PNG")
    buffer.close()
    atomic_write_bytes(path, bytes(data.data()))
