"""The tool bar's bandwidth for new links is in the topology's unit, or the unit typed."""

from fractions import Fraction

from PySide6.QtGui import QValidator

from canopy.app.commands import SetBandwidthUnit
from canopy.app.docks.properties import UnitNumberValidator


def type_bandwidth(window, text):
    window.new_link_bandwidth.setText(text)
    window.new_link_bandwidth.editingFinished.emit()


def test_the_field_follows_the_topology_unit(window):
    assert window.new_link_unit.text().strip() == "GB/s"
    assert window.new_link_bandwidth.text() == "25"
    doc = window.doc
    doc.undo_stack.push(SetBandwidthUnit(doc, "Gb/s"))
    assert window.new_link_unit.text().strip() == "Gb/s"
    assert window.new_link_bandwidth.text() == "200", "25 GB/s said in Gb/s"
    type_bandwidth(window, "400")
    assert window.scene.new_link_bandwidth == Fraction(50)


def test_a_unit_typed_after_the_number_is_honoured(window):
    type_bandwidth(window, "400 Gb/s")
    assert window.scene.new_link_bandwidth == Fraction(50)
    assert window.new_link_bandwidth.text() == "50", "shown again in the topology's unit"
    type_bandwidth(window, "1 GiB/s")
    assert window.scene.new_link_bandwidth == Fraction(2**30, 10**9)


def test_the_validator_accepts_a_unit_being_typed():
    v = UnitNumberValidator()
    state = QValidator.State
    assert v.validate("400 Gb/s", 0) == state.Acceptable
    assert v.validate("400 Gb", 0) == state.Intermediate
    assert v.validate("400", 0) == state.Acceptable
    assert v.validate("400 x", 0) == state.Invalid
