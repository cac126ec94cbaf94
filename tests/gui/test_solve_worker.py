"""The background solve job: results, errors, and prompt cancellation."""

import time

from bench.clusters import dgx_a100_cluster
from canopy.app.solve_worker import SolveJob
from canopy.engine.errors import TopologyError
from canopy.engine.forest import solve
from canopy.engine.topology_io import load_sample


def test_job_delivers_schedule_and_progress(qtbot):
    topo = load_sample("dgx-a100-2x8")
    job = SolveJob(lambda report: solve(topo, progress=report))
    phases = []
    job.progress.connect(lambda phase, fraction: phases.append(phase))
    with qtbot.waitSignal(job.finished, timeout=30000) as blocker:
        job.start()
    assert blocker.args[0].k == 13
    assert phases[0] == "optimum" and "tree packing" in phases and phases[-1] == "verification"


def test_job_reports_engine_errors(qtbot):
    def work(report):
        raise TopologyError("x.json: node 'a' is unbalanced.")
    job = SolveJob(work)
    with qtbot.waitSignal(job.failed, timeout=10000) as blocker:
        job.start()
    assert blocker.args == ["x.json: node 'a' is unbalanced."]


def test_cancel_stops_a_long_solve_promptly(qtbot):
    topo = dgx_a100_cluster(16)
    job = SolveJob(lambda report: solve(topo, progress=report))
    seen = []
    job.progress.connect(lambda phase, fraction: seen.append(phase))
    job.start()
    qtbot.waitUntil(lambda: "tree packing" in seen, timeout=30000)
    start = time.perf_counter()
    with qtbot.waitSignal(job.cancelled, timeout=10000):
        job.cancel()
    assert time.perf_counter() - start < 2.0
