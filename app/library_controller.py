"""Topology library actions of the editor: generators, NCCL, InfiniBand and GraphML import,
GraphML and Slurm export.

:func:`install` adds File ▸ New from Generator… (also on the File tool bar), File ▸ Edit
Generator Parameters… (for documents with a ``generator`` recipe), File ▸ Import ▸ NCCL
Topology XML…, InfiniBand Fabric… and GraphML…, and File ▸ Export ▸ GraphML… and Slurm
topology.conf… to a :class:`MainWindow`.
Dialogs open window-modal without blocking (``QDialog.open``) and report back through
their ``accepted`` signal.

A generated or imported topology replaces the current document only after the usual
"unsaved changes?" question; it opens without a file name, so Save asks where to write
the canopy-topology JSON. New parameters for a generated document replace its topology
as one undoable step (the file name stays).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog, QMessageBox

from canopy.app.commands import ReplaceTopology
from canopy.app.dialogs.generator_dialog import GeneratorDialog, recipe_of
from canopy.app.dialogs.ib_import_dialog import IbImportDialog
from canopy.app.dialogs.nccl_import_dialog import (
    NCCL_FILTER,
    ImportWarningsDialog,
    NcclImportDialog,
)
from canopy.engine.io.graphml import load_graphml, save_graphml
from canopy.engine.io.nccl_topology_import import summarise_warnings
from canopy.engine.model.errors import CanopyError
from canopy.engine.model.topology import Topology

if TYPE_CHECKING:
    from canopy.app.main_window import MainWindow

GRAPHML_FILTER = "GraphML (*.graphml *.xml);;All files (*)"


class LibraryController(QObject):
    """The actions and the dialogs they open, for one window."""

    def __init__(self, window: MainWindow):
        super().__init__(window)
        self.window = window
        self.generator_dialog: GeneratorDialog | None = None
        self.nccl_dialog: NcclImportDialog | None = None
        self.warnings_dialog: ImportWarningsDialog | None = None
        self.ib_dialog: IbImportDialog | None = None
        self.actions: dict[str, QAction] = {}
        a = self._action
        a("new_from_generator", "New from &Generator…", self.new_from_generator,
          "Ctrl+Shift+N", "Generate a cluster, torus, ring, dragonfly… with a live preview")
        a("edit_generator", "&Edit Generator Parameters…", self.edit_generator, None,
          "Change the parameters this topology was generated from (undoable)")
        a("import_nccl", "&NCCL Topology XML…", self.import_nccl, None,
          "Import an NCCL_TOPO_FILE or NCCL_TOPO_DUMP_FILE")
        a("import_ib", "&InfiniBand Fabric (ibnetdiscover)…", self.import_ib, None,
          "Import a cluster's InfiniBand fabric from ibnetdiscover output and list its "
          "defects")
        a("export_slurm", "&Slurm topology.conf…", self.export_slurm, None,
          "Export the switch hierarchy as Slurm's topology.conf (tree or block plugin)")
        a("import_graphml", "&GraphML…", self.import_graphml, None,
          "Import a GraphML graph (networkx, yEd, Gephi…)")
        a("export_graphml", "&GraphML…", self.export_graphml, None,
          "Export the topology as GraphML, keeping kinds, bandwidths, groups and coordinates")
        window.doc.reset.connect(self._update_edit_generator)
        self._update_edit_generator()

    def _action(self, name: str, text: str, slot: object, shortcut: str | None,
                tip: str) -> QAction:
        action = QAction(text, self.window)
        if shortcut:
            action.setShortcut(shortcut)
        action.setStatusTip(tip)
        action.setToolTip(tip)
        action.triggered.connect(slot)
        self.actions[name] = action
        return action

    def _update_edit_generator(self) -> None:
        self.actions["edit_generator"].setEnabled(
            recipe_of(self.window.doc.topology) is not None)

    def _start(self) -> str:
        doc = self.window.doc
        return str(doc.path.parent) if doc.path else ""

    def _open(self, topology: Topology, name: str) -> bool:
        """Replace the document (after the unsaved-changes question); False if cancelled."""
        if not self.window.maybe_save():
            return False
        self.window.doc.set_topology(topology, None, display_name=name)
        return True

    # ------------------------------------------------------------ generators

    def new_from_generator(self) -> GeneratorDialog:
        dialog = self._generator_dialog(None)
        dialog.accepted.connect(lambda: self._generated(dialog))
        return dialog

    def edit_generator(self) -> GeneratorDialog | None:
        recipe = recipe_of(self.window.doc.topology)
        if recipe is None:
            return None
        dialog = self._generator_dialog(recipe)
        dialog.accepted.connect(lambda: self._regenerated(dialog))
        return dialog

    def _generator_dialog(self, recipe: dict | None) -> GeneratorDialog:
        dialog = GeneratorDialog(self.window, recipe)
        self.generator_dialog = dialog
        dialog.finished.connect(dialog.deleteLater)
        dialog.open()
        return dialog

    def _generated(self, dialog: GeneratorDialog) -> None:
        topology = dialog.topology()
        if topology is not None:
            self._open(topology, dialog.document_name())

    def _regenerated(self, dialog: GeneratorDialog) -> None:
        topology = dialog.topology()
        if topology is not None:
            self.window.doc.undo_stack.push(
                ReplaceTopology(self.window.doc, topology, "Change generator parameters"))
            self.window.view.zoom_to_fit()

    # ------------------------------------------------------------ NCCL import

    def import_nccl(self) -> NcclImportDialog | None:
        path, _ = QFileDialog.getOpenFileName(self.window, "Import NCCL topology",
                                              self._start(), NCCL_FILTER)
        if not path:
            return None
        dialog = NcclImportDialog(path, self.window)
        self.nccl_dialog = dialog
        dialog.accepted.connect(lambda: self._nccl_imported(dialog))
        dialog.finished.connect(dialog.deleteLater)
        dialog.open()
        return dialog

    def _nccl_imported(self, dialog: NcclImportDialog) -> None:
        result = dialog.imported
        if result is None:
            return
        topo = result.topology
        source = Path(dialog.file.text().strip())
        hosts = dialog.hosts.value()
        if not self._open(topo, source.stem + (f"-x{hosts}" if hosts > 1 else "")):
            return
        summary = (f"Imported {source.name}: {len(topo.compute_nodes())} GPUs, "
                   f"{len(topo.switch_nodes())} switches, {len(topo.links)} links")
        if not result.warnings:
            self.window.statusBar().showMessage(summary + ".", 6000)
            return
        self.window.statusBar().showMessage(
            f"{summary}, {len(result.warnings)} warnings.", 6000)
        if self.warnings_dialog is not None:
            self.warnings_dialog.close()
        self.warnings_dialog = ImportWarningsDialog(
            "NCCL import warnings",
            f"{summary}. These parts of the file were skipped or completed with the stated "
            "value:", summarise_warnings(result.warnings), self.window)
        self.warnings_dialog.show()

    # ------------------------------------------------------------ InfiniBand and Slurm

    def import_ib(self) -> IbImportDialog | None:
        from canopy.app.dialogs.ib_import_dialog import IB_FILTER

        path, _ = QFileDialog.getOpenFileName(self.window, "Import InfiniBand fabric",
                                              self._start(), IB_FILTER)
        if not path:
            return None
        return self.open_ib_dialog(path)

    def open_ib_dialog(self, path: str) -> IbImportDialog:
        dialog = IbImportDialog(path, self.window)
        self.ib_dialog = dialog
        dialog.accepted.connect(lambda: self._ib_imported(dialog))
        dialog.finished.connect(dialog.deleteLater)
        dialog.open()
        return dialog

    def _ib_imported(self, dialog: IbImportDialog) -> None:
        from canopy.engine.io.ib_fabric_import import summary

        result = dialog.imported
        if result is None:
            return
        source = Path(dialog.file.text().strip())
        if not self._open(result.topology, source.stem):
            return
        text = f"Imported {source.name}: {summary(result)}"
        lines = ([f"port: {r}" for r in result.reports] + [d.line() for d in dialog.defects]
                 + [f"warning: {w}" for w in summarise_warnings(result.warnings)])
        self.window.statusBar().showMessage(
            f"{text}; {len(dialog.defects)} defects." if lines else f"{text}.", 8000)
        if not lines:
            return
        if self.warnings_dialog is not None:
            self.warnings_dialog.close()
        self.warnings_dialog = ImportWarningsDialog(
            "InfiniBand fabric: defects and warnings",
            f"{text}. Down or unknown ports, departures from the fabric's regularity with "
            "what each costs, and warnings:", lines, self.window)
        self.warnings_dialog.show()

    def export_slurm(self) -> bool:
        from PySide6.QtWidgets import QInputDialog

        from canopy.engine.io.slurm_topology import export_slurm
        from canopy.engine.io.topology_json import atomic_write_text

        doc = self.window.doc
        plugins = ["tree (SwitchName lines)", "block (BlockName lines, BlockSizes)"]
        choice, ok = QInputDialog.getItem(self.window, "Export Slurm topology.conf",
                                          "Slurm topology plugin:", plugins, 0, False)
        if not ok:
            return False
        start = str((doc.path.parent if doc.path else Path.cwd()) / "topology.conf")
        path, _ = QFileDialog.getSaveFileName(self.window, "Export Slurm topology.conf",
                                              start, "Slurm topology (*.conf);;All files (*)")
        if not path:
            return False
        try:
            result = export_slurm(doc.topology, choice.split()[0])
            atomic_write_text(path, result.text)
        except CanopyError as exc:
            QMessageBox.critical(self.window, "Cannot export topology.conf", str(exc))
            return False
        except OSError as exc:
            QMessageBox.critical(self.window, "Cannot export topology.conf",
                                 f"{path} cannot be written ({exc.strerror or exc}).")
            return False
        note = f" ({'; '.join(result.warnings)})" if result.warnings else ""
        self.window.statusBar().showMessage(f"Exported {path}{note}", 8000)
        return True

    # ------------------------------------------------------------ GraphML

    def import_graphml(self) -> bool:
        path, _ = QFileDialog.getOpenFileName(self.window, "Import GraphML", self._start(),
                                              GRAPHML_FILTER)
        if not path:
            return False
        try:
            topology = load_graphml(path)
        except CanopyError as exc:
            QMessageBox.critical(self.window, "Cannot import GraphML", str(exc))
            return False
        return self._open(topology, Path(path).stem)

    def export_graphml(self) -> bool:
        doc = self.window.doc
        stem = doc.path.stem if doc.path else doc.display_name
        start = str((doc.path.parent if doc.path else Path.cwd()) / f"{stem}.graphml")
        path, _ = QFileDialog.getSaveFileName(self.window, "Export GraphML", start,
                                              GRAPHML_FILTER)
        if not path:
            return False
        target = Path(path)
        if not target.suffix:
            target = target.with_suffix(".graphml")
        try:
            save_graphml(doc.topology, target)
        except CanopyError as exc:         # the atomic write names the file and the reason
            QMessageBox.critical(self.window, "Cannot export GraphML", str(exc))
            return False
        except OSError as exc:
            QMessageBox.critical(self.window, "Cannot export GraphML",
                                 f"{target} cannot be written ({exc.strerror or exc}).")
            return False
        self.window.statusBar().showMessage(f"Exported {target}", 4000)
        return True

