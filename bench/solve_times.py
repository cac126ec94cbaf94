"""Time the ForestColl pipeline per phase on reference and scaled topologies; print JSON.

Usage: python -m bench.solve_times [--repeat R] [--max-servers S]
The published Python implementation takes 5.8 s (2x A100, k=13), 34.9 s (2x MI250,
k=83) and 43 s (4x A100, fixed k=1) on a comparable machine.
"""

from __future__ import annotations

import argparse
import json
import time

from bench.clusters import dgx_a100_cluster
from canopy.engine.forestcoll.optimum import find_optimum
from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.topology_json import load_sample
from canopy.engine.network.indexed import Network

PUBLISHED_S = {"2x DGX A100 optimal": 5.8, "2x MI250 optimal": 34.9,
               "4x DGX A100 k=1": 43.0}


def run_case(name: str, topo, k, repeat: int) -> dict:
    best = None
    for _ in range(repeat):
        start = time.perf_counter()
        schedule = solve(topo, k=k)
        elapsed = time.perf_counter() - start
        if best is None or elapsed < best[0]:
            best = (elapsed, schedule)
    elapsed, schedule = best
    start = time.perf_counter()
    find_optimum(Network.from_topology(topo))
    optimum_only = time.perf_counter() - start
    row = {"case": name, "gpus": len(schedule.compute_nodes), "k": schedule.k,
           "algbw_gbps": round(float(schedule.algbw), 3), "distinct_trees": len(schedule.trees),
           "max_height": max(t.height for t in schedule.trees),
           "seconds": round(elapsed, 4), "optimum_only_s": round(optimum_only, 4),
           "phases_s": {p: round(v, 4) for p, v in schedule.timings.items()}}
    if name in PUBLISHED_S:
        row["published_s"] = PUBLISHED_S[name]
        row["speedup"] = round(PUBLISHED_S[name] / elapsed, 1)
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-servers", type=int, default=16)
    args = parser.parse_args()
    cases = [("2x DGX A100 optimal", load_sample("dgx-a100-2x8"), None),
             ("2x MI250 optimal", load_sample("mi250-2x16"), None),
             ("2x MI250 k=2", load_sample("mi250-2x16"), 2),
             ("4x DGX A100 k=1", dgx_a100_cluster(4), 1)]
    servers = 4
    while servers <= args.max_servers:
        cases.append((f"{servers}x DGX A100 optimal", dgx_a100_cluster(servers), None))
        servers *= 2
    rows = []
    for name, topo, k in cases:
        rows.append(run_case(name, topo, k, args.repeat if len(topo.nodes) < 200 else 1))
        print(json.dumps(rows[-1]), flush=True)
    print(json.dumps({"results": rows}, indent=1))


if __name__ == "__main__":
    main()
