"""check-plan against compare: the exported MSCCL++ plan's simulated algbw beside compare's
figure for the same schedule, per sample and collective; print JSON.

For each sample and collective (allgather, reduce-scatter, allreduce: the schedule
``canopy solve --mscclpp`` exports, i.e. the runtime choice; all-to-all: the MCF
schedule): compare's algbw at the size (ForestColl's row; MCF's for all-to-all), the
plan's algbw (``canopy check-plan PLAN --topology``), their ratio, the optimum's algbw
(the bound compare reports) and the plan's fraction of it, the plan's pipeline
iterations and unit, its thread blocks per GPU, whether its symbolic run proved the
result, and CPU seconds. The summary counts plans within 2 % of compare.
Run: ``python bench/mscclpp_timing.py [--size 1G] [--sample NAME] [--collective C]
[--merge RESULTS.json]``; ``--merge`` puts the rows run into the results file (replacing
the same sample and collective, keeping the others) and prints the merged summary.
"""

import argparse
import json
import os
import sys
import time

from canopy.engine.allreduce.lp_schedule import choose_allreduce
from canopy.engine.alltoall.mscclpp_plan import alltoall_plan
from canopy.engine.comparison.table import compare
from canopy.engine.deploy.mscclpp_export import schedule_plans
from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.topology_json import load_sample, sample_names
from canopy.engine.model.collectives import COLLECTIVES
from canopy.engine.model.sizes import parse_size
from canopy.engine.mscclpp.reader import read_plan_bytes
from canopy.engine.mscclpp.timing import time_plan


def expected(topo, collective, size):
    """(compare's algbw, the optimum's algbw, the all-to-all solve or None) at ``size``."""
    if collective == "alltoall":
        from canopy.engine.alltoall.compare import compare_alltoall
        comp = compare_alltoall(topo, sizes=(size,), algorithms=("mcf",))
        return comp.rows[0].algbw(size), comp.result.algbw, comp.result
    row = compare(topo, collective, sizes=(size,), algorithms=()).rows[0]
    return row.algbw_at(size), row.algbw, None


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", default="1G")
    parser.add_argument("--sample", action="append", help="only this sample (repeatable)")
    parser.add_argument("--collective", action="append", choices=(*COLLECTIVES, "alltoall"))
    parser.add_argument("--merge", help="results JSON to merge the rows into (rewritten)")
    args = parser.parse_args()
    size = parse_size(args.size)
    rows = []
    for name in sample_names():
        if args.sample and name.removesuffix(".json") not in args.sample:
            continue
        topo = load_sample(name)
        for collective in args.collective or (*COLLECTIVES, "alltoall"):
            start = time.process_time()
            row = {"sample": name.removesuffix(".json"), "collective": collective}
            try:
                want, optimum, solved = expected(topo, collective, size)
                compared = time.process_time()
                if solved is not None:       # the MCF schedule compare solved, not again
                    files = [alltoall_plan("plan.json", topo, solved.schedule)]
                else:
                    schedule = choose_allreduce(topo, solve(topo, collective))
                    files = schedule_plans("plan.json", topo, schedule)
                exported = time.process_time()
                plan = read_plan_bytes(files[-1].data)
                timing = time_plan(plan, topo, size)
            except Exception as exc:       # a row per failure, the rest still runs
                row["error"] = str(exc)
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
                continue
            timed = time.process_time()
            row.update({
                "compare_algbw": round(float(want), 3),
                "plan_algbw": round(float(timing.algbw), 3),
                "ratio": round(float(timing.algbw / want), 4),
                "optimum_algbw": round(float(optimum), 3),
                "plan_of_optimum": round(float(timing.algbw / optimum), 4),
                "iterations": timing.iterations, "unit_bytes": files[-1].unit_size,
                "plans": len(files),
                "threadblocks_per_gpu": max(len(g.tbs) for g in plan.gpus),
                "checked": files[-1].report.checked,
                "compare_cpu_s": round(compared - start, 2),
                "export_cpu_s": round(exported - compared, 2),
                "timing_cpu_s": round(timed - exported, 2)})
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    if args.merge:
        with open(args.merge) as f:
            old = json.load(f)
        if old.get("size") != size:
            parser.error(f"{args.merge} holds rows at {old.get('size')} bytes, not {size}")
        ran = {(r["sample"], r["collective"]) for r in rows}
        rows = [r for r in old["runs"] if (r["sample"], r["collective"]) not in ran] + rows
    ok = [r for r in rows if "ratio" in r]
    text = json.dumps({"size": size, "runs_total": len(rows), "failed": len(rows) - len(ok),
                       "within_2_percent": sum(abs(r["ratio"] - 1) <= 0.02 for r in ok),
                       "checked": sum(r["checked"] for r in ok), "runs": rows}, indent=1)
    if args.merge:
        with open(args.merge + ".tmp", "w") as f:
            f.write(text + "\n")
        os.replace(args.merge + ".tmp", args.merge)
    print(text)


if __name__ == "__main__":
    main()
