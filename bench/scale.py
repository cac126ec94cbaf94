"""Scale benchmark: CPU s, wall s, peak memory and phase split; prints JSON.

Each case runs in its own child process so that its peak resident memory (ru_maxrss)
is its own. Cases: DGX A100 clusters (bench/clusters.py) from 256 to 4096 GPUs, the 3-D
torus 8x8x8, a 2:1 oversubscribed leaf-spine cluster and a rail-optimised cluster
(``canopy generate cluster``; ``height`` is the tallest tree), the optimum alone at
4096 GPUs, and a whole ``canopy solve`` process on the 2 x DGX A100 sample (start-up
included).

Every row names the maxflow backend its large networks used (``maxflow``: OR-Tools when
the ``[ortools]`` extra is installed, else scipy; ``--backend`` or ``CANOPY_MAXFLOW``
picks one). Solve rows also give the size of the schedule JSON that ``canopy solve
--json`` writes (``json_mb``), its tree edges and distinct paths.

Usage: python -m bench.scale [--cases NAME,...] [--backend NAME] [--timeout S]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

CASES = {
    "dgx-32": ("solve", "dgx", 32),
    "dgx-64": ("solve", "dgx", 64),
    "dgx-128": ("solve", "dgx", 128),
    "dgx-512": ("solve", "dgx", 512),
    "torus-8x8x8": ("solve", "torus", "8x8x8"),
    "leaf-spine-32": ("solve", "leaf-spine", 32),
    "leaf-spine-128": ("solve", "leaf-spine", 128),
    "rail-16": ("solve", "rail", 16),
    "rail-128": ("solve", "rail", 128),
    "bound-dgx-512": ("bound", "dgx", 512),
    "bound-rail-512": ("bound", "rail", 512),
}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = ["dgx-32", "dgx-64", "dgx-128", "torus-8x8x8", "leaf-spine-32", "leaf-spine-128",
           "rail-16", "rail-128", "bound-dgx-512", "bound-rail-512"]


def build(kind: str, size):
    if kind == "dgx":
        from bench.clusters import dgx_a100_cluster
        return dgx_a100_cluster(size)
    from canopy.engine.generators import generate
    if kind == "torus":
        return generate("torus", {"dims": size})
    if kind == "rail":
        return generate("cluster", {"servers": str(size), "gpus": "8"})
    return generate("cluster", {"servers": str(size), "gpus": "8", "scale_out": "leaf-spine",
                                "oversubscription": "2"})


def child(name: str) -> None:
    """Run one case in this process and print its JSON row."""
    mode, kind, size = CASES[name]
    topo = build(kind, size)
    cpu, wall = time.process_time(), time.perf_counter()
    from canopy.engine.network.maxflow import default_backend
    row: dict = {"case": name, "gpus": len(topo.compute_nodes()), "maxflow": default_backend()}
    if mode == "bound":
        from canopy.engine.forestcoll.optimum import optimum
        opt = optimum(topo)
        row.update(k=opt.k, algbw=round(float(opt.algbw()), 6), rounds=opt.rounds)
    else:
        from canopy.engine.forestcoll.solve import solve
        schedule = solve(topo)
        total = schedule.timings.get("total") or 1.0
        row.update(k=schedule.k, algbw=round(float(schedule.algbw), 6),
                   distinct_trees=len(schedule.trees),
                   height=max(t.height for t in schedule.trees),
                   phases={p: round(v / total, 3) for p, v in schedule.timings.items()
                           if p != "total"})
    row.update(cpu_s=round(time.process_time() - cpu, 3),
               wall_s=round(time.perf_counter() - wall, 3),
               peak_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1))
    if mode != "bound":
        from canopy.engine.io.schedule_json import schedule_to_dict
        data = schedule_to_dict(schedule)   # as `canopy solve --json` writes it
        text = json.dumps(data, indent=None if "routes" in data else 1,
                          separators=(",", ":") if "routes" in data else None)
        row.update(json_mb=round(len(text) / 1e6, 2), tree_edges=sum(
            len(t.edges) for t in schedule.trees), distinct_paths=len(data.get("routes", [])))
    print(json.dumps(row))


def whole_process(runs: int = 10) -> dict:
    """A whole `canopy solve` on the 2 x DGX A100 sample, as a user runs it: the minimum
    and median CPU and wall seconds of ``runs`` processes."""
    path = os.path.join(ROOT, "samples", "dgx-a100-2x8.json")
    env = {k: v for k, v in os.environ.items() if k != "CANOPY_MAXFLOW"}  # as installed
    cpus, walls = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = time.perf_counter()
        subprocess.run([sys.executable, "-m", "canopy.cli", "solve", path], check=True,
                       capture_output=True, env=env)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        walls.append(time.perf_counter() - wall)
    return {"case": "canopy solve dgx-a100-2x8 (process)", "gpus": 16, "runs": runs,
            "cpu_s": round(min(cpus), 3), "cpu_s_median": round(statistics.median(cpus), 3),
            "wall_s": round(min(walls), 3),
            "wall_s_median": round(statistics.median(walls), 3)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default=",".join(DEFAULT))
    parser.add_argument("--child")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--backend", help="maxflow backend for every case (CANOPY_MAXFLOW)")
    args = parser.parse_args()
    if args.backend:
        os.environ["CANOPY_MAXFLOW"] = args.backend
    if args.child:
        child(args.child)
        return
    rows = [whole_process()]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [ROOT, os.environ.get("PYTHONPATH", "")]))
    for name in args.cases.split(","):
        try:
            out = subprocess.run([sys.executable, "-m", "bench.scale", "--child", name],
                                 check=True, capture_output=True, text=True, env=env,
                                 timeout=args.timeout)
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        except subprocess.TimeoutExpired:
            rows.append({"case": name, "error": f"over {args.timeout:.0f} s"})
        except subprocess.CalledProcessError as exc:
            rows.append({"case": name, "error": exc.stderr.strip().splitlines()[-1]})
        print(json.dumps(rows[-1]), file=sys.stderr)
    print(json.dumps({"scale": rows}, indent=1))


if __name__ == "__main__":
    main()
