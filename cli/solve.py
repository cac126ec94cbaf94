"""``canopy solve TOPO``: the optimum, the bottleneck cut, k, y and the verified forest."""

from __future__ import annotations

import argparse
import time

from canopy.cli.alltoall_solve import add_alltoall_arguments, run_alltoall
from canopy.cli.exports import add_export_arguments, write_exports
from canopy.engine.forest import solve
from canopy.engine.optimality import COLLECTIVES
from canopy.engine.schedule import Schedule
from canopy.engine.schedule_io import save_schedule
from canopy.engine.topology import format_gbps
from canopy.engine.topology_io import load_topology


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("solve", help="compute the optimal schedule of a topology")
    p.add_argument("topology", help="canopy-topology JSON file")
    p.add_argument("--collective", choices=(*COLLECTIVES, "alltoall"), default="allgather")
    p.add_argument("--k", type=int, default=None, help="fix the number of trees per node")
    p.add_argument("--json", metavar="OUT", help="write the canopy-schedule JSON here")
    add_export_arguments(p)
    add_alltoall_arguments(p)
    p.set_defaults(run=run)


def describe_cut(cut: list[str], all_nodes: list[str]) -> str:
    """A cut as a short set, or as "all but {...}" when that is shorter."""
    rest = [n for n in all_nodes if n not in set(cut)]
    names, prefix = (rest, "all nodes but ") if len(rest) < len(cut) else (cut, "")
    shown = ", ".join(names[:8]) + (f", … ({len(names)} nodes)" if len(names) > 8 else "")
    return prefix + "{" + shown + "}"


def summary(schedule: Schedule, all_nodes: list[str], seconds: float) -> str:
    """The short human summary printed by ``canopy solve``."""
    opt = schedule.optimum
    n = len(schedule.compute_nodes)
    shown = describe_cut(list(opt.bottleneck_cut), all_nodes)
    lines = [
        f"collective:      {schedule.collective}",
        f"compute nodes:   N = {n}",
        f"optimal algbw:   {format_gbps(schedule.optimal_algbw)} GB/s",
        f"1/x*:            {opt.inverse_x}",
        f"bottleneck cut:  {shown}, exiting bandwidth {format_gbps(opt.cut_bandwidth)} GB/s",
        f"optimal k:       {opt.k} trees per node, y = {opt.tree_bandwidth} GB/s per tree",
    ]
    if schedule.fixed_k:
        lines.append(f"fixed k:         {schedule.k} trees per node, y = "
                     f"{schedule.tree_bandwidth} GB/s, algbw {format_gbps(schedule.algbw)} GB/s")
    heights = [t.height for t in schedule.trees]
    lines += [
        f"trees:           {len(schedule.trees)} distinct ({n * schedule.k} unit trees), "
        f"height {min(heights)}-{max(heights)}",
        f"schedule algbw:  {format_gbps(schedule.algbw)} GB/s (verified)",
        f"time:            {seconds:.3f} s",
    ]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if args.collective == "alltoall":
        return run_alltoall(args)
    start = time.perf_counter()
    topo = load_topology(args.topology)
    schedule = solve(topo, args.collective, k=args.k, where=args.topology)
    if args.json:
        save_schedule(schedule, args.json)
    print(summary(schedule, topo.node_ids(), time.perf_counter() - start))
    write_exports(args, schedule, topo)
    return 0
