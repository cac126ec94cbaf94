"""The collector and C allocator settings of a process that runs one engine computation."""

import subprocess
import sys

import pytest

from canopy.engine.process.allocator import KEPT_BYTES
from canopy.engine.process.child_jobs import ChildJob
from canopy.engine.process.gc_tuning import BATCH_THRESHOLD
from tests import job_targets

GLIBC = job_targets.mapped_blocks_added() is not None
KEPT = 0 if GLIBC else None        # what mapped_blocks_added says once the settings are made


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


@pytest.mark.skipif(not GLIBC, reason="glibc's mallinfo2 tells where a block came from; "
                                      "this C library has none")
def test_a_block_of_megabytes_comes_from_the_heap_once_set():
    assert KEPT_BYTES > 8 << 20
    probe = "from tests.job_targets import mapped_blocks_added\nprint(mapped_blocks_added())"
    assert _in_a_fresh_process(probe) == "1"        # glibc maps it by default
    assert _in_a_fresh_process("from canopy.engine.process.allocator import batch_allocator\n"
                               "batch_allocator()\n" + probe) == "0"


def test_the_command_sets_both_but_not_for_the_editor():
    out = _in_a_fresh_process(
        "import gc, io, contextlib\n"
        "from canopy.cli import main\n"
        "from tests.job_targets import mapped_blocks_added\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['samples'])\n"
        "print(gc.get_threshold()[0], mapped_blocks_added())")
    assert out == f"{BATCH_THRESHOLD} {KEPT}"
    out = _in_a_fresh_process(
        "import gc\n"
        "import canopy.cli.gui as gui\n"
        "from canopy.cli import main\n"
        "from tests.job_targets import mapped_blocks_added\n"
        "gui.run = lambda args: 0   # the editor itself is not opened\n"
        "before = gc.get_threshold()\n"
        "main(['gui'])\n"
        "print(gc.get_threshold() == before, gc.get_freeze_count() == 0, "
        "mapped_blocks_added())")
    assert out == f"True True {1 if GLIBC else None}"


def test_an_engine_job_runs_with_both():
    job = ChildJob(job_targets.batch_settings)
    job.start()
    assert job.wait(60) == [("done", (BATCH_THRESHOLD, True, KEPT))]
