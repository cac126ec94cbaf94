"""A job's plan: the network it sees alone, the schedule it runs there, and its flows.

A job runs its algorithm on the **job network**: its compute nodes, the switches (all of
them, or the ones a vClos allots it), and the live links among those, dead-end switches
pruned. Its plan (:class:`~canopy.engine.model.plan.CollectivePlan`) is routed by Canopy's own
router there (source routing, vClos (Han et al., arXiv:2308.05692) §5.2: the sender picks the path).

A **flow** is one connection of the plan: a (sender, receiver, channel) triple, as a
runtime opens one queue pair per peer per channel. A ring's channel is its ring index;
each ForestColl tree and each all-to-all pair is its own channel. A flow's ``volume`` is
the bytes it carries per byte of message (the shares of the tree edges it serves).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from canopy.engine.baselines.ring import ring_baseline
from canopy.engine.forestcoll.solve import solve
from canopy.engine.model.errors import CanopyError, ScheduleError
from canopy.engine.model.plan import (
    CollectivePlan,
    FlowEdge,
    FlowTree,
    Path,
    add_path_load,
    schedule_plan,
)
from canopy.engine.model.topology import Link, Node, Topology
from canopy.engine.model.workloads import Job
from canopy.engine.network.routing import Router


@dataclass(frozen=True)
class Flow:
    """One connection of a job: ``path`` is its source route, ``volume`` bytes per byte."""

    src: str
    dst: str
    channel: str
    volume: Fraction
    path: Path


def job_topology(topology: Topology, job: Job, switches: frozenset[str] | None = None,
                 bandwidth: Mapping[frozenset[str], Fraction] | None = None) -> Topology:
    """The network ``job`` runs on alone (see the module docstring).

    ``switches`` limits the switches it may use; ``bandwidth`` overrides the bandwidth of
    the links between given node pairs (a vClos's reserved ports; 0 leaves the link out).
    """
    members = set(job.nodes)
    by_id = {n.id: n for n in topology.nodes}
    keep = members | {s for s in topology.switch_nodes()
                      if not by_id[s].failed and (switches is None or s in switches)}
    links = [link for link in topology.live_links()
             if link.source in keep and link.target in keep
             and (bandwidth is None
                  or bandwidth.get(frozenset((link.source, link.target)), Fraction(1)) != 0)]
    # Prune dead ends: switches left with a single neighbour carry nothing through.
    while True:
        neighbours: dict[str, set[str]] = {}
        for link in links:
            neighbours.setdefault(link.source, set()).add(link.target)
            neighbours.setdefault(link.target, set()).add(link.source)
        dead = {s for s in keep - members if len(neighbours.get(s, ())) <= 1}
        if not dead:
            break
        keep -= dead
        links = [link for link in links if link.source in keep and link.target in keep]
    if bandwidth:
        links = [Link(link.source, link.target,
                      bandwidth.get(frozenset((link.source, link.target)), link.bandwidth),
                      link.duplex, link.latency) for link in links]
    nodes = [Node(n, "compute", group=by_id[n].group) for n in job.nodes]
    nodes += [Node(n.id, n.kind, group=n.group) for n in topology.nodes
              if n.id in keep and n.id not in members]
    return Topology(f"{topology.name} / {job.name}", nodes, links, topology.bandwidth_unit)


def alltoall_plan(topology: Topology, nodes: list[str]) -> CollectivePlan:
    """All-to-all as direct exchanges: every node sends 1/N of its buffer to every other
    over its own connection, routed least congested first (vClos (Han et al.,
    arXiv:2308.05692) §5.3, "pair-wise
    exchange"; each pair is a one-edge tree)."""
    router = Router(topology)
    loads: dict[tuple[str, str], Fraction] = {}
    share = Fraction(1, len(nodes))
    trees = []
    for step in range(1, len(nodes)):
        for i, src in enumerate(nodes):
            dst = nodes[(i + step) % len(nodes)]
            path = router.route(src, dst, loads)
            if path is None:
                raise ScheduleError(f"{dst} cannot be reached from {src}.")
            add_path_load(loads, path, share)
            trees.append(FlowTree(("pair", src, dst), src,
                                  (FlowEdge(src, dst, path),), share))
    return CollectivePlan("alltoall", tuple(nodes), (), tuple(trees))


def job_plan(network: Topology, job: Job) -> CollectivePlan:
    """The plan ``job`` runs on its job network, or ScheduleError naming the job."""
    try:
        if job.collective == "alltoall":
            return alltoall_plan(network, list(job.nodes))
        if job.algorithm == "forestcoll":
            return schedule_plan(solve(network, job.collective))
        result = ring_baseline(network, job.collective)
    except CanopyError as exc:
        raise ScheduleError(f"job '{job.name}': {exc}") from None
    if not result.applicable or result.plan_at is None:
        raise ScheduleError(f"job '{job.name}': {result.not_applicable_reason}")
    return result.plan_at(Fraction(job.size))


def channel_of(tree: FlowTree) -> str:
    """The runtime channel a tree's connections belong to (see the module docstring)."""
    key = tree.key
    if isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], int):
        return f"ring{key[0]}"          # ring_plan's (ring index, origin)
    return repr(key)


def plan_flows(plan: CollectivePlan) -> list[Flow]:
    """The connections of ``plan`` with their volumes, in first-use order."""
    volume: dict[tuple[str, str, str, Path], Fraction] = {}
    for tree in plan.trees:
        channel = channel_of(tree)
        for edge in tree.edges:
            key = (edge.path[0], edge.path[-1], channel, edge.path)
            volume[key] = volume.get(key, Fraction(0)) + tree.share
    return [Flow(src, dst, channel, v, path) for (src, dst, channel, path), v in volume.items()]
