"""The time line of ``canopy solve`` and progress on a terminal."""

import io
import time

import pytest

from canopy.cli import main
from canopy.cli.phases import PhaseClock, TerminalProgress


def test_the_time_line_is_the_whole_command_split_by_phase(capsys, tmp_path, monkeypatch):
    # Phases under 5 ms are not printed; on a fast machine the whole small solve is 10 ms,
    # so the trees XML is made to take longer than that.
    from canopy.engine.io import trees_xml

    real = trees_xml.write_trees_xml

    def slower(*args, **kwargs):
        time.sleep(0.02)
        return real(*args, **kwargs)
    monkeypatch.setattr(trees_xml, "write_trees_xml", slower)
    assert main(["solve", "samples/dgx-a100-2x8.json", "--trees-xml",
                 str(tmp_path / "t.xml")]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("time:            ") and "trees XML" in last


def test_phases_add_up_with_other():
    clock = PhaseClock(time.perf_counter() - 1.0)
    clock.add("optimum", 0.25)
    clock.add_schedule({"optimum": 0.1, "verification": 0.2, "total": 9.0}, within=0.5)
    line = clock.line()
    assert "optimum 0.35 s" in line and "verification 0.20 s" in line
    assert "trees 0.20 s" in line and "other 0." in line


def test_progress_is_silent_off_a_terminal():
    progress = TerminalProgress("comparing")
    progress.stream = io.StringIO()
    progress.on = False
    progress.start -= 10
    progress("ring", 0.5)
    with progress.ticking("layout"):
        time.sleep(0.3)
    progress.done()
    assert progress.stream.getvalue() == ""


def test_progress_on_a_terminal_shows_and_erases_its_line():
    progress = TerminalProgress("comparing")
    progress.stream = io.StringIO()
    progress.on = True
    progress.start -= 10
    progress("ring", 0.5)
    progress.done()
    text = progress.stream.getvalue()
    assert "comparing: ring 50%" in text and text.endswith("\r")


def test_compare_prints_its_time_split_by_row_and_layout_choice(capsys, monkeypatch):
    from canopy.engine.comparison import table

    # phases under 5 ms are not printed: the layout choice and the ring row are made slower
    for name in ("runtime_schedule", "ring_baseline"):
        real = getattr(table, name)

        def slower(*args, real=real, **kwargs):
            time.sleep(0.02)
            return real(*args, **kwargs)
        monkeypatch.setattr(table, name, slower)
    assert main(["compare", "samples/forestcoll-fig2.json", "--algorithms", "ring",
                 "--sizes", "1M"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("time:            ")
    assert "layout choice " in last and "ring " in last


def test_a_ticking_phase_shows_the_fraction_its_work_reports():
    progress = TerminalProgress("MSCCL export")
    progress.stream = io.StringIO()
    progress.on = True
    progress.start -= 10
    progress.INTERVAL = 0.02
    follow = PhaseClock().follow({"MSCCL layout": "layout choice"}, progress)
    follow("MSCCL layout", 0.0)
    time.sleep(0.1)
    assert "MSCCL export: layout choice 0 s" in progress.stream.getvalue()
    follow("MSCCL layout", 0.4)
    time.sleep(0.1)
    follow.finish()
    assert "MSCCL export: layout choice 40%, 0 s" in progress.stream.getvalue()
    assert progress.stream.getvalue().endswith("\r")


def test_the_time_line_says_how_much_of_it_compiled_the_simulator(monkeypatch):
    """A fresh installation's first run compiles the simulator's loops (numba, cached on
    disk after): its time line says how many seconds that took, a later run's says
    nothing of it."""
    from canopy.cli import phases

    clock = PhaseClock(time.perf_counter() - 8.0)
    clock.add("layout choice", 7.5)
    monkeypatch.setattr(phases, "compile_seconds", lambda: 7.04)
    assert clock.line().endswith("; 7.04 s of it compiling the simulator for this machine "
                                 "(once: later runs load it)")
    monkeypatch.setattr(phases, "compile_seconds", lambda: 0.0)
    assert "compiling" not in clock.line()


def test_compile_seconds_count_numba_compiling():
    numba = pytest.importorskip("numba")
    from canopy.engine.execution import jit

    jit._watch()
    before = jit.compile_seconds()
    assert numba.njit(lambda x: x * 3 + 1)(2) == 7      # a new function: compiled now
    assert jit.compile_seconds() > before
