"""Jobs sharing a fabric under a routing model: per-job slowdown, per-link load.

Routing models (vClos (Han et al., arXiv:2308.05692) §3, §5.2, §6):

* ``source``: Canopy's own routing, each job's routes chosen as if it were alone on the
  fabric (source routing), then all jobs run together: one outcome.
* ``ecmp``: every flow takes the path its 5-tuple hashes to (:mod:`.ecmp`), one outcome
  per seed; the mean and 99th percentile over seeds describe the spread.
* ``vclos``: jobs are placed and isolated by :mod:`.vclos` (on a rail-optimised fabric,
  rail by rail: :mod:`.vclos_rails`) and routed inside their vClos; refused jobs are
  reported with the reason.

A job's **alone** time is the execution model's time (:func:`canopy.engine.execution.simulate.
fastest`) of its plan with the fabric to itself; its **slowdown** is the factor by which
contention stretches the bandwidth part of that time (:mod:`.contention`). Per directed
link, ``load`` is the offered load: the traffic the jobs would push through it at their
alone speed over its capacity (2 = two saturating flows collide there), and ``flows``
counts the connections crossing it.

Plans and alone times are cached per job network up to renaming (jobs on isomorphic
slices of a regular fabric share one computation).
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from canopy.engine.execution.program import BYTES_PER_US_PER_GBPS
from canopy.engine.execution.simulate import fastest
from canopy.engine.fabric.contention import alone_rates, fair_rates
from canopy.engine.fabric.ecmp import EcmpRouter
from canopy.engine.fabric.plans import Flow, channel_of, job_plan, job_topology, plan_flows
from canopy.engine.fabric.vclos import Allocation
from canopy.engine.fabric.vclos_rails import vclos_placer
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.limits import FABRIC_BYTES_PER_PAIR, check_memory
from canopy.engine.model.plan import CollectivePlan, FlowEdge, FlowTree, path_links
from canopy.engine.model.progress import Progress, report
from canopy.engine.model.topology import Link, Node, Topology, check
from canopy.engine.model.workloads import Job, check_jobs

ROUTINGS = ("ecmp", "source", "vclos")
DEFAULT_SEEDS = 100
FORMAT = "canopy-fabric"
VERSION = 1


@dataclass
class JobResult:
    """One job's outcome: ``slowdowns`` per seed (one for source and vclos)."""

    name: str
    nodes: list[str]
    collective: str
    algorithm: str
    size: int
    alone_us: float | None = None
    bandwidth_us: float | None = None
    slowdowns: list[float] = field(default_factory=list)
    refused: str | None = None
    placement: dict[str, Any] = field(default_factory=dict)
    pieces: int = 1                           # the execution model's pipeline depth
    canonical: tuple[CollectivePlan, dict[str, str]] | None = field(default=None, repr=False)

    @property
    def plan(self) -> CollectivePlan | None:
        """What the job runs (its source routes), renamed from the cached plan on use."""
        if self.canonical is None:
            return None
        plan, names = self.canonical
        return _rename_plan(plan, names)

    @property
    def mean(self) -> float | None:
        return float(np.mean(self.slowdowns)) if self.slowdowns else None

    @property
    def p99(self) -> float | None:
        """The 99th percentile (nearest rank) of the slowdowns."""
        if not self.slowdowns:
            return None
        ranked = sorted(self.slowdowns)
        return ranked[math.ceil(0.99 * len(ranked)) - 1]

    def time_us(self, slowdown: float | None) -> float | None:
        """Completion time at ``slowdown``: only the bandwidth part stretches."""
        if slowdown is None or self.alone_us is None or self.bandwidth_us is None:
            return None
        return self.alone_us + (slowdown - 1) * self.bandwidth_us


@dataclass
class LinkResult:
    """One directed link: offered load and flow count per seed."""

    source: str
    target: str
    capacity: Fraction
    loads: list[float] = field(default_factory=list)
    flows: list[int] = field(default_factory=list)


@dataclass
class FabricResult:
    topology: str
    routing: str
    seeds: int
    jobs: list[JobResult]
    links: list[LinkResult]
    plans_computed: int = 0        # distinct job networks (the others reused a plan)

    def to_json(self) -> dict[str, Any]:
        """The ``canopy-fabric`` v1 JSON object."""
        jobs = []
        for j in self.jobs:
            entry: dict[str, Any] = {
                "name": j.name, "nodes": j.nodes, "collective": j.collective,
                "algorithm": j.algorithm, "size": j.size, "alone_us": j.alone_us,
                "slowdown": {"mean": j.mean, "p99": j.p99},
                "time_us": {"mean": j.time_us(j.mean), "p99": j.time_us(j.p99)}}
            if j.refused is not None:
                entry["refused"] = j.refused
            if j.placement:
                entry["placement"] = j.placement
            jobs.append(entry)
        links = [{"source": k.source, "target": k.target,
                  "load_mean": float(np.mean(k.loads)), "load_max": float(max(k.loads)),
                  "flows_mean": float(np.mean(k.flows)), "flows_max": int(max(k.flows))}
                 for k in self.links]
        return {"format": FORMAT, "version": VERSION, "topology": self.topology,
                "routing": self.routing, "seeds": self.seeds, "jobs": jobs, "links": links}


