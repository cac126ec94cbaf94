"""File ▸ Export: MSCCL XML (collective, in place or out of place; limits), the trees
listing, schedule JSON and canvas images, each written atomically, errors in dialogs."""

from fractions import Fraction

from PySide6.QtGui import QImage

import canopy.app.export
from canopy.app.commands import edit_links
from canopy.app.export import MscclChoice, MscclExportDialog
from canopy.engine.io.safe_xml import parse_xml_file
from canopy.engine.io.schedule_json import load_schedule
from canopy.engine.model.topology import Link, Node, Topology
from canopy.engine.msccl import MscclLimits
from canopy.engine.msccl.executor import simulate_bytes


def solve_in(window, qtbot, action="solve_allgather"):
    window.named_actions[action].trigger()
    qtbot.waitUntil(lambda: not window.solver.controller.busy, timeout=60000)
    window.solver.settle()
    return window.solver.controller.solution


def wait_idle(window, qtbot):
    qtbot.waitUntil(lambda: not window.solver.controller.busy, timeout=60000)


def no_temporary_files(folder):
    return not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_schedule_json(window, qtbot, dialogs, tmp_path):
    solution = solve_in(window, qtbot)
    dialogs.save_path = str(tmp_path / "s.json")
    window.named_actions["export_json"].trigger()
    schedule = load_schedule(tmp_path / "s.json")
    assert schedule.k == 13 and len(schedule.trees) == len(solution.schedule.trees)
    assert schedule.compute_nodes == solution.schedule.compute_nodes
    assert "Exported schedule JSON" in window.statusBar().currentMessage()
    assert no_temporary_files(tmp_path)


def test_trees_listing(window, qtbot, dialogs, tmp_path):
    solve_in(window, qtbot)
    dialogs.save_path = str(tmp_path / "t.xml")
    window.named_actions["export_trees"].trigger()
    root = parse_xml_file(tmp_path / "t.xml")
    assert root.tag == "trees" and root.get("k") == "13"
    assert len(root.findall("tree")) == 32


def test_canvas_png_and_svg(window, qtbot, dialogs, tmp_path):
    solve_in(window, qtbot)
    window.scene.select(["ib0"])
    dialogs.save_path = str(tmp_path / "canvas.png")
    window.named_actions["export_image"].trigger()
    image = QImage(str(tmp_path / "canvas.png"))
    assert not image.isNull() and image.width() > 1000
    # overlays are in the picture: the tree colour appears somewhere
    colours = {image.pixelColor(x, y).name()
               for x in range(0, image.width(), 3) for y in range(0, image.height(), 3)}
    assert "#7b2cbf" in colours
    assert window.scene.selected_node_ids() == ["ib0"]  # selection restored
    dialogs.save_path = str(tmp_path / "canvas.svg")
    window.named_actions["export_image"].trigger()
    text = (tmp_path / "canvas.svg").read_text()
    assert "<svg" in text and "n0.gpu0" in text
    dialogs.save_path = str(tmp_path / "noext")
    window.named_actions["export_image"].trigger()
    assert not QImage(str(tmp_path / "noext.png")).isNull()
    assert no_temporary_files(tmp_path)


def test_image_export_works_without_results(window, dialogs, tmp_path):
    dialogs.save_path = str(tmp_path / "plain.png")
    assert window.named_actions["export_image"].isEnabled()
    assert not window.named_actions["export_json"].isEnabled()
    window.named_actions["export_image"].trigger()
    assert (tmp_path / "plain.png").exists()


def test_msccl_in_place_and_out_of_place(window, qtbot, dialogs, monkeypatch, tmp_path):
    solve_in(window, qtbot)
    for collective, inplace in [("allgather", True), ("allreduce", False)]:
        monkeypatch.setattr(MscclExportDialog, "ask",
                            staticmethod(lambda *a, c=collective, i=inplace: MscclChoice(c, i)))
        path = tmp_path / f"{collective}.xml"
        dialogs.save_path = str(path)
        window.named_actions["export_msccl"].trigger()
        assert window.solver.controller.busy  # runs in the background
        wait_idle(window, qtbot)
        report = simulate_bytes(path.read_bytes())
        assert report.coll == collective and report.ngpus == 16
        assert report.modes == (["in place"] if inplace else ["out of place"])
        assert "Exported MSCCL XML" in window.statusBar().currentMessage()
        run = window.solver.exporter.run_dialog
        assert run.isVisible() and f"-x MSCCL_XML_FILES={path}" in run.command.toPlainText()
        binary = "all_gather_perf" if collective == "allgather" else "all_reduce_perf"
        assert f"{binary} -b 1M -e 1G -f 2 -g 1" in run.command.toPlainText()
        run.close()
    assert dialogs.calls == []


