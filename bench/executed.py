"""How close ForestColl's schedule runs to the bound it proves, in the execution model.

For every bundled sample and every generator family at its default parameters, and each
collective: ForestColl's optimum (GB/s, exact) and the simulated algbw, at 1 MiB, 16 MiB,
256 MiB and 1 GiB, of the schedule ``canopy compare`` times and the MSCCL export writes
(:func:`canopy.engine.deploy.runtime_choice.runtime_schedule`: App. E's LP for allreduce where
it wins, or where its connections would be shared the fastest-executing of its layouts
and of the fewest-trees schedules within 1, 2, 4 and 10 % of the optimum), with the fraction
of the optimum it reaches, the layout, why it runs and the candidates simulated. CPU
seconds per row (``time.process_time``), and what the choice among candidates cost.
Prints JSON.

With ``--baselines``, instead: for each topology and collective, every baseline's simulated
algbw at 256 MiB and 1 GiB beside ForestColl's (:func:`canopy.engine.comparison.table
.compare`, the same execution model), and whether ForestColl is at least every baseline
("forestcoll_wins"; within 1 % where the baseline's own bound equals ForestColl's), plus a
torus case (3x4x5 torus at 50 GiB/s, 0.5 µs per link, 2 GiB allgather, TACOS with 2 chunks
per node).

Run: .venv/bin/python bench/executed.py [--quick | --baselines] [--sms=N]
[--collective=NAME] [sample-or-generator ...]
(``--quick``: 1 GiB only; ``--sms=N``: lay ForestColl out for N thread blocks per GPU, e.g.
104 for an MI250 GCD, instead of an A100's 108; ``--collective``: that collective only.)
"""

import json
import sys
import time
from fractions import Fraction

from canopy.engine.comparison.table import ComparisonRow, compare
from canopy.engine.generators import GENERATORS, generate
from canopy.engine.io.topology_json import load_sample, sample_names
from canopy.engine.msccl.threadblocks import MscclLimits

SIZES = (1 << 20, 16 << 20, 256 << 20, 1 << 30)
COLLECTIVES = ("allgather", "reduce-scatter", "allreduce")
LABELS = {1 << 20: "1M", 16 << 20: "16M", 256 << 20: "256M", 1 << 30: "1G", 2 << 30: "2G"}


def _outcome(candidate: dict) -> str:
    """What the runtime choice found of one candidate layout, in a few words."""
    if "executed_fraction" in candidate:
        return str(candidate["executed_fraction"])
    if "executed_below" in candidate:
        return f"below {candidate['executed_below']} (stopped)"
    if "executed_first_depth" in candidate:
        return f"{candidate['executed_first_depth']} at the first depth (screened out)"
    if "executed_first_depth_below" in candidate:
        return (f"below {candidate['executed_first_depth_below']} at the first depth "
                "(screened out)")
    return "its MSCCL++ plan does not fit"


def topologies(names: list[str]) -> list[tuple[str, object]]:
    found = []
    for name in sample_names():
        if not names or name in names:
            found.append((name, load_sample(name)))
    for kind in GENERATORS:
        if not names or kind in names:
            found.append((f"generate {kind}", generate(kind)))
    return found


def measure(topology: object, collective: str, sizes: tuple[int, ...],
            limits: MscclLimits | None = None) -> dict:
    """ForestColl's row of ``canopy compare`` alone: the schedule it would export (App. E's
    LP for allreduce where it wins; the schedule and layout
    :func:`canopy.engine.deploy.runtime_choice.runtime_schedule` chooses), its bound and its
    simulated algbw; fractions are of the optimum ForestColl proves."""
    start = time.process_time()
    fc = compare(topology, collective, sizes=sizes, algorithms=(),
                 limits=limits).row("forestcoll")
    optimum = Fraction(fc.details["solve_algbw"])
    row = {"collective": collective, "bound_gbps": round(float(optimum), 2),
           "k": fc.details["k"], "trees": fc.details["trees"],
           "layout": fc.details["connections"].get("layout"),
           "why": fc.details["connections"].get("note"),
           **({"below_512M": {key: below[key] for key in ("k", "trees", "layout")}}
              if (below := fc.details["connections"].get("below")) else {}),
           "candidates": [f"k={c['k']} tol={c['tolerance_percent']}% {c['layout']}: "
                          + _outcome(c)
                          for c in fc.details["connections"].get("candidates", [])],
           "choice_cpu_seconds": fc.details["connections"].get("choice_cpu_seconds", 0.0),
           "algbw_gbps": {}, "fraction_of_bound": {}, "pieces": {}}
    for size in sorted(sizes):
        label = LABELS.get(size, str(size))
        row["algbw_gbps"][label] = round(float(fc.algbw_at(size)), 2)
        row["fraction_of_bound"][label] = round(float(fc.algbw_at(size) / optimum), 4)
        row["pieces"][label] = fc.pieces[size]
    row["cpu_seconds"] = round(time.process_time() - start, 2)
    return row


