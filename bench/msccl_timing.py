"""check-xml against compare: the exported XML's own simulated algbw beside compare's
ForestColl figure, per sample and collective; print JSON.

For each sample and collective: the connections the default export and compare both take
(:func:`canopy.engine.deploy.runtime_choice.runtime_layout`: its layout, connections, unit tree
edges and thread blocks per GPU), ForestColl's bound, compare's ForestColl algbw at the
size and its fraction of the bound, the XML's algbw (``canopy check-xml --topology``, loop
iterations picked as compare picks pipeline depths), their ratio, both depths (the XML's
loop iterations, compare's pieces) and CPU seconds for compare, export and the XML's
simulation. The summary counts runs within 2 % and runs at the same depth.
Run: ``python bench/msccl_timing.py [--size 1G] [--sample NAME] [--collective C]``.
"""

import argparse
import json
import sys
import time

from canopy.engine.allreduce.lp_schedule import choose_allreduce
from canopy.engine.comparison.table import compare
from canopy.engine.deploy.runtime_choice import runtime_schedule
from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.topology_json import load_sample, sample_names
from canopy.engine.model.collectives import COLLECTIVES
from canopy.engine.model.sizes import parse_size
from canopy.engine.msccl import plan_xml
from canopy.engine.msccl.reader import read_msccl_bytes
from canopy.engine.msccl.timing import fastest_xml


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", default="1G")
    parser.add_argument("--sample", action="append", help="only this sample (repeatable)")
    parser.add_argument("--collective", action="append", choices=COLLECTIVES)
    args = parser.parse_args()
    size = parse_size(args.size)
    rows = []
    for name in sample_names():
        if args.sample and name.removesuffix(".json") not in args.sample:
            continue
        topo = load_sample(name)
        for collective in args.collective or COLLECTIVES:
            schedule = choose_allreduce(topo, solve(topo, collective))  # as compare does
            start = time.process_time()
            expected = compare(topo, collective, sizes=(size,), algorithms=()).rows[0]
            expected_algbw = expected.algbw_at(size)
            compared = time.process_time()
            choice = runtime_schedule(topo, schedule)            # as canopy solve --msccl
            data = plan_xml(choice.plan, choice.schedule.k)
            exported = time.process_time()
            timing = fastest_xml(read_msccl_bytes(data), topo, size)
            timed = time.process_time()
            rows.append({
                "sample": name.removesuffix(".json"), "collective": collective,
                "k": choice.schedule.k, **expected.details.get("connections", {}),
                "bound": round(float(expected.algbw), 3),
                "compare_algbw": round(float(expected_algbw), 3),
                "compare_of_bound": round(float(expected_algbw / expected.algbw), 4),
                "xml_algbw": round(float(timing.algbw), 3),
                "ratio": round(float(timing.algbw / expected_algbw), 4),
                "iterations": timing.iterations,
                "compare_pieces": expected.pieces[size],
                "compare_cpu_s": round(compared - start, 3),
                "export_cpu_s": round(exported - compared, 3),
                "xml_cpu_s": round(timed - exported, 3)})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    agree = sum(abs(r["ratio"] - 1) <= 0.02 for r in rows)
    same_depth = sum(r["iterations"] == r["compare_pieces"] for r in rows)
    print(json.dumps({"size": size, "within_2_percent": agree, "runs_total": len(rows),
                      "same_depth": same_depth,
                      "at_95_percent_of_bound": sum(r["compare_of_bound"] >= 0.95 for r in rows),
                      "runs": rows}, indent=1))


if __name__ == "__main__":
    main()
