"""``canopy check-xml FILE [--topology TOPO --size S]``: check an MSCCL XML algorithm.

Always: the runtime's rules and the msccl-tools convention
(:mod:`canopy.engine.msccl.checks`), then a symbolic run proving the collective's result
(:mod:`canopy.engine.msccl.executor`); exit code 0 with a one-line summary when the file
passes, exit code 2 with one sentence naming the rank, thread block and step at fault
otherwise. With ``--topology``, the XML is also timed on that topology in Canopy's
execution model (:mod:`canopy.engine.msccl.timing`): its time and algbw at ``--size``.
"""

from __future__ import annotations

import argparse

from canopy.cli.bounds import bounded_int
from canopy.cli.timing_options import add_timing_arguments, timing_line, timing_size
from canopy.engine.io.topology_json import load_topology
from canopy.engine.model.limits import MAX_CAPACITY, MAX_ITERATIONS, MAX_SMS
from canopy.engine.model.sizes import size_label
from canopy.engine.msccl.executor import simulate
from canopy.engine.msccl.reader import read_msccl
from canopy.engine.msccl.threadblocks import MscclLimits
from canopy.engine.msccl.timing import fastest_xml, time_xml


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check-xml", help="check an MSCCL XML algorithm, and time it on a "
                                         "topology")
    p.add_argument("file", help="MSCCL XML algorithm")
    p.add_argument("--capacity", type=bounded_int(1, MAX_CAPACITY), default=1, metavar="N",
                   help="messages a connection buffers in the symbolic run (default 1, the "
                        "strictest)")
    p.add_argument("--sms", type=bounded_int(1, MAX_SMS), default=MscclLimits.max_tbs_per_gpu,
                   metavar="N", help="SMs per GPU: the most thread blocks a GPU may run, all "
                   "resident at once (default %(default)s, an A100)")
    add_timing_arguments(p, "simulate the XML's time", "buffer size for --topology, "
                                                        "nccl-tests style")
    p.add_argument("--iterations", type=bounded_int(1, MAX_ITERATIONS), metavar="N",
                   help="loop iterations for --topology (default: picked as canopy compare "
                        "picks pipeline depths: twice the pipeline's stages, at least the "
                        "runtime's count of one per 2 MiB of an XML chunk, or the deepest "
                        "worth running where that is faster)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    size = timing_size(args)
    algo = read_msccl(args.file)
    report = simulate(algo, capacity=args.capacity,
                      limits=MscclLimits(max_tbs_per_gpu=args.sms), source=str(args.file))
    print(f"OK: {args.file}: {report.summary()}")
    if args.topology is None:
        return 0
    topology = load_topology(args.topology)
    if args.iterations is None:
        timing = fastest_xml(algo, topology, size)
    else:
        timing = time_xml(algo, topology, size, args.iterations)
    print(timing_line(size, args.topology, timing, "loop"))
    if not algo.min_bytes <= size <= algo.max_bytes:
        print(f"Note: the XML runs messages of {algo.min_bytes} to {algo.max_bytes} bytes "
              f"(minBytes, maxBytes), so the runtime would not run it at {size_label(size)}.")
    return 0
