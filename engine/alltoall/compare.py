"""All-to-all schedules in the execution model: MCF against what users run today.

Every algorithm becomes a :class:`~canopy.engine.model.plan.CollectivePlan` and runs in
:mod:`canopy.engine.execution.simulate`, like the allgather baselines. A route of an all-to-all
pair is a chain: a flow tree rooted at the source whose edges go hop by hop through the
relaying compute nodes (which store and forward) to the target, each edge with its
physical path through switches. With a per-rank buffer of M bytes each pair moves M/N,
so a route carrying a fraction f of its pair has ``share = f/N`` of M, and the plan's
algbw (M / time) is N·λ for the MCF schedule (the nccl-tests all-to-all convention).

* ``mcf``: the verified maximum concurrent flow routes (:mod:`.solve`).
* ``direct``: every pair on one fewest-hop path, as NCCL's point-to-point all-to-all
  sends each peer its block directly (relaying where the fabric needs it).
* ``ring``: blocks travel around the ring of ranks (rank order), pair (s, t) passing
  every rank between them, as a ring all-to-all does in N-1 steps.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from fractions import Fraction

from canopy.engine.alltoall.problem import AllToAllProblem, build_problem
from canopy.engine.alltoall.solve import AllToAllResult, solve_alltoall
from canopy.engine.execution.program import DEFAULT_LATENCY_US, algbw_gbps
from canopy.engine.execution.simulate import REPORT_SIZES, fastest
from canopy.engine.model.plan import CollectivePlan, FlowEdge, FlowTree, bandwidth_bound
from canopy.engine.model.progress import Progress, report
from canopy.engine.model.topology import Topology

ALGORITHMS = ("mcf", "direct", "ring")


def _chain(problem: AllToAllProblem, key: object, path: tuple[int, ...], share: Fraction
           ) -> FlowTree:
    """A route as a flow tree: hop edges between the compute nodes along ``path``."""
    names = problem.names
    compute = set(problem.compute)
    stops = [i for i, v in enumerate(path) if v in compute]
    edges = tuple(FlowEdge(names[path[a]], names[path[b]],
                           tuple(names[v] for v in path[a:b + 1]))
                  for a, b in zip(stops, stops[1:], strict=False))
    return FlowTree(key, names[path[0]], edges, share)


def _plan(problem: AllToAllProblem, trees: list[FlowTree]) -> CollectivePlan:
    names = tuple(problem.names[c] for c in problem.compute)
    return CollectivePlan("alltoall", names, (), tuple(trees))


def mcf_plan(result: AllToAllResult) -> CollectivePlan:
    problem = result.problem
    n = problem.num_compute
    trees = [_chain(problem, ("mcf", i), path, rate / result.lam / n)
             for i, (_, _, path, rate) in enumerate(result.schedule.paths())]
    return _plan(problem, trees)


def _fewest_hops(problem: AllToAllProblem, source: int) -> dict[int, tuple[int, ...]]:
    """A fewest-hop path from ``source`` to every node it reaches (breadth first, ties to
    the lower node index), relaying only through nodes that may forward."""
    out: list[list[int]] = [[] for _ in range(problem.n)]
    for u, v in sorted(zip(problem.tails.tolist(), problem.heads.tolist(), strict=True)):
        out[u].append(v)
    parent = {source: -1}
    queue = deque([source])
    while queue:
        u = queue.popleft()
        if u != source and not problem.relay[u]:
            continue
        for v in out[u]:
            if v not in parent:
                parent[v] = u
                queue.append(v)
    paths = {}
    for t in problem.compute:
        nodes = [t]
        while nodes[-1] != source:
            nodes.append(parent[nodes[-1]])
        paths[t] = tuple(reversed(nodes))
    return paths


def direct_plan(problem: AllToAllProblem) -> CollectivePlan:
    n = problem.num_compute
    trees = []
    for s in problem.compute:
        paths = _fewest_hops(problem, s)
        trees += [_chain(problem, ("direct", s, t), paths[t], Fraction(1, n))
                  for t in problem.compute if t != s]
    return _plan(problem, trees)


def ring_plan(problem: AllToAllProblem) -> CollectivePlan:
    """The ring of ranks; each hop on a fewest-hop path; pair (s, t) goes s, s+1, ..., t."""
    n = problem.num_compute
    ranks = list(problem.compute)
    hop = {}
    for i, s in enumerate(ranks):
        nxt = ranks[(i + 1) % n]
        hop[i] = _fewest_hops(problem, s)[nxt]
    trees = []
    for i, s in enumerate(ranks):
        for d in range(1, n):
            path: list[int] = [s]
            for j in range(i, i + d):
                path += hop[j % n][1:]
            names = problem.names
            edges = tuple(FlowEdge(names[ranks[j % n]], names[ranks[(j + 1) % n]],
                                   tuple(names[v] for v in hop[j % n]))
                          for j in range(i, i + d))
            trees.append(FlowTree(("ring", s, d), names[s], edges, Fraction(1, n)))
    return _plan(problem, trees)


@dataclass
class AllToAllRow:
    algorithm: str
    bound_algbw: Fraction                      # bandwidth-only (link congestion)
    times_us: dict[int, Fraction] = field(default_factory=dict)

    def algbw(self, size: int) -> Fraction:
        return algbw_gbps(size, self.times_us[size])


@dataclass
class AllToAllComparison:
    result: AllToAllResult
    sizes: tuple[int, ...]
    rows: list[AllToAllRow]


def compare_alltoall(topo: Topology, sizes: tuple[int, ...] = REPORT_SIZES,
                     algorithms: tuple[str, ...] = ALGORITHMS, forwarding: str = "all",
                     default_latency: Fraction = DEFAULT_LATENCY_US,
                     progress: Progress | None = None, where: str = "") -> AllToAllComparison:
    """Simulate each algorithm at each per-rank buffer size (bytes)."""
    result = solve_alltoall(topo, forwarding=forwarding, where=where)
    problem = build_problem(topo, forwarding, where)
    builders = {"mcf": lambda: mcf_plan(result), "direct": lambda: direct_plan(problem),
                "ring": lambda: ring_plan(problem)}
    caps = topo.capacities()
    rows = []
    total = len(algorithms) * len(sizes)
    for a, name in enumerate(algorithms):
        plan = builders[name]()
        row = AllToAllRow(name, bandwidth_bound(plan, caps)[0])
        start = 1
        for z, size in enumerate(sizes):
            report(progress, f"simulating {name}", (a * len(sizes) + z) / total)
            run = fastest(topo, plan, size, default_latency, start=start)
            row.times_us[size] = run.time_us
            start = run.pieces
        rows.append(row)
    return AllToAllComparison(result, tuple(sizes), rows)
