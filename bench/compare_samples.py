"""Time `compare` on every bundled sample and collective; print JSON.

For each (sample, collective): wall time per algorithm row (schedule construction plus
simulation at the four nccl-tests sizes), the bandwidth bound and the simulated algbw.
Run: .venv/bin/python bench/compare_samples.py [sample.json ...]
"""

import json
import sys
import time

from engine.compare import compare
from engine.topology_io import load_sample, sample_names

SAMPLES = sample_names()
COLLECTIVES = ["allgather", "reduce-scatter", "allreduce"]


def main(names):
    results = []
    for name in names:
        topo = load_sample(name)
        for collective in COLLECTIVES:
            start = time.perf_counter()
            comp = compare(topo, collective)
            total = time.perf_counter() - start
            rows = {}
            for row in comp.rows:
                rows[row.algorithm] = {
                    "seconds": round(row.seconds, 3),
                    "bound_gbps": None if row.algbw is None else round(float(row.algbw), 2),
                    "algbw_gbps": {str(s): round(float(row.algbw_at(s)), 2)
                                   for s in row.times_us},
                    "not_applicable": row.reason,
                }
            results.append({"sample": name, "collective": collective,
                            "seconds": round(total, 3), "rows": rows})
    print(json.dumps({"benchmark": "compare_samples", "results": results}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:] or SAMPLES)
