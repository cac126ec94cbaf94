"""``canopy samples``: list the bundled topologies, or copy one out to edit it.

    canopy samples                      # file, name and size of every sample
    canopy samples --optimum            # ... and its optimal allgather algbw
    canopy samples dgx-h100-2x8 -o my.json
"""

from __future__ import annotations

import argparse
import sys

from canopy.engine.forestcoll.optimum import find_optimum
from canopy.engine.io.topology_json import load_sample, sample_names, save_topology
from canopy.engine.model.topology import format_gbps
from canopy.engine.network.indexed import Network


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("samples", help="list the bundled sample topologies or copy one out")
    p.add_argument("name", nargs="?", help="a sample to copy (with -o) or describe")
    p.add_argument("-o", "--output", metavar="OUT.json", help="write the sample here")
    p.add_argument("--optimum", action="store_true",
                   help="also compute each sample's optimal allgather algbw")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.output:
        if not args.name:
            print("canopy samples: -o needs the NAME of a sample to copy.", file=sys.stderr)
            return 2
        topo = load_sample(args.name)
        save_topology(topo, args.output)
        print(f"wrote {args.output}: {topo.name}")
        return 0
    names = [args.name] if args.name else [n.removesuffix(".json") for n in sample_names()]
    rows = []
    for name in names:
        topo = load_sample(name)
        row = [name, topo.name, str(len(topo.compute_nodes())), str(len(topo.switch_nodes())),
               str(len(topo.links))]
        if args.optimum:
            opt = find_optimum(Network.from_topology(topo, f"sample {name}"))
            row.append(f"{format_gbps(opt.algbw())} GB/s")
        rows.append(row)
    header = ["sample", "name", "GPUs", "switches", "links"] + (["algbw"] if args.optimum else [])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
    return 0
