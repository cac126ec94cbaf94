"""File ▸ New from Generator…: pick a kind, set its parameters, watch a live preview.

The kinds and their forms come from canopy.engine.generators.GENERATORS, so a new generator
appears here without any change. Every edit restarts a short timer (DEBOUNCE_MS); when it
fires, a background worker generates the topology, counts it and, below
preview.OPTIMUM_LIMIT nodes, computes its exact optimum. A parameter the generator
refuses shows the generator's sentence (with the form's labels in place of command-line
flags) and disables OK.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QCursor
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QScrollArea,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from canopy.app.dialogs.param_fields import ParamForm
from canopy.app.dialogs.preview import (
    OPTIMUM_LIMIT,
    OPTIMUM_LINKS,
    PREVIEW_LINKS,
    PREVIEW_NODES,
    Preview,
    PreviewView,
    PreviewWorker,
)
from canopy.engine.generators import GENERATORS, generate
from canopy.engine.generators.params import DIMS, INT
from canopy.engine.model.errors import CanopyError
from canopy.engine.model.topology import Topology, format_gbps
from canopy.engine.model.units import GBPS, UNITS

DEBOUNCE_MS = 200
ERROR_STYLE = "color: #8a1c12;"
NOTE_STYLE = "color: #4b5668;"


def recipe_of(topology: Topology) -> dict[str, Any] | None:
    """The ``generator`` recipe of a topology if it names a known kind, else None."""
    recipe = topology.extra.get("generator")
    if isinstance(recipe, Mapping) and recipe.get("kind") in GENERATORS:
        params = recipe.get("params")
        return {"kind": recipe["kind"],
                "params": dict(params) if isinstance(params, Mapping) else {}}
    return None


def document_name(kind: str, texts: Mapping[str, str]) -> str:
    """A short, file-name-friendly name for a generated document: ``cluster-2-8``."""
    sizes = [texts[p.name] for p in GENERATORS[kind].params
             if p.type in (INT, DIMS) and p.name in texts][:2]
    return "-".join([kind, *sizes])


class GeneratorDialog(QDialog):
    """Choose a generator and its parameters; :meth:`topology` is the result after OK."""

    updated = Signal()
    """The preview now shows the current parameters (or their error)."""

    def __init__(self, parent: QWidget | None = None,
                 recipe: Mapping[str, Any] | None = None):
        super().__init__(parent)
        self.setWindowTitle("Edit Generator Parameters" if recipe else "New from Generator")
        self.preview: Preview | None = None
        self._result: Topology | None = None
        self._serial = 0
        self._shown = -1

        self.kinds = QListWidget()
        self.kinds.setObjectName("generator_kinds")
        for gen in GENERATORS.values():
            item = QListWidgetItem(gen.title)
            item.setData(Qt.ItemDataRole.UserRole, gen.kind)
            item.setToolTip(gen.summary[0].upper() + gen.summary[1:] + ".")
            self.kinds.addItem(item)
        self.kinds.setMaximumWidth(230)
        self.kinds.setSpacing(2)

        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.help = QLabel()
        self.help.setWordWrap(True)
        self.help.setStyleSheet(NOTE_STYLE)
        self.forms: dict[str, ParamForm] = {}
        self.stack = QStackedWidget()
        for kind, gen in GENERATORS.items():
            form = ParamForm(gen)
            form.changed.connect(self._parameters_changed)
            form.focused.connect(self.help.setText)
            self.forms[kind] = form
            self.stack.addWidget(form)
        scroll = QScrollArea()
        scroll.setWidget(self.stack)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setMinimumWidth(330)
        self.unit = QComboBox()
        self.unit.setObjectName("generator_unit")
        self.unit.addItems(list(UNITS))
        self.unit.setCurrentText(str((recipe or {}).get("unit", GBPS)))
        self.unit.setToolTip("The unit of the bandwidth parameters; the new topology keeps it")
        unit_row = QHBoxLayout()
        unit_row.addWidget(QLabel("Bandwidth unit:"))
        unit_row.addWidget(self.unit, 1)
        self.error = QLabel()
        self.error.setObjectName("generator_error")
        self.error.setWordWrap(True)
        self.error.setStyleSheet(ERROR_STYLE)

        self.view = PreviewView()
        self.view.setMinimumSize(460, 330)
        self.placeholder = QLabel()
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setWordWrap(True)
        self.placeholder.setStyleSheet(NOTE_STYLE + " background: white;")
        self.canvas = QStackedWidget()
        self.canvas.addWidget(self.view)
        self.canvas.addWidget(self.placeholder)
        self.counts = QLabel()
        self.counts.setObjectName("generator_counts")
        self.optimum = QLabel()
        self.optimum.setObjectName("generator_optimum")
        self.optimum.setWordWrap(True)
        self.optimum.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                        | QDialogButtonBox.StandardButton.Cancel)
        self.ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.ok.setText("Apply" if recipe else "Create")
        defaults = QPushButton("Defaults")
        defaults.setToolTip("Reset this kind's parameters to their defaults")
        defaults.clicked.connect(lambda: self.current_form().reset())
        self.buttons.addButton(defaults, QDialogButtonBox.ButtonRole.ResetRole)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)

        middle = QVBoxLayout()
        middle.addWidget(self.summary)
        middle.addWidget(scroll, 1)
        middle.addLayout(unit_row)
        middle.addWidget(self.help)
        middle.addWidget(self.error)
        right = QVBoxLayout()
        right.addWidget(self.canvas, 1)
        right.addWidget(self.counts)
        right.addWidget(self.optimum)
        grid = QGridLayout(self)
        grid.addWidget(QLabel("Kind:"), 0, 0)
        grid.addWidget(self.kinds, 1, 0)
        grid.addLayout(middle, 0, 1, 2, 1)
        grid.addLayout(right, 0, 2, 2, 1)
        grid.addWidget(self.buttons, 2, 0, 1, 3)
        grid.setColumnStretch(2, 1)
        grid.setRowStretch(1, 1)

        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(DEBOUNCE_MS)
        self.timer.timeout.connect(self._request_preview)
        self.worker = PreviewWorker(self)
        self.worker.ready.connect(self._show_preview)
        app = QApplication.instance()
        if app is not None:              # never leave a running thread behind at exit
            app.aboutToQuit.connect(self.worker.stop)
        self.kinds.currentRowChanged.connect(self._kind_changed)

        kind = recipe["kind"] if recipe else next(iter(GENERATORS))
        if recipe:
            self.forms[kind].set_texts(recipe.get("params", {}))
        self.set_kind(kind)
        self.resize(1120, 600)

    # ------------------------------------------------------------ state

    def kind(self) -> str:
        item = self.kinds.currentItem()
        return item.data(Qt.ItemDataRole.UserRole) if item else next(iter(GENERATORS))

    def set_kind(self, kind: str) -> None:
        self.kinds.setCurrentRow(list(GENERATORS).index(kind))

    def current_form(self) -> ParamForm:
        return self.forms[self.kind()]

    def topology(self) -> Topology | None:
        """The generated topology once the dialog was accepted."""
        return self._result

    def document_name(self) -> str:
        return document_name(self.kind(), self.current_form().texts())

    def up_to_date(self) -> bool:
        """True once the preview shows the current parameters."""
        return not self.timer.isActive() and self._shown == self._serial

    # ------------------------------------------------------------ updates

    def _kind_changed(self) -> None:
        gen = GENERATORS[self.kind()]
        self.stack.setCurrentWidget(self.forms[gen.kind])
        self.summary.setText(f"<b>{gen.title}</b>: {gen.summary}.")
        self.help.setText("Click a field to see what it means.")
        self._parameters_changed()

    def _parameters_changed(self) -> None:
        """Check the fields now; regenerate the preview once typing pauses."""
        self._serial += 1
        problem = self.current_form().first_error()
        self._set_error(problem)
        self.counts.setText("Updating preview…" if problem is None else "")
        if problem is None:
            self.timer.start()
        else:
            self.timer.stop()
            self.optimum.setText("")
            self._show_note("No preview until the parameter below the form is fixed.")

    def _request_preview(self) -> None:
        self.worker.request(self._serial, self.kind(), self.current_form().texts())

    def _show_preview(self, serial: int, preview: Preview) -> None:
        if serial != self._serial:
            return                      # the parameters changed since: a newer one comes
        self._shown = serial
        self.preview = preview
        self._display(preview)
        self.updated.emit()

    def _display(self, preview: Preview) -> None:
        form = self.current_form()
        if preview.error is not None:
            self._set_error(form.in_words(preview.error))
            self.counts.setText("")
            self.optimum.setText("")
            self._show_note("No preview: the parameters above need a change.")
            return
        self._set_error(None)
        topo = preview.topology
        assert topo is not None
        self.counts.setText(f"{len(topo.nodes)} nodes ({len(topo.compute_nodes())} compute, "
                            f"{len(topo.switch_nodes())} switches) · {len(topo.links)} links")
        self.optimum.setStyleSheet(NOTE_STYLE)
        if preview.problems:
            self.optimum.setStyleSheet(ERROR_STYLE)
            self.optimum.setText("⚠ " + preview.problems[0])
        elif preview.optimum is not None:
            opt = preview.optimum
            inside = len(set(opt.bottleneck_cut) & opt.network.compute_set)
            self.optimum.setText(
                f"Optimal allgather: <b>{format_gbps(opt.algbw())} GB/s</b> algbw "
                f"(allreduce {format_gbps(opt.algbw('allreduce'))} GB/s); "
                f"k = {opt.k} tree{'s' if opt.k != 1 else ''} per node; the bottleneck cut "
                f"holds {inside} of the {len(opt.network.compute)} compute nodes.")
        else:
            self.optimum.setText(f"The optimum is computed here for fewer than {OPTIMUM_LIMIT} "
                                 f"nodes and at most {OPTIMUM_LINKS:,} links; Create, then "
                                 "solve it in the editor.")
        if preview.picture is None:
            self._show_note(f"Too large to preview: the preview draws up to "
                            f"{PREVIEW_NODES:,} nodes and {PREVIEW_LINKS:,} links.")
        else:
            self.canvas.setCurrentWidget(self.view)
            self.view.show_picture(preview.picture)

    def _show_note(self, text: str) -> None:
        self.view.show_picture(None)
        self.placeholder.setText(text)
        self.canvas.setCurrentWidget(self.placeholder)

    def _set_error(self, message: str | None) -> None:
        self.error.setText("" if message is None else message[0].upper() + message[1:])
        self.error.setVisible(message is not None)
        self.ok.setEnabled(message is None)

    # ------------------------------------------------------------ closing

    def accept(self) -> None:
        """Use the previewed topology if it is current, else generate it now."""
        kind, texts = self.kind(), self.current_form().texts()
        preview = self.preview
        unit = self.unit.currentText()
        if preview is not None and preview.topology is not None and preview.kind == kind \
                and preview.texts == texts and unit == GBPS:
            self._result = preview.topology
        else:
            QApplication.setOverrideCursor(QCursor(Qt.CursorShape.WaitCursor))
            try:
                self._result = generate(kind, texts, unit=unit)
            except CanopyError as exc:
                self._set_error(self.current_form().in_words(str(exc)))
                return
            finally:
                QApplication.restoreOverrideCursor()
        super().accept()

    def done(self, result: int) -> None:
        self.timer.stop()
        self.worker.stop()
        super().done(result)
