"""Speed of the design advisor (``canopy advise``) on generated leaf-spine clusters.

Usage: python -m bench.advise [--curves-gpus N] [--failures-gpus N] [--target-gpus N]
Prints JSON: for each part, the cluster (servers x 8 GPUs, NVSwitch, one 25 GB/s NIC
per GPU, rail leaves, two spines, 2:1 oversubscription), its size, the CPU seconds
(time.process_time()) and what was found:
- ``curves``: every link class's exact curve and threshold (default 1024 GPUs);
- ``failures``: the optimum after every single link and switch failure (256 GPUs);
- ``target``: the cheapest upgrade doubling the allgather optimum, every class priced
  (256 GPUs).
"""

from __future__ import annotations

import argparse
import json
import time
from fractions import Fraction
from typing import Any

from canopy.engine.advise.report import Advisor
from canopy.engine.generators import generate
from canopy.engine.model.topology import Topology


def cluster(gpus: int) -> Topology:
    return generate("cluster", {"servers": str(gpus // 8), "gpus": "8",
                                "scale_out": "leaf-spine", "oversubscription": "2"})


def _base(topology: Topology) -> dict[str, Any]:
    return {"topology": topology.name, "gpus": len(topology.compute_nodes()),
            "nodes": len(topology.nodes), "links": len(topology.links)}


def bench_curves(gpus: int) -> dict[str, Any]:
    topology = cluster(gpus)
    start = time.process_time()
    advisor = Advisor(topology)
    advisor.compute_curves()
    seconds = time.process_time() - start
    return {**_base(topology), "cpu_seconds": round(seconds, 3), "limit_seconds": 30,
            "classes": {lc.name: {"pieces": len(c.pieces),
                                  "keeps_optimum_down_to": str(c.threshold)}
                        for lc, c in zip(advisor.pnet.classes, advisor.curves, strict=True)}}


def bench_failures(gpus: int) -> dict[str, Any]:
    topology = cluster(gpus)
    start = time.process_time()
    advisor = Advisor(topology)
    advisor.compute_failures()
    seconds = time.process_time() - start
    assert advisor.failures is not None
    worst = advisor.failures[0]
    return {**_base(topology), "cpu_seconds": round(seconds, 3), "limit_seconds": 60,
            "solved": len(advisor.failures),
            "elements": sum(f.alike for f in advisor.failures),
            "worst": worst.element, "worst_algbw": str(worst.ratio * advisor.factor)}


def bench_target(gpus: int) -> dict[str, Any]:
    topology = cluster(gpus)
    start = time.process_time()
    advisor = Advisor(topology)
    prices = {c: Fraction(c + 1) for c in range(len(advisor.pnet.classes))}
    advisor.compute_target(2 * advisor.optimum, prices)
    seconds = time.process_time() - start
    answer = advisor.target
    assert answer is not None
    return {**_base(topology), "cpu_seconds": round(seconds, 3), "limit_seconds": 60,
            "target_algbw": str(2 * advisor.optimum), "price": str(answer.price),
            "rounds": answer.rounds,
            "bandwidths": {lc.name: str(b) for lc, b in
                           zip(advisor.pnet.classes, answer.bandwidths, strict=True)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--curves-gpus", type=int, default=1024)
    parser.add_argument("--failures-gpus", type=int, default=256)
    parser.add_argument("--target-gpus", type=int, default=256)
    args = parser.parse_args()
    out = {"curves": bench_curves(args.curves_gpus),
           "failures": bench_failures(args.failures_gpus),
           "target": bench_target(args.target_gpus)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
