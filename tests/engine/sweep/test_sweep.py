"""Sweeps: a spec's points become tidy rows, locally and on Ray, and a sweep resumes."""

import csv
import textwrap

import pytest

from canopy.cli import main
from canopy.engine.sweep.runner import read_rows, run_sweep
from canopy.engine.sweep.spec import SpecError, load_spec

SPEC = textwrap.dedent("""\
    name = "rings"
    collectives = ["allgather"]
    algorithms = ["bound", "forestcoll", "ring"]
    sizes = ["1M"]
    time_limit = 60

    [[generator]]
    kind = "ring"
    grid = { n = [4, 6, 8], bandwidth = [25, 50], bidirectional = ["yes", "no"] }
    """)


@pytest.fixture
def spec_file(tmp_path):
    path = tmp_path / "rings.toml"
    path.write_text(SPEC)
    return path


def test_twelve_points_give_twelve_tidy_rows_and_a_resume_runs_only_the_missing(
        spec_file, tmp_path):
    spec = load_spec(spec_file)
    assert len(spec.points) == 12
    out = tmp_path / "results.csv"
    rows = run_sweep(spec, out, workers=2)
    assert len(rows) == 12 and len(read_rows(out)) == 12
    assert {r["key"] for r in read_rows(out)} == {p.key for p in spec.points}
    row = next(r for r in read_rows(out) if r["param.n"] == "4" and r["param.bandwidth"] == "50"
               and r["param.bidirectional"] == "yes")
    assert float(row["bound_algbw"]) == pytest.approx(4 * 50 * 2 / 3)   # N·x*, x* = 2b/(N-1)
    assert row["error"] == "" and row["forestcoll_k"] and float(row["ring_algbw_1M"]) > 0

    kept = read_rows(out)[:9]                  # a crash after nine points
    with open(out, "w", newline="") as f:
        writer = csv.DictWriter(f, list(kept[0]))
        writer.writeheader()
        writer.writerows(kept)
    seen = []
    rows = run_sweep(spec, out, workers=2, progress=lambda done, total: seen.append(done))
    assert seen[0] == 9 and seen[-1] == 12 and len(seen) == 4   # only three points ran
    assert len(read_rows(out)) == 12


def test_the_same_sweep_runs_on_a_local_ray_instance(spec_file, tmp_path):
    import ray  # the [ray] extra, which the test command installs
    assert not ray.is_initialized()
    out = tmp_path / "ray.csv"
    rows = run_sweep(load_spec(spec_file), out, executor="ray")
    assert len(rows) == 12 and all(r["error"] == "" for r in rows)
    local = run_sweep(load_spec(spec_file), tmp_path / "local.csv", workers=2)
    by_key = {r["key"]: r["bound_algbw"] for r in local}
    assert {r["key"]: str(r["bound_algbw"]) for r in read_rows(out)} == \
        {k: str(v) for k, v in by_key.items()}


def test_a_point_over_the_time_limit_is_stopped_and_says_so(tmp_path):
    # A ring of 128 takes far longer than the runner's 20 ms between looks (a ring of 8
    # now finishes within one look, so its result arrived before the limit was checked).
    path = tmp_path / "slow.toml"
    path.write_text(SPEC.replace("time_limit = 60", "time_limit = 0.001")
                    .replace("n = [4, 6, 8]", "n = [128]").replace("bandwidth = [25, 50]",
                                                                 "bandwidth = [25]")
                    .replace('bidirectional = ["yes", "no"]', 'bidirectional = ["yes"]'))
    rows = run_sweep(load_spec(path), tmp_path / "r.csv", workers=1)
    assert rows[0]["error"] == ("the point took longer than the time limit of 0.001 s and "
                                "was stopped.")


