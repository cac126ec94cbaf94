"""``canopy import-graphml IN.graphml -o OUT.json`` and
``canopy export-graphml IN.json -o OUT.graphml``."""

from __future__ import annotations

import argparse
import sys

from canopy.engine.io.graphml import load_graphml, save_graphml
from canopy.engine.io.topology_json import load_topology, save_topology
from canopy.engine.model.topology import find_problems


def register(sub: argparse._SubParsersAction) -> None:
    imp = sub.add_parser("import-graphml", help="convert GraphML to canopy-topology JSON")
    imp.add_argument("file", help="GraphML file")
    imp.add_argument("-o", "--output", metavar="OUT.json", required=True)
    imp.set_defaults(run=run_import)
    exp = sub.add_parser("export-graphml", help="convert canopy-topology JSON to GraphML")
    exp.add_argument("file", help="canopy-topology JSON file")
    exp.add_argument("-o", "--output", metavar="OUT.graphml", required=True)
    exp.set_defaults(run=run_export)


def run_import(args: argparse.Namespace) -> int:
    topo = load_graphml(args.file)
    for problem in find_problems(topo):
        print(f"canopy: warning: {problem.message}", file=sys.stderr)
    save_topology(topo, args.output)
    print(f"wrote {args.output}: {len(topo.compute_nodes())} compute nodes, "
          f"{len(topo.switch_nodes())} switches, {len(topo.links)} links")
    return 0


def run_export(args: argparse.Namespace) -> int:
    topo = load_topology(args.file)
    save_graphml(topo, args.output)
    print(f"wrote {args.output}: {len(topo.nodes)} nodes, {len(topo.links)} links")
    return 0
