"""The ``canopy`` command: one module per verb, each with ``register(subparsers)``.

Errors in the user's input reach stderr as one sentence and exit code 2, never a
traceback; an internal error (a bug) exits 70 with one sentence pointing to the log file
that holds its traceback (:mod:`canopy.engine.process.internal_errors`).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import os
import sys
from typing import NoReturn

from canopy.engine.model.errors import CanopyError, one_line
from canopy.engine.model.limits import TOO_LONG_TEXT, allow_long_integers, is_too_long_error
from canopy.engine.process.allocator import batch_allocator
from canopy.engine.process.gc_tuning import batch_collector
from canopy.engine.process.internal_errors import report_internal_error
from canopy.engine.process.memory_guard import start_memory_guard

EXIT_OK, EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 2, 70, 130
EPILOG = f"""exit codes:
  {EXIT_OK}    success
  {EXIT_BAD_INPUT}    bad input (a file, option or value Canopy cannot use; one sentence on stderr)
  {EXIT_INTERNAL}   internal error (a bug in Canopy; the traceback goes to the log file,
       $CANOPY_LOG or ~/.local/state/canopy/canopy.log)
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C)

--json - writes the JSON to standard output (the summary then goes to standard error)."""

# Verb modules under canopy.cli; each defines register(subparsers) and sets args.run.
VERBS = [
    "gui",
    "solve",
    "verify",
    "check-xml",
    "check-plan",
    "generate",
    "samples",
    "import-nccl",
    "import-ib",
    "export-slurm",
    "import-slurm",
    "graphml",
    "compare",
    "fabric",
    "export-nccl-graph",
    "export-nccl-topo",
    "sweep",
    "advise",
]

# Every command's one-line help as its module registers it, in the order of VERBS, and
# the module that registers it: ``canopy --help`` lists them without importing any
# (the modules import the engine; tests keep both in step).
COMMANDS = {
    "gui": ("gui", "open the topology editor (the default command)"),
    "solve": ("solve", "compute the optimal schedule of a topology"),
    "verify": ("verify", "verify a canopy-schedule against a topology"),
    "check-xml": ("check-xml", "check an MSCCL XML algorithm, and time it on a topology"),
    "check-plan": ("check-plan", "check an MSCCL++ execution plan, and time it on a topology"),
    "generate": ("generate", "generate a topology (cluster, torus, ring, dragonfly, ...)"),
    "samples": ("samples", "list the bundled sample topologies or copy one out"),
    "import-nccl": ("import-nccl", "import an NCCL topology XML file (NCCL_TOPO_FILE or "
                    "NCCL_TOPO_DUMP_FILE)"),
    "import-ib": ("import-ib", "import an InfiniBand fabric dump (ibnetdiscover output) and "
                  "report its defects"),
    "export-slurm": ("export-slurm", "write a topology's switch hierarchy as Slurm's "
                     "topology.conf (topology/tree or topology/block)"),
    "import-slurm": ("import-slurm", "read Slurm's topology.conf into a topology"),
    "import-graphml": ("graphml", "convert GraphML to canopy-topology JSON"),
    "export-graphml": ("graphml", "convert canopy-topology JSON to GraphML"),
    "compare": ("compare", "compare ForestColl with rings, Blink, TACOS, LR rings"),
    "fabric": ("fabric", "slowdown of jobs sharing a fabric (ECMP, source routing, vClos)"),
    "export-nccl-graph": ("export-nccl-graph", "write Canopy's best ring set as an "
                          "NCCL_GRAPH_FILE for plain NCCL"),
    "export-nccl-topo": ("export-nccl-topo", "write one server as an NCCL_TOPO_FILE (read "
                         "back by import-nccl)"),
    "sweep": ("sweep", "solve and compare a grid of generated designs"),
    "advise": ("advise", "per link class: what limits the optimum, the cheapest upgrades, "
               "single failures, a target"),
}

class OneSentenceParser(argparse.ArgumentParser):
    """An argument parser whose errors are one sentence (argparse prints the whole usage
    first, fifteen lines for ``canopy solve``); ``--help`` still prints it."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: {message} ('{self.prog} --help' lists "
                                  "the options).\n")


