"""vClos on a rail-optimised leaf-spine: the paper's isolation, rail by rail.

vClos (Han et al., "Isolated Scheduling for Distributed Training Tasks in GPU Clusters",
arXiv:2308.05692) §6.1 and Appendix A.2 isolate a job on l leaves x s spines of a
two-tier leaf-spine whose every server hangs off one leaf (:mod:`.vclos`). On a
rail-optimised fabric a server's NICs reach R leaves, one per rail, so that model does not
apply as written; but each **rail** is a leaf-spine of its own: the rail-r leaves (one per
**pod**, the servers that share the same leaves), the spines, and the links between them.
Every server's rail-r NIC sits under exactly one rail-r leaf, which is the paper's
assumption, so its isolation applies to each rail's sub-fabric.

This module does so, as an extension of the paper (which does not evaluate it):

* **Servers once.** A job of N GPUs takes whole servers as the paper's stages do, with a
  pod in the place of a leaf: stage 0 (N <= T GPUs per server) one server, stage 1 the
  pod with the fewest idle servers that has ceil(N/T) of them; inside one pod every rail's
  traffic turns in that pod's rail leaf, and no spine is needed.
* **Each rail's vClos.** Stage 2 takes l pods (l = 2, 4, … while there are pods; N/l GPUs,
  whole servers, in each) and, on every rail r independently, s_r spines, s_r being the
  rail-r ports the job has under each chosen leaf (servers per pod x that server's rail-r
  NICs): one free port between each chosen rail-r leaf and each of rail r's spines, as
  the paper's constraints (2)-(5) ask of a leaf-spine. The pods are shared by the rails
  (a job's servers are the same on every rail); the spines are chosen per rail and may
  differ. One ILP (HiGHS, ``scipy.optimize.milp``) holds every rail's constraints with
  the pod variables in common, and the paper's objective (6) per rail: pods with the
  fewest idle servers, spines with the fewest free ports on that rail, then file order.
* **Refusals** name the rail: a rail with no s_r spines free to every chosen leaf is
  fragmented, and the job is refused with that sentence (the other rails' vClos would
  not help it: its rail-r traffic has nowhere else to go).

A placed job holds, on each rail, one port of bandwidth on each of its (leaf, spine)
pairs of that rail and nothing else of the leaf-spine links, so no two jobs share link
capacity; its ECMP-free source routes inside that reservation see no contention.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

from canopy.engine.fabric.vclos import (
    Allocation,
    Placer,
    Tiers,
    job_switches,
    leaf_spine,
    reserved_bandwidth,
    server_tiers,
    take_idle,
)
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.topology import COMPUTE, Topology


@dataclass
class Rail:
    """One rail's leaf-spine: its leaf in each pod and its ports."""

    name: str
    leaf_of: dict[str, str]                  # pod -> the rail's leaf there
    port: Fraction                           # bandwidth of one server downlink
    per_server: int                          # the rail's ports (NICs) per server
    ports: dict[tuple[str, str], int]        # (leaf, spine) -> free ports C[n, m]


@dataclass
class RailFabric:
    """The rail-by-rail view of a rail-optimised leaf-spine (module docstring)."""

    servers: dict[str, list[str]]            # server -> its compute nodes, file order
    server_switches: dict[str, list[str]]    # server -> its own switches (NVSwitch, NICs)
    pods: dict[str, list[str]]               # pod -> its servers, file order
    rails: list[Rail]
    spines: list[str]
    per_server: int                          # T, GPUs per server
    server_pod: dict[str, str] = field(default_factory=dict)


def is_rail_optimised(topology: Topology) -> bool:
    """Whether some server reaches more than one leaf switch."""
    tiers = server_tiers(topology)
    return any(len(leaves) > 1 for leaves in _server_leaves(tiers).values())


def _server_leaves(tiers: Tiers) -> dict[str, dict[str, list[tuple[int, Fraction]]]]:
    """server -> leaf -> (position of the server's node in file order, bandwidth) of each
    link between them."""
    _server_of, neighbours, members, leaves, _spines = tiers
    out: dict[str, dict[str, list[tuple[int, Fraction]]]] = {}
    for server, nodes in members.items():
        row = out.setdefault(server, {})
        for position, node in enumerate(nodes):
            for leaf in leaves:
                bw = neighbours.get(node, {}).get(leaf)
                if bw is not None:
                    row.setdefault(leaf, []).append((position, bw))
    return out


