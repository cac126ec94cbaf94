"""File ▸ New from Generator…: forms built from the registry, live preview, errors, OK."""

from fractions import Fraction

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QComboBox, QLineEdit, QMessageBox, QSpinBox

from canopy.app.commands import edit_nodes
from canopy.app.dialogs import preview as preview_module
from canopy.app.dialogs.generator_dialog import GeneratorDialog, recipe_of
from canopy.engine.forestcoll.optimum import find_optimum
from canopy.engine.generators import GENERATORS, generate
from canopy.engine.generators.params import BOOL, CHOICE, INT
from canopy.engine.model.topology import format_gbps
from canopy.engine.network.indexed import Network

WIDGETS = {INT: QSpinBox, CHOICE: QComboBox, BOOL: QCheckBox}


@pytest.fixture
def dialog(qtbot):
    dlg = GeneratorDialog()
    qtbot.addWidget(dlg)
    dlg.show()
    wait_preview(qtbot, dlg)
    yield dlg
    dlg.reject()


def wait_preview(qtbot, dlg) -> None:
    qtbot.waitUntil(dlg.up_to_date, timeout=10000)


def set_params(qtbot, dlg, kind: str, **texts: str) -> None:
    dlg.set_kind(kind)
    dlg.current_form().set_texts(texts)
    wait_preview(qtbot, dlg)


def test_every_kind_has_a_form_built_from_its_specs(dialog):
    assert dialog.kinds.count() == len(GENERATORS)
    for kind, gen in GENERATORS.items():
        dialog.set_kind(kind)
        form = dialog.current_form()
        assert dialog.stack.currentWidget() is form and gen.title in dialog.summary.text()
        assert list(form.fields) == [p.name for p in gen.params]
        defaults = gen.defaults()
        for spec in gen.params:
            field = form.fields[spec.name]
            assert isinstance(field.widget, WIDGETS.get(spec.type, QLineEdit))
            assert field.text() == spec.format(spec.default)
            assert field.widget.isEnabled() == spec.is_relevant(defaults)
        assert form.texts() == {p.name: p.format(p.default) for p in gen.params}


def test_irrelevant_fields_are_greyed_out_as_others_change(dialog):
    form = dialog.forms["cluster"]
    fields = form.fields
    assert not fields["spines"].widget.isEnabled() and not fields["pcie_bw"].widget.isEnabled()
    fields["scale_out"].set_text("leaf-spine")
    assert fields["spines"].widget.isEnabled() and fields["oversubscription"].widget.isEnabled()
    fields["nics_per_gpu"].set_text("1/2")
    assert fields["pcie_bw"].widget.isEnabled() and fields["pcie_bw"].label.isEnabled()


def test_the_field_with_focus_is_explained_under_the_form(qtbot, dialog):
    dialog.activateWindow()
    qtbot.waitActive(dialog)
    field = dialog.forms["cluster"].fields["oversubscription"]
    dialog.forms["cluster"].fields["scale_out"].set_text("leaf-spine")
    field.widget.setFocus()
    qtbot.waitUntil(lambda: "downlink : uplink" in dialog.help.text())


def test_changing_a_parameter_updates_counts_and_optimum(qtbot, dialog):
    set_params(qtbot, dialog, "ring", n="8")
    assert dialog.counts.text().startswith("8 nodes (8 compute, 0 switches) · 8 links")
    assert dialog.view.has_picture()
    set_params(qtbot, dialog, "ring", n="12", bandwidth="12.5")
    assert dialog.counts.text().startswith("12 nodes (12 compute, 0 switches) · 12 links")
    expected = find_optimum(Network.from_topology(
        generate("ring", {"n": "12", "bandwidth": "12.5"}))).algbw()
    assert f"{format_gbps(expected)} GB/s" in dialog.optimum.text()
    assert dialog.ok.isEnabled()


def test_typing_fast_asks_for_one_preview(qtbot, dialog):
    dialog.set_kind("torus")
    seen = []
    dialog.updated.connect(lambda: seen.append(dialog.counts.text()))
    for dims in ("2", "2x", "2x3", "2x3x2"):
        dialog.forms["torus"].fields["dims"].widget.setText(dims)
    wait_preview(qtbot, dialog)
    qtbot.wait(50)
    assert len(seen) == 1 and seen[0].startswith("12 nodes")


