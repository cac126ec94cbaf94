"""``canopy import-ib FABRIC.txt [--host-topo NODE.xml] -o cluster.json``: an InfiniBand
fabric dump (``ibnetdiscover`` output) to canopy JSON, with what is broken in it.

The summary goes to stdout, then one line per down or unknown port and per defect (a
slow link, a leaf with fewer uplinks, a host with fewer adapters, a cable to the wrong
switch) with the optimum of the hosts it touches with and without it; warnings go to
stderr. The topology is written even when the fabric has defects.
"""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import-ib", help="import an InfiniBand fabric dump (ibnetdiscover "
                                         "output) and report its defects")
    p.add_argument("file", help="ibnetdiscover topology file (tabs or spaces)")
    p.add_argument("-o", "--output", metavar="OUT.json", required=True,
                   help="where to write the canopy-topology JSON")
    p.add_argument("--host-topo", metavar="NODE.xml",
                   help="NCCL topology XML of one host: fills every host with its GPUs, "
                        "NVLink/NVSwitch and PCIe, its NICs matched to the host's adapters")
    p.add_argument("--name", help="name of the topology (default: the file's name)")
    p.add_argument("--no-cost", action="store_true",
                   help="list defects without measuring what each costs")
    p.add_argument("--cost-limit", type=int, default=20, metavar="N",
                   help="measure the cost of at most N defects (default 20)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from canopy.engine.fabric.defects import find_defects
    from canopy.engine.io.ib_fabric_import import import_ib_file, summary
    from canopy.engine.io.nccl_topology_import import summarise_warnings
    from canopy.engine.io.topology_json import save_topology
    from canopy.engine.model.topology import find_problems

    result = import_ib_file(args.file, args.host_topo)
    for warning in summarise_warnings(result.warnings):
        print(f"canopy: warning: {warning}", file=sys.stderr)
    topo = result.topology
    if args.name:
        topo.name = args.name
    save_topology(topo, args.output)
    gpus = f", {len(topo.compute_nodes())} GPUs" if args.host_topo else ""
    print(f"wrote {args.output}: {summary(result)}{gpus}")
    for report in result.reports:
        print(f"port: {report}")
    defects = find_defects(result, cost=not args.no_cost, cost_limit=max(args.cost_limit, 0))
    for defect in defects:
        print(defect.line())
    if not defects:
        print("no defects: every host, leaf and cable is like its peers.")
    for problem in find_problems(topo)[:5]:
        print(f"canopy: warning: {problem.message}", file=sys.stderr)
    return 0
