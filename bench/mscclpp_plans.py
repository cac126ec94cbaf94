"""Every sample and generator family (each at its defaults) writes MSCCL++ plans that pass
check-plan: the check the suite runs on the small samples, small families and one large
case per collective (tests/engine/mscclpp/test_plans.py), for every sample, family,
collective (allgather, reduce-scatter, allreduce, all-to-all) and buffer mode; print JSON.

Each row: the schedule (the optimum, or where its plan exceeds the runtime's thread blocks
the fewest trees within 1 %, then 5 %, as the suite's fixture; all-to-all: the MCF
schedule's out-of-place plan with its lanes), its plan's thread blocks per GPU and ops,
whether the symbolic run proved the collective's result, and CPU seconds of the solve, the
program layout, the writer, the parser's rules and the symbolic run.
Run: ``python bench/mscclpp_plans.py [--sample NAME] [--families] [--out-of-place]
[--collective C] [--merge RESULTS.json]``; ``--merge`` puts the rows run into the results
file (replacing the same case, collective and buffer mode, keeping the others) and prints
the merged summary.
"""

import argparse
import json
import os
import sys
import time

from canopy.engine.deploy.mscclpp_export import schedule_algo
from canopy.engine.forestcoll.solve import solve
from canopy.engine.generators import generate
from canopy.engine.io.topology_json import load_sample, sample_names
from canopy.engine.model.collectives import COLLECTIVES
from canopy.engine.mscclpp.executor import execute
from canopy.engine.mscclpp.files import rank_servers
from canopy.engine.mscclpp.reader import parse_plan
from canopy.engine.mscclpp.writer import MscclppLimitError, algo_plan

FAMILIES = ["cluster", "torus", "punctured-torus", "mesh", "ring", "fully-connected",
            "hypercube", "dragonfly", "kautz", "punctured-kautz", "multi-dim"]


def one_alltoall(label, topo):
    from canopy.engine.alltoall import solve_alltoall
    from canopy.engine.alltoall.mscclpp_plan import alltoall_plan
    row = {"case": label, "collective": "alltoall", "inplace": False,
           "gpus": len(topo.compute_nodes())}
    start = time.process_time()
    try:
        schedule = solve_alltoall(topo).schedule
        solved = time.process_time()
        file = alltoall_plan("plan.json", topo, schedule, tune=False)
        done = time.process_time()
    except Exception as exc:       # a row per failure, the rest still runs
        row["error"] = str(exc)
        return row
    plan = json.loads(file.data)
    row.update({"threadblocks_per_gpu": max(len(g["threadblocks"]) for g in plan["gpus"]),
                "ops": file.report.ops, "checked": file.report.checked,
                "cpu_s": {"solve": round(solved - start, 2),
                          "layout_writer_parser_symbolic_run": round(done - solved, 2)}})
    return row


def one(label, topo, collective, inplace):
    if collective == "alltoall":
        return one_alltoall(label, topo)
    row = {"case": label, "collective": collective, "inplace": inplace,
           "gpus": len(topo.compute_nodes())}
    start = time.process_time()
    servers = rank_servers(topo)
    try:
        for tolerance in (0, 1, 5):
            schedule = solve(topo, collective, tolerance=tolerance)
            solved = time.process_time()
            try:
                algo = schedule_algo(schedule, inplace, servers)
                break
            except MscclppLimitError:
                continue
        laid = time.process_time()
        plan = algo_plan(algo, servers)
        written = time.process_time()
        model = parse_plan(json.loads(json.dumps(plan)), label)
        parsed = time.process_time()
        report = execute(model)
        ran = time.process_time()
    except Exception as exc:       # a row per failure, the rest still runs
        row["error"] = str(exc)
        return row
    row.update({"k": schedule.k, "tolerance_percent": tolerance,
                "threadblocks_per_gpu": max(len(g["threadblocks"]) for g in plan["gpus"]),
                "ops": report.ops, "checked": report.checked,
                "cpu_s": {"solve": round(solved - start, 2), "layout": round(laid - solved, 2),
                          "writer": round(written - laid, 2), "parser": round(parsed - written, 2),
                          "symbolic_run": round(ran - parsed, 2)}})
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sample", action="append", help="only this sample (repeatable)")
    parser.add_argument("--families", action="store_true", help="the generator families only")
    parser.add_argument("--out-of-place", action="store_true", help="out of place too")
    parser.add_argument("--collective", action="append", choices=(*COLLECTIVES, "alltoall"))
    parser.add_argument("--merge", help="results JSON to merge the rows into (rewritten)")
    args = parser.parse_args()
    cases = []
    if not args.families:
        cases += [(n.removesuffix(".json"), lambda n=n: load_sample(n)) for n in sample_names()
                  if not args.sample or n.removesuffix(".json") in args.sample]
    if args.families or not args.sample:
        cases += [(f"{k} (defaults)", lambda k=k: generate(k, {})) for k in FAMILIES]
    rows = []
    for label, make in cases:
        topo = make()
        for collective in args.collective or (*COLLECTIVES, "alltoall"):
            modes = (True, False) if args.out_of_place and collective != "alltoall" else \
                (collective != "alltoall",)
            for inplace in modes:
                row = one(label, topo, collective, inplace)
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    if args.merge:
        with open(args.merge) as f:
            old = json.load(f)["rows"]
        ran = {(r["case"], r["collective"], r["inplace"]) for r in rows}
        rows = [r for r in old if (r["case"], r["collective"], r["inplace"]) not in ran] + rows
    ok = [r for r in rows if "error" not in r]
    text = json.dumps({"runs": len(rows), "failed": len(rows) - len(ok),
                       "checked": sum(r["checked"] for r in ok),
                       "cpu_s_total": round(sum(sum(r["cpu_s"].values()) for r in ok), 1),
                       "rows": rows}, indent=1)
    if args.merge:
        with open(args.merge + ".tmp", "w") as f:
            f.write(text + "\n")
        os.replace(args.merge + ".tmp", args.merge)
    print(text)


if __name__ == "__main__":
    main()
