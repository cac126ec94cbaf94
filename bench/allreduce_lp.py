"""Does ForestColl's allreduce LP (App. E) beat reduce-scatter + allgather? Per sample.

Usage: python -m bench.allreduce_lp [--max-variables V]
Prints JSON: per sample, the LP's allreduce algbw (HiGHS, its feasibility tolerance), the
exact RS + AG algbw (a lower bound) and cut bound (an upper bound), whether and by how
much the LP beats RS + AG, the LP's value with every node's rate equal, the LP's size
and the CPU seconds of both LPs (time.process_time).
Samples whose LP would exceed V variables are listed as skipped with their size.
"""

from __future__ import annotations

import argparse
import json
import time

from canopy.engine.allreduce_lp import lp_size, solve_allreduce_lp
from canopy.engine.network import Network
from canopy.engine.topology_io import load_sample, sample_names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-variables", type=int, default=40000)
    args = parser.parse_args()
    rows = []
    for name in sample_names():
        net = Network.from_topology(load_sample(name))
        size = lp_size(net)
        if size > args.max_variables:
            rows.append({"sample": name, "skipped": f"LP has {size} variables"})
            continue
        start = time.process_time()
        lp = solve_allreduce_lp(net)
        equal = solve_allreduce_lp(net, equal_rates=True)
        rows.append({"sample": name, "gpus": len(net.compute), "lp_algbw": round(lp.value, 4),
                     "rs_ag_algbw": round(float(lp.rs_ag), 4),
                     "cut_bound": round(float(lp.cut_bound), 4),
                     "lp_equal_rates_algbw": round(equal.value, 4),
                     "beats_rs_ag": lp.beats_rs_ag, "gain_percent": round(lp.gain * 100, 3),
                     "feasibility_tolerance": lp.tolerance, "variables": lp.variables,
                     "constraints": lp.constraints,
                     "cpu_s_both_lps": round(time.process_time() - start, 3)})
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
