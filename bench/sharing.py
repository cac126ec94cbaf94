"""Does the execution model's sharing rule cost ForestColl throughput on switched routes?

:mod:`canopy.engine.execution.simulate` shares a link among the messages streaming over it by
processor sharing per link: a message of weight w gets w / W_l of every link l on its
route and moves at the smallest of these rates, without handing a share it cannot use
(held back on another link of its route) to the others. Real fabrics (credit-based
flow control) are work-conserving; the textbook model is max-min fair sharing
(progressive filling, weighted). Where a route crosses a switch (two links) the two
rules can differ. This script runs the program that ``canopy compare`` times for
ForestColl (:func:`canopy.engine.deploy.runtime_choice.runtime_schedule`'s plan, 1 GiB, a
given number of loop iterations) three ways: the simulator's event loop
(:func:`canopy.engine.execution.kernel.run_program`), and a plain reference event loop written
here with each rule, and prints the times (µs) and fractions of the optimum as JSON.
The reference loop recomputes every rate at every event (slow, pure Python, floats):
it checks the rule, not the speed.

Run: .venv/bin/python bench/sharing.py [sample:collective:pieces ...]
(default: mi250-2x16.json allgather at 4 and 16 iterations, the case where ForestColl
ran furthest below its bound; about 60 CPU s).
"""

import heapq
import json
import sys
import time
from collections.abc import Callable

import numpy as np

from canopy.engine.allreduce.lp_schedule import choose_allreduce
from canopy.engine.deploy.runtime_choice import runtime_schedule
from canopy.engine.execution.compiler import plan_program
from canopy.engine.execution.kernel import run_program
from canopy.engine.execution.program import BYTES_PER_US_PER_GBPS, DEFAULT_LATENCY_US, Program
from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.plan import path_links
from canopy.engine.model.topology import Topology

SIZE = 1 << 30
DEFAULT_CASES = ("mi250-2x16.json:allgather:4", "mi250-2x16.json:allgather:16")


def processor_sharing(routes: list[list[int]], weights: list[float], cap: np.ndarray
                      ) -> list[float]:
    """The simulator's rule: w · min over the route of cap_l / W_l."""
    total = np.zeros(len(cap))
    for route, w in zip(routes, weights, strict=True):
        total[route] += w
    return [w * min(cap[link] / total[link] for link in route)
            for route, w in zip(routes, weights, strict=True)]


def max_min(routes: list[list[int]], weights: list[float], cap: np.ndarray) -> list[float]:
    """Weighted max-min fair rates by progressive filling: all unfrozen messages grow
    their rate per unit weight together; a link that fills freezes the messages on it."""
    rate = [0.0] * len(routes)
    used = np.zeros(len(cap))
    unfrozen = set(range(len(routes)))
    while unfrozen:
        total = np.zeros(len(cap))
        for i in unfrozen:
            total[routes[i]] += weights[i]
        with np.errstate(divide="ignore", invalid="ignore"):
            level = np.where(total > 0, (cap - used) / total, np.inf)
        least = level.min()
        full = level <= least * (1 + 1e-12)
        for i in list(unfrozen):
            if full[routes[i]].any():
                rate[i] = weights[i] * least
                used[routes[i]] += rate[i]
                unfrozen.discard(i)
    return rate


def reference_run(topology: Topology, program: Program,
                  rule: Callable[[list[list[int]], list[float], np.ndarray], list[float]]
                  ) -> float:
    """The time (µs) of the last delivery, with the module docstring's connection rules
    (in order, one message at a time, α after the last byte) and ``rule`` for rates."""
    caps, lats = topology.capacities(), topology.latencies()
    link_id: dict[tuple[str, str], int] = {}
    cap_list: list[float] = []
    routes, alpha = [], []
    for connection in program.connections:
        route, a = [], 0.0
        for link in path_links(connection.route):
            if link not in link_id:
                link_id[link] = len(cap_list)
                cap_list.append(float(caps[link]) * BYTES_PER_US_PER_GBPS)
            route.append(link_id[link])
            a += float(lats.get(link, DEFAULT_LATENCY_US))
        routes.append(route)
        alpha.append(a)
    cap = np.array(cap_list)
    sends = program.sends
    waiting = [len(s.after) for s in sends]
    dependents: list[list[int]] = [[] for _ in sends]
    queue: list[list[int]] = [[] for _ in program.connections]
    for i, s in enumerate(sends):
        queue[s.connection].append(i)
        for d in s.after:
            dependents[d].append(i)
    head = [0] * len(queue)
    busy = [False] * len(queue)
    left: dict[int, float] = {}
    arrivals: list[tuple[float, int, int]] = []

    def start(c: int) -> None:
        if not busy[c] and head[c] < len(queue[c]) and waiting[queue[c][head[c]]] == 0:
            busy[c] = True
            left[queue[c][head[c]]] = float(sends[queue[c][head[c]]].size)

    for c in range(len(queue)):
        start(c)
    now = end = 0.0
    while left or arrivals:
        streaming = list(left)
        rates = rule([routes[sends[s].connection] for s in streaming],
                     [float(program.connections[sends[s].connection].weight)
                      for s in streaming], cap)
        finish = min((left[s] / r for s, r in zip(streaming, rates, strict=True)),
                     default=np.inf)
        step = min(finish, (arrivals[0][0] - now) if arrivals else np.inf)
        for s, r in zip(streaming, rates, strict=True):
            left[s] -= r * step
        now += step
        for s in streaming:
            if left[s] <= 1e-9 * max(1.0, float(sends[s].size)):
                del left[s]
                c = sends[s].connection
                busy[c] = False
                head[c] += 1
                heapq.heappush(arrivals, (now + alpha[c], s, c))
                start(c)
        while arrivals and arrivals[0][0] <= now + 1e-12:
            _, s, _ = heapq.heappop(arrivals)
            end = max(end, now)
            for d in dependents[s]:
                waiting[d] -= 1
                if waiting[d] == 0:
                    start(sends[d].connection)
    return end


def main(args: list[str]) -> None:
    results = []
    for case in args or DEFAULT_CASES:
        name, collective, pieces = case.split(":")
        topology = load_sample(name)
        schedule = choose_allreduce(topology, solve(topology, collective))
        optimum = max(schedule.algbw, schedule.optimal_algbw)
        choice = runtime_schedule(topology, schedule)
        program = plan_program(choice.plan, SIZE, int(pieces),
                               frozenset(topology.switch_nodes()))
        row: dict[str, object] = {"case": case, "k": choice.schedule.k,
                                  "layout": choice.layout, "sends": len(program.sends)}
        for label, rule in (("event_loop", None),
                            ("reference_processor_sharing", processor_sharing),
                            ("reference_max_min", max_min)):
            start = time.process_time()
            t = float(run_program(topology, program)) if rule is None \
                else reference_run(topology, program, rule)
            row[label] = {"time_us": round(t, 6),
                          "fraction_of_optimum": round(SIZE / (t * 1000) / float(optimum), 6),
                          "cpu_seconds": round(time.process_time() - start, 2)}
        results.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    print(json.dumps({"benchmark": "sharing", "results": results}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