# ------------------------------------------------------------------ plans, cached


def _canonical(network: Topology) -> tuple[Hashable, dict[str, str], Topology]:
    """(signature, name -> canonical name, the network renamed canonically)."""
    order = [n.id for n in network.nodes if n.is_compute]
    seen = set(order)
    for link in network.links:
        for end in (link.source, link.target):
            if end not in seen:
                seen.add(end)
                order.append(end)
    order += [n.id for n in network.nodes if n.id not in seen]
    rename = {old: f"v{i}" for i, old in enumerate(order)}
    by_id = {n.id: n for n in network.nodes}
    groups: dict[str | None, str | None] = {None: None}
    nodes = []
    for old in order:
        g = by_id[old].group
        if g not in groups:
            groups[g] = f"g{len(groups)}"
        nodes.append(Node(rename[old], by_id[old].kind, group=groups[g]))
    position = {old: i for i, old in enumerate(order)}
    links = sorted(network.links, key=lambda k: (position[k.source], position[k.target],
                                                 k.bandwidth, k.duplex))
    renamed = [Link(rename[k.source], rename[k.target], k.bandwidth, k.duplex, k.latency)
               for k in links]
    signature = (tuple((n.kind, n.group) for n in nodes),
                 tuple((k.source, k.target, k.bandwidth, k.duplex, k.latency) for k in renamed))
    return signature, rename, Topology(network.name, nodes, renamed, network.bandwidth_unit)


def _rename(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, str):
        return names.get(value, value)
    if isinstance(value, tuple):
        return tuple(_rename(v, names) for v in value)
    return value


def _rename_plan(plan: CollectivePlan, names: dict[str, str]) -> CollectivePlan:
    def tree(t: FlowTree) -> FlowTree:
        edges = tuple(FlowEdge(names[e.parent], names[e.child],
                               tuple(names[p] for p in e.path), e.priority) for e in t.edges)
        return FlowTree(_rename(t.key, names), names[t.root], edges, t.share, t.reduce)

    return CollectivePlan(plan.collective, tuple(names[n] for n in plan.compute_nodes),
                          tuple(tree(t) for t in plan.reduce_trees),
                          tuple(tree(t) for t in plan.broadcast_trees), plan.ordered_links)


@dataclass
class _Prepared:
    """A job ready to analyse: its (canonically named) plan, flows and alone times."""

    job: Job
    canonical: tuple[CollectivePlan, dict[str, str]]   # the plan and canonical -> real
    flows: list[Flow]
    alone_us: float
    pieces: int
    capacity: dict[tuple[str, str], Fraction]     # the links the job may use, and how much


class _Planner:
    """Builds job plans and alone times, once per job network up to renaming."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.cache: dict[Hashable, tuple[CollectivePlan, list[Flow], float, int]] = {}

    def prepare(self, job: Job, network: Topology, full: Topology | None = None
                ) -> _Prepared:
        """``network`` is where the job is planned; ``full`` (default ``network``) the
        same slice at full bandwidth, where its alone time is measured."""
        signature, rename, canon = _canonical(network)
        full_signature, canon_full = signature, canon
        if full is not None:
            full_signature, _, canon_full = _canonical(full)
        key = (signature, full_signature, job.collective, job.algorithm, job.size)
        if key not in self.cache:
            canon_job = Job(job.name, tuple(rename[n] for n in job.nodes), job.collective,
                            job.algorithm, job.size)
            plan = job_plan(canon, canon_job)
            alone = fastest(canon_full, plan, job.size)
            self.cache[key] = (plan, plan_flows(plan), float(alone.time_us), alone.pieces)
        plan, flows, alone_us, pieces = self.cache[key]
        back = {v: k for k, v in rename.items()}
        real = [Flow(back[f.src], back[f.dst], f.channel, f.volume,
                     tuple(back[n] for n in f.path)) for f in flows]
        return _Prepared(job, (plan, back), real, alone_us, pieces, network.capacities())


# ------------------------------------------------------------------ the analysis


class _Usage:
    """Per job and directed link: flows in units of the job's largest, and flow counts."""

    def __init__(self) -> None:
        self.column: dict[tuple[str, str], int] = {}
        self.entries: list[tuple[int, int, float]] = []

    def add(self, job: int, path: tuple[str, ...], units: float) -> None:
        for link in path_links(path):
            col = self.column.setdefault(link, len(self.column))
            self.entries.append((job, col, units))

    def matrices(self, jobs: int, columns: int) -> tuple[np.ndarray, np.ndarray]:
        usage = np.zeros((jobs, columns))
        count = np.zeros(columns)
        if self.entries:
            rows, cols, units = (np.array(x) for x in zip(*self.entries, strict=True))
            np.add.at(usage, (rows.astype(int), cols.astype(int)), units)
            np.add.at(count, cols.astype(int), 1)
        return usage, count