def test_msccl_dialog_offers_only_the_solved_collective_on_one_way_networks(window, qtbot):
    solve_in(window, qtbot)
    assert window.solver.exporter.msccl_collectives() == [
        "allgather", "reduce-scatter", "allreduce"]
    ring = Topology("one-way ring", [Node("a"), Node("b"), Node("c")],
                    [Link("a", "b", Fraction(10), duplex=False),
                     Link("b", "c", Fraction(10), duplex=False),
                     Link("c", "a", Fraction(10), duplex=False)])
    window.doc.set_topology(ring)
    solve_in(window, qtbot, "solve_reduce_scatter")
    exporter = window.solver.exporter
    assert exporter.msccl_collectives() == ["reduce-scatter"]
    dialog = MscclExportDialog(window.solver.controller.solution.schedule,
                               exporter.msccl_collectives(), window)
    assert dialog.collective.count() == 1
    assert dialog.choice() == MscclChoice("reduce-scatter", True, 4, "msccl")


def test_msccl_limits_error_names_the_largest_fitting_k(window, qtbot, dialogs, monkeypatch,
                                                         tmp_path):
    solve_in(window, qtbot)
    # at k = 13 a GPU of 2 x DGX A100 needs more than 60 XML elements (the parser counts
    # the root, every <gpu>, thread block and step); at k = 4 it does not
    monkeypatch.setattr(canopy.app.export, "LIMITS", MscclLimits(max_elements_per_gpu=60))
    monkeypatch.setattr(MscclExportDialog, "ask",
                        staticmethod(lambda *a: MscclChoice("allgather", True)))
    dialogs.save_path = str(tmp_path / "big.xml")
    window.named_actions["export_msccl"].trigger()
    wait_idle(window, qtbot)
    kind, title, text = dialogs.calls[-1]
    assert (kind, title) == ("critical", "Exporting MSCCL XML failed")
    assert "at k = 13; the largest fixed k that fits is" in text
    assert "Compute ▸ Solve with Fixed k" in text
    assert not (tmp_path / "big.xml").exists()


def test_write_errors_appear_in_dialogs(window, qtbot, dialogs, monkeypatch, tmp_path):
    solve_in(window, qtbot)
    missing = tmp_path / "no" / "such" / "dir"
    for action, name in [("export_json", "s.json"), ("export_trees", "t.xml"),
                         ("export_image", "c.png")]:
        dialogs.save_path = str(missing / name)
        window.named_actions[action].trigger()
        kind, title, text = dialogs.calls[-1]
        assert kind == "critical" and title.startswith("Cannot export")
        assert text == (f"{missing / name} cannot be written: the folder {missing} does not "
                        "exist.")
    monkeypatch.setattr(MscclExportDialog, "ask",
                        staticmethod(lambda *a: MscclChoice("allgather", False)))
    dialogs.save_path = str(missing / "m.xml")
    window.named_actions["export_msccl"].trigger()
    wait_idle(window, qtbot)
    kind, title, text = dialogs.calls[-1]
    assert (kind, title) == ("critical", "Exporting MSCCL XML failed")
    assert str(missing / "m.xml") in text and "\n" not in text


def test_cancelled_dialogs_write_nothing(window, qtbot, dialogs, monkeypatch, tmp_path):
    solve_in(window, qtbot)
    dialogs.save_path = ""
    for action in ("export_json", "export_trees", "export_image"):
        window.named_actions[action].trigger()
    monkeypatch.setattr(MscclExportDialog, "ask", staticmethod(lambda *a: None))
    window.named_actions["export_msccl"].trigger()
    assert not window.solver.controller.busy
    assert not [p for p in tmp_path.iterdir() if p.suffix in (".json", ".xml", ".png")]


def test_schedule_exports_refuse_stale_results(window, qtbot, dialogs, tmp_path):
    solve_in(window, qtbot)
    edit_links(window.doc, [window.doc.link_keys()[0]], "bandwidth", Fraction(50))
    # even before the deferred check ran, an export never writes the old schedule
    assert window.solver.exporter.export_json(tmp_path / "s.json") is False
    assert dialogs.calls[-1][1] == "No current results"
    assert not (tmp_path / "s.json").exists()
    assert not window.named_actions["export_json"].isEnabled()
    assert not window.named_actions["export_msccl"].isEnabled()
    assert window.named_actions["export_image"].isEnabled()


