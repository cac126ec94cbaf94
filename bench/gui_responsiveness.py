"""Worst event-loop gap while the editor opens, solves and shows a cluster, machine busy; JSON.

A 10 ms QTimer records the time between its ticks. A sampler thread looks at the GUI
thread's Python stack every 2 ms while a tick is overdue by more than 20 ms, so every
long gap comes with *where* the GUI thread was (the innermost frames in Canopy or
pyqtgraph, or "Qt" when no Python frame of ours was running: painting, layout), counted
only while it ran (its CPU clock moved; else "not running": waiting for a CPU or for the
interpreter lock), and where other threads of the editor ran meanwhile. The load
(``--load``) is separate processes, the ticks are the GUI thread's own timer.

Cases:

* ``bare``: 8x DGX A100 (64 GPUs) solved by a bare :class:`EngineJob` (the floor);
* ``editor``: the same through Compute ▸ Solve Allgather in a shown main window, so
  progress, the result docks, the plots and the canvas overlays are included;
* ``large`` (``--large S``, default 128 servers = 1024 GPUs): File ▸ Open of a saved file,
  the solve (bound first, then the schedule) and showing the results, each phase with its
  own worst gap;
* ``idle``: a shown, empty main window doing nothing for 8 s (the floor the machine's
  scheduling alone sets under the same load; not run by default);
* ``shown``: per collective (``--collectives``), the wall seconds from Compute ▸ Solve to
  the results shown on the 32-GPU H100-like rail leaf-spine (``--design``), against the
  CPU seconds of ``canopy solve`` on the same file, measured first in a child process
  before the load starts (``shown_over_cli_cpu``; the target is 1.5 with ``--load 2``);
  ``--design-file`` solves a topology file instead.

The engine runs in a child process (:mod:`canopy.engine.process.child_jobs`). To make the
machine busy, ``--load N`` (default 2, one per core here) processes spin on the CPU at the
GUI's priority for the whole run. Targets: under 50 ms while a 64-GPU solve runs, under
100 ms in every phase at 1024 GPUs.

Usage: QT_QPA_PLATFORM=offscreen python -m bench.gui_responsiveness
       [--load N] [--servers S] [--large S] [--cases bare,editor,large,idle,shown]
       [--design S | --design-file FILE] [--collectives C,...]
       [--no-stacks]   (the gaps alone: no sampler thread taking the interpreter lock)
       [--solution FILE] [--large-solution FILE]   (pickled Solutions to show instead of
       waiting for the editor's solve: faster, for profiling the showing phase)
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("CANOPY_RECOVERY_DIR", tempfile.mkdtemp(prefix="canopy-bench-"))

from PySide6.QtCore import QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from bench.clusters import dgx_a100_cluster  # noqa: E402
from canopy.app.job_runner import EngineJob  # noqa: E402
from canopy.app.main_window import MainWindow  # noqa: E402
from canopy.engine.forestcoll.solve import solve  # noqa: E402

TICK_MS = 10
SETTLE_MS = 1500
"""How long the loop runs on after the results arrived (docks, plots, first tree)."""
SAMPLE_S = 0.002
OVERDUE_S = 0.02
RAN_S = SAMPLE_S / 10
"""CPU a thread must have used since the last sample to count as running in it."""
STACKS = [True]
"""Whether the sampler thread runs (``--no-stacks``: gaps alone, with no second thread of
the bench asking the GUI thread for the interpreter lock)."""
WAITING = "GUI thread not running (waiting for a CPU or the interpreter lock)"
OURS = (os.sep + "canopy" + os.sep, os.sep + "app" + os.sep, os.sep + "engine" + os.sep,
        "pyqtgraph")


def _where(frame: object) -> str:
    """The innermost two frames of ours in a stack, as ``file:function`` pairs."""
    parts: list[str] = []
    f = frame
    while f is not None and len(parts) < 2:
        code = f.f_code  # type: ignore[attr-defined]
        name = code.co_filename
        if any(mark in name for mark in OURS) and "bench" not in name:
            short = "/".join(Path(name).parts[-2:])
            parts.append(f"{short}:{code.co_name}")
        f = f.f_back  # type: ignore[attr-defined]
    return " < ".join(parts) if parts else "Qt (no Python frame: painting, layout, events)"


class Watch:
    """Ticks on the GUI thread, stack samples from a second thread while a tick is late."""

    def __init__(self) -> None:
        self.ticks: list[float] = []
        self.cpu: list[float] = []      # the GUI thread's CPU time at each tick
        self.waits: list[float] = []    # its time runnable but not running (run queue)
        self.proc: list[float] = []     # the whole process's CPU time (all threads)
        self.samples: list[tuple[float, str]] = []
        self.marks: list[tuple[float, str]] = []
        self._main = threading.main_thread().ident
        self._stop = threading.Event()
        self._timer = QTimer()
        self._timer.setInterval(TICK_MS)
        self._timer.timeout.connect(self._tick)
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _tick(self) -> None:
        self.cpu.append(time.thread_time())
        self.proc.append(time.process_time())
        self.waits.append(_run_queue_wait())
        self.ticks.append(time.perf_counter())

    def start(self) -> None:
        self._tick()
        self._timer.start()
        if STACKS[0]:
            self._thread.start()

    def stop(self) -> None:
        self._timer.stop()
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def mark(self, phase: str) -> None:
        """A new phase starts now (gaps ending after this belong to it)."""
        self.marks.append((time.perf_counter(), phase))

    def _sample(self) -> None:
        """Every SAMPLE_S while a tick is overdue: where each thread of the process is,
        counted only if it ran since the last sample (its own CPU clock moved): a reader
        thread blocked in select or waiting for the event loop's turn holds no CPU and
        no interpreter lock, and a GUI thread that did not run was waiting (for a CPU, or
        for the lock another thread held), which is not time spent in Qt."""
        last: dict[int, float] = {}
        while not self._stop.wait(SAMPLE_S):
            now = time.perf_counter()
            if not (self.ticks and now - self.ticks[-1] > OVERDUE_S):
                last = {}     # (little done with the interpreter lock while ticks are on time)
                continue
            frames = sys._current_frames()
            ran = {ident: _thread_cpu(ident) for ident in frames}
            # the first sample of a gap has no earlier clock: counted as running
            moved = {ident: cpu - last.get(ident, -1.0) > RAN_S for ident, cpu in ran.items()}
            last = ran
            frame = frames.get(self._main)
            if frame is not None:
                self.samples.append((now, _where(frame) if moved.get(self._main, True)
                                     else WAITING))
            for ident, other in frames.items():
                if ident not in (self._main, threading.get_ident()) and moved.get(ident):
                    self.samples.append((now, "other thread: " + _where(other)))

    def phases(self) -> dict[str, dict]:
        """Per phase: worst gap, mean gap, and where the GUI thread spent the worst gap."""
        out: dict[str, dict] = {}
        gaps = list(zip(self.ticks, self.ticks[1:], strict=False))
        def per_gap(values: list[float]) -> dict[float, float]:
            return {b: y - x for (b, x, y) in zip(self.ticks[1:], values, values[1:],
                                                  strict=False)}
        cpu, proc, waits = per_gap(self.cpu), per_gap(self.proc), per_gap(self.waits)
        bounds = [*self.marks, (float("inf"), "")]
        for (start, phase), (end, _next) in zip(bounds, bounds[1:], strict=False):
            mine = [(a, b) for a, b in gaps if start < b <= end]
            if not mine:
                continue
            a, b = max(mine, key=lambda g: g[1] - g[0])
            worst_cpu = max(mine, key=lambda g: cpu[g[1]])

            def at(gap: tuple[float, float]) -> list[dict]:
                where = Counter(w for t, w in self.samples if gap[0] < t <= gap[1])
                return [{"where": w, "ms": round(n * SAMPLE_S * 1000)}
                        for w, n in where.most_common(4)]
            out[phase] = {
                "seconds": round(min(end, self.ticks[-1]) - start, 2),
                "worst_gap_ms": round((b - a) * 1000, 1),
                "mean_gap_ms": round(sum(y - x for x, y in mine) / len(mine) * 1000, 2),
                "gaps_over_50_ms": sum(1 for x, y in mine if y - x > 0.05),
                "worst_gap_cpu_ms": round(cpu[b] * 1000, 1),
                "worst_gap_run_queue_ms": round(waits[b] * 1000, 1),
                "worst_gap_other_threads_cpu_ms": round((proc[b] - cpu[b]) * 1000, 1),
                "most_gui_cpu_in_one_gap_ms": round(cpu[worst_cpu[1]] * 1000, 1),
                "worst_gap_at": at((a, b)),
                "most_cpu_gap_at": at(worst_cpu)}
        return out


def _thread_cpu(ident: int) -> float:
    """CPU seconds of the thread ``ident`` (its pthread's clock; -1 where unknown)."""
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(ident))
    except (AttributeError, OSError, OverflowError):
        return -1.0


