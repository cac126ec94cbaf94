"""``canopy solve TOPO``: the optimum, the bottleneck cut, k, y and the verified forest."""

from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import nullcontext, redirect_stdout
from fractions import Fraction
from typing import TYPE_CHECKING

from canopy.cli.alltoall_solve import add_alltoall_arguments
from canopy.cli.bounds import bounded_int
from canopy.cli.exports import add_export_arguments, write_exports
from canopy.cli.fabric import add_fail_argument, apply_failures
from canopy.cli.phases import PhaseClock
from canopy.engine.forestcoll.bottleneck_words import describe_cut
from canopy.engine.forestcoll.fewest_trees import describe_k, trees_per_gpu
from canopy.engine.forestcoll.optimum import Optimum, optimum
from canopy.engine.io.topology_json import load_topology
from canopy.engine.model.collectives import COLLECTIVES
from canopy.engine.model.errors import CanopyError
from canopy.engine.model.limits import MAX_K, number_text
from canopy.engine.model.topology import Topology, format_gbps
from canopy.engine.model.units import UNITS, from_gbps

if TYPE_CHECKING:
    from canopy.engine.model.schedule import Schedule


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("solve", help="compute the optimal schedule of a topology")
    p.add_argument("topology", help="canopy-topology JSON file")
    p.add_argument("--collective", choices=(*COLLECTIVES, "alltoall"), default="allgather")
    k = p.add_mutually_exclusive_group()
    k.add_argument("--k", type=bounded_int(1, MAX_K), default=None,
                   help=f"fix the number of trees per node (1 to {MAX_K:.0e})")
    k.add_argument("--tolerance", metavar="P", type=tolerance, default=Fraction(0),
                   help="take the fewest trees per node within P %% of the optimum "
                   "(default 0: the fewest that reach it)")
    p.add_argument("--json", metavar="OUT", help="write the canopy-schedule JSON (GB/s) here; "
                   "'-' for standard output")
    add_bandwidth_unit_argument(p)
    p.add_argument("--bound-only", action="store_true",
                   help="print the optimum, bottleneck cut and k only (no trees; fast on "
                   "large topologies)")
    p.add_argument("--allreduce-lp", nargs="?", const="on", default="auto",
                   choices=("auto", "on", "off"),
                   help="allreduce: solve ForestColl's allreduce LP (App. E) with HiGHS and "
                   "run its schedule where it beats reduce-scatter + allgather; auto (the "
                   "default) skips it when an exact bound shows it cannot win; on: solves it "
                   "even then; off: never")
    add_fail_argument(p)
    add_export_arguments(p)
    add_alltoall_arguments(p)
    p.set_defaults(run=run)


def tolerance(text: str) -> Fraction:
    """A percentage in [0, 100)."""
    try:
        value = Fraction(text)
    except (ValueError, ZeroDivisionError):
        value = Fraction(-1)
    if not 0 <= value < 100:
        raise argparse.ArgumentTypeError(f"'{text}' is not a percentage from 0 to below 100")
    return value


def add_bandwidth_unit_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bandwidth-unit", choices=UNITS, metavar="UNIT",
                   help=f"unit of the printed bandwidths, one of {', '.join(UNITS)} "
                   "(default: the topology's bandwidth_unit)")


