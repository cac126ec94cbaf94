"""File ▸ Import (NCCL topology XML, GraphML) and File ▸ Export ▸ GraphML through the GUI.

tests/data/nccl-azure-ndv2-topo.xml is Azure's published NDv2 topology file
(Azure/azhpc-images, topology/, MIT licence), unchanged.
"""

from pathlib import Path

from PySide6.QtWidgets import QMessageBox

from canopy.app.commands import edit_nodes
from canopy.app.dialogs.nccl_import_dialog import NVSWITCH
from canopy.engine.io.topology_json import load_sample
from tests import ROOT

DATA = ROOT / "tests" / "data"
NDV2 = DATA / "nccl-azure-ndv2-topo.xml"


def laughs() -> bytes:
    """A billion-laughs document: entity lol9 would expand to 10^9 'lol's."""
    decls, prev = ['<!ENTITY lol "lol">'], "lol"
    for i in range(1, 10):
        decls.append(f'<!ENTITY lol{i} "{("&" + prev + ";") * 10}">')
        prev = f"lol{i}"
    return (f'<?xml version="1.0"?>\n<!DOCTYPE system [{"".join(decls)}]>\n'
            '<system><cpu><pci busid="&lol9;" class="0x030200"/></cpu></system>').encode()


def open_nccl_dialog(window, dialogs, path: Path):
    dialogs.open_path = str(path)
    window.named_actions["import_nccl"].trigger()
    dialog = window.library.nccl_dialog
    assert dialog is not None and dialog.isVisible()
    assert dialog.file.text() == str(path)
    return dialog


def test_nccl_import_opens_the_result_and_lists_the_warnings(window, dialogs):
    dialog = open_nccl_dialog(window, dialogs, NDV2)
    assert not dialog.net.isEnabled(), "one host needs no network"
    dialog.hosts.setValue(2)
    dialog.fabric.setCurrentIndex(dialog.fabric.findData(NVSWITCH))
    dialog.fabric_bw.setText("150")
    dialog.ok.click()
    topo = window.doc.topology
    assert len(topo.compute_nodes()) == 16
    assert window.doc.display_name == "nccl-azure-ndv2-topo-x2" and window.doc.path is None
    nvswitch_links = [link for link in topo.links if "nvswitch" in link.target]
    assert len(nvswitch_links) == 16 and {link.bandwidth for link in nvswitch_links} == {150}
    warnings = window.library.warnings_dialog
    assert warnings is not None and warnings.isVisible()
    listed = warnings.warnings()
    assert len(listed) == 1
    assert "line 7" in listed[0] and '<pci busid="0101:00:00.0"' in listed[0]
    assert "“NIC bandwidth if not given”" in listed[0] and "--nic-bw" not in listed[0]
    assert "16 GPUs" in window.statusBar().currentMessage()
    assert not dialogs.calls


def test_nccl_billion_laughs_is_refused_and_the_document_stays(window, dialogs, tmp_path):
    bad = tmp_path / "laughs.xml"
    bad.write_bytes(laughs())
    before = window.doc.topology
    dialog = open_nccl_dialog(window, dialogs, bad)
    dialog.ok.click()
    assert dialogs.kinds() == ["critical"]
    _, title, text = dialogs.calls[0]
    assert title == "Cannot import NCCL topology"
    assert str(bad) in text and "entities" in text and text.endswith(".")
    assert dialog.isVisible(), "the dialog stays open to pick another file"
    assert window.doc.topology is before and window.library.warnings_dialog is None


def test_nccl_dialog_checks_its_fields_as_you_type(window, dialogs):
    dialog = open_nccl_dialog(window, dialogs, NDV2)
    assert not dialog.fabric_bw.isEnabled()
    dialog.nic_bw.setText("-3")
    assert not dialog.ok.isEnabled()
    assert dialog.error.text().startswith("The NIC bandwidth '-3'")
    dialog.nic_bw.setText("50")
    dialog.file.setText("")
    assert not dialog.ok.isEnabled() and dialog.error.text() == "Choose an NCCL topology file."
    dialog.reject()


def test_nccl_import_respects_cancel_at_the_unsaved_changes_question(window, dialogs):
    edit_nodes(window.doc, ["n0.gpu0"], "label", "changed")
    dialog = open_nccl_dialog(window, dialogs, NDV2)
    dialog.ok.click()            # the conftest answers Cancel to "save changes?"
    assert dialogs.kinds() == ["warning"]
    assert window.doc.node("n0.gpu0").label == "changed"


def test_graphml_export_import_round_trip(window, dialogs, tmp_path):
    original = window.doc.snapshot()
    dialogs.save_path = str(tmp_path / "cluster")
    assert window.named_actions["export_graphml"].isEnabled()
    window.named_actions["export_graphml"].trigger()
    written = tmp_path / "cluster.graphml"
    assert written.exists() and not list(tmp_path.glob("*.tmp"))
    assert f"Exported {written}" in window.statusBar().currentMessage()

    window.doc.set_topology(load_sample("mi250-2x16"))
    dialogs.open_path = str(written)
    window.named_actions["import_graphml"].trigger()
    topo = window.doc.topology
    assert window.doc.display_name == "cluster" and window.doc.path is None
    assert [(n.id, n.kind, n.group, n.x, n.y) for n in topo.nodes] == \
        [(n.id, n.kind, n.group, n.x, n.y) for n in original.nodes]
    assert [(link.source, link.target, link.bandwidth, link.duplex) for link in topo.links] == \
        [(link.source, link.target, link.bandwidth, link.duplex) for link in original.links]
    assert not dialogs.calls


def test_broken_graphml_is_reported_and_the_document_stays(window, dialogs, tmp_path):
    bad = tmp_path / "bad.graphml"
    bad.write_text("<graphml><graph><node id='a'/><edge source='a' target='b'>")
    before = window.doc.topology
    dialogs.open_path = str(bad)
    window.named_actions["import_graphml"].trigger()
    assert dialogs.kinds() == ["critical"] and str(bad) in dialogs.calls[0][2]
    assert window.doc.topology is before


def test_graphml_export_to_an_unwritable_place_says_so(window, dialogs, tmp_path):
    dialogs.save_path = str(tmp_path / "missing" / "dir" / "x.graphml")
    window.named_actions["export_graphml"].trigger()
    assert dialogs.kinds() == ["critical"]
    assert "x.graphml cannot be written" in dialogs.calls[0][2]


def test_menus_hold_the_library_controller(window):
    menus, acts = window.menus, window.named_actions
    assert acts["import_nccl"] in menus["import"].actions()
    assert acts["import_graphml"] in menus["import"].actions()
    assert acts["export_graphml"] in menus["export"].actions()
    file_actions = menus["file"].actions()
    assert file_actions.index(acts["new_from_generator"]) < file_actions.index(acts["open"])
    assert acts["new_from_generator"] in window.toolbars["file"].actions()
    assert QMessageBox  # the conftest replaces its statics; nothing here may block
