"""Memory of canopy's commands on a generated cluster, against the memory budget.

Generates a cluster of ``--gpus`` GPUs (servers of 8 with an NVSwitch, a leaf-spine
network; ``canopy generate cluster``), runs each command on it as the user would (a new
``canopy`` process) and samples the resident memory of the command and every process
under it (engine jobs) ten times a second. For each command: the peak resident memory
of the whole process tree, the CPU seconds, the exit code and, for a command refused
up front, its sentence and how soon it came. Every command must stay under the budget
(:data:`canopy.engine.model.limits.MEMORY_BUDGET`, or ``$CANOPY_MEMORY_BUDGET``) or be
refused with one sentence (exit 2) instead of being killed. Prints one JSON summary:

    nice -n 15 python -m bench.memory_budget --gpus 4096 > memory-4096.json
    python -m bench.memory_budget --gpus 256 --commands solve,compare
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = {
    "solve": ["solve", "{topo}", "--bound-only"],
    "solve-schedule": ["solve", "{topo}"],
    "allreduce-lp": ["solve", "{topo}", "--collective", "allreduce", "--allreduce-lp", "on"],
    "alltoall": ["solve", "{topo}", "--collective", "alltoall"],
    "alltoall-lp": ["solve", "{topo}", "--collective", "alltoall", "--method", "lp"],
    "compare": ["compare", "{topo}"],
    "fabric": ["fabric", "{topo}", "--jobs", "{jobs}"],
}
"""What is run, by name ({topo}: the generated cluster; {jobs}: two jobs of half of it)."""


def _tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and every process under it."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        child = int(stat.parent.name)
        children.setdefault(int(fields[1]), []).append(child)
        rss[child] = int(fields[21]) * page
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo.extend(children.get(p, []))
    return total


def run_one(argv: list[str], timeout: float) -> dict[str, object]:
    """Run ``canopy argv``; its peak tree memory, CPU seconds, exit code and sentence."""
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "canopy.cli", *argv],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak = 0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        peak = max(peak, _tree_rss(proc.pid))
        if time.monotonic() - start > timeout:
            proc.kill()
        time.sleep(0.1)
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code
    stderr = proc.stderr.read() if proc.stderr else ""
    wall = time.monotonic() - start
    lines = [line for line in stderr.splitlines() if line.strip()]
    out: dict[str, object] = {
        "exit": code, "peak_rss_mib": round(peak / 2**20), "wall_seconds": round(wall, 1),
        "timed_out": wall > timeout}
    out["cpu_seconds"] = round(usage.ru_utime + usage.ru_stime, 1)
    if code != 0:
        out["message"] = lines[-1][:300] if lines else ""
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gpus", type=int, default=4096, help="GPUs (a multiple of 8)")
    parser.add_argument("--commands", default=",".join(COMMANDS),
                        help=f"comma-separated, of {', '.join(COMMANDS)}")
    parser.add_argument("--timeout", type=float, default=3600.0,
                        help="wall seconds per command before it is stopped")
    args = parser.parse_args()
    from canopy.engine.model.limits import gigabytes, memory_budget

    result: dict[str, object] = {"gpus": args.gpus, "budget": gigabytes(memory_budget()),
                                 "commands": {}}
    with tempfile.TemporaryDirectory(prefix="canopy-memory-") as scratch:
        topo = Path(scratch) / f"cluster-{args.gpus}.json"
        subprocess.run([sys.executable, "-m", "canopy.cli", "generate", "cluster",
                        "--servers", str(args.gpus // 8), "--gpus", "8", "-o", str(topo)],
                       check=True, capture_output=True)
        jobs = Path(scratch) / "jobs.json"
        half = args.gpus // 16
        jobs.write_text(json.dumps({"format": "canopy-jobs", "version": 1, "jobs": [
            {"name": f"job{j}", "nodes": [f"n{s}.gpu{g}" for s in range(j * half,
                                                                          (j + 1) * half)
                                          for g in range(8)]} for j in range(2)]}))
        for name in args.commands.split(","):
            argv = [part.format(topo=topo, jobs=jobs) for part in COMMANDS[name]]
            result["commands"][name] = run_one(argv, args.timeout)
            print(f"{name}: {result['commands'][name]}", file=sys.stderr)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
