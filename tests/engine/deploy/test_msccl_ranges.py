"""An MSCCL XML per message-size range where runtime_schedule chooses differently for small
messages (connections.RuntimeChoice.below): compare's row, the files and their ranges, the
config, ``canopy solve --msccl`` and ``canopy check-xml`` on each XML."""

from fractions import Fraction

import pytest

import canopy.engine.deploy.msccl_export as msccl_export
from canopy.cli import main
from canopy.engine.comparison.table import _plans_by_size
from canopy.engine.deploy.msccl_ranges import config_path, config_xml, msccl_files
from canopy.engine.deploy.run_commands import run_command
from canopy.engine.deploy.runtime_choice import BOUNDARY, RuntimeChoice, runtime_schedule
from canopy.engine.execution.simulate import fastest
from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.safe_xml import parse_xml_bytes, parse_xml_file
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.plan import schedule_plan
from canopy.engine.msccl import MscclOptions, plan_xml
from canopy.engine.msccl.executor import simulate_file

# One worker runs the module: what its fixtures compute is kept per process.
pytestmark = pytest.mark.xdist_group("engine-deploy-test_msccl_ranges")

SAMPLE = "hypercube-3d.json"


@pytest.fixture(scope="module")
def split():
    """A choice that runs k = 2 from 512 MiB and k = 1 below (as the chooser does where
    candidates cross between 256 MiB and 1 GiB, test_msccl_near_tie.py)."""
    topo = load_sample(SAMPLE)
    large, small = solve(topo, "allgather", k=2), solve(topo, "allgather", k=1)
    below = RuntimeChoice(small, schedule_plan(small), schedule_plan(small), layout="unit")
    choice = RuntimeChoice(large, schedule_plan(large), schedule_plan(large), layout="unit",
                           note="runs k = 2 from 512 MiB and k = 1 below it", below=below,
                           boundary=BOUNDARY)
    return topo, choice


def test_each_size_runs_its_range(split):
    _, choice = split
    assert choice.at(256 << 20) is choice.below and choice.at(BOUNDARY) is choice
    assert choice.at(1 << 30) is choice
    assert choice.ranges() == [(0, BOUNDARY, choice.below), (BOUNDARY, None, choice)]
    plan_at = _plans_by_size(choice)           # compare's ForestColl row
    assert plan_at(Fraction(256 << 20)) is choice.below.plan
    assert plan_at(Fraction(1 << 30)) is choice.plan
    assert choice.describe()["below"]["k"] == 1


def test_files_and_config_name_each_range(split, tmp_path):
    _, choice = split
    options = MscclOptions()
    files = msccl_files(tmp_path / "ag.xml", choice, options)
    assert [f.path for f in files] == [str(tmp_path / "ag-below-512M.xml"),
                                       str(tmp_path / "ag.xml")]
    small, large = (parse_xml_bytes(f.data) for f in files)
    # RCCL / msccl-executor-nccl read these (both ends included)
    assert (small.get("minBytes"), small.get("maxBytes")) == ("0", str(BOUNDARY - 1))
    assert (large.get("minBytes"), large.get("maxBytes")) == (str(BOUNDARY), str(2**63 - 1))
    assert small.get("nchunksperloop") == "8" and large.get("nchunksperloop") == "16"
    config = parse_xml_bytes(config_xml(files, options.protocol))
    assert config.tag == "msccl_algos"
    loads = [dict(load.attrib) for load in config]
    assert loads == [{"path": files[0].path, "minbytes": "0", "maxbytes": str(BOUNDARY),
                      "proto": "Simple"},
                     {"path": files[1].path, "minbytes": str(BOUNDARY), "proto": "Simple"}]
    assert config_path(tmp_path / "ag.xml") == str(tmp_path / "ag-config.xml")
    # microsoft/msccl loads the config; RCCL the folder, whose XMLs carry their ranges
    msccl = run_command("msccl", "/x/ag.xml", "allgather", 8, 8, "/x/ag-config.xml")
    assert "-x MSCCL_CONFIG=/x/ag-config.xml" in msccl and "MSCCL_XML_FILES" not in msccl
    rccl = run_command("rccl", "/x/ag.xml", "allgather", 8, 8, "/x/ag-config.xml")
    assert "-x MSCCL_ALGO_DIR=/x " in rccl


