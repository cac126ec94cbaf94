"""``canopy advise TOPO``: what to build, what to upgrade, what breaks (docs/advise.md)."""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import nullcontext, redirect_stdout
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

from canopy.engine.model.errors import CanopyError

COLLECTIVES = ("allgather", "reduce-scatter", "allreduce")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("advise", help="per link class: what limits the optimum, the "
                       "cheapest upgrades, single failures, a target")
    p.add_argument("topology", help="canopy-topology JSON file")
    p.add_argument("--collective", choices=COLLECTIVES, default="allgather")
    p.add_argument("--failures", action="store_true",
                   help="the optimum after each single link or switch failure, worst first")
    p.add_argument("--target", metavar="GBPS",
                   help="the cheapest change of class bandwidths reaching this algbw (GB/s); "
                   "needs --prices")
    p.add_argument("--prices", metavar="FILE",
                   help="JSON object {class name: price per GB/s per link}; only priced "
                   "classes are upgraded")
    p.add_argument("--json", metavar="OUT", help="write canopy-advice JSON here; '-' for "
                   "standard output")
    p.set_defaults(run=run)


def read_prices_file(path: str) -> dict:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CanopyError(f"{path}: no such file.") from None
    except (OSError, UnicodeDecodeError):
        raise CanopyError(f"{path} cannot be read.") from None
    try:
        data = json.loads(text, parse_float=Decimal)
    except (json.JSONDecodeError, RecursionError):
        raise CanopyError(f"{path} is not valid JSON.") from None
    if isinstance(data, dict) and isinstance(data.get("prices"), dict):
        data = data["prices"]
    if not isinstance(data, dict):
        raise CanopyError(f"{path} is not a JSON object of class names and prices.")
    return {k: str(v) if isinstance(v, Decimal) else v for k, v in data.items()}


def parse_target(text: str) -> Fraction:
    try:
        value = Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise CanopyError(f"--target {text!r} is not a number of GB/s.") from None
    if value <= 0:
        raise CanopyError(f"--target {text} is not a positive number of GB/s.")
    return value


def run(args: argparse.Namespace) -> int:
    from canopy.engine.advise.report import advise
    from canopy.engine.io.topology_json import atomic_write_text, load_topology

    out = sys.stdout
    with redirect_stdout(sys.stderr) if args.json == "-" else nullcontext():
        target = parse_target(args.target) if args.target is not None else None
        if args.prices and target is None:
            prices = read_prices_file(args.prices)
        elif target is not None:
            if not args.prices:
                raise CanopyError("--target needs --prices FILE (a JSON object of class "
                                  "names and prices per GB/s per link).")
            prices = read_prices_file(args.prices)
        else:
            prices = None
        topology = load_topology(args.topology)
        advisor = advise(topology, args.collective, failures=args.failures, target=target,
                         prices=prices, where=args.topology,
                         prices_source=args.prices or "the price file")
        text = json.dumps(advisor.to_dict(), indent=1, ensure_ascii=False) + "\n"
        if args.json == "-":
            out.write(text)
            out.flush()
        elif args.json:
            atomic_write_text(args.json, text)
        print(advisor.text())
    return 0
