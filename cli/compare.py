"""``canopy compare TOPO``: ForestColl against rings, Blink, TACOS and contention-free rings.

Prints one row per algorithm: its bandwidth bound (algbw from link congestion), how many
times faster ForestColl's bound is, and the simulated time and algbw at each message
size (nccl-tests convention: algbw = size / time, GB/s = 10^9 bytes/s; sizes are bytes,
written 1M = 2^20 as nccl-tests does). ``--json OUT`` writes the canopy-comparison file.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import nullcontext, redirect_stdout
from decimal import Decimal
from fractions import Fraction

from canopy.cli.bounds import bounded_int
from canopy.cli.exports import SMS
from canopy.cli.fabric import add_fail_argument, apply_failures
from canopy.cli.phases import PhaseClock, TerminalProgress
from canopy.cli.solve import add_bandwidth_unit_argument
from canopy.engine.comparison.table import LAYOUT_PHASE, Comparison, compare
from canopy.engine.execution.program import CUT_THROUGH, DEFAULT_LATENCY_US, SWITCH_MODES
from canopy.engine.execution.simulate import REPORT_SIZES
from canopy.engine.generators.gpu_models import gpu_of
from canopy.engine.io.topology_json import atomic_write_text, load_topology
from canopy.engine.model.collectives import COLLECTIVES
from canopy.engine.model.errors import CanopyError
from canopy.engine.model.limits import (
    MAX_LATENCY_US,
    MAX_SEEDS,
    MAX_SIZES,
    MAX_SMS,
    MAX_TACOS_CHUNKS,
    check_range,
)
from canopy.engine.model.plan import ALGORITHMS
from canopy.engine.model.sizes import parse_size, size_label
from canopy.engine.model.units import UNIT_FACTORS
from canopy.engine.msccl.threadblocks import MscclLimits


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="compare ForestColl with rings, Blink, TACOS, LR rings")
    p.add_argument("topology", help="canopy-topology JSON file")
    p.add_argument("--collective", choices=(*COLLECTIVES, "alltoall"), default="allgather",
                   help="alltoall compares the MCF schedule with direct and ring all-to-all")
    p.add_argument("--sizes", default=",".join(size_label(s) for s in REPORT_SIZES),
                   help="comma-separated message sizes (default 1M,16M,128M,1G)")
    p.add_argument("--algorithms", default=None,
                   help="baselines to run (ForestColl always runs; default all, TACOS and "
                   "Blink only below 512 GPUs unless named here)")
    p.add_argument("--tacos-chunks", default="1,2,4",
                   help="chunks per node TACOS tries (default 1,2,4)")
    p.add_argument("--tacos-seeds", type=bounded_int(1, MAX_SEEDS), default=None,
                   help="TACOS random seeds (default 4, fewer on large topologies)")
    p.add_argument("--tacos-unwinding", choices=("ring", "mesh"), default="ring",
                   help="how TACOS unwinds switches (default ring)")
    p.add_argument("--latency", default=str(DEFAULT_LATENCY_US),
                   help="µs per link when the topology gives none (default 1)")
    p.add_argument("--switch-mode", choices=SWITCH_MODES, default=CUT_THROUGH,
                   help="how simulated switches forward (default cut-through)")
    p.add_argument("--json", metavar="OUT", help="write the canopy-comparison JSON (GB/s) here; "
                   "'-' for standard output")
    p.add_argument("--msccl-sms", type=bounded_int(1, MAX_SMS), default=None, metavar="N",
                   help="SMs per GPU, the most MSCCL thread blocks ForestColl's layout may use "
                   f"(as solve --msccl-sms; default: the topology's GPU model's, else {SMS})")
    p.add_argument("--mscclpp-baselines", metavar="DIR",
                   help="also write each baseline (rings; Blink, LR rings where they apply) as "
                   "an MSCCL++ plan with its launcher into DIR, checked and timed at the "
                   "largest size beside its row, to compare them on hardware")
    add_bandwidth_unit_argument(p)
    add_fail_argument(p)
    p.set_defaults(run=run)


def _latency(text: str) -> Fraction:
    """--latency as an exact number of µs, within the documented range."""
    try:
        value = Decimal(text.strip()) if len(text) < 40 else Decimal("NaN")
    except ArithmeticError:
        value = Decimal("NaN")
    if not value.is_finite() or not 0 <= value <= MAX_LATENCY_US:
        raise CanopyError(f"--latency must be a number of µs from 0 to {MAX_LATENCY_US:,} "
                          f"(docs/limits.md), not '{text[:40]}'.")
    if value and value.adjusted() < -12:
        value = Decimal(0)          # below a picosecond: no latency at all
    return Fraction(value)


def _options(args: argparse.Namespace) -> dict:
    try:
        sizes = tuple(parse_size(s) for s in args.sizes.split(",") if s.strip())
    except CanopyError as exc:
        raise CanopyError(f"--sizes: {exc}") from None
    named = args.algorithms is not None
    algorithms = tuple(a.strip() for a in args.algorithms.split(",") if a.strip()) if named \
        else tuple(a for a in ALGORITHMS if a != "forestcoll")
    try:
        chunks = tuple(int(c) for c in args.tacos_chunks.split(",") if c.strip()
                       and len(c) < 20)
        latency = _latency(args.latency)
    except (ValueError, ZeroDivisionError, ArithmeticError):
        raise CanopyError("--tacos-chunks takes whole numbers such as 1,2,4 and --latency a "
                          "number of µs.") from None
    if not chunks or min(chunks) < 1 or (args.tacos_seeds or 1) < 1 or latency < 0:
        raise CanopyError("--tacos-chunks and --tacos-seeds must be positive and --latency "
                          "not negative.")
    if not sizes:
        raise CanopyError("--sizes names no message size.")
    check_range("the number of --sizes", len(sizes), 1, MAX_SIZES)
    check_range("the number of --tacos-chunks", len(chunks), 1, 16)
    check_range("--tacos-chunks", max(chunks), 1, MAX_TACOS_CHUNKS)
    check_range("--latency", latency, 0, MAX_LATENCY_US, "µs")
    return {"sizes": sizes, "algorithms": algorithms, "tacos_chunks": chunks,
            "tacos_seeds": args.tacos_seeds, "tacos_unwinding": args.tacos_unwinding,
            "default_latency": latency, "switch_mode": args.switch_mode,
            "limits": MscclLimits(max_tbs_per_gpu=args.msccl_sms) if args.msccl_sms else None,
            "force": algorithms if named else ()}


def format_table(comp: Comparison, unit: str = "GB/s") -> list[str]:
    """The comparison as aligned text lines (header, one row per algorithm), bandwidths
    in ``unit``."""
    scale = float(1 / UNIT_FACTORS[unit])
    head = ["algorithm", f"bound {unit}", "FC x"]
    for s in comp.sizes:
        head += [f"{size_label(s)} µs", f"{size_label(s)} {unit}"]
    lines = [head]
    notes = []
    for row in comp.rows:
        if row.reason is not None:
            lines.append([row.algorithm, "n/a"] + [""] * (len(head) - 2))
            notes.append(f"  {row.algorithm}: " + (row.reason if row.omitted else
                                                    f"does not apply: {row.reason}"))
            continue
        ratio = comp.ratio(row)
        assert row.algbw is not None          # (a row with no reason has its bound)
        cells = [row.algorithm, f"{float(row.algbw) * scale:.2f}",
                 "" if ratio is None else f"{float(ratio):.2f}"]
        for s in comp.sizes:
            cells += [f"{float(row.times_us[s]):.1f}", f"{float(row.algbw_at(s)) * scale:.2f}"]
        lines.append(cells)
    widths = [max(len(r[i]) for r in lines) for i in range(len(head))]
    out = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in
                     enumerate(zip(r, widths, strict=True))).rstrip() for r in lines]
    return out + notes


UNIT_TEXT = {"GB/s": "GB/s = 1e9 B/s", "GiB/s": "GiB/s = 2^30 B/s", "Gb/s": "Gb/s = 1e9 bit/s",
             "Gib/s": "Gib/s = 2^30 bit/s"}


def run(args: argparse.Namespace) -> int:
    if args.collective == "alltoall":
        from canopy.cli.alltoall_solve import run_compare
        return run_compare(args, *_options(args)["sizes"])
    options = _options(args)
    clock = PhaseClock()
    out = sys.stdout
    with redirect_stdout(sys.stderr) if args.json == "-" else nullcontext():
        with clock.phase("reading"):
            topo = load_topology(args.topology)
            apply_failures(topo, args.fail)
        unit = args.bandwidth_unit or topo.bandwidth_unit
        if options["limits"] is None:
            gpu = gpu_of(topo)
            options["limits"] = MscclLimits(max_tbs_per_gpu=gpu.sms)
            print(f"ForestColl is laid out for {gpu.sms} thread blocks per GPU ({gpu.source} "
                  "SMs; --msccl-sms sets another count).")
        terminal = TerminalProgress(f"comparing {args.collective}")
        rows = clock.follow({LAYOUT_PHASE: "layout choice", "done": "table"})

        def progress(phase: str, fraction: float) -> None:
            rows(phase, fraction)
            terminal(phase, fraction)
        try:
            comp = compare(topo, args.collective, where=args.topology, progress=progress,
                           **options)
        finally:
            rows.finish()
            terminal.done()
        print(f"{comp.topology}: {comp.collective}, N = {comp.compute_nodes}; bound from link "
              "congestion, times from the execution model "
              f"({float(comp.default_latency):g} µs per link unless the topology says; "
              f"switches {comp.switch_mode})")
        for line in format_table(comp, unit):
            print(line)
        print("FC x: how many times ForestColl's bound is the row's. algbw = size / time, "
              f"{UNIT_TEXT[unit]}; 1M = 2^20 B.")
        for note in comp.notes():
            print(f"  {note}")
        fc = comp.row("forestcoll")
        if fc is not None and "allreduce_schedule" in fc.details:
            print(f"  forestcoll runs {fc.details['allreduce_schedule']}.")
        if fc is not None and fc.reason is None:
            conn = fc.details.get("connections", {})
            if "note" in conn:      # names the schedule, its layout and why
                print(f"  forestcoll ({fc.details['trees']} trees) {conn['note']}.")
            else:
                print(f"  forestcoll runs k = {fc.details['k']} ({fc.details['trees']} trees) "
                      f"on {conn.get('layout')}.")
        if args.mscclpp_baselines:
            _write_baselines(args, topo, comp, options, unit)
        text = json.dumps(comp.to_json(), indent=1) + "\n"
        if args.json == "-":
            out.write(text)
            out.flush()
        elif args.json:
            atomic_write_text(args.json, text)
            print(f"wrote {args.json}")
        print(clock.line())
    return 0


def _write_baselines(args: argparse.Namespace, topo, comp: Comparison, options: dict,
                     unit: str) -> None:
    """``--mscclpp-baselines DIR``: each baseline's MSCCL++ plan, checked and timed at the
    largest size beside the baseline's own row."""
    from canopy.engine.deploy.mscclpp_baselines import baseline_plans

    size = max(comp.sizes)
    scale = float(1 / UNIT_FACTORS[unit])
    print(f"MSCCL++ plans of the baselines in {args.mscclpp_baselines} (at {size_label(size)} "
          "in the execution model, beside their rows):")
    for done in baseline_plans(topo, args.collective, options["algorithms"],
                               args.mscclpp_baselines, size, limits=options["limits"]):
        if done.file is None or done.algbw is None:
            print(f"  {done.algorithm}: no plan ({done.reason}).")
            continue
        row = comp.row(done.algorithm)
        versus = ""
        if row is not None and row.reason is None and size in row.times_us:
            ratio = float(done.algbw / row.algbw_at(size))
            versus = f", {ratio:.1%} of its row's {float(row.algbw_at(size)) * scale:.2f}"
        print(f"  {done.algorithm}: {done.path} and {done.launcher} "
              f"({done.file.report.summary()}); runs {float(done.algbw) * scale:.2f} {unit}"
              f"{versus}.")
