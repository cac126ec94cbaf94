"""How close ForestColl's schedule runs to the bound it proves, in the execution model.

For every bundled sample and every generator family at its default parameters, and each
collective: the bandwidth bound of the schedule (GB/s, exact congestion bound), the
simulated algbw (:func:`canopy.engine.simulate.fastest`, which picks the pipeline depth)
at 1 MiB, 16 MiB, 256 MiB and 1 GiB, and the simulated algbw at each size as a fraction
of the bound. CPU seconds per topology (``time.process_time``). Prints JSON.

Run: .venv/bin/python bench/executed.py [--quick] [sample-or-generator ...]
(``--quick``: 1 GiB only.)
"""

import json
import sys
import time
from fractions import Fraction

from canopy.engine.forest import solve
from canopy.engine.generators import GENERATORS, generate
from canopy.engine.plan import bandwidth_bound, schedule_plan
from canopy.engine.simulate import fastest
from canopy.engine.topology_io import load_sample, sample_names

SIZES = (1 << 20, 16 << 20, 256 << 20, 1 << 30)
COLLECTIVES = ("allgather", "reduce-scatter", "allreduce")
LABELS = {1 << 20: "1M", 16 << 20: "16M", 256 << 20: "256M", 1 << 30: "1G"}


def topologies(names: list[str]) -> list[tuple[str, object]]:
    found = []
    for name in sample_names():
        if not names or name in names:
            found.append((name, load_sample(name)))
    for kind in GENERATORS:
        if not names or kind in names:
            found.append((f"generate {kind}", generate(kind)))
    return found


def measure(topology: object, collective: str, sizes: tuple[int, ...]) -> dict:
    start = time.process_time()
    schedule = solve(topology, collective)
    plan = schedule_plan(schedule)
    bound, _ = bandwidth_bound(plan, topology.capacities())
    row = {"collective": collective, "bound_gbps": round(float(bound), 2), "k": schedule.k,
           "trees": len(plan.trees), "algbw_gbps": {}, "fraction_of_bound": {},
           "pieces": {}}
    depth = 1
    for size in sorted(sizes):
        sim = fastest(topology, plan, size, start=depth)
        depth = sim.pieces
        label = LABELS.get(size, str(size))
        row["algbw_gbps"][label] = round(float(sim.algbw), 2)
        row["fraction_of_bound"][label] = round(float(sim.algbw / Fraction(bound)), 4)
        row["pieces"][label] = sim.pieces
    row["cpu_seconds"] = round(time.process_time() - start, 2)
    return row


def main(args: list[str]) -> None:
    sizes = (1 << 30,) if "--quick" in args else SIZES
    names = [a for a in args if not a.startswith("--")]
    results = []
    for name, topo in topologies(names):
        for collective in COLLECTIVES:
            row = measure(topo, collective, sizes)
            row["topology"] = name
            results.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    print(json.dumps({"benchmark": "executed", "results": results}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
