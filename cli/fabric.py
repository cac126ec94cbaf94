"""``canopy fabric TOPO``: jobs sharing a fabric under ECMP, source routing or vClos."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from canopy.cli.bounds import bounded_int
from canopy.engine.io.topology_json import atomic_write_text, load_topology
from canopy.engine.model.errors import TopologyError
from canopy.engine.model.limits import MAX_SEEDS
from canopy.engine.model.topology import Topology

if TYPE_CHECKING:
    from canopy.engine.fabric.analysis import FabricResult


def register(sub: argparse._SubParsersAction) -> None:
    from canopy.engine.fabric.analysis import DEFAULT_SEEDS, ROUTINGS
    p = sub.add_parser("fabric", help="slowdown of jobs sharing a fabric (ECMP, source "
                                      "routing, vClos)")
    p.add_argument("topology", help="canopy-topology JSON file")
    p.add_argument("--jobs", metavar="JOBS", help="canopy-jobs JSON file (default: the "
                                                  "topology's own 'jobs')")
    p.add_argument("--routing", choices=ROUTINGS, default="ecmp")
    p.add_argument("--seeds", type=bounded_int(1, MAX_SEEDS), default=DEFAULT_SEEDS,
                   help=f"ECMP hash seeds (default {DEFAULT_SEEDS})")
    add_fail_argument(p)
    p.add_argument("--json", metavar="OUT", help="write the canopy-fabric JSON here")
    p.set_defaults(run=run)


def add_fail_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fail", nargs="+", metavar="LINK", default=[],
                   help="fail a switch (its id) or a link (SOURCE-TARGET) for this run")


def apply_failures(topo: Topology, names: list[str]) -> None:
    """Mark each named switch, or every link between a named pair, failed, and say in one
    line what now carries nothing (so a typo that matched something else shows)."""
    kinds = {n.id: n for n in topo.nodes}
    failed = []
    for name in names:
        if name in kinds:
            if kinds[name].is_compute:
                raise TopologyError(f"--fail {name}: '{name}' is a compute node; only "
                                    "switches and links can fail.")
            kinds[name].failed = True
            links = sum(1 for link in topo.links if name in (link.source, link.target))
            failed.append(f"switch {name} (and its {links} link{'s' if links != 1 else ''})")
            continue
        hit = 0
        for cut in (i for i, ch in enumerate(name) if ch == "-"):
            a, b = name[:cut], name[cut + 1:]
            for link in topo.links:
                if {link.source, link.target} == {a, b}:
                    link.failed = True
                    hit += 1
                    ends = (link.source, link.target)
        if not hit:
            raise TopologyError(f"--fail {name}: there is no switch or link of that name "
                                "(give a switch id or SOURCE-TARGET of a link).")
        failed.append(f"the link {ends[0]} - {ends[1]}" if hit == 1
                      else f"the {hit} links between {ends[0]} and {ends[1]}")
    if failed:
        print(f"failed (carrying nothing): {'; '.join(failed)}.")


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def summary(result: FabricResult) -> str:
    # here, not at the top: canopy solve imports this module, and the rail placer's
    # module loads NumPy and SciPy's MILP, which a small solve does without
    from canopy.engine.fabric.vclos_rails import rail_lines

    seeds = f", {result.seeds} seeds" if result.routing == "ecmp" else ""
    lines = [f"routing: {result.routing}{seeds}",
             f"{'job':<12} {'nodes':>5} {'collective':<15} {'alone µs':>10} "
             f"{'slowdown':>9} {'p99':>6} {'time µs':>10}"]
    for j in result.jobs:
        if j.refused is not None:
            lines.append(f"{j.name:<12} {len(j.nodes):>5} refused: {j.refused}")
            continue
        lines.append(f"{j.name:<12} {len(j.nodes):>5} {j.collective:<15} "
                     f"{_fmt(j.alone_us, 1):>10} {_fmt(j.mean):>9} {_fmt(j.p99):>6} "
                     f"{_fmt(j.time_us(j.mean), 1):>10}")
        lines += [f"{'':<12} {line}" for line in rail_lines(j.placement)]
    hot = sorted(result.links, key=lambda k: -max(k.loads))[:5]
    if hot:
        over = "mean and max over seeds" if result.routing == "ecmp" else "one routing"
        lines.append(f"hottest links (offered load / capacity, {over}):")
        for k in hot:
            flows = f"{max(k.flows)} flow{'s' if max(k.flows) != 1 else ''}"
            spread = f", max {max(k.loads):.2f}" if result.routing == "ecmp" else ""
            lines.append(f"  {k.source} -> {k.target}: {sum(k.loads) / len(k.loads):.2f}"
                         f"{spread} ({flows})")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from canopy.engine.fabric.analysis import analyze
    from canopy.engine.model.workloads import load_jobs
    topo = load_topology(args.topology)
    apply_failures(topo, args.fail)
    jobs = load_jobs(args.jobs) if args.jobs else None
    result = analyze(topo, jobs, args.routing, args.seeds, where=args.topology,
                     jobs_where=args.jobs or args.topology)
    if args.json:
        atomic_write_text(args.json, json.dumps(result.to_json(), indent=1) + "\n")
    print(summary(result))
    return 0
