"""Live validation, the ``canopy gui`` command (screenshots, errors) and auto layout."""

import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

from PySide6.QtGui import QImage

from canopy.app.commands import InsertItems, delete, edit_links
from canopy.cli import main
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.auto_layout import auto_layout, has_placeholder_layout
from canopy.engine.model.topology import Link, Node, Topology


def test_unbalanced_node_is_reported_and_clickable(window, qtbot):
    doc, dock = window.doc, window.validation
    key = next(k for k in doc.link_keys() if doc.link(k).source == "n0.gpu3"
               and doc.link(k).target == "n0.nic3")
    dock.check_now()
    edit_links(doc, [key], "duplex", False)
    assert dock.messages()[0].startswith("✓"), "the check waits for a pause in editing"
    qtbot.waitUntil(lambda: dock.messages()[0].startswith("⚠"), timeout=2000)
    assert any("unbalanced" in m for m in dock.messages())
    assert "problem" in window.validation_label.text()
    item = next(dock.list.item(i) for i in range(dock.list.count())
                if "'n0.gpu3' is unbalanced" in dock.list.item(i).text())
    dock.list.itemClicked.emit(item)
    assert window.scene.selected_node_ids() == ["n0.gpu3"]
    doc.undo_stack.undo()
    dock.check_now()
    assert dock.messages()[0].startswith("✓")


def test_cut_off_compute_node_and_bad_link_select_culprits(window):
    doc, dock = window.doc, window.validation
    doc.undo_stack.push(InsertItems(doc, [Node("lonely", "compute", "", None, 0, -400)], [],
                                    "Add"))
    dock.check_now()
    assert "'lonely' cannot be reached" in dock.messages()[0]
    dock.list.itemClicked.emit(dock.list.item(0))
    assert "lonely" in window.scene.selected_node_ids()
    delete(doc, ["lonely"], [])
    doc.undo_stack.push(InsertItems(doc, [], [Link("n0.gpu0", "n0.gpu0", Fraction(5))], "Add"))
    dock.check_now()
    assert "to itself" in dock.messages()[0]
    dock.list.itemClicked.emit(dock.list.item(0))
    assert window.scene.selected_link_keys() == [doc.link_keys()[-1]]


def image_is_not_blank(path: Path) -> None:
    image = QImage(str(path))
    assert image.width() > 100 and image.height() > 100
    colours = {image.pixel(x, y) for x in range(0, image.width(), 7)
               for y in range(0, image.height(), 7)}
    assert len(colours) > 20, "a real picture has many colours"
    # the canvas shows green compute nodes and blue switches
    rgb = [((c >> 16) & 255, (c >> 8) & 255, c & 255) for c in colours]
    assert any(g > r + 30 and g > b + 30 for r, g, b in rgb)
    assert any(b > r + 40 and b > g + 10 for r, g, b in rgb)


def test_screenshot_in_process(tmp_path):
    out = tmp_path / "shot.png"
    assert main(["gui", "--screenshot", str(out), "--size", "900x600"]) == 0
    image_is_not_blank(out)
    assert QImage(str(out)).size().toTuple() == (900, 600)


def test_screenshot_command_needs_no_display(tmp_path):
    out = tmp_path / "cli.png"
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    code = "import sys; from canopy.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", code, "gui", "samples/mi250-2x16.json",
                           "--screenshot", str(out)], env=env, capture_output=True,
                          text=True, timeout=60, cwd=Path(__file__).parents[2])
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    image_is_not_blank(out)


def test_no_display_is_one_sentence_and_exit_2(tmp_path, monkeypatch, capsys):
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    assert main(["gui"]) == 2
    assert capsys.readouterr().err.startswith("canopy: there is no display")


def test_screenshot_of_bad_file_is_one_sentence_and_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "canopy-topology", "version": 1, "nodes": [{"id": 3}]}')
    assert main(["gui", str(bad), "--screenshot", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert err == f"canopy: {bad}: node 0 has no string 'id'.\n"
    assert not (tmp_path / "x.png").exists()


def test_layout_groups_become_blocks_with_switches_above():
    topo = load_sample()
    for n in topo.nodes:
        n.x = n.y = None
    auto_layout(topo)
    pos = {n.id: (n.x, n.y) for n in topo.nodes}
    assert len(set(pos.values())) == len(pos)
    for server in ("n0", "n1"):
        gpus = [pos[f"{server}.gpu{i}"] for i in range(8)]
        nics = [pos[f"{server}.nic{i}"] for i in range(8)]
        assert len({y for _, y in gpus}) == 1, "GPUs of a server share a row"
        assert all(y < gpus[0][1] for _, y in nics), "NICs (uplinks) above the GPUs"
        assert pos[f"{server}.nvswitch"][1] > gpus[0][1], "NVSwitch below"
        assert [x for x, _ in nics] == [x for x, _ in gpus], "each NIC above its GPU"
    assert pos["ib0"][1] < min(y for _, y in pos.values() if _ is not None) + 1
    assert max(x for x, _ in [pos[f"n0.gpu{i}"] for i in range(8)]) < pos["n1.gpu0"][0]


def test_layout_leaves_placed_nodes_alone_and_handles_rings():
    ring = Topology(nodes=[Node(f"g{i}") for i in range(6)],
                    links=[Link(f"g{i}", f"g{(i + 1) % 6}", Fraction(10)) for i in range(6)])
    ring.nodes[0].x, ring.nodes[0].y = 500.0, 500.0
    auto_layout(ring)
    assert (ring.nodes[0].x, ring.nodes[0].y) == (500.0, 500.0)
    assert all(n.y is not None and n.y > 500 for n in ring.nodes[1:])
    fresh = Topology(nodes=[Node(f"g{i}") for i in range(6)], links=ring.links)
    auto_layout(fresh)
    centre_x = sum(n.x for n in fresh.nodes) / 6
    centre_y = sum(n.y for n in fresh.nodes) / 6
    radii = {round(((n.x - centre_x) ** 2 + (n.y - centre_y) ** 2) ** 0.5) for n in fresh.nodes}
    assert max(radii) - min(radii) <= 2, "a plain ring is drawn on a circle"


def test_placeholder_line_coordinates_are_replaced_but_a_drawn_chain_is_kept():
    topo = load_sample()
    assert len({n.y for n in topo.nodes}) == 1, "the reference sample has stand-in coordinates"
    assert has_placeholder_layout(topo)
    auto_layout(topo)
    assert len({n.y for n in topo.nodes}) == 4, "NICs, GPUs, NVSwitches, IB switches"
    chain = Topology(nodes=[Node(f"g{i}", x=40.0 * i, y=0.0) for i in range(5)],
                     links=[Link(f"g{i}", f"g{i + 1}", Fraction(10)) for i in range(4)])
    assert not has_placeholder_layout(chain)
    auto_layout(chain)
    assert [n.x for n in chain.nodes] == [0.0, 40.0, 80.0, 120.0, 160.0]
