"""``canopy import-nccl FILE [--hosts N] [--nvlink-bw GBPS] [--nvswitch-bw GBPS]
[--net rail|single] [--nic-bw GBPS] -o OUT.json``: an NCCL topology file to canopy JSON.

Warnings (one per odd element of the file) go to stderr; the topology is still written.
"""

from __future__ import annotations

import argparse
import sys

from canopy.engine.io.nccl_topology_import import (
    NETS,
    NcclImportOptions,
    import_nccl_file,
    summarise_warnings,
)
from canopy.engine.io.topology_json import save_topology
from canopy.engine.model.topology import find_problems, parse_bandwidth


def _gbps(text: str) -> object:
    try:
        return parse_bandwidth(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"'{text}' {exc}") from None


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import-nccl", help="import an NCCL topology XML file "
                                           "(NCCL_TOPO_FILE or NCCL_TOPO_DUMP_FILE)")
    p.add_argument("file", help="NCCL topology XML")
    p.add_argument("-o", "--output", metavar="OUT.json", required=True,
                   help="where to write the canopy-topology JSON")
    p.add_argument("--name", help="name of the topology (default: the file's name)")
    p.add_argument("--hosts", type=int, default=1, help="copies of the host to join (default 1)")
    p.add_argument("--net", choices=NETS, default="rail",
                   help="network joining the hosts: rail (NIC i of every host on switch i) "
                        "or single (one switch); default rail")
    p.add_argument("--nvswitch-bw", type=_gbps, metavar="GBPS",
                   help="if the file has no NVLink: each GPU's bandwidth to one NVSwitch")
    p.add_argument("--nvlink-bw", type=_gbps, metavar="GBPS",
                   help="if the file has no NVLink: bandwidth between every pair of GPUs")
    p.add_argument("--nic-bw", type=_gbps, metavar="GBPS", default=parse_bandwidth(25),
                   help="bandwidth of NICs whose speed the file does not give (default 25)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    options = NcclImportOptions(hosts=args.hosts, net=args.net, nvlink_bw=args.nvlink_bw,
                                nvswitch_bw=args.nvswitch_bw, nic_bw=args.nic_bw)
    result = import_nccl_file(args.file, options)
    for warning in summarise_warnings(result.warnings):
        print(f"canopy: warning: {warning}", file=sys.stderr)
    topo = result.topology
    if args.name:
        topo.name = args.name
    for problem in find_problems(topo):
        print(f"canopy: warning: {problem.message}", file=sys.stderr)
    save_topology(topo, args.output)
    print(f"wrote {args.output}: {len(topo.compute_nodes())} GPUs, "
          f"{len(topo.switch_nodes())} switches, {len(topo.links)} links"
          + (f", {len(result.warnings)} warnings" if result.warnings else ""))
    return 0