def analyze(topology: Topology, jobs: list[Job] | None = None, routing: str = "ecmp",
            seeds: int = DEFAULT_SEEDS, progress: Progress | None = None,
            where: str = "", jobs_where: str = "") -> FabricResult:
    """Run ``jobs`` (default: the topology's) together on ``topology`` under ``routing``.

    Bad input raises TopologyError naming ``where`` (the topology) or ``jobs_where``
    (the jobs file); ``progress(phase, fraction)`` may raise
    :class:`canopy.engine.model.progress.Cancelled` to stop.
    """
    if routing not in ROUTINGS:
        raise ScheduleError(f"unknown routing '{routing}'; use {', '.join(ROUTINGS)}.")
    if seeds < 1:
        raise ScheduleError(f"seeds must be at least 1, not {seeds}.")
    jobs = topology.jobs if jobs is None else jobs
    source = jobs_where or where or topology.name
    if not jobs:
        raise ScheduleError(f"{source}: there are no jobs to analyse; add a 'jobs' list or "
                            "give a jobs file.")
    check(topology, where)
    check_jobs(topology, jobs, source, allow_overlap=routing != "vclos")
    check_memory(f"the fabric analysis of {len(jobs):,} jobs on "
                 f"{sum(len(j.nodes) for j in jobs):,} GPUs",
                 FABRIC_BYTES_PER_PAIR * sum(len(j.nodes) * (len(j.nodes) - 1) for j in jobs))
    planner = _Planner(topology)
    results = [JobResult(j.name, list(j.nodes), j.collective, j.algorithm, j.size)
               for j in jobs]
    prepared: list[_Prepared | None] = []
    allocations: list[Allocation | None] = [None] * len(jobs)
    if routing == "vclos":
        placer = vclos_placer(topology)
        for i, job in enumerate(jobs):
            allocations[i] = placer.place(job.name, len(job.nodes))
    for i, job in enumerate(jobs):
        report(progress, "plans", i / len(jobs))
        alloc = allocations[i]
        if alloc is None:
            prepared.append(planner.prepare(job, job_topology(topology, job)))
            continue
        result = results[i]
        result.placement = {"stage": alloc.stage, "leaves": alloc.leaves,
                            "spines": alloc.spines}
        if alloc.rails:
            result.placement["rails"] = [{**rail, "reserved_gbps": str(rail["reserved_gbps"])}
                                         for rail in alloc.rails]
        if not alloc.accepted:
            result.refused = alloc.refused
            result.placement = {}
            prepared.append(None)
            continue
        placed = Job(job.name, tuple(alloc.nodes), job.collective, job.algorithm, job.size)
        result.nodes = list(alloc.nodes)
        switches, reserved = placer.switches(alloc), placer.reserved(alloc)
        network = job_topology(topology, placed, switches, reserved)
        outside = {pair: bw for pair, bw in reserved.items() if not bw}  # not in its vClos
        prepared.append(planner.prepare(placed, network,
                                        job_topology(topology, placed, switches, outside)))
    report(progress, "plans", 1.0)
    live = {i: p for i, p in enumerate(prepared) if p is not None}
    caps = topology.capacities()
    if routing == "vclos":
        _check_isolation(list(live.values()), caps)
    for i, p in live.items():
        results[i].alone_us, results[i].pieces = p.alone_us, p.pieces
        results[i].canonical = p.canonical
    rounds = seeds if routing == "ecmp" else 1
    links = _contend(topology, jobs, live, routing, rounds, results, progress)
    order = {n: i for i, n in enumerate(topology.node_ids())}
    links.sort(key=lambda k: (order[k.source], order[k.target]))
    return FabricResult(topology.name, routing, rounds, results, links, len(planner.cache))


