"""The export options of ``canopy solve``: ``--msccl``, ``--inplace/--out-of-place`` and
``--trees-xml``. Every MSCCL file written is first run through Canopy's own simulator."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from canopy.cli.bounds import bounded_int
from canopy.cli.lazy import LazyChoices
from canopy.cli.phases import PhaseClock, TerminalProgress
from canopy.engine.model.limits import MAX_CHANNELS, MAX_SMS
from canopy.engine.model.schedule import Schedule
from canopy.engine.model.topology import Topology

if TYPE_CHECKING:
    from canopy.engine.mscclpp.files import MscclppExport

# MSCCL's defaults, spelled here so that building the parser does not import the MSCCL
# lowering (tests/cli/test_msccl_cli.py checks they equal MscclOptions' own).
CHANNELS, LAYOUT, RUNTIME, SMS = 4, "auto", "msccl", 108
RUNTIME_HOMES = {
    "msccl": "NCCL with the MSCCL runtime (github.com/microsoft/msccl, NVIDIA GPUs)",
    "rccl": "RCCL, ROCm's collective library, which reads MSCCL XML (github.com/ROCm/rccl, "
            "AMD GPUs)",
}


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive integer")
    return value


def add_export_arguments(parser: argparse.ArgumentParser) -> None:
    # In a group: argparse formats a parser's own option with choices when it is added,
    # which would import the MSCCL lowering that LazyChoices defers (start-up).
    p = parser.add_argument_group("exports")
    p.add_argument("--msccl", metavar="OUT.xml",
                   help="write the schedule as an MSCCL XML algorithm (checked by simulation)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--inplace", dest="out_of_place", action="store_false", default=False,
                      help="MSCCL algorithm for in-place buffers (the default)")
    mode.add_argument("--out-of-place", dest="out_of_place", action="store_true",
                      help="MSCCL algorithm for separate input and output buffers")
    p.add_argument("--msccl-channels", type=bounded_int(1, MAX_CHANNELS), default=CHANNELS,
                   metavar="C", help="channels the MSCCL program may spread relays over: more "
                   "thread blocks work in parallel (default %(default)s)")
    p.add_argument("--msccl-layout", choices=LazyChoices("canopy.engine.msccl", "LAYOUTS"),
                   default=LAYOUT,
                   help="pipelined: every unit tree edge streams on a connection of its own, "
                   "as canopy compare simulates; per-tree: every tree edge; mixed: per-tree "
                   "while channels last; compact: fewest channels and thread blocks; auto: the "
                   "first of these that fits (default %(default)s)")
    p.add_argument("--msccl-sms", type=bounded_int(1, MAX_SMS), default=None,
                   metavar="N", help="SMs (compute units) per GPU: the most thread blocks the "
                   "MSCCL program may use on one GPU, as all must be resident at once "
                   f"(default: the topology's GPU model's, see generate --gpu; else {SMS}, an "
                   "A100's; 132 for H100, 104 for an MI250 GCD)")
    p.add_argument("--msccl-runtime", choices=LazyChoices("canopy.engine.msccl", "RUNTIMES"),
                   default=None,
                   help="name reduce-scatter as microsoft/msccl or as RCCL reads it "
                   f"(default: the topology's GPU model's runtime, else {RUNTIME})")
    p.add_argument("--mscclpp", metavar="PLAN.json",
                   help="write the schedule as an MSCCL++ execution plan (checked by a symbolic "
                   "run), with a launcher script beside it")
    p.add_argument("--trees-xml", metavar="OUT", help="write the trees as XML for reading")
    p.add_argument("--print-run", action="store_true",
                   help="with --msccl or --mscclpp: print the environment and command that "
                   "run the export on the cluster")


def write_exports(args: argparse.Namespace, schedule: Schedule, topology: Topology,
                  clock: PhaseClock | None = None) -> None:
    """Write the files the export options ask for and print one line about each; the
    time of each part goes to ``clock``'s phases (layout choice, XML, XML check)."""
    clock = clock or PhaseClock()
    if args.msccl:
        with clock.phase("imports"):
            from canopy.engine.deploy.msccl_export import export_msccl
            from canopy.engine.generators.gpu_models import gpu_of
            from canopy.engine.msccl import MscclLimits, MscclOptions

        gpu = gpu_of(topology)
        sms = args.msccl_sms or gpu.sms
        runtime = args.msccl_runtime or gpu.runtime
        if args.msccl_sms is None:
            print(f"MSCCL limits:    {sms} thread blocks per GPU ({gpu.source} SMs; "
                  "--msccl-sms sets another count)")
        options = MscclOptions(inplace=not args.out_of_place, channels=args.msccl_channels,
                               runtime=runtime, layout=args.msccl_layout,
                               limits=MscclLimits(max_tbs_per_gpu=sms))
        follow = clock.follow({"MSCCL layout": "layout choice and XML",
                               "MSCCL self-check": "XML check"},
                              TerminalProgress("MSCCL export"))
        try:
            done = export_msccl(topology, schedule, args.msccl, options, progress=follow)
        finally:
            follow.finish()
        files, config = done.files, done.config
        if done.note is not None:
            print(f"MSCCL XML {done.note}.")
        if done.k != schedule.k:
            print(f"So the XML runs k = {done.k} while the schedule (--json, the docks) is "
                  f"the exact optimum with k = {schedule.k}: both are right, the XML is what "
                  "runs fastest on the runtime.")
        if len(files) > 1:
            how = ("and a config naming each XML's range (MSCCL_CONFIG)" if config else
                   "each carrying its range, which RCCL reads from their folder (MSCCL_ALGO_DIR)")
            print(f"The fastest schedule differs by message size, so {len(files)} MSCCL XMLs "
                  f"are written, one per size range ({args.msccl} for the largest), {how}.")
        for f, summary in zip(files, done.summaries, strict=True):
            where = "" if config is None else f", {f.sizes_text()}"
            print(f"MSCCL XML:       {f.path} ({summary}{where})")
        if config is not None:
            print(f"MSCCL config:    {config}")
        if done.runtime_note is not None:
            print(f"RCCL:            {done.runtime_note}")
        print(f"Runs on:         {RUNTIME_HOMES[options.runtime]}; --print-run prints the "
              "command")
        if done.stray is not None:
            print(f"Note: {done.stray}")
        if args.print_run:
            from canopy.engine.deploy.run_commands import run_command
            from canopy.engine.network.servers import compute_nodes_by_server

            per_server = len(compute_nodes_by_server(topology)[0])
            print(run_command(runtime, files[-1].path, schedule.collective,
                              len(schedule.compute_nodes), per_server, config))
    if getattr(args, "mscclpp", None):
        with clock.phase("MSCCL++ plan"):
            write_mscclpp(args, schedule, topology)
    if args.trees_xml:
        from canopy.engine.io.trees_xml import write_trees_xml

        with clock.phase("trees XML"):
            write_trees_xml(args.trees_xml, schedule)
        print(f"trees XML:       {args.trees_xml} ({len(schedule.trees)} trees)")


