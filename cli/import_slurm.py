"""``canopy import-slurm topology.conf -o OUT.json [--bw GBPS,...]``: a Slurm topology.conf
(topology/tree or topology/block) as a topology, one compute node per Slurm node.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import-slurm", help="read Slurm's topology.conf into a topology")
    p.add_argument("file", help="topology.conf (topology/tree or topology/block)")
    p.add_argument("-o", "--output", metavar="OUT.json", required=True,
                   help="where to write the canopy-topology JSON")
    p.add_argument("--bw", metavar="GBPS,...", default="50",
                   help="link bandwidth per level, GB/s: hosts to leaves, leaves to their "
                        "parents, ...; the last repeats (default 50 = 400 Gb/s)")
    p.add_argument("--name", help="name of the topology (default: the file's name)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from canopy.engine.io.slurm_topology import (
        SlurmTopologyError,
        read_topology_conf,
        topology_from_slurm,
    )
    from canopy.engine.io.topology_json import save_topology
    from canopy.engine.model.topology import find_problems, parse_bandwidth

    bandwidths = []
    for text in args.bw.split(","):
        try:
            bandwidths.append(parse_bandwidth(text))
        except ValueError as exc:
            raise SlurmTopologyError(f"--bw '{text}' {exc}.") from None
    conf = read_topology_conf(args.file)
    topo = topology_from_slurm(conf, bandwidths, args.name or Path(args.file).stem)
    save_topology(topo, args.output)
    print(f"wrote {args.output}: {len(topo.compute_nodes())} hosts, "
          f"{len(topo.switch_nodes())} switches, {len(topo.links)} links "
          f"(topology/{conf.plugin})")
    for problem in find_problems(topo)[:3]:
        print(f"canopy: warning: {problem.message}")
    return 0
