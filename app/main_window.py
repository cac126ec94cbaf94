"""The editor window: canvas in the middle, docks around it, menus and tool bars.

The window makes its docks and controllers (library, solve, export, compare, fabric),
registers every action by name in :attr:`MainWindow.named_actions` (not ``actions``: that
is QWidget's list of the widget's own actions), and lays out the menus and tool bars
from the one declaration in :mod:`canopy.app.shell`.
"""

from __future__ import annotations

import csv
import functools
from collections.abc import Callable, Generator
from fractions import Fraction
from pathlib import Path

import PySide6
from PySide6.QtCore import QRectF, Qt, qVersion
from PySide6.QtGui import QAction, QActionGroup, QCloseEvent, QKeySequence, QShowEvent
from PySide6.QtWidgets import (
    QApplication,
    QDockWidget,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMenu,
    QMessageBox,
    QUndoView,
    QWidget,
)

from canopy.app import clipboard, settings, shell
from canopy.app.alltoall_controller import AllToAllController
from canopy.app.canvas.interactions import (
    AddLink,
    AddNode,
    DeleteTool,
    Interaction,
    SelectMove,
)
from canopy.app.canvas.legend import BandwidthLegend
from canopy.app.canvas.scene import TopologyScene
from canopy.app.canvas.view import TopologyView
from canopy.app.commands import MoveNodes, ReplaceTopology, delete
from canopy.app.compare_controller import CompareController
from canopy.app.dialogs.sweep_results import SweepResultsDialog
from canopy.app.docks.design import DesignDock
from canopy.app.docks.properties import PropertiesDock, UnitNumberValidator, split_unit
from canopy.app.docks.validation import ValidationDock
from canopy.app.document import Document
from canopy.app.fabric_controller import FabricController
from canopy.app.find import FindBar
from canopy.app.library_controller import LibraryController
from canopy.app.naming import counted
from canopy.app.quick_start import QuickStart
from canopy.app.recovery import Autosaver, Recovered, orphaned
from canopy.app.shell import ActionRegistry
from canopy.app.solve_controller import SolveController
from canopy.app.tab_bars import hide_stray_tab_bars
from canopy.app.turns import END_TURN, Abandoned, run_in_turns
from canopy.app.versions import canopy_version, library_versions
from canopy.engine.io.topology_json import load_sample, load_topology, reading_steps, sample_names
from canopy.engine.model.auto_layout import auto_layout
from canopy.engine.model.errors import CanopyError, unreadable
from canopy.engine.model.topology import COMPUTE, SWITCH, Node, Topology, format_gbps
from canopy.engine.model.units import UNITS, from_gbps, to_gbps
from canopy.engine.network.maxflow import default_backend
from canopy.engine.sweep.runner import read_rows

FILE_FILTER = "Canopy topology (*.json);;All files (*)"


def opening_steps(path: Path) -> Generator[object, None, Topology]:
    """Read ``path`` (:func:`~canopy.engine.io.topology_json.reading_steps`), then lay out
    the nodes without coordinates in a turn of its own (a noticeable pause on a large
    drawing), ready for :meth:`Document.set_topology
    <canopy.app.document.Document.set_topology>`."""
    topology = yield from reading_steps(path)
    yield END_TURN
    auto_layout(topology)
    yield END_TURN
    return topology