def write_mscclpp(args: argparse.Namespace, schedule: Schedule, topology: Topology) -> None:
    """``--mscclpp PLAN.json``: the plans of the runtime choice (one per size range), each
    checked, and the launcher beside them."""
    from canopy.engine.deploy.mscclpp_export import export_mscclpp
    from canopy.engine.generators.gpu_models import gpu_of
    from canopy.engine.msccl import MscclLimits

    sms = args.msccl_sms or gpu_of(topology).sms
    done = export_mscclpp(topology, schedule, args.mscclpp, not args.out_of_place,
                          MscclLimits(max_tbs_per_gpu=sms))
    print_mscclpp(args, done, topology)


def print_mscclpp(args: argparse.Namespace, done: MscclppExport, topology: Topology) -> None:
    """A line per plan, the launcher, and with --print-run the command."""
    from canopy.engine.mscclpp.launcher import run_text
    from canopy.engine.network.servers import compute_nodes_by_server

    files = done.files
    if len(files) > 1:
        print(f"The fastest schedule differs by message size, so {len(files)} MSCCL++ plans "
              f"are written, one per size range ({args.mscclpp} for the largest).")
    for f in files:
        print(f"MSCCL++ plan:    {f.path} ({f.report.summary()}, {f.sizes_text()})")
    print(f"MSCCL++ launch:  {done.launcher}")
    if args.print_run:
        print(run_text(done.launcher, len(topology.compute_nodes()),
                       len(compute_nodes_by_server(topology)[0])))
