"""The ``canopy`` command: one module per verb, each with ``register(subparsers)``.

Errors in the user's input reach stderr as one sentence and exit code 2, never a
traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from canopy.engine.errors import CanopyError

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
    "sweep",
]


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``canopy`` parser; with ``only``, just that verb's module is imported (start-up
    of one command does not pay for every other command's imports)."""
    parser = argparse.ArgumentParser(
        prog="canopy",
        description="Design cluster networks and get optimal collective schedules (ForestColl).")
    parser.add_argument("--version", action="store_true", help="print versions and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for verb in [only] if only in VERBS else VERBS:
        importlib.import_module(f"canopy.cli.{verb.replace('-', '_')}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    if args.version:
        from canopy.app.versions import version_report
        print(version_report())
        return 0
    if args.command is None:
        args = parser.parse_args(["gui"])
    try:
        return int(args.run(args) or 0)
    except CanopyError as exc:
        print(f"canopy: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("canopy: interrupted.", file=sys.stderr)
        return 130
    except OSError as exc:
        print(f"canopy: {exc.strerror or exc} ({exc.filename or ''}).", file=sys.stderr)
        return 2


def gui_main() -> int:
    """Entry point of the ``canopy-editor`` GUI launcher: ``canopy gui`` with its arguments."""
    return main(["gui", *sys.argv[1:]])