def _contend(topology: Topology, jobs: list[Job], live: dict[int, _Prepared], routing: str,
             rounds: int, results: list[JobResult], progress: Progress | None
             ) -> list[LinkResult]:
    """Route the flows once per seed, share the links, record slowdowns and loads."""
    caps = topology.capacities()
    router = EcmpRouter(topology) if routing == "ecmp" else None
    largest = {i: max(f.volume for f in p.flows) for i, p in live.items()}
    fixed, alone_use = _Usage(), _Usage()
    moving: list[tuple[int, Flow, int, float]] = []
    for i, p in live.items():
        for flow in p.flows:
            units = float(flow.volume / largest[i])
            alone_use.add(i, flow.path, units)     # alone: its own source routes
            if router is not None and router.has_choice(flow.src, flow.dst):
                moving.append((i, flow, router.flow_hash(jobs[i].name, flow.channel,
                                                         flow.src, flow.dst), units))
            else:
                fixed.add(i, flow.path, units)
    link_stats: dict[tuple[str, str], LinkResult] = {}
    for seed in range(rounds):
        report(progress, "seeds", seed / rounds)
        use = _Usage()
        use.column = dict(fixed.column)
        use.entries = list(fixed.entries)
        for i, flow, flow_hash, units in moving:
            assert router is not None
            use.add(i, router.path(flow.src, flow.dst, flow_hash, seed), units)
        for link in alone_use.column:
            use.column.setdefault(link, len(use.column))
        links = list(use.column)
        capacity = np.array([float(caps[k]) for k in links]) * BYTES_PER_US_PER_GBPS
        usage, count = use.matrices(len(jobs), len(links))
        alone_usage = np.zeros_like(usage)
        base, _ = alone_use.matrices(len(jobs), len(alone_use.column))
        alone_usage[:, [use.column[k] for k in alone_use.column]] = base
        alone = alone_rates(alone_usage, capacity)
        if routing == "vclos":     # each job alone on the capacity it holds
            held = np.zeros_like(usage)
            for i, p in live.items():
                held[i] = [float(p.capacity.get(k, 0)) for k in links]
            rate = alone_rates(usage, held * BYTES_PER_US_PER_GBPS)
        else:
            rate = fair_rates(usage, capacity)
        for i in live:
            results[i].slowdowns.append(float(alone[i] / rate[i]))
            if seed == 0:
                results[i].bandwidth_us = float(largest[i]) * jobs[i].size / float(alone[i])
        offered = (usage * np.where(np.isfinite(alone), alone, 0)[:, None]).sum(axis=0)
        for col, link in enumerate(links):
            stats = link_stats.setdefault(link, LinkResult(link[0], link[1], caps[link]))
            stats.loads.append(float(offered[col] / capacity[col]))
            stats.flows.append(int(count[col]))
    report(progress, "seeds", 1.0)
    for stats in link_stats.values():   # links a seed did not use carry nothing then
        stats.loads += [0.0] * (rounds - len(stats.loads))
        stats.flows += [0] * (rounds - len(stats.flows))
    return list(link_stats.values())


def ecmp_plan(router: EcmpRouter, job: str, plan: CollectivePlan, seed: int
              ) -> CollectivePlan:
    """``plan`` with every connection on the path ECMP hashes it to under ``seed``: the
    routes the analysis assumes for job ``job`` (to run in the execution model)."""
    def tree(t: FlowTree) -> FlowTree:
        channel = channel_of(t)
        edges = []
        for e in t.edges:
            src, dst, path = e.path[0], e.path[-1], e.path
            if router.has_choice(src, dst):
                path = router.path(src, dst, router.flow_hash(job, channel, src, dst), seed)
            edges.append(FlowEdge(e.parent, e.child, path, e.priority))
        return FlowTree(t.key, t.root, tuple(edges), t.share, t.reduce)

    return CollectivePlan(plan.collective, plan.compute_nodes,
                          tuple(tree(t) for t in plan.reduce_trees),
                          tuple(tree(t) for t in plan.broadcast_trees), plan.ordered_links)


def _check_isolation(prepared: list[_Prepared], caps: dict[tuple[str, str], Fraction]
                     ) -> None:
    """vClos's promise: the capacities the jobs hold add up to at most each link's."""
    held: dict[tuple[str, str], Fraction] = {}
    for p in prepared:
        used = {link for flow in p.flows for link in path_links(flow.path)}
        for link in used:
            held[link] = held.get(link, Fraction(0)) + p.capacity[link]
    for link, total in held.items():
        if total > caps[link]:
            raise ScheduleError(f"internal error: vClos jobs hold {total} GB/s of link "
                                f"{link[0]} -> {link[1]}, which has {caps[link]}.")