def build_parser(only: str | None = None, listing: bool = False) -> argparse.ArgumentParser:
    """The ``canopy`` parser; with ``only`` (a command or its module's name), just that
    command's module is imported (start-up of one command does not pay for every other
    command's imports). ``listing``: every command as a placeholder with its help line
    (:data:`COMMANDS`), no module imported, for ``canopy --help``."""
    parser = OneSentenceParser(
        prog="canopy",
        description="Design cluster networks and get optimal collective schedules (ForestColl).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="store_true", help="print versions and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    if listing:
        for command, (_, text) in COMMANDS.items():
            sub.add_parser(command, help=text, add_help=False)
        return parser
    module = COMMANDS[only][0] if only in COMMANDS else only
    for verb in [module] if module in VERBS else VERBS:
        importlib.import_module(f"canopy.cli.{verb.replace('-', '_')}").register(sub)
    return parser


def _parse(argv: list[str]) -> argparse.Namespace:
    """``argv`` parsed by the parser of its command only; without a known command first
    (``canopy --help``, ``canopy --version``, a mistyped command), by the listing parser,
    then by the command's own parser if one was named after all."""
    if argv and argv[0] in COMMANDS:
        return build_parser(argv[0]).parse_args(argv)
    listing = build_parser(listing=True)
    args, _ = listing.parse_known_args(argv)
    if args.command is not None:
        return build_parser(args.command).parse_args(argv)
    return listing.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    allow_long_integers()
    args = _parse(argv)
    if args.version:
        from canopy.app.versions import version_report
        print(version_report())
        return 0
    if args.command is None:
        args = _parse(["gui"])
    if args.command != "gui":       # the editor keeps its own (canopy.app.heap)
        batch_collector()
        batch_allocator()
        try:
            start_memory_guard()
        except CanopyError as exc:   # a CANOPY_MEMORY_BUDGET that is not a size
            print(f"canopy: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
    try:
        return int(args.run(args) or 0)
    except CanopyError as exc:
        print(f"canopy: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("canopy: interrupted.", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK  # the reader (| head) has what it wanted
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"canopy: {one_line(f'{exc.strerror or exc}{where}')}.", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:  # a bug: one sentence here, the traceback in the log
        if is_too_long_error(exc):
            print(f"canopy: {TOO_LONG_TEXT}", file=sys.stderr)
            return EXIT_BAD_INPUT
        return _internal(args, exc)


def run() -> NoReturn:
    """The ``canopy`` command: :func:`main` on the process's arguments, then the process
    ends at once. A command that built large plans would otherwise spend a noticeable
    part of its time at exit freeing them object by object (the interpreter's teardown),
    with nothing left to do: the exit handlers still run (:mod:`atexit`: the log's
    handlers, Ray's shutdown), the output is flushed, the commands close their files as
    they write them, and the operating system takes the memory back. The editor
    (``canopy gui``, or no command) exits as usual: Qt writes its settings as its objects
    are torn down."""
    code = main()
    argv = sys.argv[1:]
    if not argv or argv[0] == "gui":
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        # (the reader may have left, or the stream been closed)
        with contextlib.suppress(BrokenPipeError, ValueError):
            stream.flush()
    atexit._run_exitfuncs()
    os._exit(code)


def _internal(args: argparse.Namespace, exc: BaseException) -> int:
    print(f"canopy: {report_internal_error(f'canopy {args.command}', exc)}", file=sys.stderr)
    return EXIT_INTERNAL


def gui_main() -> int:
    """Entry point of the ``canopy-editor`` GUI launcher: ``canopy gui`` with its arguments."""
    return main(["gui", *sys.argv[1:]])
