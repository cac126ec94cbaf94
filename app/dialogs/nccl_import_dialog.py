"""File ▸ Import ▸ NCCL Topology XML…: the options of canopy.engine.io.nccl_topology_import,
then the import.

Static NCCL topology files (NCCL_TOPO_FILE) rarely describe NVLink, and a dump describes
one host, so the dialog asks what the file cannot say: how many hosts, the network
between them, the GPU fabric to add when the file has no NVLink, and the bandwidth of
NICs without a speed. The import runs when Import is pressed; a file Canopy cannot use
is reported in the engine's one sentence and the dialog stays open.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QLabel,
    QLineEdit,
    QListWidget,
    QMessageBox,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from canopy.app.dialogs.import_form import ImportForm, browse_row, choose_file
from canopy.engine.io.nccl_topology_import import (
    MAX_HOSTS,
    RAIL,
    SINGLE,
    NcclImport,
    NcclImportOptions,
    import_nccl_file,
)
from canopy.engine.model.errors import CanopyError
from canopy.engine.model.topology import parse_bandwidth

NCCL_FILTER = "NCCL topology (*.xml);;All files (*)"
NO_FABRIC, NVSWITCH, NVLINK_MESH = "none", "nvswitch", "nvlink"
FABRICS = {NO_FABRIC: "None (only what the file describes)",
           NVSWITCH: "One NVSwitch per host",
           NVLINK_MESH: "NVLink between every pair of GPUs"}
NETWORKS = {RAIL: "Rail-optimised (NIC i of every host on rail switch i)",
            SINGLE: "One switch for every NIC"}
OPTION_NAMES = {"--nic-bw": "“NIC bandwidth if not given”",
                "--nvswitch-bw": "the NVSwitch fabric option",
                "--nvlink-bw": "the NVLink fabric option"}
"""How the engine's warnings, written for the command line, name this dialog's fields."""


def in_dialog_words(message: str) -> str:
    """``message`` with the command-line options replaced by the dialog's fields."""
    for flag, name in OPTION_NAMES.items():
        message = message.replace(flag, name)
    return message


class NcclImportDialog(QDialog):
    """Options for one NCCL file; after Import, :attr:`imported` holds topology and warnings."""

    def __init__(self, path: Path | str = "", parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Import NCCL Topology")
        self.imported: NcclImport | None = None

        self.file = QLineEdit(str(path))
        self.file.setObjectName("nccl_file")

        self.hosts = QSpinBox()
        self.hosts.setRange(1, MAX_HOSTS)
        self.hosts.setToolTip("Copies of the host described by the file")
        self.net = QComboBox()
        for key, text in NETWORKS.items():
            self.net.addItem(text, key)
        self.net.setToolTip("How the hosts' NICs are joined")
        self.fabric = QComboBox()
        for key, text in FABRICS.items():
            self.fabric.addItem(text, key)
        self.fabric.setToolTip("Used only when the file has no <nvlink> elements "
                               "(static NCCL_TOPO_FILE files usually have none)")
        self.fabric_bw = QLineEdit("300")
        self.fabric_bw.setToolTip("GB/s per direction: each GPU to the NVSwitch, or each "
                                  "GPU pair with NVLink")
        self.nic_bw = QLineEdit("25")
        self.nic_bw.setToolTip("GB/s of NICs whose <net speed> the file does not give "
                               "(25 GB/s = 200 Gb/s)")

        self.frame = ImportForm(self)
        self.error, self.buttons, self.ok = self.frame.error, self.frame.buttons, self.frame.ok
        form = self.frame.form
        form.addRow("NCCL topology file:", browse_row(self.file, self._browse))
        form.addRow("Hosts:", self.hosts)
        form.addRow("Network between hosts:", self.net)
        form.addRow("GPU fabric if the file has no NVLink:", self.fabric)
        self.fabric_bw_label = QLabel("Fabric bandwidth (GB/s):")
        form.addRow(self.fabric_bw_label, self.fabric_bw)
        form.addRow("NIC bandwidth if not given (GB/s):", self.nic_bw)

        for signal in (self.file.textChanged, self.hosts.valueChanged,
                       self.fabric.currentIndexChanged, self.fabric_bw.textChanged,
                       self.nic_bw.textChanged):
            signal.connect(self._check)
        self._check()
        self.resize(620, self.sizeHint().height())

    def _browse(self) -> None:
        choose_file(self, self.file, "NCCL topology file", NCCL_FILTER)

    def _bandwidth(self, edit: QLineEdit, what: str) -> Fraction:
        try:
            return parse_bandwidth(edit.text())
        except ValueError as exc:
            raise ValueError(f"The {what} '{edit.text()}' {exc}.") from None

    def options(self) -> NcclImportOptions:
        """The import options; raises ValueError (one sentence) for a bad bandwidth."""
        fabric = self.fabric.currentData()
        fabric_bw = (self._bandwidth(self.fabric_bw, "fabric bandwidth")
                     if fabric != NO_FABRIC else None)
        return NcclImportOptions(hosts=self.hosts.value(), net=self.net.currentData(),
                                 nvswitch_bw=fabric_bw if fabric == NVSWITCH else None,
                                 nvlink_bw=fabric_bw if fabric == NVLINK_MESH else None,
                                 nic_bw=self._bandwidth(self.nic_bw, "NIC bandwidth"))

    def _check(self) -> None:
        self.net.setEnabled(self.hosts.value() > 1)
        uses_bw = self.fabric.currentData() != NO_FABRIC
        self.fabric_bw.setEnabled(uses_bw)
        self.fabric_bw_label.setEnabled(uses_bw)
        problem = None
        if not self.file.text().strip():
            problem = "Choose an NCCL topology file."
        else:
            try:
                self.options()
            except ValueError as exc:
                problem = str(exc)
        self.frame.show_problem(problem)

    def accept(self) -> None:
        """Import now; on failure say why in one sentence and stay open."""
        try:
            self.imported = import_nccl_file(self.file.text().strip(), self.options())
        except (CanopyError, ValueError) as exc:
            QMessageBox.critical(self, "Cannot import NCCL topology", str(exc))
            return
        super().accept()


class ImportWarningsDialog(QDialog):
    """The warnings of an import, one per line, each naming the element at fault."""

    def __init__(self, title: str, summary: str, warnings: list[str],
                 parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle(title)
        label = QLabel(summary)
        label.setWordWrap(True)
        self.list = QListWidget()
        self.list.setObjectName("import_warnings")
        self.list.setWordWrap(True)
        self.list.setAlternatingRowColors(True)
        self.list.addItems([in_dialog_words(w) for w in warnings])
        self.list.setTextElideMode(Qt.TextElideMode.ElideNone)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(label)
        layout.addWidget(self.list, 1)
        layout.addWidget(buttons)
        self.resize(760, 320)

    def warnings(self) -> list[str]:
        return [self.list.item(i).text() for i in range(self.list.count())]