def rail_fabric(topology: Topology) -> RailFabric:
    """The rails of a rail-optimised leaf-spine, or ScheduleError saying why it has none."""
    tiers = server_tiers(topology)
    _server_of, neighbours, members, leaves, spines = tiers
    reach = _server_leaves(tiers)
    for server in members:
        if not reach.get(server):
            raise ScheduleError(f"server '{server}' reaches no leaf switch.")
    by_leaves: dict[frozenset[str], list[str]] = {}
    for server in members:
        by_leaves.setdefault(frozenset(reach[server]), []).append(server)
    pods = {f"pod {i}": servers for i, servers in enumerate(by_leaves.values())}
    owner: dict[str, str] = {}
    for pod, pod_servers in pods.items():
        for leaf in reach[pod_servers[0]]:
            other = owner.setdefault(leaf, pod)
            if other != pod:
                raise ScheduleError(
                    f"vClos per rail needs pods (servers sharing the same leaves), but leaf "
                    f"'{leaf}' serves server '{pods[other][0]}' and server "
                    f"'{pod_servers[0]}', which reach different leaves.")
    # a rail: the leaves that the same NICs (by position in the server) reach, one per pod
    rail_leaf: dict[str, dict[tuple[int, ...], str]] = {}
    for pod, pod_servers in pods.items():
        first = pod_servers[0]
        rail_leaf[pod] = {}
        for leaf in sorted(reach[first], key=leaves.index):
            key = tuple(p for p, _ in reach[first][leaf])
            for other in pod_servers[1:]:
                if tuple(p for p, _ in reach[other][leaf]) != key:
                    raise ScheduleError(
                        f"vClos per rail needs the servers of a pod to reach each leaf from "
                        f"the same NICs, but servers '{first}' and '{other}' reach leaf "
                        f"'{leaf}' differently.")
            rail_leaf[pod][key] = leaf
    keys = sorted({key for row in rail_leaf.values() for key in row})
    for pod, row in rail_leaf.items():
        missing = next((k for k in keys if k not in row), None)
        if missing is not None:
            server = pods[pod][0]
            raise ScheduleError(
                f"vClos per rail needs every pod on every rail, but server '{server}' "
                f"reaches no leaf from '{members[server][missing[0]]}', which other "
                "servers' same NIC does.")
    servers = {s: [n for n in nodes if topology.node(n).kind == COMPUTE]
               for s, nodes in members.items()}
    sizes = {len(gpus) for gpus in servers.values()}
    if len(sizes) != 1:
        raise ScheduleError("vClos needs servers of equal size; these have "
                            f"{', '.join(map(str, sorted(sizes)))} compute nodes.")
    switches = {s: [n for n in nodes if topology.node(n).kind != COMPUTE]
                for s, nodes in members.items()}
    rails = []
    for i, key in enumerate(keys):
        leaf_of = {pod: rail_leaf[pod][key] for pod in pods}
        links = {s: [bw for _, bw in reach[s][leaf_of[pod]]]
                 for pod, members_ in pods.items() for s in members_}
        port = min(bw for bws in links.values() for bw in bws)
        per_server = {int(sum(bws) / port) for bws in links.values()}
        if len(per_server) != 1:
            raise ScheduleError(f"vClos per rail needs the same ports per server on each "
                                f"rail; rail {i} has {', '.join(map(str, sorted(per_server)))}.")
        ports = {(leaf, spine): int(neighbours[leaf].get(spine, 0) / port)
                 for leaf in leaf_of.values() for spine in spines}
        rails.append(Rail(f"rail {i}", leaf_of, port, per_server.pop(), ports))
    server_pod = {s: pod for pod, members_ in pods.items() for s in members_}
    return RailFabric(servers, switches, pods, rails, spines, sizes.pop(), server_pod)


