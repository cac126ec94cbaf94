"""``canopy generate KIND [--param value ...] -o OUT.json`` and ``canopy generate --list``.

The options of each kind come from canopy.engine.generators.GENERATORS, so a new generator
needs no change here; ``canopy generate KIND --help`` lists that kind's options.
"""

from __future__ import annotations

import argparse
import sys

from canopy.engine.generators import GENERATORS, Generator, generate
from canopy.engine.io.topology_json import save_topology
from canopy.engine.model.topology import find_problems
from canopy.engine.model.units import GBPS, UNITS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "generate", help="generate a topology (cluster, torus, ring, dragonfly, ...)",
        description="Generate a topology from a few parameters. "
                    "'canopy generate --list' describes every kind and its options; "
                    "'canopy generate KIND --help' shows one kind's options.")
    p.add_argument("--list", action="store_true", help="describe every kind and its options")
    p.add_argument("kind", nargs="?", choices=sorted(GENERATORS), metavar="KIND",
                   help=f"one of: {', '.join(GENERATORS)}")
    p.add_argument("params", nargs=argparse.REMAINDER,
                   help="the kind's options, e.g. --servers 4 --gpus 8, and -o OUT.json")
    p.set_defaults(run=run)


def kind_parser(gen: Generator) -> argparse.ArgumentParser:
    """The option parser of one kind, built from its parameter specs."""
    from canopy.cli import OneSentenceParser
    parser = OneSentenceParser(prog=f"canopy generate {gen.kind}",
                               description=f"{gen.title}: {gen.summary}.")
    parser.add_argument("-o", "--output", metavar="OUT.json", required=True,
                        help="where to write the canopy-topology JSON")
    parser.add_argument("--name", help="name of the topology (default: describes it)")
    parser.add_argument("--bandwidth-unit", choices=UNITS, default=GBPS, metavar="UNIT",
                        help=f"unit of the bandwidth options and of the file, one of "
                        f"{', '.join(UNITS)} (default {GBPS})")
    for spec in gen.params:
        extra = f" (one of {', '.join(spec.choices)})" if spec.choices else ""
        parser.add_argument(spec.flag, dest=spec.name, metavar=spec.type.upper(),
                            help=f"{spec.help}{extra}; default {spec.format(spec.default)}")
    return parser


def describe_all() -> str:
    lines = []
    for gen in GENERATORS.values():
        lines.append(f"{gen.kind}: {gen.title} - {gen.summary}")
        for spec in gen.params:
            choices = f" [{'|'.join(spec.choices)}]" if spec.choices else ""
            lines.append(f"    {spec.flag} {spec.type.upper()}{choices} "
                         f"(default {spec.format(spec.default)}): {spec.help}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if args.list:
        print(describe_all())
        return 0
    if args.kind is None:
        print("canopy generate: give a KIND (one of "
              f"{', '.join(GENERATORS)}) or --list.", file=sys.stderr)
        return 2
    gen = GENERATORS[args.kind]
    opts = kind_parser(gen).parse_args(args.params)
    values = {spec.name: getattr(opts, spec.name) for spec in gen.params
              if getattr(opts, spec.name) is not None}
    topo = generate(gen.kind, values, unit=opts.bandwidth_unit)
    if opts.name:
        topo.name = opts.name
    problems = find_problems(topo)
    for problem in problems:
        print(f"canopy: warning: {problem.message}", file=sys.stderr)
    save_topology(topo, opts.output)
    print(f"wrote {opts.output}: {topo.name}, {len(topo.compute_nodes())} compute nodes, "
          f"{len(topo.switch_nodes())} switches, {len(topo.links)} links")
    return 0
