"""Engine jobs in a child process, without Qt: events, throttling, cancel."""

import time

from canopy.engine.jobs import Job
from tests import job_targets


def test_progress_is_throttled_and_the_result_comes_last():
    job = Job(job_targets.count_to, 100_000)
    job.start()
    events = job.wait(60)
    assert events[-1] == ("done", 100_000)
    progress = [e for e in events if e[0] == "progress"]
    assert 1 <= len(progress) < 1000
    assert job.ended and list(job.events()) == []


def test_errors_arrive_as_one_sentence():
    job = Job(job_targets.unbalanced)
    job.start()
    assert job.wait(60) == [("failed", "x.json: node 'a' is unbalanced.")]


def test_cancel_ends_the_child_at_once():
    job = Job(job_targets.count_to, 10**12)
    job.start()
    job.wait(0.5)
    start = time.perf_counter()
    job.cancel()
    assert time.perf_counter() - start < 0.5
    assert job.ended and job.wait(0.1) == []
