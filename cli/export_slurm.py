"""``canopy export-slurm TOPO -o topology.conf [--plugin tree|block] [--block-sizes N,...]``:
a topology's switch hierarchy as Slurm's topology.conf (canopy.engine.io.slurm_topology).
"""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export-slurm", help="write a topology's switch hierarchy as Slurm's "
                                            "topology.conf (topology/tree or topology/block)")
    p.add_argument("topology", help="canopy-topology JSON (drawn, generated or imported)")
    p.add_argument("-o", "--output", metavar="topology.conf", required=True,
                   help="where to write the Slurm file ('-' for standard output)")
    p.add_argument("--plugin", choices=("tree", "block"), default="tree",
                   help="tree: SwitchName lines (default); block: BlockName lines and "
                        "BlockSizes")
    p.add_argument("--block-sizes", metavar="N,...",
                   help="BlockSizes for --plugin block (default: the smallest block and "
                        "its doublings)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from canopy.engine.io.slurm_topology import SlurmTopologyError, export_slurm
    from canopy.engine.io.topology_json import atomic_write_text, load_topology

    sizes = None
    if args.block_sizes:
        try:
            sizes = [int(t) for t in args.block_sizes.split(",")]
        except ValueError:
            raise SlurmTopologyError(f"--block-sizes '{args.block_sizes}' is not a list of "
                                     "whole numbers.") from None
    topology = load_topology(args.topology)
    result = export_slurm(topology, args.plugin, sizes)
    for warning in result.warnings:
        print(f"canopy: warning: {warning}", file=sys.stderr)
    if args.output == "-":
        sys.stdout.write(result.text)
        return 0
    atomic_write_text(args.output, result.text)
    lines = sum(1 for line in result.text.splitlines() if line and not line.startswith("#"))
    print(f"wrote {args.output}: {lines} lines for topology/{args.plugin}")
    return 0
