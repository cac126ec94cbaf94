"""`canopy compare` and the comparison rows behind it."""

import json
from fractions import Fraction

import pytest

from canopy.cli import main
from canopy.engine.comparison import table as comparison
from canopy.engine.comparison.table import LAYOUT_PHASE, compare
from canopy.engine.generators import generate
from canopy.engine.io.topology_json import load_sample, save_topology
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.progress import Cancelled
from canopy.engine.model.sizes import parse_size
from canopy.engine.model.topology import Link, Node, Topology
from tests import ROOT

SIZES = (1 << 20, 1 << 30)


def star_of_switches():
    """Two leaf switches of 3 GPUs under a root switch, equal bandwidths: a tree."""
    nodes = [Node("root", "switch"), Node("a", "switch"), Node("b", "switch")]
    links = [Link("root", "a", Fraction(10)), Link("root", "b", Fraction(10))]
    for s in ("a", "b"):
        for i in range(3):
            nodes.append(Node(f"{s}{i}", group=s))
            links.append(Link(f"{s}{i}", s, Fraction(10)))
    return Topology("tree", nodes, links)


def test_rows_on_a_tree_include_lr_rings_at_the_optimum():
    comp = compare(star_of_switches(), sizes=SIZES, tacos_chunks=(1,), tacos_seeds=1)
    assert [r.algorithm for r in comp.rows] == ["forestcoll", "ring", "blink", "tacos",
                                                "lr1", "lr3"]
    fc = comp.row("forestcoll")
    assert fc.algbw == Fraction(6 * 10, 5)
    for name in ("lr1", "lr3"):
        row = comp.row(name)
        assert row.reason is None
        assert row.algbw == fc.algbw
        assert comp.ratio(row) == 1
    assert comp.row("lr3").details["hops"] <= comp.row("lr1").details["hops"]
    for row in comp.rows:
        assert set(row.times_us) == set(SIZES)
        assert all(t > 0 for t in row.times_us.values())
        # Rate-based plans never beat their congestion bound. (TACOS's bound is its own
        # timetable's, with phases back to back; the simulator may overlap them.)
        if row.algorithm != "tacos":
            assert all(row.algbw_at(s) <= row.algbw for s in SIZES)


def test_json_document_and_not_applicable_reason():
    comp = compare(load_sample("forestcoll-fig2.json"), "allreduce", sizes=SIZES,
                   tacos_chunks=(1,), tacos_seeds=1)
    doc = comp.to_json()
    assert doc["format"] == "canopy-comparison" and doc["version"] == 1
    assert doc["collective"] == "allreduce"
    rows = {r["algorithm"]: r for r in doc["rows"]}
    assert set(rows) == {"forestcoll", "ring", "blink", "tacos", "lr1", "lr3"}
    assert rows["forestcoll"]["algbw"] == 4.0
    assert set(rows["ring"]["time_us"]) == {"1048576", "1073741824"}
    assert rows["lr1"]["algbw"] is None and "not a tree" in rows["lr1"]["not_applicable"]
    assert rows["lr1"]["time_us"] == {}
    json.dumps(doc)     # plain JSON all the way down


def test_progress_and_cancel():
    seen = []
    compare(star_of_switches(), sizes=(1 << 20,), algorithms=("ring",),
            progress=lambda phase, f: seen.append((phase, f)))
    # Rows and sizes report in order, ForestColl's layout choice within its row; slow
    # stretches may repeat the last report.
    phases = [p for p, _ in seen]
    order = ["forestcoll", LAYOUT_PHASE, "forestcoll", "ring", "done"]
    assert [p for i, p in enumerate(phases) if i == 0 or phases[i - 1] != p] == order
    assert phases.count("forestcoll") >= 2 and phases.count("ring") >= 2
    # the table's fraction over its rows; the layout choice's own, from 0 to 1
    fractions = [f for p, f in seen if p != LAYOUT_PHASE]
    assert fractions == sorted(fractions) and fractions[-1] == 1
    choosing = [f for p, f in seen if p == LAYOUT_PHASE]
    assert choosing == sorted(choosing) and choosing[0] == 0 and choosing[-1] == 1

    def stop(phase, fraction):
        if phase == "ring":
            raise Cancelled("stopped")
    with pytest.raises(Cancelled):
        compare(star_of_switches(), sizes=(1 << 20,), progress=stop)


