"""``canopy export-nccl-topo TOPO -o server.xml``: one server as an ``NCCL_TOPO_FILE``.

Writes the server (``--server GROUP``, else the first with GPUs) in NCCL's topology
format (:mod:`canopy.engine.io.nccl_topology_export`), reads the file back with
``canopy import-nccl``'s rules and checks that it is the same server, then prints the
import command that rebuilds the whole cluster from it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from canopy.engine.io.nccl_topology_export import (
    as_nccl_server,
    first_server,
    same_server,
    write_nccl_topology,
)
from canopy.engine.io.nccl_topology_import import NcclImportOptions, import_nccl_file
from canopy.engine.io.topology_json import load_topology
from canopy.engine.model.errors import CanopyError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export-nccl-topo",
                       help="write one server as an NCCL_TOPO_FILE (read back by import-nccl)")
    p.add_argument("topology", help="canopy-topology JSON file")
    p.add_argument("-o", "--output", required=True, help="the NCCL topology XML to write")
    p.add_argument("--server", metavar="GROUP", help="the server (node group) to write")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    topology = load_topology(args.topology)
    group = args.server or first_server(topology)
    out = Path(args.output)
    topology, notes = as_nccl_server(topology, group)
    write_nccl_topology(out, topology, group)
    servers = len({n.group for n in topology.nodes if n.is_compute and n.group})
    rails = {link.target for link in topology.links if link.target.startswith("rail")}
    net = "rail" if rails else "single"
    back = import_nccl_file(out, NcclImportOptions(hosts=min(servers, 2), net=net)).topology
    if not same_server(topology, group, back, "h0"):
        raise CanopyError(f"{out} does not read back as server '{group}' (a bug in Canopy).")
    print(f"NCCL topology of server '{group}': {out}, read back and checked")
    if notes:
        print(f"In NCCL's terms the file {'; '.join(notes)}.")
    print(f"rebuild the cluster: canopy import-nccl {out} --hosts {servers} --net {net} "
          f"-o cluster.json")
    return 0
