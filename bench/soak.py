"""Soak test: N random topologies through the whole pipeline, in one process.

Each topology (3 to 40 nodes, switches, one-way cycles, awkward and mixed bandwidths from
1e-12 to 1e30, thirds and long decimals) is saved and reloaded in a random bandwidth
unit, solved for a random collective (sometimes at a fixed k), verified, and on small
cases its optimum is checked against brute force over every cut. Every exception is
caught: a :class:`CanopyError` is an outcome (one sentence), anything else is counted as
a traceback and the first few are kept with their seeds. Prints one JSON summary.

    python -m bench.soak --count 10000 --seed 1 > soak.json
    python -m bench.soak --merge part1.json part2.json ...   # one summary of several runs
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import sys
import time
import traceback
from collections import Counter
from fractions import Fraction
from itertools import combinations

from canopy.engine.forestcoll.optimum import find_optimum
from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.schedule_json import schedule_from_dict, schedule_to_dict
from canopy.engine.io.topology_json import dumps_topology, loads_topology
from canopy.engine.model.errors import CanopyError
from canopy.engine.model.topology import COMPUTE, SWITCH, Link, Node, Topology, find_problems
from canopy.engine.model.units import UNITS
from canopy.engine.model.verification import verify
from canopy.engine.network.indexed import Network

AWKWARD = [Fraction(1), Fraction(3), Fraction(1, 3), Fraction(2, 3), Fraction(1000000),
           Fraction("0.3333333333333333"), Fraction("0.001"), Fraction("2.3333333333"),
           Fraction(10**30), Fraction(1, 10**12), Fraction(25), Fraction("12.5"),
           Fraction(7, 11), Fraction(2**63 + 1)]
BRUTE_MAX_NODES = 9


class Timeout(Exception):
    """One topology took longer than its budget."""


def random_topology(rng: random.Random) -> Topology:
    """A connected random topology; duplex links plus one-way cycles keep nodes balanced."""
    n_compute = rng.randint(2, 24)
    n_switch = rng.randint(0, min(16, 40 - n_compute))
    names = [f"c{i}" for i in range(n_compute)] + [f"w{i}" for i in range(n_switch)]
    nodes = [Node(n, COMPUTE if n[0] == "c" else SWITCH) for n in names]
    palette = rng.sample(AWKWARD, rng.randint(1, 4))

    def bw() -> Fraction:
        return rng.choice(palette)

    order = names[:]
    rng.shuffle(order)
    links = [Link(a, b, bw()) for a, b in zip(order, order[1:], strict=False)]
    for _ in range(rng.randint(0, len(names))):
        a, b = rng.sample(names, 2)
        links.append(Link(a, b, bw()))
    for _ in range(rng.randint(0, 3)):
        cycle = rng.sample(names, rng.randint(2, min(5, len(names))))
        b = bw()
        links += [Link(u, v, b, duplex=False)
                  for u, v in zip(cycle, cycle[1:] + cycle[:1], strict=True)]
    return Topology("soak", nodes, links)


def brute_force_inverse_x(net: Network) -> Fraction:
    """max |S ∩ V_c| / B+(S) over every cut S ⊉ V_c meeting V_c (ForestColl (arXiv:2402.06787) eq.
    1)."""
    compute = set(net.compute)
    best = Fraction(0)
    for size in range(1, net.n):
        for subset in combinations(range(net.n), size):
            s = set(subset)
            if compute <= s or not compute & s:
                continue
            best = max(best, Fraction(len(compute & s)) / net.egress_of(s))
    return best


def run_one(rng: random.Random) -> str:
    """One topology through load, solve, verify (and brute force when small)."""
    topo = random_topology(rng)
    topo.bandwidth_unit = rng.choice(UNITS)
    topo = loads_topology(dumps_topology(topo), "soak")
    if find_problems(topo):
        return "refused: invalid topology"
    collective = rng.choice(["allgather", "allgather", "reduce-scatter", "allreduce"])
    k = None
    net = Network.from_topology(topo)
    opt = find_optimum(net)
    if net.n <= BRUTE_MAX_NODES and opt.inverse_x != brute_force_inverse_x(net):
        raise AssertionError(f"optimum 1/x* = {opt.inverse_x} differs from brute force")
    if rng.random() < 0.2 and opt.k > 1:
        k = rng.randint(1, min(opt.k, 64))
    try:
        schedule = solve(topo, collective, k=k)
    except CanopyError as exc:   # every k >= 1 has a verified schedule (§4.5)
        raise AssertionError(f"solve refused k = {k}: {exc}") from None
    verify(topo, schedule_from_dict(json.loads(json.dumps(schedule_to_dict(schedule)))))
    if k is None and schedule.algbw != opt.algbw(collective):
        raise AssertionError("the schedule misses the optimum")
    return "solved (fixed k)" if k else "solved"


def _alarm(signum: int, frame: object) -> None:
    raise Timeout


def soak(count: int, seed: int, budget: int) -> dict:
    outcomes: Counter[str] = Counter()
    samples: list[dict] = []
    slowest = (0.0, None)
    signal.signal(signal.SIGALRM, _alarm)
    start_cpu, start_wall = time.process_time(), time.perf_counter()
    for i in range(count):
        case_seed = seed * 1_000_003 + i
        rng = random.Random(case_seed)
        t0 = time.process_time()
        signal.alarm(budget)
        try:
            outcome = run_one(rng)
        except Timeout:
            outcome = "timeout"
        except CanopyError as exc:
            outcome = f"refused: {exc.__class__.__name__}"
            if len(samples) < 20 and not any(s.get("error") == str(exc) for s in samples):
                samples.append({"seed": case_seed, "error": str(exc)})
        except Exception:  # everything else is a bug: count it, keep the first few
            outcome = "traceback"
            if sum(1 for s in samples if "traceback" in s) < 5:
                samples.append({"seed": case_seed, "traceback": traceback.format_exc()})
        finally:
            signal.alarm(0)
        outcomes[outcome] += 1
        if (i + 1) % 500 == 0:
            print(f"soak: {i + 1}/{count} {dict(outcomes)}", file=sys.stderr, flush=True)
        spent = time.process_time() - t0
        if spent > slowest[0]:
            slowest = (spent, case_seed)
    return {
        "count": count, "seed": seed, "outcomes": dict(sorted(outcomes.items())),
        "tracebacks": outcomes["traceback"], "timeouts": outcomes["timeout"],
        "cpu_seconds": round(time.process_time() - start_cpu, 2),
        "wall_seconds": round(time.perf_counter() - start_wall, 2),
        "slowest_cpu_seconds": round(slowest[0], 3), "slowest_seed": slowest[1],
        "samples": samples,
    }


def merge(parts: list[dict]) -> dict:
    """One summary of several runs (different seeds, e.g. run side by side)."""
    outcomes: Counter[str] = Counter()
    for part in parts:
        outcomes.update(part["outcomes"])
    slowest = max(parts, key=lambda p: p["slowest_cpu_seconds"])
    return {
        "count": sum(p["count"] for p in parts), "seeds": [p["seed"] for p in parts],
        "outcomes": dict(sorted(outcomes.items())),
        "tracebacks": sum(p["tracebacks"] for p in parts),
        "timeouts": sum(p["timeouts"] for p in parts),
        "cpu_seconds": round(sum(p["cpu_seconds"] for p in parts), 2),
        "wall_seconds": max(p["wall_seconds"] for p in parts),
        "slowest_cpu_seconds": slowest["slowest_cpu_seconds"],
        "slowest_seed": slowest["slowest_seed"],
        "samples": [s for p in parts for s in p["samples"]],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--budget", type=int, default=120,
                        help="seconds one topology may take before it counts as a timeout")
    parser.add_argument("--merge", nargs="+", metavar="SUMMARY.json",
                        help="print one summary of these runs' JSON summaries instead")
    args = parser.parse_args(argv)
    if args.merge:
        parts = [json.loads(open(path, encoding="utf-8").read()) for path in args.merge]
        json.dump(merge(parts), sys.stdout, indent=1)
        print()
        return 0
    json.dump(soak(args.count, args.seed, args.budget), sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
