"""The ``canopy`` command: one module per verb, each with ``register(subparsers)``.

Errors in the user's input reach stderr as one sentence and exit code 2, never a
traceback; an internal error (a bug) exits 70 with one sentence pointing to the log file
that holds its traceback (:mod:`canopy.engine.process.internal_errors`).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from canopy.engine.model.errors import CanopyError
from canopy.engine.model.limits import TOO_LONG_TEXT, allow_long_integers, is_too_long_error
from canopy.engine.process.gc_tuning import batch_collector
from canopy.engine.process.internal_errors import report_internal_error

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
    "generate",
    "samples",
    "import-nccl",
    "graphml",
    "compare",
    "fabric",
    "export-nccl-graph",
    "export-nccl-topo",
    "sweep",
]


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``canopy`` parser; with ``only``, just that verb's module is imported (start-up
    of one command does not pay for every other command's imports)."""
    parser = argparse.ArgumentParser(
        prog="canopy",
        description="Design cluster networks and get optimal collective schedules (ForestColl).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="store_true", help="print versions and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for verb in [only] if only in VERBS else VERBS:
        importlib.import_module(f"canopy.cli.{verb.replace('-', '_')}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    allow_long_integers()
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    if args.version:
        from canopy.app.versions import version_report
        print(version_report())
        return 0
    if args.command is None:
        args = parser.parse_args(["gui"])
    if args.command != "gui":       # the editor keeps its own (canopy.app.heap)
        batch_collector()
    try:
        return int(args.run(args) or 0)
    except CanopyError as exc:
        print(f"canopy: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("canopy: interrupted.", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK  # the reader (| head) has what it wanted
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"canopy: {exc.strerror or exc}{where}.", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:  # a bug: one sentence here, the traceback in the log
        if is_too_long_error(exc):
            print(f"canopy: {TOO_LONG_TEXT}", file=sys.stderr)
            return EXIT_BAD_INPUT
        return _internal(args, exc)


def _internal(args: argparse.Namespace, exc: BaseException) -> int:
    print(f"canopy: {report_internal_error(f'canopy {args.command}', exc)}", file=sys.stderr)
    return EXIT_INTERNAL


def gui_main() -> int:
    """Entry point of the ``canopy-editor`` GUI launcher: ``canopy gui`` with its arguments."""
    return main(["gui", *sys.argv[1:]])
