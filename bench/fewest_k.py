"""Cost of the fewest-k search (engine/forestcoll/fewest_trees.py) on every sample and larger
clusters.

Usage: python -m bench.fewest_k [--tolerances 0,1,5]
Prints JSON: per topology and tolerance, Prop. 3's k, the fewest k found, its algbw and
share of the optimum, the search's CPU seconds (time.process_time) against the whole
solve's, and how many k were rejected by a cut alone or needed the full flow test.
"""

from __future__ import annotations

import argparse
import json
import time
from fractions import Fraction

from bench.clusters import dgx_a100_cluster
from canopy.engine.forestcoll.fewest_trees import SearchStats, fewest_k_candidates
from canopy.engine.forestcoll.optimum import find_optimum
from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.topology_json import load_sample, sample_names
from canopy.engine.network.indexed import Network


def run(name: str, topo, tolerance: Fraction) -> dict:
    net = Network.from_topology(topo)
    opt = find_optimum(net)
    stats = SearchStats()
    start = time.process_time()
    k, _ = next(fewest_k_candidates(net, opt, tolerance, stats=stats))
    search = time.process_time() - start
    start = time.process_time()
    schedule = solve(topo, tolerance=tolerance)
    whole = time.process_time() - start
    return {"topology": name, "tolerance_percent": str(tolerance), "prop3_k": opt.k,
            "first_candidate_k": k, "k": schedule.k,
            "algbw_gbps": round(float(schedule.algbw), 3),
            "share_of_optimum": round(float(schedule.algbw / schedule.optimal_algbw), 6),
            "search_cpu_s": round(search, 4), "solve_cpu_s": round(whole, 4),
            "cut_rejected": stats.cut_rejected, "flow_tests": stats.flow_tests}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tolerances", default="0,1,5")
    args = parser.parse_args()
    cases = [(name, load_sample(name)) for name in sample_names()]
    cases.append(("dgx-a100 8 servers", dgx_a100_cluster(8)))
    rows = [run(name, topo, Fraction(t)) for name, topo in cases
            for t in args.tolerances.split(",")]
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
