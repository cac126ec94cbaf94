"""File ▸ Export: MSCCL XML, the trees listing, the schedule JSON and a canvas image.

Every file is written atomically (a temporary file renamed over the target), and every
failure, MSCCL's runtime limits included, is shown as a dialog with one sentence. The
MSCCL export runs in the background: laying out a large schedule, running Canopy's
simulator on the XML and, when the limits are exceeded, finding the largest fixed k that
fits (by solving again) can all take a while.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QRectF, QSize
from PySide6.QtGui import QAction, QColor, QFontDatabase, QImage, QPainter
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import (
    QApplication,
    QButtonGroup,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QLabel,
    QMessageBox,
    QPlainTextEdit,
    QRadioButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from canopy.app.canvas.scene import TopologyScene
from canopy.app.compute import ComputeController
from canopy.engine.deploy.msccl_export import export_msccl as write_msccl_files
from canopy.engine.deploy.nccl_graph import NcclGraph, export_nccl_graph
from canopy.engine.deploy.run_commands import run_command
from canopy.engine.forestcoll.solve import is_symmetric, solve
from canopy.engine.generators.gpu_models import gpu_of
from canopy.engine.io.schedule_json import save_schedule
from canopy.engine.io.topology_json import atomic_write_bytes
from canopy.engine.io.trees_xml import write_trees_xml
from canopy.engine.model.collectives import COLLECTIVES
from canopy.engine.model.errors import CanopyError
from canopy.engine.model.progress import Progress
from canopy.engine.model.schedule import Schedule
from canopy.engine.model.topology import Topology, format_gbps
from canopy.engine.msccl import (
    RUNTIMES,
    MscclLimits,
    MscclOptions,
)
from canopy.engine.network.indexed import Network
from canopy.engine.network.servers import compute_nodes_by_server

if TYPE_CHECKING:
    from canopy.app.main_window import MainWindow

LIMITS = MscclLimits()
"""The runtime limits MSCCL exports are laid out within."""
IMAGE_SCALE = 2.0
MAX_IMAGE_SIDE = 8000
IMAGE_MARGIN = 24.0


@dataclass(frozen=True)
class MscclChoice:
    """What the MSCCL export dialog asked for."""

    collective: str
    inplace: bool
    channels: int = MscclOptions.channels
    runtime: str = MscclOptions.runtime
    limits: MscclLimits = field(default_factory=lambda: LIMITS)

    def options(self) -> MscclOptions:
        return MscclOptions(inplace=self.inplace, channels=self.channels,
                            runtime=self.runtime, limits=self.limits)


class RunCommandDialog(QDialog):
    """After an export: what was written, and the command that runs it on the cluster."""

    def __init__(self, path: Path, summary: str, command: str,
                 parent: QWidget | None = None,
                 how: str = "Run it with nccl-tests on the cluster (adjust the path and the "
                            "binary's folder):") -> None:
        super().__init__(parent)
        self.setWindowTitle("Exported: run it on the cluster")
        layout = QVBoxLayout(self)
        lines = "<br>".join(html.escape(line if line.endswith(".") else f"{line}.")
                            for line in summary.split("\n"))   # a line per file (export_msccl)
        about = QLabel(f"<b>{html.escape(path.name)}</b>: {lines}<br>{html.escape(how)}")
        about.setWordWrap(True)
        layout.addWidget(about)
        self.command = QPlainTextEdit(command)
        self.command.setReadOnly(True)
        self.command.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.command.setMinimumSize(560, 110)
        layout.addWidget(self.command)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        copy = buttons.addButton("Copy Command", QDialogButtonBox.ButtonRole.ActionRole)
        copy.clicked.connect(lambda: QApplication.clipboard().setText(command))
        buttons.rejected.connect(self.close)
        layout.addWidget(buttons)


class MscclExportDialog(QDialog):
    """Collective, in place or out of place, channels and runtime of an MSCCL export."""

    def __init__(self, schedule: Schedule, collectives: list[str],
                 parent: QWidget | None = None, topology: Topology | None = None):
        super().__init__(parent)
        self.setWindowTitle("Export MSCCL XML")
        gpu = gpu_of(topology) if topology is not None else None
        layout = QVBoxLayout(self)
        form = QFormLayout()
        self.collective = QComboBox()
        self.collective.addItems(collectives)
        self.collective.setCurrentText(schedule.collective)
        form.addRow("Collective", self.collective)
        self.inplace = QRadioButton("In place")
        self.out_of_place = QRadioButton("Out of place")
        self.inplace.setChecked(True)
        group = QButtonGroup(self)
        group.addButton(self.inplace)
        group.addButton(self.out_of_place)
        buffers = QVBoxLayout()
        buffers.addWidget(self.inplace)
        buffers.addWidget(self.out_of_place)
        form.addRow("Buffers", buffers)
        self.channels = QSpinBox()
        self.channels.setRange(1, LIMITS.max_channels)
        self.channels.setValue(MscclOptions.channels)
        self.channels.setToolTip("Channels relays may spread over: more thread blocks run in "
                                 "parallel, at the cost of more connection buffers.")
        form.addRow("Channels", self.channels)
        self.runtime = QComboBox()
        self.runtime.addItems(RUNTIMES)
        self.runtime.setToolTip("microsoft/msccl and RCCL name reduce-scatter differently.")
        form.addRow("Runtime", self.runtime)
        self.sms = QSpinBox()
        self.sms.setRange(1, 4096)
        self.sms.setValue(gpu.sms if gpu else LIMITS.max_tbs_per_gpu)
        self.sms.setToolTip("SMs (compute units) per GPU: the most thread blocks the program "
                            "may keep resident on one GPU"
                            + (f"; from {gpu.source} SMs." if gpu else "."))
        form.addRow("Thread blocks per GPU", self.sms)
        if gpu is not None:
            self.runtime.setCurrentText(gpu.runtime)
        layout.addLayout(form)
        if len(collectives) == 1:
            note = QLabel("Some links are one-way, so the trees serve only the collective "
                          "they were solved for.")
            note.setWordWrap(True)
            layout.addWidget(note)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)

    def choice(self) -> MscclChoice:
        return MscclChoice(self.collective.currentText(), self.inplace.isChecked(),
                           self.channels.value(), self.runtime.currentText(),
                           MscclLimits(max_tbs_per_gpu=self.sms.value()))

    @staticmethod
    def ask(parent: QWidget, schedule: Schedule, collectives: list[str],
            topology: Topology | None = None) -> MscclChoice | None:
        dialog = MscclExportDialog(schedule, collectives, parent, topology)
        return dialog.choice() if dialog.exec() == QDialog.DialogCode.Accepted else None


def export_msccl(topology: Topology, schedule: Schedule, choice: MscclChoice, path: Path,
                 progress: Progress) -> tuple[str, str | None]:
    """:func:`canopy.engine.deploy.msccl_export.export_msccl` as an engine job (a child
    process): the summary (a line per XML written, the config and the layout's note) and
    the config naming an XML per size range where one was written (else None)."""
    def solver(topo: Topology, collective: str, k: int) -> Schedule:
        return solve(topo, collective, k=k,
                     progress=lambda phase, f: progress(f"trying k = {k}: {phase}", f))

    done = write_msccl_files(topology, schedule, path, choice.options(), choice.collective,
                             progress, "Compute ▸ Solve with Fixed k…", solver)
    return "\n".join(done.lines()), done.config


def render_image(scene: TopologyScene, path: Path) -> None:
    """The drawing (with its overlays, without the selection) as PNG or, for ``.svg``, SVG."""
    scene.flush_groups()
    rect = scene.drawing_rect().adjusted(-IMAGE_MARGIN, -IMAGE_MARGIN,
                                         IMAGE_MARGIN, IMAGE_MARGIN)
    if rect.isEmpty():
        raise CanopyError("the drawing is empty, so there is no image to export.")
    selected_nodes, selected_links = scene.selected_node_ids(), scene.selected_link_keys()
    overview, zoom = scene.overview_on, scene.zoom
    svg = path.suffix.lower() == ".svg"
    scene.blockSignals(True)
    scene.clearSelection()
    scene.set_overview(False)
    scene.set_zoom(1.0 if svg else _png_scale(rect))  # names and bandwidths for that size
    try:
        data = _svg(scene, rect) if svg else _png(scene, rect)
    finally:
        scene.set_zoom(zoom)
        scene.set_overview(overview)
        scene.blockSignals(False)
        scene.select(selected_nodes, selected_links)
    atomic_write_bytes(path, data)


def _png_scale(rect: QRectF) -> float:
    return min(IMAGE_SCALE, MAX_IMAGE_SIDE / max(rect.width(), rect.height()))


def _png(scene: TopologyScene, rect: QRectF) -> bytes:
    scale = _png_scale(rect)
    image = QImage(max(1, int(rect.width() * scale)), max(1, int(rect.height() * scale)),
                   QImage.Format.Format_ARGB32)
    image.fill(QColor("white"))
    painter = QPainter(image)
    painter.setRenderHints(QPainter.RenderHint.Antialiasing
                           | QPainter.RenderHint.TextAntialiasing)
    scene.render(painter, QRectF(image.rect()), rect)
    painter.end()
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")  # type: ignore[call-overload]  # the stubs say bytes; PySide6 takes str
    buffer.close()
    return bytes(data.data())


def _svg(scene: TopologyScene, rect: QRectF) -> bytes:
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    generator = QSvgGenerator()
    generator.setOutputDevice(buffer)
    generator.setSize(QSize(int(rect.width()), int(rect.height())))
    generator.setViewBox(QRectF(0, 0, rect.width(), rect.height()))
    generator.setTitle("Canopy topology")
    painter = QPainter(generator)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    scene.render(painter, QRectF(0, 0, rect.width(), rect.height()), rect)
    painter.end()
    buffer.close()
    return bytes(data.data())


class Exporter:
    """The File ▸ Export actions of one window."""

    def __init__(self, window: MainWindow, controller: ComputeController):
        self.window = window
        self.controller = controller
        self.actions: dict[str, QAction] = {}
        for name, text, slot, tip in [
                ("export_mscclpp", "MSCCL++ &Plan…", self.export_mscclpp,
                 "Write the schedule as an MSCCL++ execution plan (checked by a symbolic run) "
                 "with a launcher, and show the command that runs it"),
                ("export_msccl", "&MSCCL XML…", self.export_msccl,
                 "Write the schedule as an MSCCL XML algorithm (checked by simulation)"),
                ("export_trees", "&Trees Listing (XML)…", self.export_trees,
                 "Write every tree with its routes as XML for reading"),
                ("export_json", "&Schedule JSON…", self.export_json,
                 "Write the schedule as canopy-schedule JSON"),
                ("export_image", "Canvas &Image (PNG or SVG)…", self.export_image,
                 "Write the drawing, with the shown overlays, as PNG or SVG"),
                ("export_nccl_graph", "&NCCL Graph File (rings for plain NCCL)…",
                 self.export_nccl_graph,
                 "Write Canopy's best ring set as an NCCL_GRAPH_FILE and show the command "
                 "that runs it")]:
            action = QAction(text, window)
            action.setStatusTip(tip)
            if name == "export_mscclpp":        # the default schedule export
                action.setShortcut("Ctrl+E")
            action.triggered.connect(lambda _=False, s=slot: s())
            self.actions[name] = action
        self.update()

    def update(self) -> None:
        """Schedule exports need fresh results (never a schedule of another topology)."""
        fresh = self.controller.fresh
        for name in ("export_mscclpp", "export_msccl", "export_trees", "export_json"):
            self.actions[name].setEnabled(fresh and not self.controller.busy)
        self.actions["export_nccl_graph"].setEnabled(not self.controller.busy)

    # ------------------------------------------------------------ helpers

    def _ask_path(self, title: str, suggested: str, filters: str) -> Path | None:
        start = self.window.doc.path.parent if self.window.doc.path else Path.cwd()
        path, _ = QFileDialog.getSaveFileName(self.window, title, str(start / suggested),
                                              filters)
        return Path(path) if path else None

    def _schedule(self) -> Schedule | None:
        self.controller.check_now()
        if not self.controller.fresh:
            QMessageBox.warning(self.window, "No current results",
                                "Solve the topology first (Compute ▸ Solve): there are no "
                                "results for the topology as it is now.")
            return None
        assert self.controller.solution is not None
        return self.controller.solution.schedule

    def _stem(self) -> str:
        name = self.window.doc.display_name
        return name[:-5] if name.endswith(".json") else name

    def _write(self, what: str, path: Path, write: Callable[[], None]) -> bool:
        try:
            write()
        except OSError as exc:
            QMessageBox.critical(self.window, f"Cannot export {what}",
                                 f"{path} cannot be written ({exc.strerror or exc}).")
            return False
        except CanopyError as exc:
            QMessageBox.critical(self.window, f"Cannot export {what}", str(exc))
            return False
        self.window.statusBar().showMessage(f"Exported {what} to {path}", 6000)
        return True

    # ------------------------------------------------------------ exports

    def export_json(self, path: Path | None = None) -> bool:
        schedule = self._schedule()
        if schedule is None:
            return False
        path = path or self._ask_path("Export schedule JSON",
                                      f"{self._stem()}.schedule.json",
                                      "Canopy schedule (*.json);;All files (*)")
        return path is not None and self._write("schedule JSON", path,
                                                lambda: save_schedule(schedule, path))

    def export_trees(self, path: Path | None = None) -> bool:
        schedule = self._schedule()
        if schedule is None:
            return False
        path = path or self._ask_path("Export trees listing", f"{self._stem()}.trees.xml",
                                      "XML (*.xml);;All files (*)")
        return path is not None and self._write("trees listing", path,
                                                lambda: write_trees_xml(path, schedule))

    def export_nccl_graph(self, path: Path | None = None) -> bool:
        """Build, write and check the NCCL graph of the drawing in the background, then
        show the command that runs it."""
        topology = self.window.doc.snapshot()
        path = path or self._ask_path("Export NCCL graph file", f"{self._stem()}.nccl-graph.xml",
                                      "NCCL graph XML (*.xml);;All files (*)")
        if path is None:
            return False
        target = path

        def done(graph: NcclGraph) -> None:
            summary = (f"{len(graph.channels)} ring channels, allgather bound "
                       f"{format_gbps(graph.algbw)} GB/s")
            self.window.statusBar().showMessage(f"Exported the NCCL graph to {target}: "
                                                f"{summary}", 10000)
            command = run_command("nccl-graph", target, "allgather",
                                  len(topology.compute_nodes()),
                                  len(compute_nodes_by_server(topology)[0]))
            self.run_dialog = RunCommandDialog(target, summary, command, self.window)
            self.run_dialog.show()

        return self.controller.run("Exporting the NCCL graph", done, export_nccl_graph,
                                   topology, target)

    def export_image(self, path: Path | None = None) -> bool:
        path = path or self._ask_path("Export canvas image", f"{self._stem()}.png",
                                      "PNG image (*.png);;SVG image (*.svg)")
        if path is None:
            return False
        if path.suffix.lower() not in (".png", ".svg"):
            path = path.with_suffix(".png")
        return self._write("image", path, lambda: render_image(self.window.scene, path))

    def msccl_collectives(self) -> list[str]:
        """Collectives the current trees can be exported as: all three on a network whose
        links all run both ways (ForestColl, arXiv:2402.06787, §4.6), otherwise only the
        solved one."""
        solution = self.controller.solution
        assert solution is not None
        if is_symmetric(Network.from_topology(solution.topology)):
            return list(COLLECTIVES)
        return [solution.schedule.collective]

    def export_mscclpp(self, path: Path | None = None, inplace: bool | None = None) -> bool:
        """File ▸ Export ▸ MSCCL++ Plan (:mod:`canopy.app.mscclpp_export`)."""
        from canopy.app.mscclpp_export import export_mscclpp_plan
        return export_mscclpp_plan(self, path, inplace)

    def export_msccl(self, path: Path | None = None, choice: MscclChoice | None = None
                     ) -> bool:
        """Ask for the options and the file, then export in the background."""
        schedule = self._schedule()
        if schedule is None:
            return False
        assert self.controller.solution is not None
        topology = self.controller.solution.topology
        choice = choice or MscclExportDialog.ask(self.window, schedule,
                                                 self.msccl_collectives(), topology)
        if choice is None:
            return False
        mode = "inplace" if choice.inplace else "outofplace"
        path = path or self._ask_path("Export MSCCL XML",
                                      f"{self._stem()}.{choice.collective}.{mode}.xml",
                                      "MSCCL XML (*.xml);;All files (*)")
        if path is None:
            return False
        target = path

        def done(result: tuple[str, str | None]) -> None:
            summary, config = result
            self.window.statusBar().showMessage(
                f"Exported MSCCL XML to {target}: {summary.replace(chr(10), '; ')}", 10000)
            command = run_command(choice.runtime, target, choice.collective,
                                  len(schedule.compute_nodes),
                                  len(compute_nodes_by_server(topology)[0]), config)
            self.run_dialog = RunCommandDialog(target, summary, command, self.window)
            self.run_dialog.show()

        return self.controller.run("Exporting MSCCL XML", done, export_msccl, topology,
                                   schedule, choice, target)
