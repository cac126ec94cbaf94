"""``canopy check-plan PLAN.json [--topology TOPO --size S]``: check an MSCCL++ plan.

Always: every structural rule of the runtime's parser (:mod:`canopy.engine.mscclpp.reader`),
then a symbolic run on every GPU (:mod:`canopy.engine.mscclpp.executor`); exit code 0 with
a one-line summary when the plan passes, exit code 2 with one sentence naming the GPU,
thread block and op at fault otherwise. With ``--topology``, the plan is also timed on
that topology in Canopy's execution model (:mod:`canopy.engine.mscclpp.timing`).
"""

from __future__ import annotations

import argparse

from canopy.cli.timing_options import add_timing_arguments, timing_line, timing_size
from canopy.engine.mscclpp.executor import execute
from canopy.engine.mscclpp.reader import read_plan


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check-plan", help="check an MSCCL++ execution plan, and time it on a "
                                          "topology")
    p.add_argument("file", help="MSCCL++ execution plan (JSON)")
    add_timing_arguments(p, "time the plan", "message size for --topology, nccl-tests "
                                             "style: the whole buffer")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    size = timing_size(args)
    plan = read_plan(args.file)
    report = execute(plan)
    print(f"OK: {args.file}: {report.summary()}")
    if args.topology is None:
        return 0
    from canopy.engine.io.topology_json import load_topology
    from canopy.engine.mscclpp.timing import size_problem, time_plan

    topology = load_topology(args.topology)
    timing = time_plan(plan, topology, size)
    print(timing_line(size, args.topology, timing, "pipeline"))
    problem = size_problem(plan, size)
    if problem is not None:
        print(f"Note: {problem}")
    return 0