class RailPlacer:
    """First in, first out placement of jobs on a :class:`RailFabric` (module docstring)."""

    def __init__(self, fabric: RailFabric) -> None:
        self.fabric = fabric
        self.idle = {s: list(g) for s, g in fabric.servers.items()}
        self.free = {rail.name: dict(rail.ports) for rail in fabric.rails}
        self.held: dict[str, dict[tuple[str, str], Fraction]] = {}

    def idle_servers(self, pod: str) -> list[str]:
        t = self.fabric.per_server
        return [s for s in self.fabric.pods[pod] if len(self.idle[s]) == t]

    def place(self, job: str, n: int) -> Allocation:
        """Place a job of ``n`` compute nodes (stages 0, 1, 2), or refuse it."""
        fab, t = self.fabric, self.fabric.per_server
        total = sum(len(g) for g in self.idle.values())
        if n > total:
            return Allocation(job, refused=f"it needs {n} compute nodes but only {total} "
                                           "are idle.")
        if n <= t:
            fits = [s for s in fab.servers if len(self.idle[s]) >= n]
            if not fits:
                return Allocation(job, refused=f"no server has {n} idle compute nodes (a job "
                                               f"of at most {t} stays in one server).")
            server = min(fits, key=lambda s: len(self.idle[s]))
            return self._placed(job, self._take([server], n), 0, [fab.server_pod[server]], {})
        count = math.ceil(n / t)
        pods = [p for p in fab.pods if len(self.idle_servers(p)) >= count]
        if pods:
            pod = min(pods, key=lambda p: len(self.idle_servers(p)))
            return self._placed(job, self._take(self.idle_servers(pod)[:count], n), 1, [pod],
                                {})
        return self._stage2(job, n, total)

    def _placed(self, job: str, nodes: list[str], stage: int, pods: list[str],
                spines: dict[str, list[str]]) -> Allocation:
        fab = self.fabric
        rails = [{"rail": rail.name, "leaves": [rail.leaf_of[p] for p in pods],
                  "spines": spines.get(rail.name, []),
                  "reserved_gbps": rail.port * len(spines.get(rail.name, []))}
                 for rail in fab.rails]
        held: dict[tuple[str, str], Fraction] = {}
        for rail in fab.rails:
            for p in pods:
                for m in fab.spines:
                    held[(rail.leaf_of[p], m)] = (rail.port if m in spines.get(rail.name, ())
                                                  else Fraction(0))
        self.held[job] = held
        leaves = [rail.leaf_of[p] for rail in fab.rails for p in pods]
        chosen = [m for m in fab.spines if any(m in s for s in spines.values())]
        return Allocation(job, nodes, stage, leaves, chosen, rails=rails)

    def _take(self, servers: list[str], n: int) -> list[str]:
        return take_idle(self.idle, servers, n)

    def _stage2(self, job: str, n: int, total: int) -> Allocation:
        fab = self.fabric
        t = fab.per_server
        shapes = []
        width = 2
        while width <= len(fab.pods):
            s = n // width
            if n % width == 0 and s % t == 0 and all(
                    s // t * rail.per_server <= len(fab.spines) for rail in fab.rails):
                shapes.append((width, s))
            width *= 2
        if not shapes:
            return Allocation(job, refused=f"{n} compute nodes do not split into l pods of "
                                           f"whole servers of {t} with at most "
                                           f"{len(fab.spines)} ports per rail leaf (l doubling "
                                           f"up to {len(fab.pods)} pods).")
        for width, s in shapes:
            found = self._ilp(width, s, fab.rails)
            if found is not None:
                pods, spines = found
                nodes: list[str] = []
                for pod in pods:
                    nodes += self._take(self.idle_servers(pod)[:s // t], s)
                for rail in fab.rails:
                    for pod in pods:
                        for m in spines[rail.name]:
                            self.free[rail.name][(rail.leaf_of[pod], m)] -= 1
                return self._placed(job, nodes, 2, pods, spines)
        width, s = shapes[0]
        broken = [rail.name for rail in fab.rails if self._ilp(width, s, [rail]) is None]
        tried = ", ".join(f"{w} pods" for w, _ in shapes)
        if broken:
            return Allocation(job, refused=f"{', '.join(broken)} "
                                           f"{'is' if len(broken) == 1 else 'are'} fragmented: "
                                           f"{total} compute nodes are idle, but no vClos "
                                           f"({tried}) has a free port between every chosen "
                                           "leaf and enough spines of that rail.")
        return Allocation(job, refused=f"the fabric is fragmented: every rail has a vClos "
                                       f"alone, but no choice of pods ({tried}) gives every "
                                       "rail its own at once.")

    def _ilp(self, width: int, s: int, rails: list[Rail]
             ) -> tuple[list[str], dict[str, list[str]]] | None:
        """The vClos-ILP (A.2, (2)-(6)) of every rail in ``rails`` at once, the pods shared:
        ``width`` pods of s/T idle servers each, and on each rail r, s/T x (its NICs per
        server) spines with a free port to every chosen rail-r leaf; None if infeasible."""
        fab = self.fabric
        t = fab.per_server
        pods = [p for p in fab.pods if len(self.idle_servers(p)) * t >= s]
        if len(pods) < width:
            return None
        spines = fab.spines
        np_, ns = len(pods), len(spines)
        weight = (np_ + ns * len(rails)) ** 2 + 1     # objective first, then file order
        cost = [len(self.idle_servers(p)) * t * weight + i for i, p in enumerate(pods)]
        for rail in rails:
            free = self.free[rail.name]
            cost += [sum(free[(leaf, m)] for leaf in rail.leaf_of.values()) * weight + j
                     for j, m in enumerate(spines)]
        size = np_ + ns * len(rails)
        rows = [[1] * np_ + [0] * (ns * len(rails))]
        lower, upper = [width], [width]
        for r, rail in enumerate(rails):
            row = [0] * size
            for j in range(ns):
                row[np_ + r * ns + j] = 1
            need = s // t * rail.per_server
            rows.append(row)
            lower.append(need)
            upper.append(need)
            free = self.free[rail.name]
            for i, p in enumerate(pods):
                for j, m in enumerate(spines):
                    if free[(rail.leaf_of[p], m)] < 1:    # no free port: not both chosen
                        row = [0] * size
                        row[i] = row[np_ + r * ns + j] = 1
                        rows.append(row)
                        lower.append(0)
                        upper.append(1)
        result = milp(np.array(cost, dtype=float), integrality=np.ones(size),
                      bounds=Bounds(0, 1),
                      constraints=LinearConstraint(np.array(rows, dtype=float), lower, upper))
        if result.x is None:
            return None
        chosen = np.round(result.x).astype(int)
        picked = {rail.name: [m for j, m in enumerate(spines) if chosen[np_ + r * ns + j]]
                  for r, rail in enumerate(rails)}
        return [p for i, p in enumerate(pods) if chosen[i]], picked

    def switches(self, allocation: Allocation) -> frozenset[str]:
        """The switches a placed job may use: its servers' own, its leaves and spines."""
        servers = {s for s, gpus in self.fabric.servers.items()
                   if any(g in allocation.nodes for g in gpus)}
        own = {sw for s in servers for sw in self.fabric.server_switches.get(s, [])}
        return frozenset(own | set(allocation.leaves) | set(allocation.spines))

    def reserved(self, allocation: Allocation) -> dict[frozenset[str], Fraction]:
        """One port of its rail on each (leaf, spine) pair the job holds; nothing (0) on
        the pairs between its leaves and spines that another rail chose."""
        return {frozenset(pair): bw for pair, bw in self.held.get(allocation.job, {}).items()}


class TorPlacer(Placer):
    """:class:`.vclos.Placer` with the interface :func:`vclos_placer` promises."""

    def switches(self, allocation: Allocation) -> frozenset[str]:
        return job_switches(self.fabric, allocation)

    def reserved(self, allocation: Allocation) -> dict[frozenset[str], Fraction]:
        return reserved_bandwidth(self.fabric, allocation)


def rail_lines(placement: dict[str, Any]) -> list[str]:
    """What a job placed rail by rail holds on each rail, one line a rail (one line in all
    when no rail needs a spine); nothing for a job placed otherwise."""
    rails = placement.get("rails", [])
    if rails and not any(rail["spines"] for rail in rails):
        leaves = [leaf for rail in rails for leaf in rail["leaves"]]
        return [f"{len(rails)} rails, each turning in its leaf ({', '.join(leaves)}); "
                "no spine"]
    return [f"{rail['rail']}: leaves {', '.join(rail['leaves'])}; spines "
            f"{', '.join(rail['spines'])}; {rail['reserved_gbps']} GB/s reserved up from "
            "each leaf" for rail in rails]


def vclos_placer(topology: Topology) -> TorPlacer | RailPlacer:
    """vClos placement for ``topology``: the paper's (every server under one leaf), or
    rail by rail on a rail-optimised leaf-spine (this module)."""
    if is_rail_optimised(topology):
        return RailPlacer(rail_fabric(topology))
    return TorPlacer(leaf_spine(topology))