def test_one_choice_is_todays_single_xml(tmp_path):
    topo = load_sample(SAMPLE)
    choice = runtime_schedule(topo, solve(topo, "allgather"))
    assert choice.below is None and choice.ranges() == [(0, None, choice)]
    options = MscclOptions()
    [only] = msccl_files(tmp_path / "ag.xml", choice, options)
    assert only.path == str(tmp_path / "ag.xml") and only.sizes_text() == "every size"
    assert only.data == plan_xml(choice.plan, choice.schedule.k, options)


def test_solve_writes_an_xml_per_range_that_check_xml_times_as_compare(split, tmp_path,
                                                                      capsys, monkeypatch):
    topo, choice = split
    monkeypatch.setattr(msccl_export, "runtime_schedule", lambda *args: choice)
    out = tmp_path / "ag.xml"
    assert main(["solve", f"samples/{SAMPLE}", "--msccl", str(out), "--print-run"]) == 0
    printed = capsys.readouterr().out
    below, above, config = (tmp_path / "ag-below-512M.xml", tmp_path / "ag.xml",
                            tmp_path / "ag-config.xml")
    # the file the user named holds the largest messages' XML; the smaller ones' beside it
    assert above == out and below.exists() and above.exists() and config.exists()
    assert "2 MSCCL XMLs are written, one per size range (" + str(out) + " for the largest)" \
        in printed
    assert f"MSCCL XML:       {below} (" in printed and "below 512M)" in printed
    assert f"MSCCL XML:       {above} (" in printed and "512M and above)" in printed
    assert f"MSCCL config:    {config}" in printed
    assert f"-x MSCCL_CONFIG={config}" in printed
    assert [load.get("path") for load in parse_xml_file(config)] == [str(below), str(above)]
    for path, part, size in [(below, choice.below, 256 << 20), (above, choice, 1 << 30)]:
        assert simulate_file(path).coll == "allgather"
        assert main(["check-xml", str(path), "--topology", f"samples/{SAMPLE}",
                     "--size", f"{size >> 20}M"]) == 0
        line = capsys.readouterr().out
        algbw = float(line.split("algbw ")[1].split()[0])
        expected = float(fastest(topo, part.plan, size).algbw)     # GB/s, as compare
        assert abs(algbw - expected) <= 0.02 * expected, line
        assert "Note:" not in line
    assert main(["check-xml", str(below), "--topology", f"samples/{SAMPLE}",
                 "--size", "1G"]) == 0        # outside its range: said, still timed
    assert f"runs messages of 0 to {BOUNDARY - 1} bytes (minBytes, maxBytes), so the " \
        "runtime would not run it at 1G." in capsys.readouterr().out


def test_rccl_export_writes_no_config_and_names_what_else_its_folder_holds(split, tmp_path,
                                                                          capsys,
                                                                          monkeypatch):
    """RCCL reads every file of MSCCL_ALGO_DIR as an algorithm: an RCCL export writes the
    XMLs alone (no config, which RCCL would read as an algorithm) and says which other
    files of that folder RCCL would also load."""
    _, choice = split
    monkeypatch.setattr(msccl_export, "runtime_schedule", lambda *args: choice)
    out = tmp_path / "ag.xml"
    argv = ["solve", f"samples/{SAMPLE}", "--msccl", str(out), "--msccl-runtime", "rccl",
            "--print-run"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ag-below-512M.xml", "ag.xml"]
    assert "each carrying its range, which RCCL reads from their folder" in printed
    assert f"-x MSCCL_ALGO_DIR={tmp_path} " in printed and "Note:" not in printed
    (tmp_path / "trees.xml").write_text("<trees/>")
    (tmp_path / ".notes").write_text("x")
    assert main(argv) == 0
    assert (f"Note: RCCL loads every file in MSCCL_ALGO_DIR ({tmp_path}) as an MSCCL "
            "algorithm, and that folder also holds .notes, trees.xml: move the exported "
            "XMLs to a folder of their own before running.") in capsys.readouterr().out