def summary(schedule: Schedule, topology: Topology, unit: str = "GB/s") -> str:
    """The short human summary printed by ``canopy solve``, bandwidths in ``unit``."""

    def bw(value: Fraction) -> str:
        return f"{format_gbps(from_gbps(value, unit))} {unit}"

    def exact(value: Fraction) -> str:
        return f"{number_text(from_gbps(value, unit))} {unit}"

    opt = schedule.optimum
    n = len(schedule.compute_nodes)
    cut = describe_cut(topology, opt.bottleneck_cut, opt.cut_bandwidth, unit)
    lines = [
        f"collective:      {schedule.collective}",
        f"GPUs:            {n} (N)",
        f"optimal algbw:   {bw(schedule.optimal_algbw)}, the most any schedule reaches "
        f"(1/x* = {number_text(opt.inverse_x)})",
        f"bottleneck cut:  {cut}",
        f"at the optimum:  {trees_per_gpu(opt.k)}, each carrying {exact(opt.tree_bandwidth)} "
        "(Prop. 3's k and y)",
        f"fewest trees:    {describe_k(schedule)}",
        f"schedule:        {trees_per_gpu(schedule.k)}, each carrying "
        f"{exact(schedule.tree_bandwidth)} (k and y)",
    ]
    # an allreduce whose reduce phase has trees of its own (ForestColl's App. E) counts both phases,
    # as the Results and Trees docks do
    trees = schedule.trees + (schedule.reduce_trees or [])
    heights = [t.height for t in trees]
    phases = (f": {len(schedule.trees)} broadcast, {len(schedule.reduce_trees)} reduce"
              if schedule.reduce_trees else "")
    depth = f"{min(heights)}-{max(heights)}" if min(heights) != max(heights) else heights[0]
    lines += [
        f"trees:           {len(trees)} distinct trees, "
        f"{number_text(sum(t.multiplicity for t in trees))} counting each as often as it is "
        f"used{phases}; {depth} links from a root to its farthest GPU",
        f"schedule algbw:  {bw(schedule.algbw)} (verified)",
    ]
    return "\n".join(lines)


def bound_summary(opt: Optimum, collective: str, topology: Topology, seconds: float,
                  unit: str = "GB/s") -> str:
    """``canopy solve --bound-only``: the optimum without trees, bandwidths in ``unit``."""
    n = len(opt.network.compute)
    y = f"{number_text(from_gbps(opt.tree_bandwidth, unit))} {unit}"
    return "\n".join([
        f"collective:      {collective}",
        f"GPUs:            {n} (N)",
        f"optimal algbw:   {format_gbps(from_gbps(opt.algbw(collective), unit))} {unit}, the "
        f"most any schedule reaches (1/x* = {number_text(opt.inverse_x)})",
        f"bottleneck cut:  "
        f"{describe_cut(topology, opt.cut_names(), opt.cut_bandwidth, unit)}",
        f"at the optimum:  {trees_per_gpu(opt.k)}, each carrying {y} (Prop. 3's k and y)",
        f"time:            {seconds:.3f} s (bound only: no trees built)",
    ])


def run(args: argparse.Namespace) -> int:
    # Imported here so that `canopy solve` on a small file starts fast.
    if args.collective == "alltoall":
        from canopy.cli.alltoall_solve import run_alltoall
        return run_alltoall(args)
    start = time.perf_counter()
    clock = PhaseClock(start)
    out = sys.stdout
    with redirect_stdout(sys.stderr) if args.json == "-" else nullcontext():
        with clock.phase("reading"):
            topo = load_topology(args.topology)
            apply_failures(topo, args.fail)
        if args.bound_only:
            if args.json or args.msccl or args.trees_xml or args.k is not None \
                    or args.allreduce_lp == "on":
                raise CanopyError("--bound-only builds no trees, so it cannot be combined "
                                  "with --k, --json, --msccl, --trees-xml or --allreduce-lp.")
            opt = optimum(topo, where=args.topology)
            print(bound_summary(opt, args.collective, topo, time.perf_counter() - start,
                                args.bandwidth_unit or topo.bandwidth_unit))
            return 0
        from canopy.engine.deploy.best_schedule import best_schedule

        began = time.perf_counter()
        schedule = best_schedule(topo, args.collective, k=args.k, tolerance=args.tolerance,
                                 allreduce_lp=args.allreduce_lp, where=args.topology)
        clock.add_schedule(schedule.timings, time.perf_counter() - began)
        with clock.phase("saving"):
            if args.json:
                from canopy.engine.io.schedule_json import save_schedule, schedule_to_dict
            if args.json == "-":
                out.write(json.dumps(schedule_to_dict(schedule), indent=1) + "\n")
                out.flush()
            elif args.json:
                save_schedule(schedule, args.json)
        unit = args.bandwidth_unit or topo.bandwidth_unit
        with clock.phase("summary"):
            print(summary(schedule, topo, unit))
            if args.collective == "allreduce":
                from canopy.engine.allreduce.lp_schedule import describe_choice

                if describe_choice(schedule):
                    print(f"allreduce:       {describe_choice(schedule)}")
        write_exports(args, schedule, topo, clock)
        print(clock.line())
    return 0
