"""File ▸ Import ▸ InfiniBand Fabric…: an ibnetdiscover dump, optionally one host's NCCL XML.

The dialog asks for the dump and, optionally, an NCCL topology XML of one host to fill
every host with GPUs (canopy.engine.io.ib_fabric_import), and whether to measure what
each defect costs (canopy.engine.fabric.defects). The import runs when Import is
pressed; a file Canopy cannot use is reported in the engine's one sentence and the
dialog stays open.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from canopy.app.dialogs.nccl_import_dialog import ERROR_STYLE, NCCL_FILTER
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

        form = QFormLayout()
        form.addRow("Fabric dump (ibnetdiscover):", self._row(self.file, self._browse_dump))
        form.addRow("Host topology (optional):", self._row(self.host_topo,
                                                            self._browse_host))
        form.addRow("", self.cost)
        self.error = QLabel()
        self.error.setWordWrap(True)
        self.error.setStyleSheet(ERROR_STYLE)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                        | QDialogButtonBox.StandardButton.Cancel)
        self.ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.ok.setText("Import")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.error)
        layout.addWidget(self.buttons)
        self.file.textChanged.connect(self._check)
        self._check()
        self.resize(640, self.sizeHint().height())

    @staticmethod
    def _row(edit: QLineEdit, browse_slot: object) -> QHBoxLayout:
        browse = QPushButton("Browse…")
        browse.clicked.connect(browse_slot)
        row = QHBoxLayout()
        row.addWidget(edit, 1)
        row.addWidget(browse)
        return row

    def _browse_dump(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Fabric dump",
                                              str(Path(self.file.text()).parent), IB_FILTER)
        if path:
            self.file.setText(path)

    def _browse_host(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "NCCL topology of one host",
                                              str(Path(self.file.text()).parent), NCCL_FILTER)
        if path:
            self.host_topo.setText(path)

    def _check(self) -> None:
        problem = None if self.file.text().strip() else "Choose an ibnetdiscover dump."
        self.error.setText(problem or "")
        self.error.setVisible(problem is not None)
        self.ok.setEnabled(problem is None)

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
