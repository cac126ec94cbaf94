"""All-to-all solve times and quality; print JSON.

Usage: python -m bench.alltoall [--large N] [--skip-large] [--gap G] [--skip-fig5]
                                [--removed 0,1,2,3,4,5,6] [--seeds S]

Cases: the 4x4x4 torus (64 nodes) by the exact link LP (target ≤ 10 s CPU), and a
large generalised Kautz graph and torus by the decomposition (target ≤ 5 min CPU on
2 cores, within 5 % of the certified bound it reports). For the torus and the GenKautz
case the JSON's size is measured too (paths, MB, MB gzipped, CPU s to write it).

The ``fig5`` part reproduces the shape of the summary's Fig. 5: exact all-to-all algbw
of a punctured 4x4x2 torus and a punctured GenKautz GK(3, 32) against the number of
links removed (min / mean / max over seeds; seeds that disconnect are skipped; "exact"
counts the instances solved exactly). CPU seconds come from ``time.process_time()``
(HiGHS and scipy run on this process's threads).
"""

from __future__ import annotations

import argparse
import gzip
import json
import time

from canopy.engine.alltoall import solve_alltoall
from canopy.engine.alltoall.io import result_to_text
from canopy.engine.generators import ParameterError, generate


def json_size(result: object) -> dict:
    """Size of the canopy-alltoall JSON (compact, one path per line) and gzipped."""
    start = time.process_time()
    text, paths = result_to_text(result)
    data = text.encode()
    return {"json_paths": paths, "json_mb": round(len(data) / 1e6, 1),
            "json_gz_mb": round(len(gzip.compress(data, compresslevel=6)) / 1e6, 1),
            "json_cpu_s": round(time.process_time() - start, 1)}


def run(name: str, kind: str, params: dict, method: str, gap: float,
        with_json: bool = False) -> dict:
    topo = generate(kind, params)
    start, wall = time.process_time(), time.perf_counter()
    result = solve_alltoall(topo, method=method, target_gap=gap)
    row = {"case": name, "nodes": result.num_compute, "links": result.problem.m,
           "method": result.method, "exact": result.exact,
           "algbw_gbps": round(float(result.algbw), 4),
           "bound_algbw_gbps": round(float(result.bound_algbw), 4),
           "gap": round(result.gap, 6),
           "cut_bound_algbw_gbps": round(float(result.cut_bound_algbw), 4),
           "routes": len(result.schedule.routes), "rounds": result.iterations,
           "cpu_s": round(time.process_time() - start, 2),
           "wall_s": round(time.perf_counter() - wall, 2)}
    if result.regular_bound is not None:
        row["theorem1_algbw_gbps"] = round(float(result.num_compute * result.regular_bound), 4)
    if result.exact:
        row["algbw_exact"] = str(result.algbw)
    if with_json:
        row.update(json_size(result))
    return row


FIG5 = (("torus 4x4x2", "punctured-torus", {"dims": "4x4x2"}),
        ("GenKautz GK(3,32)", "punctured-kautz", {"degree": "3", "n": "32"}))


def fig5(kind: str, params: dict, removed: list[int], seeds: int) -> list[dict]:
    """Exact algbw of a punctured fabric for each number of removed links."""
    rows = []
    for k in removed:
        values, exact = [], 0
        for seed in range(seeds if k else 1):
            try:
                topo = generate(kind, {**params, "removed": str(k), "seed": str(seed)})
            except ParameterError:
                continue
            result = solve_alltoall(topo, method="lp")
            exact += result.exact
            values.append(float(result.algbw))
        rows.append({"removed": k, "instances": len(values), "exact": exact,
                     "min": round(min(values), 4),
                     "mean": round(sum(values) / len(values), 4),
                     "max": round(max(values), 4)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--large", type=int, default=1024, help="nodes of the large cases")
    parser.add_argument("--skip-large", action="store_true")
    parser.add_argument("--gap", type=float, default=0.04,
                        help="target gap of the decomposition (default 0.04)")
    parser.add_argument("--skip-fig5", action="store_true")
    parser.add_argument("--removed", default="0,1,2,3,4,5,6")
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    rows = [run("torus 4x4x4", "torus", {"dims": "4x4x4"}, "lp", args.gap, with_json=True)]
    if not args.skip_large:
        n = args.large
        rows.append(run(f"GenKautz d=4 n={n}", "kautz", {"degree": "4", "n": str(n)},
                        "decomposition", args.gap, with_json=True))
        side = round(n ** (1 / 3))
        while n % (side * side):
            side -= 1
        dims = f"{side}x{side}x{n // (side * side)}"
        rows.append(run(f"torus {dims}", "torus", {"dims": dims}, "decomposition", args.gap))
    out: dict = {"benchmark": "alltoall", "cases": rows}
    if not args.skip_fig5:
        removed = [int(x) for x in args.removed.split(",")]
        start = time.process_time()
        out["fig5"] = [{"fabric": name, "algbw_gbps_by_removed_links":
                        fig5(kind, params, removed, args.seeds)} for name, kind, params in FIG5]
        out["fig5_cpu_s"] = round(time.process_time() - start, 2)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
