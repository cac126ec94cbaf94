"""``canopy solve TOPO --collective alltoall``: λ*, algbw, bounds, bottleneck links, the
verified routes (``--json``) and MSCCL XML (``--msccl``)."""

from __future__ import annotations

import argparse

from canopy.engine.alltoall import FORWARDING, METHODS, AllToAllResult, solve_alltoall
from canopy.engine.alltoall.io import save_result
from canopy.engine.errors import CanopyError
from canopy.engine.topology import format_gbps
from canopy.engine.topology_io import load_topology


def add_alltoall_arguments(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group("all-to-all (--collective alltoall)")
    group.add_argument("--forwarding", choices=FORWARDING, default="all",
                       help="which nodes may relay others' data (default: all)")
    group.add_argument("--method", choices=METHODS, default="auto",
                       help="exact link LP, decomposition (column generation) for large "
                            "networks, or auto (default)")


def summary(result: AllToAllResult) -> str:
    """The short human summary of an all-to-all solve."""
    links = result.bottleneck_links()
    shown = ", ".join(f"{u}->{v}" for u, v in links[:6])
    if len(links) > 6:
        shown += f", … ({len(links)} links)"
    exact = "exact" if result.exact else f"within {result.gap:.2e} of the bound"
    lines = [
        "collective:      alltoall",
        f"compute nodes:   N = {result.num_compute} (forwarding: {result.problem.forwarding})",
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
    lines += [
        f"bottleneck:      {shown or 'none saturated'}",
        f"routes:          {len(result.schedule.routes)} (verified)",
        f"time:            {result.seconds:.3f} s CPU",
    ]
    return "\n".join(lines)


def run_alltoall(args: argparse.Namespace) -> int:
    if args.k is not None:
        raise CanopyError("--k applies to tree collectives, not to alltoall.")
    topo = load_topology(args.topology)
    result = solve_alltoall(topo, forwarding=args.forwarding, method=args.method,
                            where=args.topology)
    if args.json:
        save_result(result, args.json)
    if args.json != "-":
        print(summary(result))
    if args.msccl:
        from canopy.cli.alltoall_msccl import write_alltoall_msccl
        write_alltoall_msccl(args, result)
    return 0
