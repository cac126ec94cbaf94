"""Shared fabrics in the editor: jobs from the selection, Analyze Contention (results,
cancel), the heat map, and the Failed toggle in Properties."""

from canopy.engine.io.topology_json import load_sample


def _open(window, name="leaf-spine-jobs"):
    window.doc.set_topology(load_sample(name), None, display_name=name)


def test_job_from_selection_is_undoable_and_coloured(window):
    window.scene.select(["n0.gpu0", "n0.gpu1", "n1.gpu0"])
    job = window.fabric.dock.add_from_selection()
    assert job.nodes == ("n0.gpu0", "n0.gpu1", "n1.gpu0")
    assert window.doc.topology.jobs == [job] and window.doc.modified
    assert window.fabric.dock.table.rowCount() == 1
    assert len(window.fabric.marks._items) == 2        # one ring path and the crosses
    window.fabric.dock.size_field.setText("16M")
    window.fabric.dock.size_field.setModified(True)
    window.fabric.dock._commit_size()
    assert window.doc.topology.jobs[0].size == 16 << 20
    window.doc.undo_stack.undo()
    window.doc.undo_stack.undo()
    assert window.doc.topology.jobs == []
    window.scene.select(["n0.gpu0"])
    assert window.fabric.dock.add_from_selection() is None
    assert "at least 2" in window.fabric.dock.error.text()


def test_analyze_contention_fills_the_table_and_heat_map(window, qtbot):
    _open(window)
    fabric = window.fabric
    fabric.dock.seeds.setValue(10)
    assert window.named_actions["analyze_contention"].isEnabled()
    window.named_actions["analyze_contention"].trigger()
    assert window.solver.controller.wait(120000)
    assert set(fabric.dock.results) == {"ecmp", "source", "vclos"}
    table = fabric.dock.table
    assert table.rowCount() == 4
    assert float(table.item(0, 5).text()) > 1 and table.item(0, 8).text() == "1.00"
    fabric.dock.heat.setChecked(True)
    key = next(k for k in window.doc.link_keys()
               if {window.doc.link(k).source, window.doc.link(k).target} == {"leaf0",
                                                                             "spine0"})
    assert window.scene.link_item(key).highlight is not None
    fabric.dock.heat.setChecked(False)
    assert window.scene.link_item(key).highlight is None


def test_analyze_contention_can_be_cancelled(window):
    _open(window)
    fabric = window.fabric
    fabric.dock.seeds.setValue(5000)
    controller = window.solver.controller
    controller.progress.connect(lambda phase, fraction: controller.cancel())
    assert fabric.analyze()
    assert controller.wait(120000)
    assert fabric.dock.results == {}


def test_failed_toggle_in_properties(window):
    _open(window)
    fabric = window.fabric
    window.scene.select(["spine2"])
    assert fabric.node_failed.isEnabled()
    fabric.node_failed.click()
    assert window.doc.node("spine2").failed
    window.scene.select(["n0.gpu0"])
    fabric.window.properties.refresh()
    assert not fabric.node_failed.isEnabled()         # compute nodes cannot fail
    key = window.doc.link_keys()[-1]
    window.scene.select([], [key])
    fabric.link_failed.click()
    assert window.doc.link(key).failed
    assert window.doc.snapshot().capacities().get(("leaf3", "spine7")) is None
    window.doc.undo_stack.undo()
    assert not window.doc.link(key).failed


def test_vclos_rail_by_rail_placement_is_in_the_jobs_tooltip(window):
    """On a rail-optimised fabric the vClos column's tooltip says what each job holds
    on each rail (the engine's analysis, run here directly)."""
    from canopy.engine.fabric.analysis import analyze
    from canopy.engine.generators import generate
    from canopy.engine.model.workloads import Job
    topo = generate("cluster", {"servers": "4", "gpus": "2", "scale_out": "leaf-spine",
                                "leaf": "rail", "servers_per_leaf": "1", "spines": "2",
                                "oversubscription": "1/2"})
    topo.jobs = [Job("a", ("n0.gpu0", "n0.gpu1", "n2.gpu0", "n2.gpu1"))]
    window.doc.set_topology(topo, None, display_name="rails")
    dock = window.fabric.dock
    dock.results = {"vclos": analyze(topo, routing="vclos")}
    dock.refresh()
    tip = dock.table.item(0, 8).toolTip()
    assert tip.startswith("vClos rail by rail:\nrail 0: leaves leaf0.0, leaf1.0; spines "
                          "spine0; 25 GB/s reserved")
