"""CPU seconds of the execution model's event loop (compiled by numba) on real programs,
with a check that another version of the loop gives the same results. Prints JSON.

Programs: the two first connection layouts of the allreduce schedule ``canopy solve
samples/mi250-2x16.json --collective allreduce --k 2 --msccl`` chooses among, and the
allgather ForestColl schedule of ``samples/rail-leaf-spine-4x8.json``, each at 1 GiB in
its deepest pipeline (MAX_PIECES iterations at most: the runs the runtime choice and
``canopy compare`` spend most of their time in). Each is built by the simulator's own
functions (its template, expanded to a flat program:
:func:`canopy.engine.execution.compiler.expand_template`) and run by
:func:`canopy.engine.execution.kernel.run_flat`, best of ``--rounds`` runs (the machine
may be shared). Per program: sends, CPU s, sends per CPU second and a digest of the
arrival times and end time (the same digest, the same floats).

``--reference FILE`` also times the ``run_flat`` of another copy of kernel.py (say
``git show main:engine/execution/kernel.py > /tmp/kernel_main.py``), the two runs of each
round in alternating order, and fails unless both give the same arrival times and end
time on every program.

Run: .venv/bin/python -m bench.event_loop [--rounds N] [--reference FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import itertools
import json
import sys
import time
from collections.abc import Callable
from fractions import Fraction
from types import ModuleType
from typing import Any

from canopy.engine.deploy.best_schedule import best_schedule
from canopy.engine.deploy.runtime_choice import REFERENCE_SIZE
from canopy.engine.execution import kernel
from canopy.engine.execution.compiler import expand_template
from canopy.engine.execution.program import CUT_THROUGH, DEFAULT_LATENCY_US
from canopy.engine.execution.simulate import MAX_PIECES, _running, max_pieces
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.plan import schedule_plan
from canopy.engine.msccl.connections import iter_layouts
from canopy.engine.msccl.options import MscclLimits

CASES = (("mi250-2x16.json", "allreduce", 2, 2), ("rail-leaf-spine-4x8.json", "allgather",
                                                   None, 1))   # sample, collective, k, layouts


def programs() -> list[tuple[str, Callable[[ModuleType], tuple[Fraction, list]]]]:
    """(name, run) per program: run(module) runs it by ``module.run_flat``, giving the end
    time and the arrival times."""
    found = []
    for sample, collective, k, layouts in CASES:
        topology = load_sample(sample)
        schedule = best_schedule(topology, collective, k=k)
        laid = iter_layouts(schedule_plan(schedule), MscclLimits(), topology)
        for layout, plan in itertools.islice(laid, layouts):
            template, folded = _running(topology, plan, CUT_THROUGH, True)
            running, links = (template, None) if folded is None else folded
            pieces = min(MAX_PIECES, max_pieces(plan, REFERENCE_SIZE))
            flat = expand_template(running, Fraction(REFERENCE_SIZE), pieces)

            def run(module: ModuleType, topology: Any = topology, flat: Any = flat,
                    links: Any = links) -> tuple[Fraction, list]:
                arrivals: list = []
                end = module.run_flat(topology, flat, DEFAULT_LATENCY_US, False, None,
                                      arrivals, links)
                return end, arrivals
            found.append((f"{sample[:-5]} {collective} {layout} x{pieces}", run))
    return found


def _loaded(path: str) -> ModuleType:
    """The kernel module in the file ``path``, compiled (its numba cache beside it)."""
    spec = importlib.util.spec_from_file_location("reference_kernel", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module         # (dataclasses look their module up)
    spec.loader.exec_module(module)
    module.compiled_event_loop()
    return module


def _digest(end: Fraction, arrivals: list) -> str:
    return hashlib.sha256(repr((end, arrivals)).encode()).hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reference")
    args = parser.parse_args()
    if kernel.compiled_event_loop() is None:
        sys.exit("numba is not installed: there is no compiled loop to time.")
    versions = [kernel] + ([_loaded(args.reference)] if args.reference else [])
    rows = []
    same = True
    for name, run in programs():
        results = [run(module) for module in versions]      # (compiles, checks)
        best = [float("inf")] * len(versions)
        for round_ in range(args.rounds):
            for i in (range(len(versions)) if round_ % 2 == 0 else
                      reversed(range(len(versions)))):
                start = time.process_time()
                run(versions[i])
                best[i] = min(best[i], time.process_time() - start)
        sends = len(results[0][1])
        row: dict[str, Any] = {"program": name, "sends": sends, "cpu_s": round(best[0], 3),
                               "sends_per_s": round(sends / best[0]),
                               "digest": _digest(*results[0])}
        if args.reference:
            row["reference_cpu_s"] = round(best[1], 3)
            row["speedup"] = round(best[1] / best[0], 2)
            row["identical"] = results[0] == results[1]
            same = same and row["identical"]
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    print(json.dumps({"rounds": args.rounds, "reference": args.reference, "programs": rows,
                      "cpu_s": round(sum(r["cpu_s"] for r in rows), 3)}, indent=1))
    if not same:
        sys.exit("the reference gives other results.")


if __name__ == "__main__":
    main()