@pytest.mark.parametrize("change,message", [
    (('kind = "ring"', 'kind = "moebius"'), "generator 1: kind 'moebius' is not a generator"),
    (("n = [4, 6, 8]", "n = []"), "grid 'n' is empty"),
    (("n = [4, 6, 8]", "n = [4, -6]"), "generator 1:"),
    (('sizes = ["1M"]', 'sizes = ["lots"]'), "'sizes': 'lots' is not a message size"),
    (('algorithms = ["bound"', 'algorithms = ["magic"'), "'algorithms' has 'magic'"),
    (("time_limit = 60", "time_limit = -1"), "'time_limit' must be a number of seconds above 0"),
    (("name =", "colour = 1\nname ="), "unknown key 'colour'"),
    (("n = [4, 6, 8]", "n = " + "[" * 5000 + "]" * 5000), "nests arrays or tables too deeply"),
])
def test_bad_specs_get_one_sentence_naming_the_key_and_exit_2(tmp_path, capsys, change,
                                                              message):
    path = tmp_path / "bad.toml"
    path.write_text(SPEC.replace(*change))
    with pytest.raises(SpecError, match=message.replace("(", r"\(")):
        load_spec(path)
    assert main(["sweep", str(path), "-o", str(tmp_path / "out.csv")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("canopy: ") and err.count("\n") == 1 and "Traceback" not in err


def test_the_bundled_spec_has_a_dozen_points():
    spec = load_spec("samples/sweep-rails.toml")
    assert len(spec.points) == 12
    assert {p.params["oversubscription"] for p in spec.points} == {1, 2}


def test_sweep_results_plot_and_open_a_point_in_the_editor(qtbot, tmp_path, spec_file):
    from canopy.app.main_window import MainWindow
    out = tmp_path / "results.csv"
    run_sweep(load_spec(spec_file), out, workers=2)
    window = MainWindow()
    qtbot.addWidget(window)
    dialog = window.open_sweep_dialog(out)
    qtbot.addWidget(dialog)
    names = [dialog.x_box.itemText(i) for i in range(dialog.x_box.count())]
    assert names == ["n", "bandwidth", "bidirectional"]
    series = dialog.series()
    assert set(series) == {"optimum", "forestcoll", "ring"}
    assert sorted({x for x, _ in series["optimum"]}) == [4.0, 6.0, 8.0]
    dialog.metric_box.setCurrentText("simulated at 1M")
    assert set(dialog.series()) == {"forestcoll", "ring"}
    row = next(i for i, r in enumerate(dialog.rows) if r["param.n"] == "6")
    dialog.table.cellDoubleClicked.emit(row, 0)
    assert len(window.doc.topology.compute_nodes()) == 6
    window.doc.undo_stack.setClean()


def test_cli_plot_renders_a_screenshot(tmp_path, spec_file):
    out = tmp_path / "results.csv"
    run_sweep(load_spec(spec_file), out, workers=2)
    png = tmp_path / "plot.png"
    assert main(["sweep", "--plot", str(out), "--x", "bandwidth", "--screenshot",
                 str(png)]) == 0
    assert png.stat().st_size > 10_000
    assert main(["sweep", "--plot", str(out), "--x", "colour", "--screenshot",
                 str(png)]) == 2


def test_cli_plot_without_a_display_is_one_sentence_and_exit_2(tmp_path, monkeypatch, capsys):
    out = tmp_path / "results.csv"
    out.write_text("point,param.n,algorithm,algbw\n0,4,bound,10\n")
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("sys.platform", "linux")
    assert main(["sweep", "--plot", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == ("canopy: there is no display to open the plot on (DISPLAY is not set); "
                   "add --screenshot OUT.png to render it without one.\n")


def test_the_plot_draws_the_optimum_on_top_and_says_lines_are_means(qtbot, tmp_path, spec_file):
    from canopy.app.dialogs.sweep_results import SweepResultsDialog
    out = tmp_path / "results.csv"
    run_sweep(load_spec(spec_file), out, workers=2)
    dialog = SweepResultsDialog(read_rows(out), str(out))
    qtbot.addWidget(dialog)
    names = {item.name(): item for item in dialog.plot.listDataItems() if item.name()}
    assert set(names) == {"optimum (mean, dashed)", "forestcoll (mean)", "ring (mean)"}
    assert names["optimum (mean, dashed)"].zValue() > names["forestcoll (mean)"].zValue()
    assert "mean algbw" in dialog.plot.plotItem.titleLabel.text
