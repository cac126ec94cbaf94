"""Form fields built from generator parameter specs (:class:`canopy.engine.generators.ParamSpec`).

Each :class:`ParamField` pairs a spec with the widget that edits it: a spin box for whole
numbers, a combo box for one choice, a check box for yes/no and a line edit for
everything else (bandwidths, ratios, dims like ``4x4x4``, lists like ``ring,fc``). Every
field reads and writes the spec's text form, so the values a form holds are exactly what
``canopy generate`` would take on its command line and what a generated topology's
``generator`` recipe records.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from PySide6.QtCore import QEvent, QObject, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QSpinBox,
    QWidget,
)

from canopy.engine.generators import Generator, ParameterError, ParamSpec
from canopy.engine.generators.gpu_models import GPU_MODELS
from canopy.engine.generators.params import BANDWIDTH, BANDWIDTHS, BOOL, CHOICE, INT

SPIN_LIMIT = 1_000_000
"""Spin boxes of parameters without a bound stop here (the generators refuse far less)."""
INVALID_STYLE = "QLineEdit { border: 1px solid #c0392b; background: #fdecea; }"

_FLAG = re.compile(r"--[a-z][a-z0-9-]*")


class ParamField(QObject):
    """The widget editing one parameter, with its label."""

    changed = Signal()
    focused = Signal(str)
    """The widget got the keyboard focus; carries the parameter's help sentence."""

    def __init__(self, spec: ParamSpec, parent: QWidget | None = None):
        super().__init__(parent)
        self.spec = spec
        unit = " (GB/s)" if spec.type in (BANDWIDTH, BANDWIDTHS) else ""
        self.label = QLabel(spec.label + unit + ":")
        self.widget = self._make_widget(parent)
        self.label.setBuddy(self.widget)
        tip = spec.help[0].upper() + spec.help[1:] + "."
        if spec.choices and spec.type != CHOICE:
            tip += f" Choices: {', '.join(spec.choices)}."
        for w in (self.label, self.widget):
            w.setToolTip(tip)
        self.widget.setObjectName(f"param_{spec.name}")
        self.widget.installEventFilter(self)
        self.set_text(spec.format(spec.default))

    def _make_widget(self, parent: QWidget | None) -> QWidget:
        spec = self.spec
        if spec.type == INT:
            spin = QSpinBox(parent)
            spin.setRange(spec.minimum if spec.minimum is not None else -SPIN_LIMIT,
                          spec.maximum if spec.maximum is not None else SPIN_LIMIT)
            zero = re.search(r"\b0 = ([^;.,]+)", spec.help)
            if zero and spin.minimum() == 0:
                spin.setSpecialValueText(zero.group(1).strip())  # "Rails: one per NIC"
            spin.valueChanged.connect(self.changed)
            return spin
        if spec.type == CHOICE:
            combo = QComboBox(parent)
            combo.addItems(list(spec.choices))
            combo.currentIndexChanged.connect(self.changed)
            return combo
        if spec.type == BOOL:
            box = QCheckBox(parent)
            box.toggled.connect(self.changed)
            return box
        edit = QLineEdit(parent)
        if spec.choices:
            edit.setPlaceholderText(",".join(spec.choices))
        edit.textChanged.connect(self._check_text)
        edit.textChanged.connect(self.changed)
        return edit

    # ------------------------------------------------------------ text form

    def text(self) -> str:
        w = self.widget
        if isinstance(w, QSpinBox):
            return str(w.value())
        if isinstance(w, QComboBox):
            return w.currentText()
        if isinstance(w, QCheckBox):
            return "yes" if w.isChecked() else "no"
        assert isinstance(w, QLineEdit)
        return w.text()

    def set_text(self, text: str) -> None:
        """Show ``text`` (a recipe's value); values a widget cannot show keep the default."""
        w = self.widget
        try:
            value = self.spec.parse(text)
        except ParameterError:
            value = None
        if isinstance(w, QSpinBox):
            if value is not None:
                w.setValue(value)
        elif isinstance(w, QComboBox):
            if value is not None:
                w.setCurrentIndex(self.spec.choices.index(value))
        elif isinstance(w, QCheckBox):
            if value is not None:
                w.setChecked(value)
        else:
            assert isinstance(w, QLineEdit)
            w.setText(text)

    def value(self) -> Any:
        """The typed value; raises ParameterError (one sentence) if the text is unusable."""
        return self.spec.parse(self.text())

    def error(self) -> str | None:
        try:
            self.value()
        except ParameterError as exc:
            return str(exc)
        return None

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.FocusIn:
            self.focused.emit(self.widget.toolTip())
        return False

    def _check_text(self) -> None:
        self.widget.setStyleSheet("" if self.error() is None else INVALID_STYLE)

    def set_relevant(self, relevant: bool) -> None:
        self.widget.setEnabled(relevant)
        self.label.setEnabled(relevant)


