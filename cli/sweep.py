"""``canopy sweep SPEC.toml -o results.csv``: many designs, one tidy row each.

``--executor local`` (default) uses this machine's cores; ``--executor ray`` runs the
same points on a Ray cluster (``--address``) or a local Ray instance. Points already in
the output are skipped, so a sweep resumes after a crash. ``--plot RESULTS.csv`` draws
algbw against a parameter (``--screenshot PNG`` renders it and exits). See
:mod:`canopy.engine.sweep`.
"""

from __future__ import annotations

import argparse
import sys

from canopy.cli.bounds import bounded_int
from canopy.cli.gui import need_display
from canopy.engine.model.errors import CanopyError
from canopy.engine.model.limits import MAX_WORKERS
from canopy.engine.sweep.runner import EXECUTORS, read_rows, run_sweep
from canopy.engine.sweep.spec import load_spec


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="solve and compare a grid of generated designs")
    p.add_argument("spec", nargs="?", help="sweep spec (TOML), e.g. samples/sweep-rails.toml")
    p.add_argument("-o", "--output", help="results CSV (appended to; finished points skipped)")
    p.add_argument("--executor", choices=EXECUTORS, default="local",
                   help="local cores (default) or a Ray cluster")
    p.add_argument("--address", help="Ray cluster address (default: a local Ray instance)")
    p.add_argument("--workers", type=bounded_int(1, MAX_WORKERS),
                   help=f"local points at once (default: CPU count; at most {MAX_WORKERS})")
    p.add_argument("--plot", metavar="RESULTS.csv", help="draw a sweep's results")
    p.add_argument("--x", help="parameter on the plot's x axis (default: the first varied)")
    p.add_argument("--screenshot", metavar="OUT.png", help="with --plot: render and exit")
    p.set_defaults(run=run)


def _bar(done: int, total: int) -> None:
    if not sys.stderr.isatty():
        return
    width = 30
    filled = width * done // max(total, 1)
    end = "\n" if done == total else ""
    print(f"\r[{'#' * filled}{' ' * (width - filled)}] {done}/{total} points",
          end=end, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    if args.plot:
        return _plot(args)
    if not args.spec or not args.output:
        raise CanopyError("canopy sweep needs a spec and -o RESULTS.csv (or --plot RESULTS).")
    spec = load_spec(args.spec)
    _bar(0, len(spec.points))      # at once: the first point may take minutes
    rows = run_sweep(spec, args.output, args.executor, args.address, args.workers, _bar)
    errors = sum(1 for r in rows if r.get("error"))
    print(f"{len(rows)} rows in {args.output} ({len(spec.points)} points in the spec, "
          f"{errors} with errors).")
    return 0


def _plot(args: argparse.Namespace) -> int:
    try:
        rows = read_rows(args.plot)
    except FileNotFoundError:
        raise CanopyError(f"{args.plot}: no such file.") from None
    if not rows:
        raise CanopyError(f"{args.plot} holds no rows.")
    need_display(bool(args.screenshot), "the plot")
    from PySide6.QtWidgets import QApplication

    from canopy.app.dialogs.sweep_results import SweepResultsDialog
    app = QApplication.instance() or QApplication(sys.argv[:1])
    windows = []

    def open_topology(topology: object) -> None:
        from canopy.app.main_window import MainWindow
        window = MainWindow(topology)  # type: ignore[arg-type]
        window.show()
        windows.append(window)

    dialog = SweepResultsDialog(rows, args.plot, open_topology)
    if args.x:
        names = [dialog.x_box.itemText(i) for i in range(dialog.x_box.count())]
        if args.x not in names:
            raise CanopyError(f"--x {args.x}: the results vary {', '.join(names)}.")
        dialog.x_box.setCurrentIndex(names.index(args.x))
    dialog.show()
    if args.screenshot:
        app.processEvents()
        if not dialog.grab().save(args.screenshot):
            raise CanopyError(f"{args.screenshot} cannot be written.")
        return 0
    return app.exec()
