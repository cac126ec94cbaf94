"""What building and simulating each candidate layout of a runtime choice costs: per layout of the
schedule ``canopy solve --msccl`` lays out (the optimal one, or the one with ``--k``),
the CPU seconds building it took (:func:`canopy.engine.msccl.connections.iter_layouts`,
as the runtime choice builds them, one at a time), its fraction of the optimum at 1 GiB
(:func:`canopy.engine.execution.simulate.fastest`, as the runtime choice times it, no
deadline), the depth that won, CPU seconds simulating it, the sends
of the depth runs that finished (a deeper run that provably loses is stopped part-way and
its sends are not counted) and CPU microseconds per such send. Prints JSON.

Run: ``python -m bench.layout_cost TOPOLOGY COLLECTIVE [--k K]`` (a file, or a sample's
name).
"""

import argparse
import json
import time
from fractions import Fraction

from canopy.engine.deploy.best_schedule import best_schedule
from canopy.engine.deploy.runtime_choice import REFERENCE_SIZE
from canopy.engine.execution import simulate
from canopy.engine.execution.simulate import fastest
from canopy.engine.io.topology_json import load_sample, load_topology, sample_names
from canopy.engine.model.plan import schedule_plan
from canopy.engine.msccl.connections import iter_layouts
from canopy.engine.msccl.options import MscclLimits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("topology")
    parser.add_argument("collective")
    parser.add_argument("--k", type=int)
    args = parser.parse_args()
    named = f"{args.topology}.json"
    topology = load_sample(named) if named in sample_names() else load_topology(args.topology)
    schedule = best_schedule(topology, args.collective, k=args.k)
    optimum = max(schedule.algbw, schedule.optimal_algbw)
    sends: list[int] = []
    real = simulate._simulate

    def counted(*call_args, **kwargs):
        result = real(*call_args, **kwargs)
        sends.append(result.messages)
        return result
    simulate._simulate = counted
    rows = []
    layouts = iter_layouts(schedule_plan(schedule), MscclLimits(), topology)
    while True:
        start = time.process_time()
        found = next(layouts, None)
        built = time.process_time() - start
        if found is None:
            break
        name, laid = found
        sends.clear()
        start = time.process_time()
        result = fastest(topology, laid, REFERENCE_SIZE)
        cpu = time.process_time() - start
        rows.append({"layout": name, "build_cpu_s": round(built, 3),
                     "fraction": round(float(result.algbw / optimum), 4),
                     "pieces": result.pieces, "sends_finished": sum(sends),
                     "cpu_s": round(cpu, 2),
                     "cpu_us_per_finished_send": round(cpu * 1e6 / max(sum(sends), 1), 2)})
    print(json.dumps({"topology": args.topology, "collective": args.collective,
                      "k": schedule.k, "trees": len(schedule.trees),
                      "gpus": len(topology.compute_nodes()),
                      "optimum_gbps": float(Fraction(optimum)), "layouts": rows,
                      "build_cpu_s": round(sum(r["build_cpu_s"] for r in rows), 3),
                      "cpu_s": round(sum(r["cpu_s"] for r in rows), 2),
                      "sends_finished": sum(r["sends_finished"] for r in rows)}, indent=1))


if __name__ == "__main__":
    main()