class ParamForm(QWidget):
    """All parameters of one generator in a form; irrelevant ones are greyed out."""

    changed = Signal()
    focused = Signal(str)

    def __init__(self, gen: Generator, parent: QWidget | None = None):
        super().__init__(parent)
        self.gen = gen
        layout = QFormLayout(self)
        layout.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.fields: dict[str, ParamField] = {}
        for spec in gen.params:
            field = ParamField(spec, self)
            if spec.name == "gpu":       # a GPU model fills the fields it sets, then stays
                field.changed.connect(self._apply_gpu_model)
            field.changed.connect(self._on_change)
            field.focused.connect(self.focused)
            layout.addRow(field.label, field.widget)
            self.fields[spec.name] = field
        self._update_relevance()

    def texts(self) -> dict[str, str]:
        """The parameters' texts, as ``generate(kind, values)`` takes them.

        A greyed-out field whose text does not parse is left out (it takes its default):
        it does not matter, so it must not stop the generator.
        """
        return {name: field.text() for name, field in self.fields.items()
                if field.widget.isEnabled() or field.error() is None}

    def set_texts(self, texts: Mapping[str, str]) -> None:
        """Fill the fields named in ``texts`` (others keep their values)."""
        for name, text in texts.items():
            if name in self.fields:
                self.fields[name].set_text(str(text))
        self._update_relevance()

    def reset(self) -> None:
        self.set_texts({s.name: s.format(s.default) for s in self.gen.params})

    def first_error(self) -> str | None:
        """The sentence about the first relevant field whose text is unusable."""
        for field in self.fields.values():
            if field.widget.isEnabled():
                message = field.error()
                if message is not None:
                    return self.in_words(message)
        return None

    def in_words(self, message: str) -> str:
        """``message`` with command-line flags replaced by the form's labels."""
        labels = {s.flag: f"“{s.label}”" for s in self.gen.params}
        return _FLAG.sub(lambda m: labels.get(m.group(0), m.group(0)), message)

    def _typed_values(self) -> dict[str, Any]:
        """Typed values, with defaults standing in for fields that do not parse."""
        values = self.gen.defaults()
        for name, field in self.fields.items():
            try:
                values[name] = field.value()
            except ParameterError:
                pass  # a field that does not parse keeps its default
        return values

    def _update_relevance(self) -> None:
        values = self._typed_values()
        for field in self.fields.values():
            field.set_relevant(field.spec.is_relevant(values))

    def _on_change(self) -> None:
        self._update_relevance()
        self.changed.emit()

    def _apply_gpu_model(self) -> None:
        """Show the chosen GPU model's values in the fields it sets (bandwidths with their
        unit, so they hold whatever unit the dialog writes in); the user may change them."""
        model = GPU_MODELS.get(self.fields["gpu"].text())
        if model is None:
            return
        texts = {}
        for name, value in model.generator_values().items():
            spec = self.gen.param(name)
            texts[name] = (f"{spec.format(value)} GB/s" if spec.type == BANDWIDTH
                           else spec.format(value))
        for name, text in texts.items():
            self.fields[name].widget.blockSignals(True)
            self.fields[name].set_text(text)
            self.fields[name].widget.blockSignals(False)
