"""Worst event-loop gap while a long solve runs in the background; print JSON.

A 10 ms QTimer records the time between its ticks while SolveJob solves 16x DGX A100
(128 GPUs) on its worker thread. The editor stays responsive if the worst gap stays
well under 100 ms. Usage: QT_QPA_PLATFORM=offscreen python -m bench.gui_responsiveness
"""

from __future__ import annotations

import json
import time

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from app.solve_worker import SolveJob
from bench.clusters import dgx_a100_cluster
from engine.solve import solve


def main(servers: int = 16) -> None:
    app = QApplication.instance() or QApplication([])
    topo = dgx_a100_cluster(servers)
    ticks: list[float] = []
    timer = QTimer()
    timer.setInterval(10)
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
    job = SolveJob(lambda report: solve(topo, progress=report))
    result: dict = {}
    job.finished.connect(lambda schedule: (result.update(k=schedule.k), app.quit()))
    job.failed.connect(lambda message: (result.update(error=message), app.quit()))
    start = time.perf_counter()
    timer.start()
    job.start()
    app.exec()
    elapsed = time.perf_counter() - start
    gaps = [b - a for a, b in zip(ticks, ticks[1:], strict=False)]
    print(json.dumps({"case": f"{servers}x DGX A100 solve in background",
                      "solve_s": round(elapsed, 3), "ticks": len(ticks),
                      "worst_gap_ms": round(max(gaps) * 1000, 1),
                      "mean_gap_ms": round(sum(gaps) / len(gaps) * 1000, 2), **result}))


if __name__ == "__main__":
    main()