def forestcoll_wins(fc: ComparisonRow, baseline: ComparisonRow, optimum: Fraction,
                    sizes: tuple[int, ...]) -> bool:
    """The rule: ForestColl's simulated algbw is at least the baseline's at every size, or
    within 1 % of it where the baseline's own bound equals ``optimum``."""
    slack = Fraction(99, 100) if baseline.algbw == optimum else Fraction(1)
    return all(fc.algbw_at(s) >= slack * baseline.algbw_at(s) for s in sizes)


def against_baselines(topology: object, collective: str, sizes: tuple[int, ...],
                      **options: object) -> dict:
    """ForestColl's simulated algbw against every baseline's at ``sizes``: ForestColl wins
    where it is at least the baseline at every size, or within 1 % where the baseline's own
    bound equals the optimum ForestColl proves (the optimum, not the bound of the schedule
    ForestColl runs, which may have fewer trees), and ``notes`` are compare's lines saying
    why a baseline is faster where it is."""
    start = time.process_time()
    comp = compare(topology, collective, sizes=sizes, **options)
    fc = comp.row("forestcoll")
    optimum = Fraction(fc.details["optimum_algbw"])
    row = {"collective": collective, "sizes": [LABELS.get(s, str(s)) for s in sizes],
           "forestcoll": {LABELS.get(s, str(s)): round(float(fc.algbw_at(s)), 2)
                          for s in sizes},
           "bound_gbps": round(float(fc.algbw), 2), "optimum_gbps": round(float(optimum), 2),
           "baselines": {}, "forestcoll_wins": True, "notes": comp.notes()}
    for r in comp.rows:
        if r is fc or r.reason is not None:
            continue
        optimal = r.algbw == optimum
        wins = forestcoll_wins(fc, r, optimum, sizes)
        largest = max(sizes)
        row["baselines"][r.algorithm] = {
            "bound_gbps": round(float(r.algbw), 2), "bound_is_optimum": optimal,
            "algbw_gbps": {LABELS.get(s, str(s)): round(float(r.algbw_at(s)), 2)
                           for s in sizes},
            # the bound of the schedule run at each size (TACOS builds one per size)
            "schedule_bound_gbps": {LABELS.get(s, str(s)): round(float(r.bounds[s][0]), 2)
                                    for s in sizes if s in r.bounds},
            "fraction_of_bound": round(float(r.algbw_at(largest) / r.algbw), 4),
            "pieces": r.pieces.get(largest), "stages": r.stages.get(largest),
            "shortfall": next((line for line in comp.shortfalls()
                               if line.startswith(f"{r.algorithm} runs at")), None),
            "forestcoll_wins": wins}
        row["forestcoll_wins"] = row["forestcoll_wins"] and wins
    row["cpu_seconds"] = round(time.process_time() - start, 2)
    return row


def baselines_main(names: list[str]) -> None:
    results = []
    torus = generate("torus", {"dims": "3x4x5", "bandwidth": "53.6870912"})
    cases: list[tuple[str, object, str | None]] = [(n, t, None) for n, t in topologies(names)]
    if not names or "torus-case" in names:
        cases.append(("torus 3x4x5, 0.5 us, TACOS 2 chunks, 2 GiB", torus, "allgather"))
    for name, topo, only in cases:
        for collective in ((only,) if only else COLLECTIVES):
            if only:
                row = against_baselines(topo, collective, (2 << 30,), algorithms=("tacos",),
                                        tacos_chunks=(2,), default_latency=Fraction(1, 2))
            else:
                row = against_baselines(topo, collective, (256 << 20, 1 << 30))
            row["topology"] = name
            results.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    print(json.dumps({"benchmark": "executed-baselines", "results": results,
                      "all_won": all(r["forestcoll_wins"] for r in results)}, indent=1))


def option(args: list[str], name: str) -> str | None:
    """The value of ``--name=value`` among ``args``, or None."""
    return next((a.split("=", 1)[1] for a in args if a.startswith(f"--{name}=")), None)


def main(args: list[str]) -> None:
    names = [a for a in args if not a.startswith("--")]
    if "--baselines" in args:
        baselines_main(names)
        return
    sizes = (1 << 30,) if "--quick" in args else SIZES
    sms = option(args, "sms")
    limits = MscclLimits(max_tbs_per_gpu=int(sms)) if sms else None
    only = option(args, "collective")
    results = []
    for name, topo in topologies(names):
        for collective in (only,) if only else COLLECTIVES:
            row = measure(topo, collective, sizes, limits)
            row["topology"] = name
            if sms:
                row["threadblocks_per_gpu_limit"] = int(sms)
            results.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    print(json.dumps({"benchmark": "executed", "results": results}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
