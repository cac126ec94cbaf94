"""``canopy export-nccl-graph TOPO -o graph.xml``: Canopy's best rings for plain NCCL.

Writes an ``NCCL_GRAPH_FILE`` (:mod:`canopy.engine.deploy.nccl_graph`), reads it back and checks
that it describes the same rings, then prints the channels, their bandwidth bound
against the best unconstrained ring set, and with ``--print-run`` the command that runs
it (:mod:`canopy.engine.deploy.run_commands`). NCCL's graph holds rings only, the same on every
server: trees through switches (ForestColl) and unequal servers cannot be expressed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from canopy.engine.baselines.ring import ring_baseline
from canopy.engine.deploy.nccl_graph import export_nccl_graph
from canopy.engine.deploy.run_commands import run_command
from canopy.engine.io.topology_json import load_topology
from canopy.engine.model.collectives import COLLECTIVES
from canopy.engine.network.servers import compute_nodes_by_server


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export-nccl-graph",
                       help="write Canopy's best ring set as an NCCL_GRAPH_FILE for plain NCCL")
    p.add_argument("topology", help="canopy-topology JSON file")
    p.add_argument("-o", "--output", required=True, help="the NCCL graph XML to write")
    p.add_argument("--collective", choices=COLLECTIVES, default="allgather",
                   help="the collective of the printed run command (NCCL's rings serve all)")
    p.add_argument("--print-run", action="store_true",
                   help="print the environment and nccl-tests command that run the file")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    topology = load_topology(args.topology)
    out = Path(args.output)
    graph = export_nccl_graph(topology, out)
    best = ring_baseline(topology).algbw
    print(f"NCCL graph: {len(graph.channels)} ring channels, read back and checked: {out}")
    print(f"ring allgather bound: {float(graph.algbw):.2f} GB/s"
          + ("" if best is None else
             f" ({float(graph.algbw / best) * 100:.0f} % of the best ring set Canopy finds "
             f"without NCCL's constraints, {float(best):.2f} GB/s)"))
    if args.print_run:
        servers = compute_nodes_by_server(topology)
        print(run_command("nccl-graph", out, args.collective, len(topology.compute_nodes()),
                          len(servers[0])))
    return 0
