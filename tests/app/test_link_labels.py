"""Every link's bandwidth readable at the window sizes people use, and no bandwidth sitting
over another link or a node: a number on its own link where a free spot exists, one label
at a hub for its fan of equal links, and always the link's colour keyed in the legend."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QPainterPathStroker

from canopy.engine.io.topology_json import load_sample

SIZES = [(1280, 800), (1920, 1080)]


def _fitted(window, qtbot, sample, size):
    window.doc.set_topology(load_sample(sample), None, display_name=sample)
    window.resize(*size)
    qtbot.wait(20)
    window.view.zoom_to_fit()
    window.scene.apply_zoom()
    return window.scene, window.view.zoom()


def _line(link):
    """The area the link's line covers on the canvas (its pen's width)."""
    stroker = QPainterPathStroker()
    stroker.setWidth(link.pen_width())
    return stroker.createStroke(link.path())


def _boxes(scene, zoom):
    """(what, rect, link it belongs to or None) of every shown bandwidth and hub label."""
    out = []
    for link in scene.link_items():
        if link.bandwidth_label.text:
            out.append((f"{link.source}-{link.target}", link.label_rect(
                link.bandwidth_label.pos()), link))
    for node in scene.node_items():
        if node.fan_label.text:
            out.append((f"hub {node.node_id}", node.fan_rect(
                node.fan_label.pos() + node.pos(), node.fan_label.text, zoom), None))
    return out


@pytest.mark.parametrize("sample", ["mi250-2x16", "dgx-a100-2x8"])
def test_no_bandwidth_covers_another_link_or_a_node_and_every_link_reads(window, qtbot,
                                                                         sample):
    for size in SIZES:
        scene, zoom = _fitted(window, qtbot, sample, size)
        links = scene.link_items()
        lines = {id(link): _line(link) for link in links}
        boxes = _boxes(scene, zoom)
        names = [node.name_rect(node.name_label.text, zoom) for node in scene.node_items()
                 if node.name_label.text]
        for what, rect, own in boxes:
            over = [f"{k.source}-{k.target}" for k in links
                    if k is not own and lines[id(k)].intersects(rect)]
            assert not over, f"{sample} at {size}: the label of {what} covers {over}"
            bodies = [n.node_id for n in scene.node_items()
                      if n.body().translated(n.pos()).intersects(rect)]
            assert not bodies, f"{sample} at {size}: the label of {what} covers {bodies}"
        rects = [rect for _, rect, _ in boxes] + names
        for i, a in enumerate(rects):
            assert not any(a.intersects(b) for b in rects[i + 1:])
        # every link: its own number, its hub's label, or its colour in the legend
        fanned = {key for node in scene.node_items() for key in node.fan_links}
        legend = dict(scene.bandwidth_classes)
        assert window.bandwidth_legend.isVisible() == bool(legend)
        assert window.bandwidth_legend.texts() == list(legend)
        for link in links:
            if link.bandwidth_label.text or link.key in fanned:
                continue
            assert link.color.rgba() == legend[link.text].rgba(), (
                f"{sample} at {size}: {link.source}-{link.target} shows no bandwidth")
        colours = [c.rgba() for c in legend.values()]
        assert len(set(colours)) == len(colours)


def test_mi250s_infiniband_fan_is_one_label_at_the_switch(window, qtbot):
    """The 32 InfiniBand links of 2 x MI250 converge on one switch, where no number of
    their own fits; one label beside the switch says all 32 carry 16 GB/s, and it covers
    none of them; the Infinity Fabric links keep numbers where they have room (1920 x
    1080) and their colours in the legend: 200, 100, 50 and 16 GB/s."""
    scene, zoom = _fitted(window, qtbot, "mi250-2x16", (1920, 1080))
    ib = scene.node_item("ib")
    assert ib.fan_label.text == "32 × 16" and len(ib.fan_links) == 32
    assert not any(link.bandwidth_label.text for link in scene.link_items()
                   if "ib" in (link.source, link.target))
    assert ib.fan_label.pos().y() < 0      # above the switch, away from its links
    assert window.bandwidth_legend.texts() == ["200", "100", "50", "16"]
    numbered = {link.text for link in scene.link_items() if link.bandwidth_label.text}
    assert {"200", "100", "50"} <= numbered


def test_one_bandwidth_needs_no_legend(window, qtbot):
    from canopy.engine.generators import generate
    window.doc.set_topology(generate("torus", {"dims": "3x3", "bandwidth": "50"}), None)
    qtbot.wait(20)
    window.scene.apply_zoom()
    assert window.scene.bandwidth_classes == [] and not window.bandwidth_legend.isVisible()


def test_a_highlight_leaves_every_bandwidth_where_the_scene_placed_it(window, qtbot):
    """Showing a tree recolours its links (and marks them) without moving a label: a
    bandwidth the scene hid for want of room stays hidden (the NVSwitch links of a 4 x 8
    rail leaf-spine at 1920 x 1080 have room for two of eight), one it placed stays there,
    and clearing the highlight leaves them as they were."""
    from PySide6.QtGui import QColor

    from canopy.engine.generators import generate

    window.doc.set_topology(generate("cluster", {"servers": 4, "gpus": 8, "gpu_bw": 450,
                                                 "nic_bw": 50, "scale_out": "leaf-spine"}),
                            None)
    window.resize(1920, 1080)
    qtbot.wait(20)
    window.view.zoom_to_fit()
    window.scene.apply_zoom()
    links = window.scene.link_items()

    def labels():
        return [(link.bandwidth_label.text, link.bandwidth_label.pos().toTuple())
                for link in links]

    placed = labels()
    shown = [text for text, _ in placed if text == "450"]
    assert 0 < len(shown) < sum(link.text == "450" for link in links)
    for link in links:
        link.set_highlight(QColor("purple"), 3.0, marks=((link.target, "1"),))
    assert labels() == placed
    for link in links:
        link.set_highlight(None)
    assert labels() == placed
