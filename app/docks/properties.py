"""The Properties dock: edit the selected nodes and links (several at once).

Fields show the common value of the selection, or stay blank when the values differ;
whatever is typed applies to every selected item as one undoable step. Bandwidths are
checked as you type and kept exact (``Fraction`` from the decimal text).
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import TypeVar

from PySide6.QtCore import QTimer
from PySide6.QtGui import QValidator
from PySide6.QtWidgets import (
    QComboBox,
    QDockWidget,
    QFormLayout,
    QGroupBox,
    QLabel,
    QLineEdit,
    QVBoxLayout,
    QWidget,
)

from canopy.app.canvas.scene import TopologyScene
from canopy.app.commands import (
    RenameNode,
    RenameTopology,
    SetBandwidthUnit,
    edit_links,
    edit_nodes,
)
from canopy.app.document import Document
from canopy.app.naming import counted
from canopy.engine.model.topology import NODE_KINDS, format_gbps, parse_bandwidth
from canopy.engine.model.units import UNITS, from_gbps, to_gbps

_PARTIAL_NUMBER = re.compile(r"^\s*(\d*\.?\d*|\d+\s*/\s*\d*)\s*$")
INVALID_STYLE = "QLineEdit { background: #ffd9d6; }"
VARIOUS = "(various)"


class NumberValidator(QValidator):
    """Accepts a positive number (``300``, ``12.5``, ``1/3``); zero too if ``allow_zero``.

    An empty field is acceptable when ``optional`` (it clears the value).
    """

    def __init__(self, optional: bool = False, allow_zero: bool = False,
                 parent: QWidget | None = None):
        super().__init__(parent)
        self.optional = optional
        self.allow_zero = allow_zero

    def parse(self, text: str) -> Fraction | None:
        """The exact value of ``text``; raises ValueError with a reason if it is not valid."""
        if not text.strip():
            if self.optional:
                return None
            raise ValueError("is empty")
        if self.allow_zero and re.fullmatch(r"\s*0*\.?0*\s*", text) and any(
                c == "0" for c in text):
            return Fraction(0)
        return parse_bandwidth(text)

    def validate(self, text: str, pos: int) -> object:
        try:
            self.parse(text)
            return QValidator.State.Acceptable
        except (ValueError, ZeroDivisionError):
            pass  # not a whole number yet: maybe the start of one
        if _PARTIAL_NUMBER.match(text):
            return QValidator.State.Intermediate
        return QValidator.State.Invalid


def split_unit(text: str) -> tuple[str, str | None]:
    """``"400 Gb/s"`` -> ``("400", "Gb/s")``; text without a unit -> ``(text, None)``."""
    stripped = text.strip()
    for unit in sorted(UNITS, key=len, reverse=True):
        if stripped.endswith(unit):
            return stripped[:-len(unit)], unit
    return text, None


class UnitNumberValidator(NumberValidator):
    """A positive number, optionally followed by a unit (``400 Gb/s``, ``25 GB/s``)."""

    def parse(self, text: str) -> Fraction | None:
        return super().parse(split_unit(text)[0])

    def validate(self, text: str, pos: int) -> object:
        number, unit = split_unit(text)
        if unit is None:
            # part of a unit being typed after the number ("400 G", "400 Gb/")
            match = re.fullmatch(r"(.*?\d)\s*([GgIiBb/s]*)", text.strip())
            if match and match.group(2):
                if any(u.startswith(match.group(2)) for u in UNITS):
                    state = super().validate(match.group(1), pos)
                    return (QValidator.State.Intermediate
                            if state != QValidator.State.Invalid else state)
                return QValidator.State.Invalid
        return super().validate(number, pos)


T = TypeVar("T")


def _common(values: list[T]) -> T | str | None:
    """The one value of ``values``; :data:`VARIOUS` if they differ; None if empty."""
    first = values[0] if values else None
    return first if all(v == first for v in values) else VARIOUS


class PropertiesDock(QDockWidget):
    """Fields for the current selection, or the topology's name when nothing is selected."""

    def __init__(self, doc: Document, scene: TopologyScene, parent: QWidget | None = None):
        super().__init__("Properties", parent)
        self.setObjectName("PropertiesDock")
        self.doc = doc
        self.scene = scene
        self._nodes: list[str] = []
        self._links: list[int] = []
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(0)
        self._timer.timeout.connect(self.refresh)

        body = QWidget()
        body.setMinimumWidth(280)
        layout = QVBoxLayout(body)
        self.topology_box = QGroupBox("Topology")
        form = QFormLayout(self.topology_box)
        self.name_edit = QLineEdit()
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.unit_combo = QComboBox()
        self.unit_combo.setObjectName("bandwidth_unit")
        self.unit_combo.addItems(list(UNITS))
        self.unit_combo.setToolTip("The unit bandwidths are typed, shown and saved in; "
                                   "changing it keeps every bandwidth's value (exact)")
        form.addRow("Name", self.name_edit)
        form.addRow("Bandwidth unit", self.unit_combo)
        form.addRow("Contents", self.summary)

        self.node_box = QGroupBox("Node")
        form = QFormLayout(self.node_box)
        self.id_edit = QLineEdit()
        self.label_edit = QLineEdit()
        self.kind_combo = QComboBox()
        self.kind_combo.addItems(list(NODE_KINDS))
        self.group_combo = QComboBox()
        self.group_combo.setEditable(True)
        group_edit = self.group_combo.lineEdit()
        assert group_edit is not None           # an editable combo box has one
        self.group_edit = group_edit
        self.node_error = QLabel()
        self.node_error.setStyleSheet("color: #b3261e;")
        self.node_error.setWordWrap(True)
        form.addRow("Id", self.id_edit)
        form.addRow("Label", self.label_edit)
        form.addRow("Kind", self.kind_combo)
        form.addRow("Group", self.group_combo)
        form.addRow(self.node_error)

        self.link_box = QGroupBox("Link")
        self.link_form = form = QFormLayout(self.link_box)
        self.ends = QLabel()
        self.bandwidth_edit = QLineEdit()
        self.bandwidth_validator = NumberValidator(parent=self)
        self.bandwidth_edit.setValidator(self.bandwidth_validator)
        self.bandwidth_edit.setToolTip("in each direction, in the topology's bandwidth unit; "
                                       "decimals like 12.5 are exact")
        self.direction_combo = QComboBox()
        self.direction_combo.addItems(["duplex", "one-way"])
        self.direction_combo.setToolTip("duplex: the bandwidth in each direction; "
                                        "one-way: from the first end to the second only")
        self.latency_edit = QLineEdit()
        self.latency_validator = NumberValidator(optional=True, allow_zero=True, parent=self)
        self.latency_edit.setValidator(self.latency_validator)
        self.latency_edit.setPlaceholderText("none")
        self.link_error = QLabel()
        self.link_error.setStyleSheet("color: #b3261e;")
        form.addRow("Ends", self.ends)
        form.addRow("Bandwidth (GB/s)", self.bandwidth_edit)
        form.addRow("Direction", self.direction_combo)
        form.addRow("Latency (µs)", self.latency_edit)
        form.addRow(self.link_error)

        layout.addWidget(self.topology_box)
        layout.addWidget(self.node_box)
        layout.addWidget(self.link_box)
        layout.addStretch(1)
        self.setWidget(body)

        self.name_edit.editingFinished.connect(self._commit_name)
        self.unit_combo.activated.connect(self._commit_unit)
        self.id_edit.editingFinished.connect(self._commit_id)
        self.label_edit.editingFinished.connect(self._commit_label)
        self.kind_combo.activated.connect(self._commit_kind)
        self.group_edit.editingFinished.connect(self._commit_group)
        self.group_combo.activated.connect(self._commit_group)
        self.bandwidth_edit.textEdited.connect(
            lambda: self._check(self.bandwidth_edit, self.bandwidth_validator, "bandwidth"))
        self.latency_edit.textEdited.connect(
            lambda: self._check(self.latency_edit, self.latency_validator, "latency"))
        self.bandwidth_edit.editingFinished.connect(self._commit_bandwidth)
        self.latency_edit.editingFinished.connect(self._commit_latency)
        self.direction_combo.activated.connect(self._commit_direction)
        scene.selectionChanged.connect(self._timer.start)
        doc.edited.connect(self._timer.start)
        doc.reset.connect(self._timer.start)
        self.refresh()

    # ------------------------------------------------------------ showing

    def refresh(self) -> None:
        """Show the selection's values (called after selection changes and edits)."""
        self._nodes = [n for n in self.scene.selected_node_ids() if self.doc.has_node(n)]
        self._links = [k for k in self.scene.selected_link_keys()]
        self.topology_box.setVisible(not self._nodes and not self._links)
        self.node_box.setVisible(bool(self._nodes))
        self.link_box.setVisible(bool(self._links))
        topo = self.doc.topology
        self._set_text(self.name_edit, topo.name)
        self.unit_combo.setCurrentText(topo.bandwidth_unit)
        label = self.link_form.labelForField(self.bandwidth_edit)
        if isinstance(label, QLabel):
            label.setText(f"Bandwidth ({topo.bandwidth_unit})")
        self.summary.setText(f"{len(topo.compute_nodes())} compute, "
                             f"{counted(len(topo.switch_nodes()), 'switch')}, "
                             f"{counted(len(topo.links), 'link')}")
        if self._nodes:
            self._show_nodes()
        if self._links:
            self._show_links()

    def _set_text(self, edit: QLineEdit, value: object) -> None:
        if edit.hasFocus() and edit.isModified():
            return
        edit.setStyleSheet("")
        if value == VARIOUS:
            edit.setText("")
            edit.setPlaceholderText(VARIOUS)
        else:
            edit.setText("" if value is None else str(value))
            edit.setCursorPosition(0)
        edit.setModified(False)

    def _show_nodes(self) -> None:
        nodes = [self.doc.node(n) for n in self._nodes]
        single = len(nodes) == 1
        self.node_box.setTitle("Node" if single else f"{len(nodes)} nodes")
        self.id_edit.setEnabled(single)
        self._set_text(self.id_edit, nodes[0].id if single else VARIOUS)
        self._set_text(self.label_edit, _common([n.label or n.id for n in nodes]))
        kind = _common([n.kind for n in nodes])
        self.kind_combo.setCurrentIndex(-1 if kind == VARIOUS else NODE_KINDS.index(kind))
        group = _common([n.group or "" for n in nodes])
        self.group_combo.blockSignals(True)
        self.group_combo.clear()
        self.group_combo.addItems([""] + self.doc.groups())
        self.group_combo.setCurrentText("" if group == VARIOUS else str(group))
        self.group_edit.setPlaceholderText(VARIOUS if group == VARIOUS else "none")
        self.group_combo.blockSignals(False)
        self.node_error.setText("")

    def _show_links(self) -> None:
        links = [self.doc.link(k) for k in self._links]
        single = len(links) == 1
        self.link_box.setTitle("Link" if single else f"{len(links)} links")
        first = links[0]
        arrow = "⟷" if first.duplex else "→"
        self.ends.setText(f"{first.source} {arrow} {first.target}" if single
                          else f"{len(links)} links")
        bandwidth = _common([link.bandwidth for link in links])
        unit = self.doc.topology.bandwidth_unit
        self._set_text(self.bandwidth_edit, bandwidth if isinstance(bandwidth, str) or
                       bandwidth is None else format_gbps(from_gbps(bandwidth, unit)))
        duplex = _common([link.duplex for link in links])
        self.direction_combo.setCurrentIndex(-1 if duplex == VARIOUS else (0 if duplex else 1))
        latency = _common([link.latency for link in links])
        self._set_text(self.latency_edit, latency if isinstance(latency, str) or
                       latency is None else format_gbps(latency))
        self.link_error.setText("")

    def _check(self, edit: QLineEdit, validator: NumberValidator, what: str) -> None:
        try:
            validator.parse(edit.text())
        except (ValueError, ZeroDivisionError) as exc:
            edit.setStyleSheet(INVALID_STYLE)
            self.link_error.setText(
                f"The {what} {exc}: type a positive number such as 25 or 12.5.")
            return
        edit.setStyleSheet("")
        self.link_error.setText("")

    # ------------------------------------------------------------ committing

    def _commit_name(self) -> None:
        name = self.name_edit.text().strip()
        if name and name != self.doc.topology.name:
            self.doc.undo_stack.push(RenameTopology(self.doc, name))

    def _commit_unit(self, index: int) -> None:
        unit = self.unit_combo.itemText(index)
        if unit != self.doc.topology.bandwidth_unit:
            self.doc.undo_stack.push(SetBandwidthUnit(self.doc, unit))

    def _commit_id(self) -> None:
        if len(self._nodes) != 1 or not self.id_edit.isModified():
            return
        old, new = self._nodes[0], self.id_edit.text().strip()
        self.id_edit.setModified(False)
        if new == old:
            return
        if not new:
            self.node_error.setText("A node id cannot be empty.")
        elif self.doc.has_node(new):
            self.node_error.setText(f"There is already a node '{new}'.")
        else:
            self.doc.undo_stack.push(RenameNode(self.doc, old, new))
            self.scene.select([new])
            return
        self.id_edit.setStyleSheet(INVALID_STYLE)

    def _commit_label(self) -> None:
        if self._nodes and self.label_edit.isModified() and self.label_edit.text().strip():
            self.label_edit.setModified(False)
            edit_nodes(self.doc, self._nodes, "label", self.label_edit.text().strip())

    def _commit_kind(self, index: int) -> None:
        if self._nodes and index >= 0:
            edit_nodes(self.doc, self._nodes, "kind", NODE_KINDS[index])

    def _commit_group(self) -> None:
        text = self.group_combo.currentText().strip()
        if not self._nodes:
            return
        nodes = [self.doc.node(n) for n in self._nodes]
        if not text and len({n.group for n in nodes}) > 1:
            return  # "(various)" left blank: leave each group as it is
        edit_nodes(self.doc, self._nodes, "group", text or None)

    def _commit_bandwidth(self) -> None:
        if self._links and self.bandwidth_edit.isModified():
            self.bandwidth_edit.setModified(False)
            value = self.bandwidth_validator.parse(self.bandwidth_edit.text())
            if value is not None:
                value = to_gbps(value, self.doc.topology.bandwidth_unit)
            edit_links(self.doc, self._links, "bandwidth", value)

    def _commit_latency(self) -> None:
        if self._links and self.latency_edit.isModified():
            self.latency_edit.setModified(False)
            value = self.latency_validator.parse(self.latency_edit.text())
            edit_links(self.doc, self._links, "latency", value)

    def _commit_direction(self, index: int) -> None:
        if self._links and index >= 0:
            edit_links(self.doc, self._links, "duplex", index == 0)

