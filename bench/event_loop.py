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

``--compare FILE COLLECTIVE`` takes instead the programs a ``canopy compare`` of that
topology file runs through the event loop (recorded from one run of the command; those
of a run with a deadline keep it: such a run may stop, its result then being that it
ended past the deadline), and prints their total too.

``--reference FILE`` also times the ``run_flat`` of another copy of kernel.py (say
``git show main:engine/execution/kernel.py > /tmp/kernel_main.py``), the two runs of each
round in alternating order, and fails unless both give the same arrival times and end
time on every program.

Run: .venv/bin/python -m bench.event_loop [--rounds N] [--reference FILE]
[--compare FILE COLLECTIVE]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import io
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


def programs() -> list[tuple[str, Callable[[ModuleType, bool], tuple[Any, list]]]]:
    """(name, run) per program: run(module, record) runs it by ``module.run_flat``, giving
    the end time and (``record``) the arrival times."""
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

            def run(module: ModuleType, record: bool, topology: Any = topology,
                    flat: Any = flat, links: Any = links) -> tuple[Any, list]:
                arrivals: list = []
                end = module.run_flat(topology, flat, DEFAULT_LATENCY_US, False, None,
                                      arrivals if record else None, links)
                return end, arrivals
            found.append((f"{sample[:-5]} {collective} {layout} x{pieces}", run))
    return found


def compare_programs(path: str, collective: str
                     ) -> list[tuple[str, Callable[[ModuleType, bool], tuple[Any, list]]]]:
    """(name, run) per program ``canopy compare PATH --collective COLLECTIVE`` runs through
    :func:`canopy.engine.execution.kernel.run_flat` (its compiled loop: 1,000 sends or
    more), recorded while the command runs once; run(module, record) runs it again by
    ``module.run_flat`` with its deadline on the module's network of its links (built
    once, as the command keeps it), giving the end time and (``record``) the arrival
    times, or ("past deadline", []) where it stops."""
    from canopy.cli import main as cli
    from canopy.engine.execution import simulate

    recorded: list[tuple] = []
    real = simulate.run_flat

    def recording(topology: Any, flat: Any, default_latency: Fraction, exact: bool,
                  check: Any, arrivals: Any, links: Any = None, network: Any = None,
                  deadline: float = 0.0) -> Fraction:
        if not exact and len(flat.conn) >= kernel.COMPILE_FROM:
            recorded.append((topology, flat, default_latency, links, deadline))
        return real(topology, flat, default_latency, exact, check, arrivals, links, network,
                    deadline)

    simulate.run_flat = recording
    argv = sys.argv
    sys.argv = ["canopy", "compare", path, "--collective", collective]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            cli()
    finally:
        simulate.run_flat, sys.argv = real, argv
    found = []
    for i, (topology, flat, default_latency, links, deadline) in enumerate(recorded):

        networks: dict[str, Any] = {}

        def run(module: ModuleType, record: bool, topology: Any = topology, flat: Any = flat,
                default_latency: Fraction = default_latency, links: Any = links,
                deadline: float = deadline, networks: dict[str, Any] = networks
                ) -> tuple[Any, list]:
            if module.__name__ not in networks:
                networks[module.__name__] = module.link_network(
                    topology, flat.connections, default_latency, False, links)
            arrivals: list = []
            try:
                end = module.run_flat(topology, flat, default_latency, False, None,
                                      arrivals if record else None, links,
                                      networks[module.__name__], deadline)
            except module.PastDeadline:
                return "past deadline", []
            return end, arrivals
        found.append((f"compare {i:02d}: {len(flat.conn)} sends, deadline {deadline:.1f} µs",
                      run))
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


def _digest(end: Any, arrivals: list) -> str:
    return hashlib.sha256(repr((end, arrivals)).encode()).hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reference")
    parser.add_argument("--compare", nargs=2, metavar=("FILE", "COLLECTIVE"))
    args = parser.parse_args()
    if kernel.compiled_event_loop() is None:
        sys.exit("numba is not installed: there is no compiled loop to time.")
    versions = [kernel] + ([_loaded(args.reference)] if args.reference else [])
    rows = []
    same = True
    for name, run in (compare_programs(*args.compare) if args.compare else programs()):
        results = [run(module, True) for module in versions]      # (compiles, checks)
        best = [float("inf")] * len(versions)
        for round_ in range(args.rounds):
            for i in (range(len(versions)) if round_ % 2 == 0 else
                      reversed(range(len(versions)))):
                start = time.process_time()
                run(versions[i], False)
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
    total = {"cpu_s": round(sum(r["cpu_s"] for r in rows), 3)}
    if args.reference:
        total["reference_cpu_s"] = round(sum(r["reference_cpu_s"] for r in rows), 3)
    print(json.dumps({"rounds": args.rounds, "reference": args.reference,
                      "compare": args.compare, "programs": rows, **total}, indent=1))
    if not same:
        sys.exit("the reference gives other results.")


if __name__ == "__main__":
    main()
