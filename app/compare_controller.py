"""Compute ▸ Compare Algorithms…: the options dialog and the Compare dock, for one window.

:func:`install` adds the action to the window's Compute menu (built by
:class:`canopy.app.solve_controller.SolveController`, whose controller runs the comparison in the
background), the dock (tabbed with Validation at the bottom) and its toggle to the View
menu. The action is disabled while the controller is busy. The dialog picks the
collective, the message sizes (nccl-tests style: 1M = 2^20 bytes) and how the simulated
switches forward; OK starts the comparison (:class:`canopy.app.docks.compare.CompareDock`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Unpack

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QVBoxLayout,
    QWidget,
)

from canopy.app.docks.compare import FULL_OPTION, CompareDock, CompareOptions
from canopy.engine.comparison.table import SLOW_FROM, Comparison
from canopy.engine.execution.program import SWITCH_MODES
from canopy.engine.execution.simulate import REPORT_SIZES
from canopy.engine.model.collectives import COLLECTIVES
from canopy.engine.model.errors import CanopyError
from canopy.engine.model.sizes import parse_size, size_label

if TYPE_CHECKING:
    from canopy.app.compute import ComputeController
    from canopy.app.main_window import MainWindow

DOCK_HEIGHT = 330


class CompareDialog(QDialog):
    """Collective, message sizes and switch forwarding for one comparison."""

    def __init__(self, options: CompareOptions, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Compare Algorithms")
        self.collective = QComboBox()
        self.collective.addItems(list(COLLECTIVES))
        self.collective.setCurrentText(options.get("collective", "allgather"))
        self.sizes = QLineEdit(",".join(size_label(s) for s in
                                        options.get("sizes", REPORT_SIZES)))
        self.sizes.setToolTip("Comma-separated message sizes in bytes; K, M, G are powers "
                              "of two as in nccl-tests (1M = 1,048,576 bytes)")
        self.switch_mode = QComboBox()
        self.switch_mode.addItems(list(SWITCH_MODES))
        self.switch_mode.setCurrentText(options.get("switch_mode", SWITCH_MODES[0]))
        self.switch_mode.setToolTip("How simulated switches forward a message: as soon as "
                                    "its header arrives (cut-through, as NVSwitch and "
                                    "InfiniBand do) or after all of it (store-and-forward)")
        self.full = QCheckBox(f"{FULL_OPTION} (minutes from {SLOW_FROM} GPUs)")
        self.full.setChecked(bool(options.get("full", False)))
        self.full.setToolTip(f"From {SLOW_FROM} GPUs TACOS and Blink are left out and "
                             "ForestColl runs a connection per tree edge, so the "
                             "comparison stays interactive; tick to build them all (this "
                             "can take minutes)")
        self.error = QLabel()
        self.error.setStyleSheet("color: #8a1c12;")
        self.error.setWordWrap(True)
        self.error.hide()
        form = QFormLayout()
        form.addRow("Collective:", self.collective)
        form.addRow("Message sizes:", self.sizes)
        form.addRow("Switches:", self.switch_mode)
        form.addRow("", self.full)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Compare")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("Build ForestColl, NCCL-style rings, Blink, TACOS and "
                                "contention-free rings for this topology and simulate "
                                "them on one α-β model."))
        layout.addLayout(form)
        layout.addWidget(self.error)
        layout.addWidget(buttons)

    def parsed_sizes(self) -> tuple[int, ...] | None:
        """The sizes in bytes, or None (with the reason shown) when the text is wrong."""
        try:
            sizes = tuple(parse_size(t) for t in self.sizes.text().split(",") if t.strip())
        except CanopyError as exc:
            self.error.setText(str(exc))
            self.error.show()
            return None
        if not sizes:
            self.error.setText("Name at least one message size, such as 1M.")
            self.error.show()
            return None
        return tuple(sorted(set(sizes)))

    def options(self) -> CompareOptions | None:
        """The chosen options, or None (with the reason shown) while the sizes are wrong."""
        sizes = self.parsed_sizes()
        if sizes is None:
            return None
        return CompareOptions(collective=self.collective.currentText(), sizes=sizes,
                              switch_mode=self.switch_mode.currentText(),
                              full=self.full.isChecked())

    def accept(self) -> None:
        if self.options() is not None:
            super().accept()


class CompareController(QObject):
    """The Compare Algorithms action, its dialog and the dock."""

    def __init__(self, window: MainWindow, controller: ComputeController):
        super().__init__(window)
        self.window = window
        self.dock = CompareDock(window.doc, controller, window)
        self.dialog: CompareDialog | None = None
        window.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.dock)
        window.tabifyDockWidget(window.validation, self.dock)
        window.validation.raise_()
        action = QAction("Compare &Algorithms…", window)
        action.setShortcut("Ctrl+Shift+C")
        tip = "Compare ForestColl with rings, Blink, TACOS and LR rings on this topology"
        action.setStatusTip(tip)
        action.setToolTip(tip)
        action.triggered.connect(self.open_dialog)
        controller.busy_changed.connect(lambda busy: action.setEnabled(not busy))
        self.actions = {"compare": action}
        self.dock.compared.connect(self._compared)

    def _compared(self, comparison: Comparison, seconds: float) -> None:
        self.window.solver.plots.set_comparison(comparison, self.dock.signature)
        self.window.statusBar().showMessage(
            f"Compared {len(comparison.rows)} algorithms for {comparison.collective} in "
            f"{seconds:.1f} s.", 8000)

    def open_dialog(self) -> CompareDialog | None:
        """Ask for the options (window-modal, non-blocking); None while the engine is busy."""
        if self.dock.controller.busy:
            self.window.statusBar().showMessage("Wait for the running computation, or "
                                                "cancel it, before comparing.", 4000)
            return None
        dialog = CompareDialog(self.dock.options, self.window)
        self.dialog = dialog
        dialog.accepted.connect(lambda: self._start_chosen(dialog))
        dialog.finished.connect(dialog.deleteLater)
        dialog.open()
        return dialog

    def _start_chosen(self, dialog: CompareDialog) -> None:
        options = dialog.options()
        if options is not None:         # accepted, so the sizes parse
            self.start(**options)

    def start(self, **options: Unpack[CompareOptions]) -> None:
        if self.dock.start(**options):
            self.window.resizeDocks([self.dock], [DOCK_HEIGHT], Qt.Orientation.Vertical)

