"""File ▸ Import ▸ InfiniBand Fabric… and File ▸ Export ▸ Slurm topology.conf… in the editor."""


from PySide6.QtWidgets import QInputDialog

from bench.ib_dump_writer import fat_tree, remove_node, write_dump
from canopy.engine.io.slurm_topology import parse_topology_conf
from tests import DATA

HOST_XML = DATA / "nccl-dgx-a100-dump.xml"


def _dump(tmp_path, text=None):
    dump = fat_tree(16, rails=2, hosts_per_leaf=4, spines=2)
    remove_node(dump, dump.adapters[("node009", 1)])
    path = tmp_path / "fabric.txt"
    path.write_text(text if text is not None else write_dump(dump))
    return path


def test_ib_import_opens_the_cluster_and_lists_its_defects(window, dialogs, tmp_path):
    dialogs.open_path = str(_dump(tmp_path))
    window.named_actions["import_ib"].trigger()
    dialog = window.library.ib_dialog
    assert dialog is not None and dialog.isVisible() and dialog.ok.isEnabled()
    dialog.host_topo.setText(str(HOST_XML))
    dialog.ok.click()
    topo = window.doc.topology
    assert len(topo.compute_nodes()) == 16 * 8 and window.doc.display_name == "fabric"
    listed = window.library.warnings_dialog.warnings()
    assert any(line.startswith("few adapters: host node009") for line in listed)
    assert "16 hosts, 31 adapters" in window.statusBar().currentMessage()
    assert not dialogs.calls


def test_ib_import_of_a_cut_dump_says_why_and_stays_open(window, dialogs, tmp_path):
    text = write_dump(fat_tree(4, hosts_per_leaf=2, spines=1))
    dialogs.open_path = str(_dump(tmp_path, text[:len(text) // 2]))
    before = window.doc.topology
    window.named_actions["import_ib"].trigger()
    dialog = window.library.ib_dialog
    dialog.ok.click()
    assert dialogs.kinds() == ["critical"]
    assert "fabric.txt" in dialogs.calls[0][2] and dialogs.calls[0][2].endswith(".")
    assert dialog.isVisible() and window.doc.topology is before


def test_export_slurm(window, dialogs, tmp_path, monkeypatch):
    monkeypatch.setattr(QInputDialog, "getItem",
                        staticmethod(lambda parent, title, label, items, *a, **k:
                                     (items[0], True)))
    dialogs.save_path = str(tmp_path / "topology.conf")
    window.named_actions["export_slurm"].trigger()
    conf = parse_topology_conf((tmp_path / "topology.conf").read_text())
    assert conf.plugin == "tree" and sorted(s.nodes for s in conf.switches)[0] == ["n0", "n1"]