class MainWindow(QMainWindow):
    """One document in one window."""

    def __init__(self, topology: Topology | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.doc = Document(topology or Topology(), parent=self)
        if topology is not None:
            self.doc.display_name = topology.name
        self.scene = TopologyScene(self.doc, self)
        self.view = TopologyView(self.scene, self)
        self.setCentralWidget(self.view)
        self.bandwidth_legend = BandwidthLegend(self.view.viewport())
        self.view.add_overlay(self.bandwidth_legend)
        self.scene.bandwidths_changed.connect(self._show_bandwidth_classes)
        self._show_bandwidth_classes(self.scene.bandwidth_classes)
        self.properties = PropertiesDock(self.doc, self.scene, self)
        self.validation = ValidationDock(self.doc, self)
        self.history = QDockWidget("Undo History", self)
        self.history.setObjectName("UndoHistoryDock")
        self.history.setWidget(QUndoView(self.doc.undo_stack))
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.properties)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.history)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.validation)
        self.autosaver = Autosaver(self.doc, parent=self)
        self.autosaver.failed.connect(lambda text: self.statusBar().showMessage(text, 10000))
        self.named_actions = ActionRegistry()
        self.named_actions.register(self._create_actions())
        self._build_status_bar()
        # Controllers, each owning its actions and docks; the compare and fabric ones run
        # their engine jobs through the solve controller's ComputeController.
        self.library = LibraryController(self)
        self.solver = SolveController(self)
        self.compare = CompareController(self, self.solver.controller)
        self.fabric = FabricController(self, self.solver.controller)
        self.alltoall = AllToAllController(self, self.solver.controller)
        self.design = DesignDock(self.doc, self.solver.controller, self.scene, self)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.design)
        self.tabifyDockWidget(self.validation, self.design)
        self.validation.raise_()
        self.properties.raise_()        # the controllers tabified their docks over it
        for owner in (self.library, self.solver, self.solver.exporter, self.compare,
                      self.fabric, self.alltoall):
            self.named_actions.register(owner.actions)
        self.named_actions.register({f"dock_{name}": dock.toggleViewAction() for name, dock in [
            ("properties", self.properties), ("validation", self.validation),
            ("history", self.history), ("results", self.solver.results),
            ("trees", self.solver.trees), ("plots", self.solver.plots),
            ("compare", self.compare.dock), ("jobs", self.fabric.dock),
            ("alltoall", self.alltoall.dock), ("design", self.design)]})
        self.menus, self.toolbars = shell.build(
            self, self.named_actions,
            fillers={"samples": self._fill_samples_menu, "recent": self._fill_recent_menu},
            widgets={"new_link_bandwidth": self._new_link_bandwidth_field(),
                     "solve_button": self.solver.solve_button})
        self.find_bar = FindBar(self)
        self.addToolBar(Qt.ToolBarArea.BottomToolBarArea, self.find_bar)
        self._short_toolbar_texts()
        self.doc.undo_stack.cleanChanged.connect(self._update_title)
        self.doc.path_changed.connect(self._update_title)
        self.doc.reset.connect(self._after_reset)
        self.doc.edited.connect(self._update_counts)
        self.scene.tool_finished.connect(lambda: self.named_actions["tool_select"].trigger())
        self.validation.culprits_activated.connect(self.show_culprits)
        self.validation.summary_changed.connect(self._show_validation_summary)
        self.view.zoom_changed.connect(
            lambda z: self.zoom_label.setText(f"{z * 100:.0f} %"))
        self._update_title()
        self._update_counts()
        self._sized_docks = False
        self._opening = False
        self.resize(1280, 800)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        hide_stray_tab_bars(self)
        if not self._sized_docks:
            self._sized_docks = True
            self.resizeDocks([self.properties, self.history], [3, 1], Qt.Orientation.Vertical)
            self.resizeDocks([self.validation], [80], Qt.Orientation.Vertical)

    # ------------------------------------------------------------ actions

    def _action(self, name: str, text: str, slot: Callable[..., object] | None = None,
                shortcut: QKeySequence | QKeySequence.StandardKey | str | list[QKeySequence]
                | None = None, tip: str = "",
                checkable: bool = False) -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            if isinstance(shortcut, list):
                action.setShortcuts(shortcut)
            else:
                action.setShortcut(QKeySequence(shortcut))
        if tip:
            action.setStatusTip(tip)
            action.setToolTip(tip)
        action.setCheckable(checkable)
        if slot is not None:
            action.triggered.connect(slot)
        self._own[name] = action
        return action

    def _create_actions(self) -> dict[str, QAction]:
        """The window's own actions (files, editing, view, tools, help), by name."""
        self._own: dict[str, QAction] = {}
        std = QKeySequence.StandardKey
        a = self._action
        a("new", "&New", self.new_document, std.New, "Start an empty topology")
        a("open", "&Open…", self.open_dialog, std.Open, "Open a canopy-topology file")
        a("save", "&Save", self.save, std.Save, "Save the topology")
        a("save_as", "Save &As…", self.save_as, std.SaveAs, "Save under a new name")
        a("open_sweep", "Open S&weep Results…", self.open_sweep_dialog,
          tip="Plot a sweep's results (canopy sweep) and open any design in it")
        a("quit", "&Quit", self.close, std.Quit, "Leave Canopy")

        undo = self.doc.undo_stack.createUndoAction(self, "&Undo")
        undo.setShortcuts(std.Undo)
        redo = self.doc.undo_stack.createRedoAction(self, "&Redo")
        redo.setShortcuts(std.Redo)
        self._own["undo"], self._own["redo"] = undo, redo
        # tool-bar twins with a fixed caption (the menu entries name the command)
        stack = self.doc.undo_stack
        undo_button = a("undo_button", "Undo", stack.undo, tip="Undo the last change")
        redo_button = a("redo_button", "Redo", stack.redo, tip="Redo the undone change")
        undo_button.setEnabled(False)
        redo_button.setEnabled(False)
        stack.canUndoChanged.connect(undo_button.setEnabled)
        stack.canRedoChanged.connect(redo_button.setEnabled)
        a("cut", "Cu&t", self.cut, std.Cut, "Cut the selected nodes and their links")
        a("copy", "&Copy", self.copy, std.Copy, "Copy the selected nodes and their links")
        a("paste", "&Paste", self.paste, std.Paste, "Paste nodes beside the originals")
        a("duplicate", "D&uplicate", self.duplicate, "Ctrl+D",
          "Copy and paste the selection in one step")
        a("delete", "&Delete", self.delete_selection,
          [QKeySequence(QKeySequence.StandardKey.Delete), QKeySequence("Backspace")],
          "Delete the selection (nodes take their links with them)")
        a("select_all", "Select &All", self.select_all, std.SelectAll)
        a("find", "&Find…", self.show_find_bar, std.Find, "Find a node or link by name (Ctrl+F)")

        a("zoom_in", "Zoom &In", self.view.zoom_in, std.ZoomIn)
        a("zoom_out", "Zoom &Out", self.view.zoom_out, std.ZoomOut)
        a("zoom_fit", "Zoom to &Fit", lambda: self.view.zoom_to_fit(), "Ctrl+0")
        a("zoom_reset", "&Actual Size", self.view.reset_zoom, "Ctrl+1")
        a("snap", "&Snap to Grid", self._toggle_snap, "Ctrl+G", checkable=True)

        tools = QActionGroup(self)
        for name, text, key, tip in [
            ("tool_select", "&Select / Move", "S", "Select, move, rubber-band select (S)"),
            ("tool_compute", "Add &Compute Node", "C", "Click to add a GPU (C)"),
            ("tool_switch", "Add S&witch Node", "W", "Click to add a switch (W)"),
            ("tool_link", "Add &Link", "L", "Drag from one node to another (L)"),
            ("tool_delete", "&Delete Tool", "X", "Click items to delete them (X)"),
        ]:
            action = a(name, text, None, key, tip, checkable=True)
            tools.addAction(action)
        own = self._own
        own["tool_select"].setChecked(True)
        own["tool_select"].triggered.connect(lambda: self.set_tool(SelectMove))
        own["tool_compute"].triggered.connect(lambda: self.set_tool(lambda s: AddNode(s, COMPUTE)))
        own["tool_switch"].triggered.connect(lambda: self.set_tool(lambda s: AddNode(s, SWITCH)))
        own["tool_link"].triggered.connect(lambda: self.set_tool(AddLink))
        own["tool_delete"].triggered.connect(lambda: self.set_tool(DeleteTool))

        a("auto_layout", "&Auto Layout", self.auto_layout, "Ctrl+L",
          "Arrange servers as blocks with scale-out switches above (undoable)")
        a("quick_start", "&Quick Start", self.quick_start, std.HelpContents,
          "A first solve and export, step by step (F1)")
        a("about", "&About Canopy", self.about)
        a("about_qt", "About &Qt", QApplication.aboutQt)
        return self._own

    def _new_link_bandwidth_field(self) -> QWidget:
        """The tool bar's "Links: [25] GB/s" field for the bandwidth of drawn links, in
        the topology's bandwidth unit (or the unit typed after the number)."""
        box = QWidget()
        row = QHBoxLayout(box)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel(" Links: "))
        self.new_link_bandwidth = QLineEdit(format_gbps(self.scene.new_link_bandwidth))
        self.new_link_bandwidth.setValidator(UnitNumberValidator(parent=self))
        self.new_link_bandwidth.setMaximumWidth(90)
        self.new_link_bandwidth.editingFinished.connect(self._set_new_link_bandwidth)
        row.addWidget(self.new_link_bandwidth)
        self.new_link_unit = QLabel()
        row.addWidget(self.new_link_unit)
        self._new_link_unit_changed()
        self.doc.edited.connect(self._new_link_unit_changed)
        return box

    def _new_link_unit_changed(self) -> None:
        """The topology's unit changed (or another topology): say and show it in that."""
        unit = self.doc.topology.bandwidth_unit
        if self.new_link_unit.text() != f" {unit} ":
            self.new_link_unit.setText(f" {unit} ")
            self.new_link_bandwidth.setToolTip(
                f"Bandwidth given to links you draw, in {unit} (or type a unit after the "
                f"number: {', '.join(UNITS)})")
            self.new_link_bandwidth.setText(
                format_gbps(from_gbps(self.scene.new_link_bandwidth, unit)))

    def _fill_samples_menu(self, menu: QMenu) -> None:
        menu.clear()
        for name in sample_names():
            menu.addAction(name, functools.partial(self.open_sample, name))

    def _short_toolbar_texts(self) -> None:
        """Tool-bar captions short enough that every button fits at 1280 pixels (the
        menus keep the full names; tooltips give them too)."""
        for name, text in [("new_from_generator", "Generate"), ("tool_select", "Select"),
                           ("tool_compute", "+ GPU"), ("tool_switch", "+ Switch"),
                           ("tool_link", "+ Link"), ("tool_delete", "Delete"),
                           ("zoom_fit", "Fit"), ("auto_layout", "Layout")]:
            action = self.named_actions.get(name)
            if action is not None:
                action.setIconText(text)
                if not action.toolTip() or action.toolTip() == text:
                    action.setToolTip(action.text().replace("&", ""))

    def _build_status_bar(self) -> None:
        bar = self.statusBar()
        self.validation_label = QLabel()
        self.counts_label = QLabel()
        self.zoom_label = QLabel("100 %")
        bar.addWidget(self.validation_label, 1)
        bar.addPermanentWidget(self.counts_label)
        bar.addPermanentWidget(self.zoom_label)
        self._show_validation_summary(*self._validation_summary())

    def _validation_summary(self) -> tuple[str, bool]:
        messages = self.validation.messages()
        ok = len(messages) == 1 and messages[0].startswith("✓")
        return (messages[0][2:] if messages else "", ok)

    # ------------------------------------------------------------ tools and view

    def set_tool(self, factory: Callable[[TopologyScene], Interaction]) -> None:
        interaction = factory(self.scene)
        self.scene.set_interaction(interaction)
        self.view.set_rubber_band(interaction.rubber_band)
        self.view.setFocus()

    def _toggle_snap(self, on: bool) -> None:
        self.scene.snap_to_grid = on
        self.view.resetCachedContent()
        self.scene.update()

    def _set_new_link_bandwidth(self) -> None:
        unit = self.doc.topology.bandwidth_unit
        text = self.new_link_bandwidth.text()
        typed = split_unit(text)[1]
        value = UnitNumberValidator().parse(text) or Fraction(25)
        self.scene.new_link_bandwidth = to_gbps(value, typed or unit)
        if typed is not None:  # shown in the topology's unit, like every other bandwidth
            self.new_link_bandwidth.setText(
                format_gbps(from_gbps(self.scene.new_link_bandwidth, unit)))

    def show_culprits(self, node_ids: list[str], link_keys: list[int]) -> None:
        """Select the named nodes and links and bring them into view."""
        self.scene.select(node_ids, link_keys)
        rect: QRectF = self.scene.items_rect(node_ids, link_keys)
        if not rect.isEmpty():
            visible = self.view.mapToScene(self.view.viewport().rect()).boundingRect()
            if not visible.contains(rect):
                if rect.width() < visible.width() and rect.height() < visible.height():
                    self.view.centerOn(rect.center())
                else:
                    self.view.zoom_to_fit(rect)

    def _show_validation_summary(self, summary: str, ok: bool) -> None:
        self.validation_label.setText(("✓ " if ok else "⚠ ") + summary)
        self.validation_label.setStyleSheet("color: #2e6b23;" if ok else "color: #8a1c12;")

    def _update_counts(self) -> None:
        topo = self.doc.topology
        self.counts_label.setText(f"{counted(len(topo.compute_nodes()), 'GPU')} · "
                                  f"{counted(len(topo.switch_nodes()), 'switch')} · "
                                  f"{counted(len(topo.links), 'link')}")

    def _update_title(self) -> None:
        self.setWindowTitle(f"{self.doc.display_name}[*] — Canopy")
        self.setWindowModified(self.doc.modified)

    def _after_reset(self) -> None:
        """Show the whole new drawing (a large one is still being built: where it will be)."""
        self.view.zoom_to_fit(self.scene.drawing_rect())

    # ------------------------------------------------------------ editing

    def select_all(self) -> None:
        self.scene.select(self.doc.node_ids(), self.doc.link_keys())

    def delete_selection(self) -> None:
        delete(self.doc, self.scene.selected_node_ids(), self.scene.selected_link_keys())

    def copy(self) -> bool:
        return clipboard.copy_selection(self.doc, self.scene.selected_node_ids(),
                                        QApplication.clipboard())

    def cut(self) -> None:
        nodes = self.scene.selected_node_ids()
        if clipboard.copy_selection(self.doc, nodes, QApplication.clipboard()):
            self.doc.undo_stack.beginMacro(f"Cut {len(nodes)} nodes")
            delete(self.doc, nodes, self.scene.selected_link_keys())
            self.doc.undo_stack.endMacro()

    def paste(self) -> list[str]:
        part = clipboard.from_mime(QApplication.clipboard().mimeData())
        if part is None:
            self.statusBar().showMessage("The clipboard holds no Canopy nodes.", 4000)
            return []
        nodes, keys = clipboard.paste(self.doc, part)
        self.scene.select(nodes, keys)
        return nodes

    def duplicate(self) -> list[str]:
        nodes = self.scene.selected_node_ids()
        if not nodes:
            return []
        new, keys = clipboard.paste(self.doc, clipboard.fragment(self.doc, nodes), "Duplicate")
        self.scene.select(new, keys)
        return new

    def _show_bandwidth_classes(self, classes: list) -> None:
        """The legend of the links' bandwidth colours (hidden for a single bandwidth)."""
        self.bandwidth_legend.set_classes(classes, self.doc.topology.bandwidth_unit)

    def auto_layout(self) -> None:
        """Lay every node out again (one undoable step)."""
        old = {n.id: (n.x or 0.0, n.y or 0.0) for n in self.doc.topology.nodes}
        probe = Topology(nodes=[Node(n.id, n.kind, n.label, n.group)
                                for n in self.doc.topology.nodes],
                         links=self.doc.topology.links)
        auto_layout(probe)
        new = {n.id: (n.x or 0.0, n.y or 0.0) for n in probe.nodes}
        if new != old:
            self.doc.undo_stack.push(MoveNodes(self.doc, old, new, "Auto layout"))
            self.view.zoom_to_fit()

    # ------------------------------------------------------------ files

    def maybe_save(self) -> bool:
        """Ask about unsaved changes; False if the user cancelled."""
        if not self.doc.modified:
            return True
        answer = QMessageBox.warning(
            self, "Unsaved changes",
            f"“{self.doc.display_name}” has unsaved changes. Save them first?",
            QMessageBox.StandardButton.Save | QMessageBox.StandardButton.Discard
            | QMessageBox.StandardButton.Cancel, QMessageBox.StandardButton.Save)
        if answer == QMessageBox.StandardButton.Save:
            return self.save()
        return answer == QMessageBox.StandardButton.Discard

    def new_document(self) -> None:
        if self.maybe_save():
            self.doc.set_topology(Topology(name="untitled"))

    def open_dialog(self) -> None:
        start = str(self.doc.path.parent) if self.doc.path else ""
        path, _ = QFileDialog.getOpenFileName(self, "Open topology", start, FILE_FILTER)
        if path:
            self.open_path(Path(path))

    def open_path(self, path: Path) -> bool:
        """Open a file; on failure show the engine's sentence and keep the current document.

        The file is read a slice per turn of the event loop, and laying it out and
        putting it in the document take turns of their own (:func:`opening_steps`), so
        the window stays live while a large file opens; this returns once
        the file is open, or could not be.
        """
        if self._opening:
            self.statusBar().showMessage("Another file is still being opened.", 4000)
            return False
        if not self.maybe_save():
            return False
        self._opening = True
        edits = self.doc.undo_stack.index()
        try:
            topology = run_in_turns(opening_steps(Path(path)))
        except CanopyError as exc:
            QMessageBox.critical(self, "Cannot open file", str(exc))
            return False
        except Abandoned:
            return False
        finally:
            self._opening = False
        if self.doc.undo_stack.index() != edits and not self.maybe_save():
            return False    # edited meanwhile, and the user keeps those edits
        self.doc.set_topology(topology, Path(path))
        self.doc.opened(Path(path))
        settings.add_recent_file(Path(path))
        return True

    def open_sweep_dialog(self, path: Path | None = None) -> SweepResultsDialog | None:
        """Show a sweep's results; a double-clicked point opens in this window."""
        if path is None:
            name, _ = QFileDialog.getOpenFileName(self, "Open sweep results", "",
                                                  "Sweep results (*.csv);;All files (*)")
            if not name:
                return None
            path = Path(name)
        try:
            rows = read_rows(path)
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            QMessageBox.critical(self, "Cannot open sweep results",
                                 unreadable(path, exc))
            return None
        if not rows or "generator" not in rows[0]:
            QMessageBox.critical(self, "Cannot open sweep results",
                                 f"{path} holds no rows written by canopy sweep.")
            return None

        def open_topology(topology: Topology) -> None:
            if self.maybe_save():
                self.doc.set_topology(topology, None, display_name=topology.name)

        dialog = SweepResultsDialog(rows, path.name, open_topology, self)
        dialog.show()
        return dialog

    def open_sample(self, name: str) -> bool:
        if not self.maybe_save():
            return False
        try:
            topology = load_sample(name)
        except CanopyError as exc:
            QMessageBox.critical(self, "Cannot open sample", str(exc))
            return False
        self.doc.set_topology(topology, None, display_name=name)
        return True

    def _fill_recent_menu(self, menu: QMenu) -> None:
        menu.clear()
        files = settings.recent_files()
        for path in files:
            menu.addAction(str(path), functools.partial(self.open_path, path))
        if not files:
            menu.addAction("(none)").setEnabled(False)
        else:
            menu.addSeparator()
            menu.addAction("Clear Menu", settings.clear_recent_files)

    def save(self) -> bool:
        if self.doc.path is None:
            return self.save_as()
        return self._save_to(self.doc.path)

    def save_as(self) -> bool:
        start = str(self.doc.path or Path.cwd() / f"{self.doc.display_name}")
        if not start.endswith(".json"):
            start += ".json"
        path, _ = QFileDialog.getSaveFileName(self, "Save topology", start, FILE_FILTER)
        if not path:
            return False
        target = Path(path)
        if not target.suffix:
            target = target.with_suffix(".json")
        return self._save_to(target)

    def _save_to(self, path: Path) -> bool:
        if path == self.doc.path and self.doc.changed_on_disk():
            answer = QMessageBox.warning(
                self, "File changed on disk",
                f"{path.name} was changed on disk since you opened or saved it (another "
                "editor or a command wrote it). Overwrite it with your version?",
                QMessageBox.StandardButton.Save | QMessageBox.StandardButton.Cancel,
                QMessageBox.StandardButton.Cancel)
            if answer != QMessageBox.StandardButton.Save:
                self.statusBar().showMessage(f"Not saved: {path} changed on disk", 6000)
                return False
        try:
            self.doc.save(path)
        except OSError as exc:
            QMessageBox.critical(self, "Cannot save",
                                 f"{path} cannot be written ({exc.strerror or exc}).")
            return False
        settings.add_recent_file(path)
        self.statusBar().showMessage(f"Saved {path}", 4000)
        return True

    def closeEvent(self, event: QCloseEvent) -> None:
        if self.maybe_save():
            self.autosaver.remove()
            event.accept()
        else:
            event.ignore()

    # ------------------------------------------------------------ recovery

    def offer_recovery(self) -> bool:
        """After a crash, offer the newest recovery file; True if it was restored."""
        found = orphaned()
        if not found:
            return False
        latest = found[0]
        where = latest.original_path or f"“{latest.display_name}”"
        answer = QMessageBox.question(
            self, "Restore unsaved changes?",
            f"Canopy did not shut down normally. Restore the unsaved changes to {where}?",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.Yes)
        if answer == QMessageBox.StandardButton.Yes:
            self.restore(latest)
            restored = True
        else:
            restored = False
        latest.discard()
        return restored

    def restore(self, recovered: Recovered) -> None:
        """Open the original (file or sample) and apply the recovered state as one undo step."""
        base, path = Topology(name=recovered.topology.name), None
        try:
            if recovered.original_path is not None:
                base, path = load_topology(recovered.original_path), recovered.original_path
            elif recovered.display_name in sample_names():
                base = load_sample(recovered.display_name)
        except CanopyError:
            pass  # the original is gone or broken: restore onto an empty document
        self.doc.set_topology(base, path, display_name=None if path else recovered.display_name)
        self.doc.undo_stack.push(
            ReplaceTopology(self.doc, recovered.topology, "Restore unsaved changes"))

    # ------------------------------------------------------------ help

    def show_find_bar(self) -> None:
        self.find_bar.open_bar()

    def quick_start(self) -> None:
        QuickStart(self).exec()

    def about(self) -> None:
        rows = "".join(f"<tr><td>{name}</td><td>{version}</td></tr>"
                       for name, version in self.library_versions().items())
        QMessageBox.about(
            self, "About Canopy",
            f"<h3>Canopy {canopy_version()}</h3>"
            "<p>Draw cluster networks and get exactly optimal collective schedules "
            "(ForestColl).</p>"
            f"<table>{rows}</table>")

    @staticmethod
    def library_versions() -> dict[str, str]:
        versions = {"Qt": qVersion(), "PySide6": PySide6.__version__}
        versions.update((k, v) for k, v in library_versions().items()
                        if k != "PySide6-Essentials")
        versions["maxflow backend"] = default_backend()
        return versions