def test_a_bad_field_shows_the_sentence_and_disables_ok(qtbot, dialog):
    dialog.set_kind("cluster")
    dialog.current_form().fields["gpu_bw"].widget.setText("fast")
    assert not dialog.ok.isEnabled()
    assert dialog.error.text() == ("“GPU bandwidth” is 'fast', which is not a number; give a "
                                   "number in GB/s or one with its unit, e.g. 400Gb/s.")
    assert dialog.canvas.currentWidget() is dialog.placeholder
    dialog.current_form().fields["gpu_bw"].widget.setText("450")
    wait_preview(qtbot, dialog)
    assert dialog.ok.isEnabled() and not dialog.error.text()


def test_parameters_the_generator_refuses_disable_ok(qtbot, dialog):
    set_params(qtbot, dialog, "cluster", rails="9")
    assert not dialog.ok.isEnabled()
    assert dialog.error.text().startswith("“Rails” is 9 but each server has only 8 NICs")
    set_params(qtbot, dialog, "cluster", rails="4")
    assert dialog.ok.isEnabled() and dialog.counts.text().startswith("38 nodes")


def test_large_topologies_are_counted_not_drawn(qtbot, dialog, monkeypatch):
    monkeypatch.setattr(preview_module, "PREVIEW_NODES", 50)
    monkeypatch.setattr(preview_module, "OPTIMUM_LIMIT", 10)
    set_params(qtbot, dialog, "torus", dims="4x4x4")
    assert dialog.counts.text().startswith("64 nodes")
    assert dialog.canvas.currentWidget() is dialog.placeholder
    assert "Too large to preview" in dialog.placeholder.text()
    assert "optimum is computed here for fewer than" in dialog.optimum.text()
    assert dialog.ok.isEnabled()


def test_ok_with_a_preview_still_pending_generates_the_current_parameters(qtbot, dialog):
    dialog.set_kind("hypercube")
    dialog.current_form().fields["dimension"].set_text("4")
    assert dialog.timer.isActive()
    dialog.ok.click()
    assert dialog.result() == GeneratorDialog.DialogCode.Accepted
    assert len(dialog.topology().nodes) == 16


def test_ok_on_refused_parameters_not_yet_previewed_says_why_and_stays(qtbot, dialog):
    dialog.set_kind("cluster")
    dialog.current_form().fields["rails"].set_text("9")
    assert dialog.timer.isActive() and dialog.ok.isEnabled()
    dialog.ok.click()
    assert dialog.isVisible() and dialog.topology() is None
    assert dialog.error.text().startswith("“Rails” is 9") and not dialog.ok.isEnabled()


def test_ok_opens_the_topology_as_a_new_document(qtbot, window, dialogs):
    edit_nodes(window.doc, ["n0.gpu0"], "label", "changed")
    window.named_actions["new_from_generator"].trigger()
    dlg = window.library.generator_dialog
    set_params(qtbot, dlg, "torus", dims="2x2x2", bandwidth="25")
    dialogs.answers["warning"] = QMessageBox.StandardButton.Cancel
    dlg.ok.click()
    assert dialogs.kinds() == ["warning"], "the unsaved-changes question comes first"
    assert window.doc.node("n0.gpu0").label == "changed", "cancel keeps the document"

    window.named_actions["new_from_generator"].trigger()
    dlg = window.library.generator_dialog
    set_params(qtbot, dlg, "torus", dims="2x2x2", bandwidth="25")
    dialogs.answers["warning"] = QMessageBox.StandardButton.Discard
    dlg.ok.click()
    topo = window.doc.topology
    assert len(topo.compute_nodes()) == 8 and {link.bandwidth for link in topo.links} == {25}
    assert window.doc.path is None and window.doc.display_name == "torus-2x2x2"
    assert topo.extra["generator"] == {"kind": "torus",
                                       "params": {"dims": "2x2x2", "bandwidth": "25"}}
    assert all(n.x is not None for n in topo.nodes)
    assert window.named_actions["edit_generator"].isEnabled()


