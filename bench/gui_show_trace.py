"""Every turn of the editor's event loop while it shows a solve's results, named; JSON.

``bench.gui_turns`` lists the longest turns; this names each turn by the showing step it
ran (:class:`~canopy.app.solve_controller.SolveController`'s steps, by qualified name, a
lambda by its line) and, under ``--load N`` (N processes spinning on the CPU), says how
a long gap came about. Per turn: its wall time, the GUI thread's CPU (thread clock) and
its wait for a core (the run-queue time in ``/proc/thread-self/schedstat``), the rest
being neither (blocked: the interpreter lock, a lock in Qt), and the widgets it painted.
A 10 ms timer's ticks mark the gaps, as in ``bench.gui_responsiveness``.

The case is the shown case's: Compute ▸ Solve on the 32-GPU H100-like rail leaf-spine
(``--design`` servers of 8 GPUs) in a shown 1400x900 window; turns from the solution's
arrival for 1.5 s. Printed per run: the worst gap, the gaps over 50 ms, each gap over
``--over`` ms with its turns, and the steps' GUI CPU (the most in one turn, by step;
turns not run by a step are named by their event and receiver).

Usage: QT_QPA_PLATFORM=offscreen python -m bench.gui_show_trace [--load N]
       [--collective C] [--design S] [--runs R] [--over MS]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import tempfile
import time

os.environ.setdefault("CANOPY_RECOVERY_DIR", tempfile.mkdtemp(prefix="canopy-bench-"))

from PySide6.QtCore import QEvent, QObject, QTimer  # noqa: E402

from bench.gui_responsiveness import _spin, design_file  # noqa: E402
from bench.gui_turns import TimedApplication, shown_window, start_editor  # noqa: E402

SETTLE_S = 1.5
"""How long the loop runs on after the solution arrived."""


def _run_queue_s() -> float:
    """Seconds this thread has waited for a core, since it started."""
    with open("/proc/thread-self/schedstat") as f:
        return int(f.read().split()[1]) / 1e9


class TracedApplication(TimedApplication):
    """Records each turn with its wall-clock span, the run queue's wait in it and the
    showing step it ran, if any."""

    def __init__(self, argv: list[str]):
        super().__init__(argv)
        self.step = ""
        """The showing step run in the turn under way, if any."""
        self.named: list[tuple[QObject, str]] = []
        """Timers whose turns are named (the label slices, a tree's restyling)."""
        self._began = (0.0, 0.0)

    def begin(self, receiver: QObject) -> None:
        self.step = next((n for o, n in self.named if o is receiver), "")
        self._began = (time.perf_counter(), _run_queue_s())

    def record(self, receiver: QObject, kind: QEvent.Type, cpu: float,
               paints: list[tuple[str, float]]) -> dict:
        wall, queued = self._began
        return {"w0": wall, "w1": time.perf_counter(), "cpu": cpu,
                "rq": _run_queue_s() - queued,
                "what": self.step or f"{kind.name}/{type(receiver).__name__}",
                "paints": [(w, round(c * 1000, 1)) for w, c in paints]}


def _step_name(step: object) -> str:
    name = getattr(step, "__qualname__", type(step).__name__)
    if name.endswith("<lambda>"):
        name += f"@{step.__code__.co_firstlineno}"
    return name.replace(".<locals>", "")


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def _one_run(app: TracedApplication, path: str, collective: str, over_s: float) -> dict:
    window = shown_window(app, path)
    app.named = [(window.scene._detail_timer, "label slice"),
                 (window.solver.overlays._restyle_timer, "tree restyle slice")]
    ticks: list[float] = []
    ticker = QTimer()
    ticker.setInterval(10)
    ticker.timeout.connect(lambda: ticks.append(time.perf_counter()))
    arrived: list[float] = []

    def solved(solution: object) -> None:
        if solution is not None and not arrived:
            arrived.append(time.perf_counter())
            QTimer.singleShot(int(SETTLE_S * 1000), app.quit)

    window.solver.controller.solution_changed.connect(solved)
    ticker.start()
    app.turns = []
    app.on = True
    QTimer.singleShot(0, window.named_actions["solve_" + collective.replace("-", "_")].trigger)
    app.exec()
    app.on = False
    ticker.stop()
    t0 = arrived[0]
    gaps = [(y - x, x, y) for x, y in zip(ticks, ticks[1:], strict=False) if y > t0]
    after = [t for t in app.turns if t["w0"] >= t0]
    steps: dict[str, float] = {}
    for t in after:
        steps[t["what"]] = max(steps.get(t["what"], 0.0), t["cpu"])
    long_gaps = []
    for gap, x, y in sorted((g for g in gaps if g[0] > over_s), reverse=True):
        inside = [t for t in app.turns if t["w1"] > x and t["w0"] < y]
        long_gaps.append({
            "gap_ms": _ms(gap), "from_arrival_ms": _ms(x - t0),
            "gui_cpu_ms": _ms(sum(t["cpu"] for t in inside)),
            "turns": [{"at_ms": _ms(t["w0"] - x), "wall_ms": _ms(t["w1"] - t["w0"]),
                       "cpu_ms": _ms(t["cpu"]), "run_queue_ms": _ms(t["rq"]),
                       "blocked_ms": _ms(t["w1"] - t["w0"] - t["cpu"] - t["rq"]),
                       "what": t["what"], "paints": t["paints"]}
                      for t in inside if t["w1"] - t["w0"] > 0.0005]})
    window.doc.undo_stack.setClean()
    window.close()
    window.deleteLater()
    app.processEvents()
    return {"worst_gap_ms": _ms(max(gaps)[0]),
            "gaps_over_50_ms": sum(1 for g in gaps if g[0] > 0.05),
            "gui_cpu_ms": _ms(sum(t["cpu"] for t in after)),
            "run_queue_ms": _ms(sum(t["rq"] for t in after)),
            "longest_turn_by_step_ms": {k: _ms(v) for k, v in
                                        sorted(steps.items(), key=lambda kv: -kv[1])
                                        if v >= 0.0015},
            "gaps": long_gaps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", type=int, default=0)
    parser.add_argument("--collective", default="allreduce")
    parser.add_argument("--design", type=int, default=4)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--over", type=float, default=40.0)
    args = parser.parse_args()
    app = TracedApplication([])
    from canopy.app.solve_controller import SolveController

    start_editor()
    next_step = SolveController._next_step

    def named_step(self: SolveController) -> None:
        if self._steps and not self.window.scene.placing_labels():
            app.step = _step_name(self._steps[0])
        next_step(self)

    SolveController._next_step = named_step
    path = str(design_file(args.design))
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.load)]
    for spinner in spinners:
        spinner.start()
    try:
        runs = [_one_run(app, path, args.collective, args.over / 1000)
                for _ in range(args.runs)]
    finally:
        for spinner in spinners:
            spinner.kill()
    print(json.dumps({"case": f"h100-{args.design}x8 {args.collective}, --load {args.load}: "
                              "turns from the solution's arrival",
                      "loadavg_1min": round(os.getloadavg()[0], 1), "runs": runs}, indent=1))


if __name__ == "__main__":
    from bench.gui_responsiveness import run_as_console_script

    run_as_console_script(main)