def _run_queue_wait() -> float:
    """Seconds the calling thread has spent runnable but waiting for a CPU (Linux's
    schedstat; 0 elsewhere): a gap's share of it is time the scheduler gave away."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def _run(steps: Callable[[Watch, Callable[[], None]], None]) -> dict[str, dict]:
    """Run ``steps(watch, done)`` in the event loop with a watch on; ends SETTLE_MS after
    done()."""
    app = QApplication.instance()
    watch = Watch()

    def done() -> None:
        watch.mark("showing results")
        QTimer.singleShot(SETTLE_MS, app.quit)

    watch.start()
    QTimer.singleShot(0, lambda: steps(watch, done))
    app.exec()
    watch.stop()
    return watch.phases()


def bare_job(servers: int) -> dict:
    topo = dgx_a100_cluster(servers)
    result: dict = {}

    def steps(watch: Watch, done: Callable[[], None]) -> None:
        watch.mark("solving")
        job = EngineJob(solve, topo)
        job.finished.connect(lambda schedule: (result.update(k=schedule.k), done()))
        job.failed.connect(lambda message: (result.update(error=message), done()))
        job.start()
        result["job"] = job

    phases = _run(steps)
    result.pop("job")
    return {"case": f"{servers}x DGX A100 ({servers * 8} GPUs) solved in a bare EngineJob",
            "phases": phases, **result}


def editor(servers: int, open_file: bool, solution_file: str = "") -> dict:
    """Solve (and with ``open_file``, first open a saved file) in a shown main window.

    With ``solution_file`` (a pickled :class:`~canopy.app.solution.Solution` of the same
    cluster), the schedule's job is cancelled once the bound is shown and that solution
    is delivered instead: at 1024 GPUs the editor's full solve (schedule, fixed-k curve
    and the executed-time simulation) takes about 5 CPU minutes, most of it simulation.
    """
    from canopy.engine.io.topology_json import save_topology

    topo = dgx_a100_cluster(servers)
    path = Path(tempfile.mkdtemp(prefix="canopy-bench-")) / f"dgx-a100-{servers}x8.json"
    save_topology(topo, path)
    window = MainWindow(None if open_file else topo)
    window.resize(1400, 900)
    window.show()
    QApplication.processEvents()
    window.view.zoom_to_fit()
    settle = time.perf_counter() + 0.5   # the first paints belong to no phase measured
    while time.perf_counter() < settle:
        QApplication.processEvents()
        time.sleep(0.01)
    result: dict = {}
    solver = window.solver

    def solved(solution: object) -> None:
        if solution is not None and not result.get("k"):
            result.update(k=solution.schedule.k, trees=len(solution.schedule.trees))  # type: ignore[attr-defined]
            done_holder[0]()

    done_holder: list[Callable[[], None]] = []
    t0 = [time.perf_counter()]

    def steps(watch: Watch, done: Callable[[], None]) -> None:
        done_holder.append(done)
        solver.controller.solution_changed.connect(solved)
        solver.controller.failed.connect(lambda what, m: (result.update(error=m), done()))
        solver.controller.bound_changed.connect(bound)
        if open_file:
            watch.mark("opening")
            window.open_path(path)
            QTimer.singleShot(SETTLE_MS, lambda: solve_now(watch))
        else:
            solve_now(watch)

    def bound(b: object) -> None:
        if b is None or "bound_after_s" in result:
            return
        result["bound_after_s"] = round(time.perf_counter() - t0[0], 2)
        if solution_file:
            result["solution"] = "precomputed (" + solution_file + ")"
            QTimer.singleShot(500, deliver)

    def deliver() -> None:
        """Replace the schedule's job by one that reads the precomputed solution in the
        child process, so it reaches the editor the way a solve's result does (through
        the pipe, unpickled off the GUI thread)."""
        controller = solver.controller
        controller.cancel()
        controller.run("Solving allgather", controller._solved, load_solution, solution_file)

    def solve_now(watch: Watch) -> None:
        watch.mark("solving")
        t0[0] = time.perf_counter()
        window.named_actions["solve_allgather"].trigger()

    phases = _run(steps)
    window.doc.undo_stack.setClean()
    window.close()
    how = "opened from a saved file, solved" if open_file else "solved"
    return {"case": f"{servers}x DGX A100 ({servers * 8} GPUs) {how} from the editor's "
                    "menus", "phases": phases, **result}


def idle(seconds: float = 8.0) -> dict:
    """An empty main window, shown and left alone: the gaps the machine alone causes."""
    window = MainWindow()
    window.resize(1400, 900)
    window.show()
    QApplication.processEvents()

    def steps(watch: Watch, done: Callable[[], None]) -> None:
        watch.mark("idle")
        QTimer.singleShot(int(seconds * 1000), done)

    phases = _run(steps)
    window.close()
    return {"case": "an empty main window doing nothing", "phases": {"idle": phases["idle"]}}


def cli_cpu_seconds(path: Path, collective: str) -> float:
    """CPU seconds (user + system) of ``canopy solve PATH --collective C`` in a child."""
    import resource
    import subprocess
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "canopy.cli", "solve", str(path), "--collective",
                    collective], check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def design_file(servers: int) -> Path:
    """The issue's design: ``servers`` x 8 H100-like GPUs (450 GB/s), 50 GB/s rails on a
    leaf-spine, saved as a topology file."""
    from canopy.engine.generators import generate
    from canopy.engine.io.topology_json import save_topology
    topo = generate("cluster", {"servers": str(servers), "gpus": "8", "gpu_bw": "450",
                                "nic_bw": "50", "scale_out": "leaf-spine"})
    path = Path(tempfile.mkdtemp(prefix="canopy-bench-")) / f"h100-{servers}x8.json"
    save_topology(topo, path)
    return path


def shown(path: Path, collective: str, cli_cpu_s: float) -> dict:
    """Compute ▸ Solve <collective> on ``path`` in a shown main window: wall seconds until
    the results are shown (the controller's solution signal), against ``cli_cpu_s``."""
    from canopy.engine.io.topology_json import load_topology
    window = MainWindow(load_topology(path))
    window.resize(1400, 900)
    window.show()
    QApplication.processEvents()
    settle = time.perf_counter() + 1.0   # the window's first paints belong to no solve
    while time.perf_counter() < settle:
        QApplication.processEvents()
        time.sleep(0.01)
    result: dict = {}
    t0 = [0.0]

    def steps(watch: Watch, done: Callable[[], None]) -> None:
        controller = window.solver.controller

        def solved(solution: object) -> None:
            if solution is not None and "shown_s" not in result:
                result["shown_s"] = round(time.perf_counter() - t0[0], 2)
                done()

        controller.solution_changed.connect(solved)
        controller.failed.connect(lambda what, m: (result.update(error=m), done()))
        watch.mark("solving")
        t0[0] = time.perf_counter()
        window.named_actions["solve_" + collective.replace("-", "_")].trigger()

    phases = _run(steps)
    window.doc.undo_stack.setClean()
    window.close()
    ratio = result["shown_s"] / cli_cpu_s if "shown_s" in result and cli_cpu_s else None
    return {"case": f"{path.stem} {collective}: Solve in the editor against the command line",
            "phases": phases, "cli_cpu_s": round(cli_cpu_s, 2), **result,
            "shown_over_cli_cpu": None if ratio is None else round(ratio, 2)}


def load_solution(path: str, progress: object = None) -> object:
    """A pickled Solution, read in an engine job's child process."""
    import pickle
    with open(path, "rb") as f:
        return pickle.load(f)


def _spin() -> None:
    while True:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=8)
    parser.add_argument("--large", type=int, default=128, help="servers in the large case")
    parser.add_argument("--load", type=int, default=2, help="CPU-bound processes alongside")
    parser.add_argument("--cases", default="bare,editor,large")
    parser.add_argument("--design", type=int, default=4,
                        help="servers of the H100-like design in the shown case")
    parser.add_argument("--design-file", default="",
                        help="topology file of the shown case instead of the generated design")
    parser.add_argument("--collectives", default="allgather,allreduce",
                        help="collectives of the shown case")
    parser.add_argument("--no-stacks", action="store_true",
                        help="no stack samples: the gaps without the sampler thread")
    parser.add_argument("--solution", default="",
                        help="pickled Solution of the editor case's cluster to show instead "
                             "of waiting for its solve (faster, for profiling)")
    parser.add_argument("--large-solution", default="",
                        help="pickled Solution of the large cluster to show instead of "
                             "waiting for the editor's full solve")
    args = parser.parse_args()
    STACKS[0] = not args.no_stacks
    _app = QApplication.instance() or QApplication([])
    from canopy.app import heap
    # as `canopy gui` does, after importing the editor's modules (MainWindow, above) and
    # before its window: modules imported later would be walked by every full gc pass
    heap.settle_start_up()
    from canopy.app.job_runner import warm_up
    warm_up()
    cases = args.cases.split(",")
    collectives = args.collectives.split(",")
    design = Path(args.design_file) if args.design_file else \
        design_file(args.design) if "shown" in cases else Path()
    cli = {c: cli_cpu_seconds(design, c) for c in collectives} if "shown" in cases else {}
    burners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.load)]
    for b in burners:
        b.start()
    runs = {"bare": lambda: bare_job(args.servers),
            "editor": lambda: editor(args.servers, False, args.solution),
            "large": lambda: editor(args.large, True, args.large_solution),
            "idle": idle}
    try:
        for name in cases:
            for collective in collectives if name == "shown" else [""]:
                start = time.process_time()
                case = shown(design, collective, cli[collective]) if name == "shown" \
                    else runs[name]()
                print(json.dumps({**case, "gui_cpu_s": round(time.process_time() - start, 2),
                                  "load_processes": args.load,
                                  "loadavg_1min": round(os.getloadavg()[0], 1)}), flush=True)
    finally:
        for b in burners:
            b.kill()


def run_as_console_script(entry: Callable[[], None]) -> None:
    """Run ``entry`` with the ``__main__`` module unnamed: multiprocessing's fork server
    prepares each engine job's process by importing the parent's main module (by name or
    path); run as the editor is, from a console script that imports almost nothing, not a
    benchmark module with PySide6 and the editor (1-2 s a job)."""
    main_module = sys.modules["__main__"]
    main_module.__spec__ = None
    del main_module.__file__
    entry()


if __name__ == "__main__":
    run_as_console_script(main)
