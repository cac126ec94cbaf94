"""Time `compare` on every bundled sample and collective; print JSON.

For each (sample, collective): wall time per algorithm row (schedule construction plus
simulation at the four nccl-tests sizes), the bandwidth bound, the simulated algbw and
pipeline depth per size, and the simulated algbw at the largest size as a fraction of
the row's own bound. ``--store-and-forward`` simulates store-and-forward switches
instead of the default cut-through ones.
Run: .venv/bin/python bench/compare_samples.py [--store-and-forward] [sample.json ...]
"""

import json
import sys
import time

from canopy.engine.comparison.table import compare
from canopy.engine.execution.program import CUT_THROUGH, STORE_AND_FORWARD
from canopy.engine.io.topology_json import load_sample, sample_names

SAMPLES = sample_names()
COLLECTIVES = ["allgather", "reduce-scatter", "allreduce"]


def main(names, switch_mode=CUT_THROUGH):
    results = []
    for name in names:
        topo = load_sample(name)
        for collective in COLLECTIVES:
            start = time.perf_counter()
            comp = compare(topo, collective, switch_mode=switch_mode)
            total = time.perf_counter() - start
            rows = {}
            for row in comp.rows:
                rows[row.algorithm] = {
                    "seconds": round(row.seconds, 3),
                    "bound_gbps": None if row.algbw is None else round(float(row.algbw), 2),
                    "algbw_gbps": {str(s): round(float(row.algbw_at(s)), 2)
                                   for s in row.times_us},
                    "pieces": {str(s): p for s, p in row.pieces.items()},
                    "largest_size_of_bound": None if row.reason else
                    round(float(row.algbw_at(max(row.times_us)) / row.algbw), 4),
                    "not_applicable": row.reason,
                }
            results.append({"sample": name, "collective": collective,
                            "seconds": round(total, 3), "rows": rows})
    print(json.dumps({"benchmark": "compare_samples", "switch_mode": switch_mode,
                      "results": results}, indent=1))


if __name__ == "__main__":
    args = sys.argv[1:]
    mode = STORE_AND_FORWARD if "--store-and-forward" in args else CUT_THROUGH
    main([a for a in args if a != "--store-and-forward"] or SAMPLES, mode)