def test_nccl_graph_export_writes_checks_and_shows_the_run_command(window, qtbot, dialogs,
                                                                   tmp_path):
    dialogs.save_path = str(tmp_path / "rings.xml")
    assert window.named_actions["export_nccl_graph"].isEnabled()      # no solve needed
    window.named_actions["export_nccl_graph"].trigger()
    wait_idle(window, qtbot)
    assert (tmp_path / "rings.xml").read_bytes().startswith(b"<graphs")
    run = window.solver.exporter.run_dialog
    text = run.command.toPlainText()
    assert f"-x NCCL_GRAPH_FILE={tmp_path / 'rings.xml'}" in text and "-np 16 -N 8" in text
    assert "8 ring channels" in window.statusBar().currentMessage()
    run.close()
    assert dialogs.calls == []


def test_msccl_export_writes_what_the_command_line_writes(tmp_path):
    """On rail-leaf-spine-4x8 the optimal k = 10 would share connections, so the editor's
    export, like `canopy solve --msccl`, writes the schedule that executes fastest, the
    fewest-trees schedule within 1 % (k = 1, one chunk per GPU), and says so."""
    from canopy.engine.forestcoll.solve import solve
    from canopy.engine.io.topology_json import load_sample

    topo = load_sample("rail-leaf-spine-4x8.json")
    schedule = solve(topo, "allgather")
    assert schedule.k == 10
    path = tmp_path / "rail.xml"
    summary, config = canopy.app.export.export_msccl(topo, schedule,
                                                    MscclChoice("allgather", True), path,
                                                    lambda phase, fraction: None)
    assert config is None
    assert "fewest trees within" in summary and "runs k = 1 " in summary
    root = parse_xml_file(path)
    assert root.get("nchunksperloop") == "32"     # one chunk per GPU: k = 1


def test_msccl_export_writes_an_xml_per_size_range_and_the_config(tmp_path, monkeypatch):
    """Where smaller messages run another schedule (runtime_schedule's ``below``), the
    editor's export writes an XML per size range and the config, as the command line."""
    from canopy.engine.deploy.runtime_choice import BOUNDARY, RuntimeChoice
    from canopy.engine.forestcoll.solve import solve
    from canopy.engine.io.topology_json import load_sample
    from canopy.engine.model.plan import schedule_plan

    topo = load_sample("hypercube-3d.json")
    large, small = solve(topo, "allgather", k=2), solve(topo, "allgather", k=1)
    below = RuntimeChoice(small, schedule_plan(small), schedule_plan(small), layout="unit")
    split = RuntimeChoice(large, schedule_plan(large), schedule_plan(large), layout="unit",
                          below=below, boundary=BOUNDARY)
    monkeypatch.setattr("canopy.engine.deploy.msccl_export.runtime_schedule", lambda *args: split)
    summary, config = canopy.app.export.export_msccl(topo, large,
                                                    MscclChoice("allgather", True),
                                                    tmp_path / "ag.xml",
                                                    lambda phase, fraction: None)
    assert config == str(tmp_path / "ag-config.xml")
    assert summary.startswith("ag-below-512M.xml for below 512M: allgather, 8 GPUs")
    assert "\nag.xml for 512M and above: " in summary      # a line per file
    assert summary.endswith("\nag-config.xml names each XML's size range")
    assert [load.get("path") for load in parse_xml_file(config)] == [
        str(tmp_path / "ag-below-512M.xml"), str(tmp_path / "ag.xml")]
    assert parse_xml_file(tmp_path / "ag.xml").get("minBytes") == str(BOUNDARY)
    # for RCCL: no config (it would load it as an algorithm), and what else the folder holds
    for f in tmp_path.iterdir():
        f.unlink()
    (tmp_path / "topo.json").write_text("{}")
    summary, config = canopy.app.export.export_msccl(
        topo, large, MscclChoice("allgather", True, runtime="rccl"), tmp_path / "ag.xml",
        lambda phase, fraction: None)
    assert config is None and not (tmp_path / "ag-config.xml").exists()
    assert summary.endswith(f"RCCL loads every file in MSCCL_ALGO_DIR ({tmp_path}) as an "
                            "MSCCL algorithm, and that folder also holds topo.json: move "
                            "the exported XMLs to a folder of their own before running.")
