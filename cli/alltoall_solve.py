"""``canopy solve TOPO --collective alltoall``: λ*, algbw, bounds, bottleneck links, the
verified routes (``--json``) and MSCCL XML (``--msccl``)."""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import nullcontext, redirect_stdout
from fractions import Fraction
from typing import TYPE_CHECKING

from canopy.cli.bounds import bounded_int
from canopy.cli.fabric import apply_failures
from canopy.cli.lazy import LazyChoices
from canopy.cli.phases import TerminalProgress
from canopy.engine.io.topology_json import atomic_write_bytes, load_topology
from canopy.engine.model.errors import CanopyError
from canopy.engine.model.limits import MAX_TIME_STEPS
from canopy.engine.model.topology import format_gbps, parse_bandwidth

if TYPE_CHECKING:
    from canopy.engine.alltoall import AllToAllResult


def add_alltoall_arguments(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group("all-to-all (--collective alltoall)")
    group.add_argument("--forwarding", default="all",
                       choices=LazyChoices("canopy.engine.alltoall", "FORWARDING"),
                       help="which nodes may relay others' data (default: all)")
    group.add_argument("--method", default="auto",
                       choices=LazyChoices("canopy.engine.alltoall", "METHODS"),
                       help="exact link LP, decomposition (per-source trees) for large "
                            "networks, or auto (default)")
    group.add_argument("--time-steps", type=bounded_int(1, MAX_TIME_STEPS), metavar="T",
                       help="also solve the time-stepped LP: T store-and-forward steps "
                            "(relays forward only what they held at the end of a step)")
    group.add_argument("--nic-bandwidth", metavar="GBPS",
                       help="model the host-to-NIC bottleneck: every compute node reaches its "
                            "links through a NIC joined to it by GBPS each way")
    group.add_argument("--nic-forwarding", default="nic",
                       choices=LazyChoices("canopy.engine.alltoall.nic", "NIC_FORWARDING"),
                       help="with --nic-bandwidth: relays turn around in the NIC (default) or "
                            "go up to the host and back")


def summary(result: AllToAllResult) -> str:
    """The short human summary of an all-to-all solve."""
    links = result.bottleneck_links()
    shown = ", ".join(f"{u}->{v}" for u, v in links[:6])
    if len(links) > 6:
        shown += f", … ({len(links)} links)"
    exact = "exact" if result.exact else f"within {result.gap:.2e} of the bound"
    lines = [
        "collective:      alltoall",
        f"compute nodes:   N = {result.num_compute} (forwarding: {result.problem.forwarding}"
        + (f"; host-NIC {format_gbps(result.nic[0])} GB/s, {result.nic[1]} forwarding"
           if result.nic else "") + ")",
        f"method:          {'link LP (HiGHS)' if result.method == 'lp' else 'decomposition'}"
        f" ({'exact' if result.exact else 'gap ' + format(result.gap, '.3%')}; "
        f"solver tolerance {result.tolerance:g})"
        + (f", {result.iterations} rounds" if result.iterations else ""),
        f"algbw:           {format_gbps(result.algbw)} GB/s ({exact}; per pair "
        f"{format_gbps(result.lam)} GB/s)",
        f"bound:           {format_gbps(result.bound_algbw)} GB/s (length certificate)",
        f"cut bound:       {format_gbps(result.cut_bound_algbw)} GB/s",
    ]
    if result.regular_bound is not None:
        lines.append(f"Theorem 1 bound: "
                     f"{format_gbps(result.num_compute * result.regular_bound)} GB/s")
    if result.method == "lp":
        from canopy.engine.alltoall.timesteps import time_steps
        stepped = time_steps(result.schedule)
        lines.append(f"store-and-fwd:   {format_gbps(stepped.algbw)} GB/s in "
                     f"{len(stepped.steps)} time steps (relays store whole messages)")
    lines += [
        f"bottleneck:      {shown or 'none saturated'}",
        f"routes:          {len(result.schedule.routes)} (verified)",
        f"time:            {result.seconds:.3f} s CPU",
    ]
    return "\n".join(lines)


def run_alltoall(args: argparse.Namespace) -> int:
    from canopy.engine.alltoall import solve_alltoall
    if args.k is not None:
        raise CanopyError("--k applies to tree collectives, not to alltoall.")
    topo = load_topology(args.topology)
    apply_failures(topo, getattr(args, "fail", []) or [])
    nic = None
    if args.nic_bandwidth is not None:
        try:
            nic = parse_bandwidth(args.nic_bandwidth)
        except ValueError as exc:
            raise CanopyError(f"--nic-bandwidth {args.nic_bandwidth} {exc}.") from None
    progress = TerminalProgress("all-to-all")
    try:
        result = solve_alltoall(topo, forwarding=args.forwarding, method=args.method,
                                where=args.topology, nic_bandwidth=nic,
                                nic_forwarding=args.nic_forwarding, progress=progress)
    finally:
        progress.done()
    stepped = None
    if args.time_steps is not None:
        from canopy.engine.alltoall.timestep_lp import check_against_fluid, solve_time_steps
        stepped = solve_time_steps(result.problem, args.time_steps)
        check_against_fluid(stepped, result.algbw)
    written = None
    if args.json:
        from canopy.engine.alltoall.io import save_result
        written = save_result(result, args.json, stepped)
    if args.json != "-":
        print(summary(result))
        if written is not None:
            print(f"JSON:            {args.json} ({written[1]} paths, "
                  f"{written[0] / 1e6:.3g} MB)")
        if stepped is not None:
            print(f"time-stepped LP: {stepped.algbw:.4g} GB/s in {stepped.steps} "
                  f"store-and-forward steps ({stepped.pair_data:.6g} GB per pair per "
                  f"1 s step; HiGHS, tolerance {stepped.tolerance:g})")
    if args.msccl:
        from canopy.engine.alltoall.msccl import alltoall_xml
        xml = alltoall_xml(result.schedule)
        atomic_write_bytes(args.msccl, xml.data)
        split = "exact shares" if xml.share_error == 0 else \
            f"route shares within {xml.share_error:.1%}"
        print(f"MSCCL XML:       {args.msccl} (out of place, {xml.chunks_per_pair} chunk(s) "
              f"per pair, {split}; {xml.report.summary()})", file=sys.stderr
              if args.json == "-" else sys.stdout)
    if getattr(args, "mscclpp", None):
        from canopy.cli.exports import print_mscclpp
        from canopy.engine.alltoall.mscclpp_plan import alltoall_plan, mcf_gap
        from canopy.engine.mscclpp.files import write_plans
        plan = alltoall_plan(args.mscclpp, topo, result.schedule)
        done = write_plans([plan], args.mscclpp, "alltoall", False)
        with redirect_stdout(sys.stderr) if args.json == "-" else nullcontext():
            print_mscclpp(args, done, topo)
            gap = mcf_gap(topo, result, plan)
            if gap is not None:
                print(f"MSCCL++ vs MCF:  {gap}.")
    return 0


def run_compare(args: argparse.Namespace, *sizes: int) -> int:
    """``canopy compare TOPO --collective alltoall``: MCF against direct and ring."""
    from canopy.engine.alltoall.compare import compare_alltoall
    from canopy.engine.model.sizes import size_label
    topo = load_topology(args.topology)
    apply_failures(topo, args.fail)
    progress = TerminalProgress("comparing all-to-all")
    try:
        comp = compare_alltoall(topo, sizes=tuple(sizes),
                                default_latency=Fraction(args.latency), where=args.topology,
                                progress=progress)
    finally:
        progress.done()
    result = comp.result
    print(f"{topo.name}: alltoall, N = {result.num_compute}; MCF optimum "
          f"{format_gbps(result.algbw)} GB/s ({result.method}), bound "
          f"{format_gbps(result.bound_algbw)} GB/s; times from the α-β simulator")
    head = ["algorithm", "bound GB/s"] + [f"{size_label(s)} GB/s" for s in comp.sizes]
    lines = [head] + [[row.algorithm, f"{float(row.bound_algbw):.2f}"]
                      + [f"{float(row.algbw(s)):.2f}" for s in comp.sizes]
                      for row in comp.rows]
    widths = [max(len(r[i]) for r in lines) for i in range(len(head))]
    for r in lines:
        print("  ".join(c.rjust(w) if i else c.ljust(w)
                        for i, (c, w) in enumerate(zip(r, widths, strict=True))))
    print("algbw = per-rank buffer size / time (GB/s = 1e9 B/s; 1M = 2^20 B); direct: one "
          "fewest-hop path per pair; ring: blocks around the ring of ranks.")
    if args.json:
        data = {"format": "canopy-alltoall-comparison", "version": 1,
                "sizes": list(comp.sizes),
                "rows": [{"algorithm": row.algorithm, "bound_algbw": float(row.bound_algbw),
                          "algbw": [float(row.algbw(s)) for s in comp.sizes],
                          "time_us": [float(row.times_us[s]) for s in comp.sizes]}
                         for row in comp.rows]}
        atomic_write_bytes(args.json, (json.dumps(data, indent=1) + "\n").encode())
    return 0
