"""The longest turns of the editor's event loop while it shows a solve's results; JSON.

Where ``bench.gui_responsiveness`` says how long the event loop went without a tick,
this says which turns took the GUI thread's CPU: every event delivered from the event
loop itself (not from inside another) is one turn, timed with the thread's CPU clock,
with what it was (the event, its receiver) and which widgets it painted, and how long
each paint took. A 10 ms timer's ticks group the turns into the gaps the other bench
measures, so a gap's CPU can be read as the turns in it.

The case is the shown case's: Compute ▸ Solve on the 32-GPU H100-like rail leaf-spine
(``--design`` servers of 8 GPUs) in a shown window; the turns counted are those after
the solution arrived (``--settle`` seconds of them). No load is added: run it on a quiet
machine and compare runs of two versions alternately (the numbers are single runs).

Usage: QT_QPA_PLATFORM=offscreen python -m bench.gui_turns [--collective C]
       [--design S] [--top N] [--settle S]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Any

os.environ.setdefault("CANOPY_RECOVERY_DIR", tempfile.mkdtemp(prefix="canopy-bench-"))

from PySide6.QtCore import QEvent, QObject, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402


def _name(obj: QObject | None) -> str:
    """A widget and two of its parents, by class (and object name where it has one)."""
    names = []
    while obj is not None and len(names) < 3:
        names.append(type(obj).__name__ + (f"#{obj.objectName()}" if obj.objectName() else ""))
        obj = obj.parent()
    return "/".join(names)


class TimedApplication(QApplication):
    """Times each event delivered from the event loop (a turn) while ``on``; what a turn's
    record holds is :meth:`record`'s (a subclass may record more)."""

    def __init__(self, argv: list[str]):
        super().__init__(argv)
        self.on = False
        self.depth = 0
        self.turns: list[dict] = []
        self._paints: list[tuple[str, float]] = []

    def notify(self, receiver: QObject, event: QEvent) -> bool:
        if not self.on:
            return super().notify(receiver, event)
        kind = event.type()
        self.depth += 1
        if self.depth == 1:
            self._paints = []
            self.begin(receiver)
        start = time.thread_time()
        try:
            return super().notify(receiver, event)
        finally:
            cpu = time.thread_time() - start
            self.depth -= 1
            if kind == QEvent.Type.Paint:
                self._paints.append((_name(receiver), cpu))
            if self.depth == 0:
                self.turns.append(self.record(receiver, kind, cpu,
                                              [(w, c) for w, c in self._paints if c >= 0.0005]))

    def begin(self, receiver: QObject) -> None:
        """A turn delivering to ``receiver`` begins (nothing to note here)."""

    def record(self, receiver: QObject, kind: QEvent.Type, cpu: float,
               paints: list[tuple[str, float]]) -> dict:
        """The record of a turn: its CPU, event, receiver and the paints it did (widget,
        CPU s; those over half a millisecond)."""
        return {"turn": len(self.turns), "cpu_ms": round(cpu * 1000, 2),
                "event": kind.name, "receiver": type(receiver).__name__,
                "paints": [{"widget": w, "cpu_ms": round(c * 1000, 2)} for w, c in paints]}


def start_editor() -> None:
    """The editor's start-up as the application makes it: its heap settled and the job
    runner's child process warmed up."""
    from canopy.app import heap
    from canopy.app.job_runner import warm_up

    heap.settle_start_up()
    warm_up()


def shown_window(app: QApplication, path: str) -> Any:
    """A main window on the topology at ``path``, shown at 1400x900, after its first paints
    (which no bench counts)."""
    from canopy.app.main_window import MainWindow
    from canopy.engine.io.topology_json import load_topology

    window = MainWindow(load_topology(path))
    window.resize(1400, 900)
    window.show()
    settle = time.perf_counter() + 1.0
    while time.perf_counter() < settle:
        app.processEvents()
        time.sleep(0.01)
    return window


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collective", default="allreduce")
    parser.add_argument("--design", type=int, default=4)
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--settle", type=float, default=2.0)
    args = parser.parse_args()
    app = TimedApplication([])
    from bench.gui_responsiveness import design_file
    start_editor()
    window = shown_window(app, str(design_file(args.design)))
    ticks: list[tuple[float, int]] = []
    ticker = QTimer()
    ticker.setInterval(10)
    ticker.timeout.connect(lambda: ticks.append((time.thread_time(), len(app.turns))))
    arrived: list[bool] = []
    window.solver.controller.solution_changed.connect(
        lambda s: arrived.append(True) if s is not None else None)
    ticker.start()
    app.on = True
    window.named_actions["solve_" + args.collective.replace("-", "_")].trigger()
    while not arrived:
        app.processEvents()
        time.sleep(0.002)
    app.turns.clear()
    ticks.clear()
    end = time.perf_counter() + args.settle
    while time.perf_counter() < end:
        app.processEvents()
        time.sleep(0.002)
    app.on = False
    ticker.stop()
    turns = app.turns
    gaps = sorted(((c1 - c0, i0, i1) for (c0, i0), (c1, i1) in zip(ticks, ticks[1:],
                                                                    strict=False)),
                  reverse=True)
    print(json.dumps({
        "case": f"h100-{args.design}x8 {args.collective}: turns after the solution arrived",
        "turns": len(turns), "cpu_ms": round(sum(t["cpu_ms"] for t in turns), 1),
        "longest_turns": sorted(turns, key=lambda t: -t["cpu_ms"])[:args.top],
        "most_cpu_gaps": [{"cpu_ms": round(c * 1000, 2),
                           "turns": [t["turn"] for t in turns[i0:i1] if t["cpu_ms"] >= 0.5]}
                          for c, i0, i1 in gaps[:args.top]],
        "loadavg_1min": round(os.getloadavg()[0], 1)}, indent=1))
    window.doc.undo_stack.setClean()
    window.close()


if __name__ == "__main__":
    from bench.gui_responsiveness import run_as_console_script

    run_as_console_script(main)
