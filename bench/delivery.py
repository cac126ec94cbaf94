"""Time the commands that take a user from a drawing to a runnable schedule; print JSON.

Usage: python -m bench.delivery [--cases NAME,...] [--timeout S] [--list]

Every case runs the installed ``canopy`` command in a fresh child process and reports its
CPU seconds (user + system of the command and everything it started, from
``resource.getrusage(RUSAGE_CHILDREN)``), wall seconds, peak resident memory (MiB, the
largest child) and the phase split the command printed (lines ``time: ...`` and
``phases: ...``). Topologies are generated into a temporary directory first (not timed),
and Canopy's sources are compiled to bytecode first (:func:`_compiled_sources`), as an
installed wheel has them: otherwise, under ``PYTHONDONTWRITEBYTECODE`` or in a fresh
checkout, every case would pay for compiling the modules it imports.
A case over ``--timeout`` seconds is stopped and reported as such.

The host's speed varies (a shared virtual machine: the same command's CPU seconds move
with its neighbours' load), so the JSON also holds the CPU seconds of a fixed
pure-Python loop timed before and after the cases (``reference_loop_cpu_s``): figures from
runs whose references differ are compared through them, or by running both versions
alternately.
"""

from __future__ import annotations

import argparse
import compileall
import importlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CANOPY = [sys.executable, "-m", "canopy.cli"]

# name -> canopy generate arguments
TOPOLOGIES = {
    "h100-4x8": ["cluster", "--servers", "4", "--gpus", "8", "--gpu-bw", "450", "--nic-bw",
                 "50", "--scale-out", "leaf-spine"],
    "h100-8x8": ["cluster", "--servers", "8", "--gpus", "8", "--gpu-bw", "450", "--nic-bw",
                 "50", "--scale-out", "leaf-spine"],
    "h100-128x8": ["cluster", "--servers", "128", "--gpus", "8", "--gpu-bw", "450",
                   "--nic-bw", "50", "--scale-out", "leaf-spine"],
    "a100-128x8": ["cluster", "--servers", "128", "--gpus", "8"],   # DGX A100-like, rails
    "torus-4x4x4": ["torus", "--dims", "4x4x4"],
}
SAMPLES = Path(__file__).resolve().parent.parent / "samples"
COLLECTIVES = ("allgather", "reduce-scatter", "allreduce")


def _cases() -> dict[str, list[str]]:
    """case name -> canopy arguments ({topo:NAME} is a generated file, {out} a scratch
    file)."""
    cases: dict[str, list[str]] = {"help": ["--help"]}
    for topo in ("h100-4x8", "h100-8x8", "h100-128x8", "a100-128x8"):
        cases[f"solve allreduce {topo}"] = ["solve", f"{{topo:{topo}}}", "--collective",
                                            "allreduce"]
    for coll in COLLECTIVES:
        cases[f"solve --msccl {coll} h100-4x8"] = [
            "solve", "{topo:h100-4x8}", "--collective", coll, "--msccl", "{out}"]
    cases["solve --msccl allreduce mi250-2x16 k=2"] = [
        "solve", str(SAMPLES / "mi250-2x16.json"), "--collective", "allreduce", "--k", "2",
        "--msccl", "{out}"]
    for topo in ("h100-4x8", "h100-8x8"):
        for coll in COLLECTIVES:
            cases[f"compare {coll} {topo}"] = ["compare", f"{{topo:{topo}}}", "--collective",
                                               coll]
    cases["solve alltoall torus-4x4x4"] = ["solve", "{topo:torus-4x4x4}", "--collective",
                                          "alltoall"]
    return cases


def _child(args: list[str], timeout: float) -> None:
    """Run one command; print one JSON line about it (used in a process of its own, so
    that the children's peak memory is this command's)."""
    start = time.perf_counter()
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PYTHONHASHSEED": "0"})
        out, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        raw = exc.stdout or b""
        out = raw.decode() if isinstance(raw, bytes) else raw
        code = "timeout"
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    phases = [line.strip() for line in out.splitlines()
              if re.match(r"\s*(time|phases)\b", line)]
    print(json.dumps({"cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
                      "wall_s": round(wall, 2), "peak_mib": round(usage.ru_maxrss / 1024, 1),
                      "exit": code, "printed": phases,
                      "tail": out.strip().splitlines()[-1:] if code else []}))


def _reference_loop() -> float:
    """CPU seconds of ten million additions in a Python loop: the host's speed now."""
    start = time.process_time()
    total = 0
    for i in range(10_000_000):
        total += i
    return round(time.process_time() - start, 3)


def _compiled_sources() -> None:
    """Write the bytecode of every module of Canopy's packages (``__pycache__`` beside
    them, which ``.gitignore`` leaves out), as pip does when it installs a wheel."""
    for name in ("canopy.engine", "canopy.cli", "canopy.app"):
        for folder in importlib.import_module(name).__path__:
            compileall.compile_dir(folder, quiet=1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", help="comma-separated substrings of case names")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--child", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.timeout)
        return
    cases = _cases()
    if args.list:
        print("\n".join(cases))
        return
    if args.cases:
        wanted = args.cases.split(",")
        cases = {n: a for n, a in cases.items() if any(w in n for w in wanted)}
    _compiled_sources()
    reference = [_reference_loop()]
    scratch = Path(tempfile.mkdtemp(prefix="canopy-delivery-"))
    rows = []
    try:
        made: dict[str, str] = {}
        for name, argv in cases.items():
            for i, arg in enumerate(argv):
                match = re.fullmatch(r"\{topo:(.+)\}", arg)
                if match:
                    topo = match.group(1)
                    if topo not in made:
                        made[topo] = str(scratch / f"{topo}.json")
                        subprocess.run([*CANOPY, "generate", *TOPOLOGIES[topo], "-o",
                                        made[topo]], check=True, capture_output=True)
                    argv[i] = made[topo]
                elif arg == "{out}":
                    argv[i] = str(scratch / "out.xml")
            done = subprocess.run([sys.executable, __file__, "--timeout", str(args.timeout),
                                   "--child", *CANOPY, *argv], capture_output=True, text=True,
                                  check=True)
            row = {"case": name, **json.loads(done.stdout)}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    reference.append(_reference_loop())
    print(json.dumps({"cores": os.cpu_count(), "load_1min": round(os.getloadavg()[0], 2),
                      "reference_loop_cpu_s": reference, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