def test_edit_generator_parameters_reopens_prefilled_and_is_undoable(qtbot, window):
    assert not window.named_actions["edit_generator"].isEnabled(), "the sample has no recipe"
    window.doc.set_topology(generate("cluster", {"servers": "3", "gpus": "4",
                                                 "fabric": "ring"}))
    assert window.named_actions["edit_generator"].isEnabled()
    window.named_actions["edit_generator"].trigger()
    dlg = window.library.generator_dialog
    assert dlg.kind() == "cluster" and dlg.windowTitle() == "Edit Generator Parameters"
    fields = dlg.current_form().fields
    assert (fields["servers"].text(), fields["gpus"].text(), fields["fabric"].text()) == \
        ("3", "4", "ring")
    set_params(qtbot, dlg, "cluster", gpus="2")
    dlg.ok.click()
    assert len(window.doc.topology.compute_nodes()) == 6 and window.doc.modified
    window.doc.undo_stack.undo()
    assert len(window.doc.topology.compute_nodes()) == 12
    assert window.doc.topology.extra["generator"]["params"]["gpus"] == "4"


def test_a_recipe_from_a_hand_edited_file_is_shown_with_its_problem(qtbot):
    dlg = GeneratorDialog(recipe={"kind": "torus", "params": {"dims": "4xx4", "colour": "red"}})
    qtbot.addWidget(dlg)
    assert dlg.kind() == "torus" and dlg.current_form().fields["dims"].text() == "4xx4"
    assert dlg.error.text() == "“Dims” is '4xx4'; give sizes like 4x4x4."
    assert not dlg.ok.isEnabled()
    dlg.reject()


def test_unknown_generator_kinds_offer_no_parameters(window):
    topo = generate("ring", {"n": "4"})
    topo.extra["generator"] = {"kind": "moebius", "params": {}}
    window.doc.set_topology(topo)
    assert not window.named_actions["edit_generator"].isEnabled()
    assert recipe_of(topo) is None and window.library.edit_generator() is None


def test_cancel_while_a_preview_is_being_built(qtbot):
    dlg = GeneratorDialog()
    qtbot.addWidget(dlg)
    dlg.set_kind("torus")
    dlg.current_form().fields["dims"].widget.setText("40x40x10")
    dlg.timer.timeout.emit()
    dlg.timer.stop()
    dlg.reject()
    assert not dlg.worker.busy


def test_exact_bandwidths_reach_the_topology(qtbot, dialog):
    set_params(qtbot, dialog, "ring", n="3", bandwidth="1/3")
    dialog.ok.click()
    assert {link.bandwidth for link in dialog.topology().links} == {Fraction(1, 3)}


def test_kind_list_shows_titles_with_summaries(dialog):
    item = dialog.kinds.item(0)
    gen = next(iter(GENERATORS.values()))
    assert item.text() == gen.title and item.toolTip().startswith(gen.summary[0].upper())
    assert item.data(Qt.ItemDataRole.UserRole) == gen.kind


def test_the_chosen_unit_reaches_the_topology(qtbot, dialog):
    set_params(qtbot, dialog, "ring", n="3", bandwidth="100")
    dialog.unit.setCurrentText("Gb/s")
    dialog.ok.click()
    topo = dialog.topology()
    assert topo.bandwidth_unit == "Gb/s"
    assert {link.bandwidth for link in topo.links} == {Fraction(25, 2)}


def test_a_gpu_model_fills_its_fields_and_is_stored(qtbot, dialog):
    """Choosing H100 shows 450 GB/s NVLink and 400 Gb/s NICs; the generated topology keeps
    the model (its SMs feed the exports)."""
    dialog.set_kind("cluster")
    form = dialog.current_form()
    form.fields["gpu"].widget.setCurrentText("h100")
    assert form.fields["gpu_bw"].text() == "450 GB/s"
    assert form.fields["nic_bw"].text() == "50 GB/s"
    wait_preview(qtbot, dialog)
    dialog.accept()
    topo = dialog.topology()
    assert topo.extra["gpu"]["model"] == "h100" and topo.extra["gpu"]["sms"] == 132
    assert {link.bandwidth for link in topo.links if "nvswitch" in link.target} == {450}
