"""``canopy solve TOPO``: the optimum, the bottleneck cut, k, y and the forest."""

from __future__ import annotations

import argparse
import time

from engine.network import Network
from engine.optimality import COLLECTIVES, find_fixed_k, find_optimum
from engine.topology import format_gbps
from engine.topology_io import load_topology


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("solve", help="compute the optimal schedule of a topology")
    p.add_argument("topology", help="canopy-topology JSON file")
    p.add_argument("--collective", choices=COLLECTIVES, default="allgather")
    p.add_argument("--k", type=int, default=None, help="fix the number of trees per node")
    p.add_argument("--json", metavar="OUT", help="write the canopy-schedule JSON here")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    net = Network.from_topology(load_topology(args.topology), args.topology)
    opt = find_optimum(net)
    n = len(net.compute)
    print(f"N = {n} compute nodes")
    print(f"optimal {args.collective} algbw = {format_gbps(opt.algbw(args.collective))} GB/s")
    print(f"1/x* = {opt.inverse_x}")
    print(f"bottleneck cut: {len(opt.bottleneck_cut)} nodes, exiting bandwidth "
          f"{format_gbps(opt.cut_bandwidth)} GB/s")
    print(f"k = {opt.k}, y = {opt.tree_bandwidth} GB/s")
    if args.k is not None:
        fixed = find_fixed_k(net, args.k, opt)
        print(f"fixed k = {args.k}: U* = {fixed.u_star}, algbw = "
              f"{format_gbps(fixed.algbw(args.collective))} GB/s")
    print(f"time {time.perf_counter() - start:.3f} s")
    return 0
