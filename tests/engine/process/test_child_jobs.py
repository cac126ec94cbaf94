"""Engine jobs in a child process, without Qt: events, throttling, cancel."""

import pickle
import time

import pytest

from canopy.engine.process.child_jobs import ChildJob, _decode
from tests import job_targets


def test_progress_is_throttled_and_the_result_comes_last():
    job = ChildJob(job_targets.count_to, 100_000)
    job.start()
    events = job.wait(60)
    assert events[-1] == ("done", 100_000)
    progress = [e for e in events if e[0] == "progress"]
    assert 1 <= len(progress) < 1000
    assert job.ended and list(job.events()) == []


def test_errors_arrive_as_one_sentence():
    job = ChildJob(job_targets.unbalanced)
    job.start()
    assert job.wait(60) == [("failed", "x.json: node 'a' is unbalanced.")]


def test_cancel_ends_the_child_at_once():
    job = ChildJob(job_targets.count_to, 10**12)
    job.start()
    job.wait(0.5)
    start = time.perf_counter()
    job.cancel()
    assert time.perf_counter() - start < 0.5
    assert job.ended and job.wait(0.1) == []


def test_a_large_event_is_decoded_frame_by_frame_into_the_same_value():
    """The reader thread decodes a large result a pickle frame (64 KiB) at a time, letting
    go of the interpreter lock in between, and gets exactly what was sent."""
    from fractions import Fraction

    from canopy.engine.process import child_jobs as jobs

    value = ("done", {"trees": [(f"gpu{i}", Fraction(i, 7), list(range(i % 50)))
                                for i in range(20_000)]})
    data = pickle.dumps(value, protocol=4)
    assert len(data) > 10 * 65536
    frames = jobs._Frames(data)
    assert pickle.Unpickler(frames).load() == value == _decode(data)
    assert frames.reads >= len(data) // 65536
    assert frames.largest_read <= 65536 + 16


def test_the_frame_reader_reads_lines_and_into_buffers():
    from canopy.engine.process.child_jobs import _Frames

    frames = _Frames(b"ab\ncd")
    assert frames.readline() == b"ab\n"
    buffer = bytearray(4)
    assert frames.readinto(memoryview(buffer)) == 2 and buffer[:2] == b"cd"
    assert frames.read() == b"" and frames.readline() == b""


def test_a_large_call_goes_to_the_child_a_frame_at_a_time_and_arrives_whole():
    """The call (function and arguments) travels over a pipe of its own, pickled a frame
    at a time with ``between_frames`` in between, not inside the fork server's process
    object; the child gets exactly what was sent."""
    from fractions import Fraction

    value = [(f"gpu{i}", Fraction(i, 7), tuple(range(i % 50))) for i in range(20_000)]
    pauses = []
    job = ChildJob(job_targets.echo, value)
    job.start(lambda: pauses.append(1))
    assert job.wait(60) == [("done", value)]
    assert len(pauses) >= len(pickle.dumps(value, protocol=5)) // 65536


def test_an_argument_that_cannot_be_pickled_fails_before_a_child_starts():
    job = ChildJob(job_targets.echo, lambda: None)
    with pytest.raises((pickle.PicklingError, AttributeError)):
        job.start()
    assert job._process is None


def test_a_job_keeps_its_priority_and_a_background_job_lowers_it():
    """A job the user waits for runs at the priority of the process that started it, in
    the batch scheduling class where there is one (it never preempts the editor's event
    loop, and is not starved on a busy machine); a background job runs CHILD_NICENESS
    lower."""
    import os

    from canopy.engine.process.child_jobs import CHILD_NICENESS

    job = ChildJob(job_targets.scheduling)
    job.start()
    batch = getattr(os, "SCHED_BATCH", None)
    assert job.wait(60) == [("done", (os.nice(0), batch if batch is not None else None))]
    background = ChildJob(job_targets.scheduling)
    background.background = True
    background.start()
    [(kind, (nice, _))] = background.wait(60)
    assert kind == "done" and nice == min(19, os.nice(0) + CHILD_NICENESS)


NEVER_SENT = """
import sys
from canopy.engine.process.child_jobs import _child, _context
if __name__ == "__main__":
    ctx = _context()
    events, child_events = ctx.Pipe(duplex=False)
    calls, call = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_child, args=(child_events, calls, sys.argv[1], 0))
    process.start()
    child_events.close()
    calls.close()
    call.close()                        # nothing sent
    process.join(120)
    try:
        events.recv_bytes()
    except EOFError:
        print("exit", process.exitcode)
"""


def test_a_child_whose_parent_never_sends_the_call_ends_quietly(tmp_path):
    """An editor that quits while a job starts closes the call's pipe unsent: the child
    ends at once, with no traceback on the terminal and no internal error logged."""
    import os
    import subprocess
    import sys

    from tests import ROOT
    script = tmp_path / "never_sent.py"
    script.write_text(NEVER_SENT)
    log = tmp_path / "canopy.log"
    out = subprocess.run([sys.executable, str(script), str(log)], capture_output=True,
                         text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "exit 0", out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    assert not log.exists()
