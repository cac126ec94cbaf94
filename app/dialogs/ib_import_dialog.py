"""File ▸ Import ▸ InfiniBand Fabric…: an ibnetdiscover dump, optionally one host's NCCL XML.

The dialog asks for the dump and, optionally, an NCCL topology XML of one host to fill
every host with GPUs (canopy.engine.io.ib_fabric_import), and whether to measure what
each defect costs (canopy.engine.fabric.defects). The import runs when Import is
pressed; a file Canopy cannot use is reported in the engine's one sentence and the
dialog stays open.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QCheckBox, QDialog, QLineEdit, QMessageBox, QWidget

from canopy.app.dialogs.import_form import ImportForm, browse_row, choose_file
from canopy.app.dialogs.nccl_import_dialog import NCCL_FILTER
from canopy.engine.fabric.defects import Defect, find_defects
from canopy.engine.io.ib_fabric_import import IbImport, import_ib_file
from canopy.engine.model.errors import CanopyError

IB_FILTER = "ibnetdiscover output (*.txt *.topo *.out *.lst);;All files (*)"


class IbImportDialog(QDialog):
    """After Import, :attr:`imported` holds the fabric's topology and :attr:`defects`."""

    def __init__(self, path: Path | str = "", parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Import InfiniBand Fabric")
        self.imported: IbImport | None = None
        self.defects: list[Defect] = []

        self.file = QLineEdit(str(path))
        self.file.setObjectName("ib_file")
        self.host_topo = QLineEdit()
        self.host_topo.setObjectName("ib_host_topo")
        self.host_topo.setPlaceholderText("none: each host is one compute node")
        self.host_topo.setToolTip("An NCCL topology XML of one host (NCCL_TOPO_DUMP_FILE): "
                                  "every host gets its GPUs, NVLink and PCIe, its NICs "
                                  "matched to the host's adapters by name")
        self.cost = QCheckBox("Measure what each defect costs (the optimum of the hosts "
                              "it touches, with and without it)")
        self.cost.setChecked(True)

        self.frame = ImportForm(self)
        self.error, self.buttons, self.ok = self.frame.error, self.frame.buttons, self.frame.ok
        form = self.frame.form
        form.addRow("Fabric dump (ibnetdiscover):", browse_row(self.file, self._browse_dump))
        form.addRow("Host topology (optional):", browse_row(self.host_topo,
                                                             self._browse_host))
        form.addRow("", self.cost)
        self.file.textChanged.connect(self._check)
        self._check()
        self.resize(640, self.sizeHint().height())

    def _browse_dump(self) -> None:
        choose_file(self, self.file, "Fabric dump", IB_FILTER)

    def _browse_host(self) -> None:
        choose_file(self, self.host_topo, "NCCL topology of one host", NCCL_FILTER,
                    near=self.file)

    def _check(self) -> None:
        self.frame.show_problem(None if self.file.text().strip()
                                else "Choose an ibnetdiscover dump.")

    def accept(self) -> None:
        """Import now; on failure say why in one sentence and stay open."""
        host = self.host_topo.text().strip() or None
        try:
            result = import_ib_file(self.file.text().strip(), host)
            self.defects = find_defects(result, cost=self.cost.isChecked())
        except CanopyError as exc:
            QMessageBox.critical(self, "Cannot import the fabric", str(exc))
            return
        self.imported = result
        super().accept()