def test_bad_options_are_schedule_errors():
    topo = star_of_switches()
    with pytest.raises(ScheduleError, match="unknown algorithm"):
        compare(topo, algorithms=("nccl",))
    with pytest.raises(ScheduleError, match="unknown collective"):
        compare(topo, "alltoall")


def test_cli_prints_table_and_writes_json(tmp_path, capsys):
    topo_path = tmp_path / "tree.json"
    save_topology(star_of_switches(), topo_path)
    out = tmp_path / "cmp.json"
    code = main(["compare", str(topo_path), "--sizes", "1M,16M", "--tacos-chunks", "1",
                 "--tacos-seeds", "1", "--json", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "forestcoll" in text and "lr3" in text and "16M GB/s" in text
    doc = json.loads(out.read_text())
    assert [r["algorithm"] for r in doc["rows"]][0] == "forestcoll"
    assert doc["sizes"] == [1 << 20, 16 << 20]


def test_cli_prints_why_a_baseline_runs_below_its_own_bound(tmp_path, capsys):
    """canopy compare prints, under its table, the line saying why a baseline runs below
    95 % of its own bound (TACOS's allgather timetable for 1 GiB on aws-p4d-2x8 loads a
    PCIe link more than its latency-free one), and the JSON keeps it with each row's bound
    per size."""
    out = tmp_path / "cmp.json"
    assert main(["compare", str(ROOT / "samples" / "aws-p4d-2x8.json"), "--algorithms",
                 "tacos", "--sizes", "1G", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert ("  tacos runs at 88.9% of its own bound at 1G: its timetable for 1G, synthesized "
            "with latency") in text
    assert "loads h0.pcie1 -> h0.nic1 more than its timetable without latency" in text
    doc = json.loads(out.read_text())
    assert any(n.startswith("tacos runs at 88.9%") for n in doc["notes"])
    tacos = next(r for r in doc["rows"] if r["algorithm"] == "tacos")
    assert tacos["bound_at"] == {str(1 << 30): 42.666667} and tacos["algbw"] == 48.0


def test_a_baseline_held_back_by_its_pipeline_fill_is_timed_deeper():
    """A chain of 16 sends (a line of 17 GPUs, 25 GB/s, no latency) at 256 MiB: P loop
    iterations take (P + 15) / P times the link's time, so the model's deepest pipeline
    (MAX_PIECES = 256) runs at 256/271 = 94.5 % of the bound, all of it filling and
    draining. A runtime runs such a loop deeper; a baseline's row held back so is timed
    again up to DEEPEST = 1024 iterations: 1024/1039 (Blink's single-root trees on the
    4x4x4 torus, 30 sends deep: 94.4 % at 256, 98.2 % at 1024)."""
    from canopy.engine.execution.simulate import MAX_PIECES, fastest
    from canopy.engine.model.plan import CollectivePlan, FlowEdge, FlowTree

    names = [f"v{i}" for i in range(17)]
    topo = Topology("line", [Node(v) for v in names],
                    [Link(a, b, Fraction(25)) for a, b in zip(names, names[1:], strict=False)])
    tree = FlowTree("t", "v0", tuple(FlowEdge(a, b, (a, b)) for a, b in
                                     zip(names, names[1:], strict=False)), Fraction(1))
    plan = CollectivePlan("allgather", tuple(names), broadcast_trees=(tree,))
    size = 256 << 20
    link_us = Fraction(size, 25_000)

    shallow = fastest(topo, plan, size, Fraction(0), saturated=True)
    assert shallow.pieces == MAX_PIECES
    assert abs(shallow.time_us / (Fraction(271, 256) * link_us) - 1) < Fraction(1, 10**9)
    assert comparison._held_by_fill(topo, plan, shallow, "cut-through")
    deep = fastest(topo, plan, size, Fraction(0), shallow.pieces, saturated=True,
                   deepest=comparison.DEEPEST)
    assert deep.pieces == 1024
    assert abs(deep.time_us / (Fraction(1039, 1024) * link_us) - 1) < Fraction(1, 10**9)
    assert not comparison._held_by_fill(topo, plan, deep, "cut-through")


def test_slow_baselines_are_omitted_on_large_networks_unless_named(tmp_path, capsys,
                                                                    monkeypatch):
    # From SLOW_FROM compute nodes (here lowered to 6) TACOS and Blink are left out,
    # one line saying why and how to force them; naming them runs them.
    monkeypatch.setattr(comparison, "SLOW_FROM", 6)
    topo = star_of_switches()
    rows = {r.algorithm: r for r in compare(topo, sizes=(1 << 20,), tacos_seeds=1).rows}
    assert rows["tacos"].omitted and rows["blink"].omitted and not rows["ring"].omitted
    assert "--algorithms tacos" in rows["tacos"].reason
    assert rows["forestcoll"].details["connections"]["layout"] == "a connection per tree edge"
    assert "thread-block limit" in rows["forestcoll"].details["connections"]["note"]
    forced = compare(topo, sizes=(1 << 20,), algorithms=("tacos",), tacos_seeds=1,
                     force=("tacos",)).row("tacos")
    assert not forced.omitted and forced.times_us
    laid = compare(topo, sizes=(1 << 20,), algorithms=(), force=("forestcoll",)).rows[0]
    assert "note" not in laid.details["connections"]
    path = tmp_path / "tree.json"
    save_topology(topo, path)
    assert main(["compare", str(path), "--sizes", "1M", "--tacos-seeds", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert sum("omitted at 6 GPUs" in line for line in lines) == 2
    assert main(["compare", str(path), "--sizes", "1M", "--tacos-seeds", "1",
                 "--algorithms", "tacos"]) == 0
    assert "omitted" not in capsys.readouterr().out


def test_cli_bad_input_exits_2(tmp_path, capsys):
    unbalanced = Topology("u", [Node("a"), Node("b")],
                          [Link("a", "b", Fraction(1), duplex=False),
                           Link("b", "a", Fraction(2), duplex=False)])
    path = tmp_path / "u.json"
    save_topology(unbalanced, path)
    assert main(["compare", str(path)]) == 2
    err = capsys.readouterr().err
    assert "unbalanced" in err and "Traceback" not in err
    assert main(["compare", str(path), "--sizes", "12Q"]) == 2
    assert "--sizes" in capsys.readouterr().err


@pytest.mark.parametrize("text,value", [("1M", 1 << 20), ("16MB", 16 << 20), ("1G", 1 << 30),
                                        ("4096", 4096), ("2KiB", 2048)])
def test_parse_size(text, value):
    assert parse_size(text) == value


def test_forestcoll_beats_tacos_on_the_torus_of_issue_14():
    # 3x4x5 torus, 50 GiB/s and 0.5 µs per link, 2 GiB allgather, TACOS with 2 chunks per
    # node: ForestColl runs within 2 % of its bound and faster than TACOS.
    topo = generate("torus", {"dims": "3x4x5", "bandwidth": "53.6870912"})
    size = 2 << 30
    comp = compare(topo, "allgather", sizes=(size,), algorithms=("tacos",),
                   tacos_chunks=(2,), default_latency=Fraction(1, 2))
    fc, tacos = comp.row("forestcoll"), comp.row("tacos")
    assert fc.times_us[size] < tacos.times_us[size]
    assert fc.algbw_at(size) >= Fraction(98, 100) * fc.algbw
    assert comp.notes() == []


def test_cli_fail_removes_a_link_from_every_row(tmp_path, capsys):
    """``--fail`` as in ``canopy solve``: a 4-ring of 50 GB/s links with one link failed is
    a path; two shards cross its middle link each way, so ForestColl's bound halves (133.33
    to 66.67 GB/s)."""
    ring = generate("ring", {"n": "4", "bandwidth": "50"})
    path = tmp_path / "ring.json"
    save_topology(ring, path)
    out = tmp_path / "cmp.json"
    assert main(["compare", str(path), "--sizes", "1M", "--algorithms", "ring",
                 "--json", str(out)]) == 0
    whole = json.loads(out.read_text())
    assert main(["compare", str(path), "--sizes", "1M", "--algorithms", "ring",
                 "--fail", "n0-n1", "--json", str(out)]) == 0
    failed = json.loads(out.read_text())
    assert Fraction(whole["rows"][0]["algbw_exact"]) == Fraction(400, 3)
    assert Fraction(failed["rows"][0]["algbw_exact"]) == Fraction(200, 3)
    assert main(["compare", str(path), "--fail", "n0-n9"]) == 2
    assert "--fail n0-n9" in capsys.readouterr().err


def test_canopy_compare_does_not_import_networkx_or_scipy_optimize_at_start_up():
    # 0.1 and 0.3 s of start-up (networkx is imported where a baseline needs a graph,
    # scipy.optimize where an allreduce LP or assignment runs)
    import subprocess
    import sys

    code = ("import sys, canopy.cli.compare, canopy.engine.generators; "
            "print('networkx' in sys.modules, 'scipy.optimize' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False False"
