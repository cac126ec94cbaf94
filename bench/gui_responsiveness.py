"""Worst event-loop gap while a long solve runs in the background, machine busy; JSON.

A 10 ms QTimer records the time between its ticks while 8x DGX A100 (64 GPUs) is
solved, twice: by a bare EngineJob, and through the editor itself (Compute ▸ Solve
Allgather in a shown main window, so progress updates, the result docks, the plots and
the canvas overlays are included). The engine runs in a child process
(:mod:`canopy.engine.jobs`); to make the machine busy, ``--load N`` (default 2, one per
core here) processes spin on the CPU at the same priority for the whole run. The editor
is responsive if the worst gap while solving stays under 50 ms.
Usage: QT_QPA_PLATFORM=offscreen python -m bench.gui_responsiveness [--load N] [--servers S]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import time
from collections.abc import Callable

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from bench.clusters import dgx_a100_cluster
from canopy.app.job_runner import EngineJob
from canopy.engine.forest import solve

SETTLE_MS = 1000


def _gaps(run: Callable[[Callable[[], None]], None]) -> dict:
    """Start ``run(done)`` with a 10 ms ticking timer; the event loop ends at done().

    Also reports the worst gap after the result arrived (``done`` called), when the
    window draws the results; the loop runs on for :data:`SETTLE_MS` to include it.
    """
    app = QApplication.instance() or QApplication([])
    ticks: list[float] = []
    timer = QTimer()
    timer.setInterval(10)
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
    arrived: list[float] = []

    def done() -> None:
        arrived.append(time.perf_counter())
        QTimer.singleShot(SETTLE_MS, app.quit)

    start = time.perf_counter()
    timer.start()
    QTimer.singleShot(0, lambda: run(done))
    app.exec()
    timer.stop()
    gaps = [(b - a, b) for a, b in zip(ticks, ticks[1:], strict=False)]
    during = [g for g, end in gaps if end <= arrived[0]]
    after = [g for g, end in gaps if end > arrived[0]]
    return {"seconds": round(arrived[0] - start, 3), "ticks": len(ticks),
            "worst_gap_ms": round(max(during) * 1000, 1),
            "mean_gap_ms": round(sum(during) / len(during) * 1000, 2),
            "worst_gap_showing_results_ms": round(max(after) * 1000, 1)}


def bare_job(servers: int) -> dict:
    topo = dgx_a100_cluster(servers)
    result: dict = {}

    def run(done: Callable[[], None]) -> None:
        job = EngineJob(solve, topo)
        job.finished.connect(lambda schedule: (result.update(k=schedule.k), done()))
        job.failed.connect(lambda message: (result.update(error=message), done()))
        job.start()
        result["job"] = job

    gaps = _gaps(run)
    result.pop("job")
    return {"case": f"{servers}x DGX A100 solve in a bare EngineJob", **gaps, **result}


def main_window(servers: int) -> dict:
    from canopy.app.main_window import MainWindow

    window = MainWindow(dgx_a100_cluster(servers))
    window.resize(1400, 900)
    window.show()
    QApplication.processEvents()
    window.view.zoom_to_fit()
    result: dict = {}
    phases: set[str] = set()

    def run(done: Callable[[], None]) -> None:
        inspector = window.solver
        inspector.controller.solution_changed.connect(lambda s: s and (
            result.update(k=s.schedule.k, trees=len(s.schedule.trees)), done()))
        inspector.controller.progress.connect(lambda phase, f: phases.add(phase))
        inspector.controller.failed.connect(lambda what, m: (result.update(error=m), done()))
        window.actions["solve_allgather"].trigger()

    gaps = _gaps(run)
    result["phases_seen"] = len(phases)
    window.doc.undo_stack.setClean()
    window.close()
    return {"case": f"{servers}x DGX A100 solved from the Compute menu of the editor",
            **gaps, **result}


def _spin() -> None:
    while True:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=8)
    parser.add_argument("--load", type=int, default=2, help="CPU-bound processes alongside")
    args = parser.parse_args()
    burners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.load)]
    for b in burners:
        b.start()
    try:
        for case in (bare_job(args.servers), main_window(args.servers)):
            print(json.dumps({**case, "load_processes": args.load}))
    finally:
        for b in burners:
            b.kill()


if __name__ == "__main__":
    main()
