"""``canopy check-xml FILE``: run an MSCCL XML algorithm in Canopy's simulator.

Exit code 0 with a one-line summary when the file is accepted and computes its
collective; exit code 2 with one sentence naming the rank, thread block and step at
fault otherwise (see :mod:`canopy.engine.msccl.executor`).
"""

from __future__ import annotations

import argparse

from canopy.cli.exports import positive_int
from canopy.engine.msccl.executor import simulate_file


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check-xml", help="simulate an MSCCL XML algorithm and check its result")
    p.add_argument("file", help="MSCCL XML algorithm")
    p.add_argument("--capacity", type=positive_int, default=1, metavar="N",
                   help="messages a connection buffers (default 1, the strictest)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    report = simulate_file(args.file, capacity=args.capacity)
    print(f"OK: {args.file}: {report.summary()}")
    return 0
