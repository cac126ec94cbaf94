"""The collector settings of a process that runs one engine computation."""

import subprocess
import sys

from canopy.engine.process.child_jobs import ChildJob
from canopy.engine.process.gc_tuning import BATCH_THRESHOLD
from tests import job_targets


def _in_a_fresh_process(code: str) -> str:
    """What ``code`` prints, run by a new interpreter (the settings are process-wide)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_start_up_is_frozen_and_young_passes_come_rarely():
    out = _in_a_fresh_process(
        "import gc\n"
        "from canopy.engine.process.gc_tuning import batch_collector\n"
        "batch_collector()\n"
        "print(gc.get_threshold()[0], gc.get_freeze_count() > 0, gc.isenabled())")
    assert out == f"{BATCH_THRESHOLD} True True"


def test_a_collector_switched_off_or_set_rarer_is_left_so():
    out = _in_a_fresh_process(
        "import gc\n"
        "from canopy.engine.process.gc_tuning import BATCH_THRESHOLD, batch_collector\n"
        "for young in (0, 2 * BATCH_THRESHOLD):\n"
        "    gc.set_threshold(young, 10, 10)\n"
        "    batch_collector()\n"
        "    print(gc.get_threshold()[0] == young)")
    assert out.split() == ["True", "True"]


def test_the_command_sets_it_but_not_for_the_editor():
    out = _in_a_fresh_process(
        "import gc, io, contextlib\n"
        "from canopy.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['samples'])\n"
        "print(gc.get_threshold()[0])")
    assert out == str(BATCH_THRESHOLD)
    out = _in_a_fresh_process(
        "import gc\n"
        "import canopy.cli.gui as gui\n"
        "from canopy.cli import main\n"
        "gui.run = lambda args: 0   # the editor itself is not opened\n"
        "before = gc.get_threshold()\n"
        "main(['gui'])\n"
        "print(gc.get_threshold() == before, gc.get_freeze_count() == 0)")
    assert out == "True True"


def test_an_engine_job_runs_with_it():
    job = ChildJob(job_targets.collector_threshold)
    job.start()
    assert job.wait(60) == [("done", (BATCH_THRESHOLD, True))]
