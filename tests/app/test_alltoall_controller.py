"""Compute ▸ Solve All-to-All: dock text, canvas drawing, XML export, cleared on edit."""

from fractions import Fraction

from canopy.app.commands import edit_links
from canopy.engine.msccl.executor import simulate_bytes


def test_solve_alltoall_draws_and_exports(window, qtbot, tmp_path):
    view = window.alltoall
    assert window.named_actions["solve_alltoall"] in window.menus["compute"].actions()
    assert not window.named_actions["export_alltoall_msccl"].isEnabled()
    window.named_actions["solve_alltoall"].trigger()
    qtbot.waitUntil(lambda: view.result is not None, timeout=120000)
    result = view.result
    # 2 x DGX A100: 64 pairs cross each way over 8 NICs of 25 GB/s: λ = 200/64
    assert result.exact and result.algbw == 16 * Fraction(200, 64) == 50
    assert "algbw" in view.label.text() and "link LP" in view.label.text()
    # the Results dock shows algbw, bound and method, in front of the other docks
    results = window.solver.results
    text = results.text("alltoall")
    assert "50 GB/s" in text and "length certificate" in text and "link LP" in text
    assert results.alltoall.isVisibleTo(results) and not results.banner.isVisibleTo(results)
    styled = [window.scene.link_item(k) for k in view._styled]
    assert styled and all(item.highlight is not None for item in styled)
    # bottleneck links are outlined and wider than the links the schedule leaves slack
    tight = {frozenset(link) for link in result.bottleneck_links()}
    outlined = [item for item in styled if frozenset((item.source, item.target)) in tight]
    assert outlined and len(outlined) < len(styled)
    out = tmp_path / "a2a.xml"
    assert window.named_actions["export_alltoall_msccl"].isEnabled()
    assert view.write_xml(str(out)) is None
    assert "the result is correct" in simulate_bytes(out.read_bytes()).summary()
    key = window.doc.link_keys()[0]
    edit_links(window.doc, [key], "bandwidth", Fraction(7))
    assert view.result is None and view._styled == []
    assert not results.alltoall.isVisibleTo(results)
    assert not window.named_actions["export_alltoall_msccl"].isEnabled()
