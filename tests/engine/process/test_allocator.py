"""The C allocator settings of a process that runs one engine computation."""

import ctypes
import subprocess
import sys

import pytest

from canopy.engine.process.allocator import KEPT_BYTES
from canopy.engine.process.child_jobs import ChildJob
from tests import job_targets

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not hasattr(ctypes.CDLL(None), "mallinfo2"),
    reason="glibc's mallinfo2 tells where a block came from; this C library has none")


def _in_a_fresh_process(code: str) -> str:
    """What ``code`` prints, run by a new interpreter (the settings are process-wide)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_a_block_of_megabytes_comes_from_the_heap_once_set():
    assert KEPT_BYTES > 8 << 20
    probe = "from tests.job_targets import mapped_blocks_added\nprint(mapped_blocks_added())"
    assert _in_a_fresh_process(probe) == "1"        # glibc maps it by default
    assert _in_a_fresh_process("from canopy.engine.process.allocator import batch_allocator\n"
                               "batch_allocator()\n" + probe) == "0"


def test_the_command_sets_it():
    out = _in_a_fresh_process(
        "import io, contextlib\n"
        "from canopy.cli import main\n"
        "from tests.job_targets import mapped_blocks_added\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['samples'])\n"
        "print(mapped_blocks_added())")
    assert out == "0"


def test_an_engine_job_runs_with_it():
    job = ChildJob(job_targets.mapped_blocks_added)
    job.start()
    assert job.wait(60) == [("done", 0)]
