"""vClos: each job isolated on its own leaves, spines and reserved leaf-spine ports.

vClos (Han et al., arXiv:2308.05692) §6.1 and Appendix A.2. The fabric is a two-tier leaf-spine:
every server
(a ``group`` of compute nodes and its own switches, NVSwitch and NICs) hangs off one
leaf; spines join the leaves. A port is the bandwidth of one leaf downlink (a GPU's
NIC); C[n, m] counts the free ports between leaf n and spine m. Jobs are placed first in,
first out, each by the paper's stages:

* Stage 0 (N <= T GPUs per server): the server with the fewest idle GPUs that has N.
* Stage 1: the leaf with the fewest idle servers that has ceil(N/T) idle servers.
* Stage 2 (Algorithm 3, FINDVCLOS): l virtual leaves x s virtual spines, l starting at
  max(1, 2^floor(log2 N) / S) and doubling while l <= L, with s = N / l GPUs (s / T whole
  idle servers) under each chosen leaf and one free port between every chosen leaf and
  every chosen spine (constraints (2)-(5)); among the solutions, the vClos-ILP's
  objective (6) prefers spines with the fewest free ports and leaves with the fewest
  idle servers. We solve that ILP exactly with HiGHS (scipy.optimize.milp) and break
  ties by file order.

Jobs are placed anew: a job's listed nodes only give its size (the paper's scheduler
picks the GPUs); the result names the nodes, stage, leaves and spines chosen. A job no
stage can place is **refused** with the reason: not enough idle GPUs, or a
fragmented fabric (enough idle GPUs but no leaves and spines with the free ports a vClos
needs). OCS-vClos (§7, rewiring through optical switches) is not modelled.

Inside its vClos a job is routed by Canopy's own router (source routing); it shares no
link capacity with any other job, so its flows see no contention.

**Rail-optimised fabrics** (a server's NICs under R leaves, one per rail) do not fit this
model as written (the paper's §6.1 puts each server under exactly one leaf); each rail does,
and :mod:`.vclos_rails` isolates jobs rail by rail. :func:`leaf_spine` is the paper's view
and refuses a rail-optimised fabric; :func:`.vclos_rails.vclos_placer` picks the view.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.topology import COMPUTE, Topology


@dataclass
class LeafSpine:
    """The leaf-spine view of a topology (see the module docstring)."""

    servers: dict[str, list[str]]           # server -> its compute nodes, file order
    server_switches: dict[str, list[str]]   # server -> its own switches (NVSwitch, NICs)
    server_leaf: dict[str, str]
    leaves: list[str]
    spines: list[str]
    port: Fraction
    ports: dict[tuple[str, str], int]       # (leaf, spine) -> C[n, m]
    per_server: int                          # T

    def leaf_servers(self, leaf: str) -> list[str]:
        return [s for s in self.servers if self.server_leaf[s] == leaf]


Tiers = tuple[dict[str, str], dict[str, dict[str, Fraction]], dict[str, list[str]],
              list[str], list[str]]


def server_tiers(topology: Topology) -> Tiers:
    """(node -> its server, node -> neighbour -> bandwidth, server -> its nodes in file
    order, leaves, spines) of a two-tier leaf-spine, or ScheduleError saying why it is
    not one. A server is a ``group`` of nodes (or a lone compute node); a leaf is a switch
    outside every server that links to one; the other switches outside are spines."""
    nodes = {n.id: n for n in topology.nodes}
    server_of = {n.id: (n.group if n.group is not None else n.id) for n in topology.nodes
                 if n.kind == COMPUTE or n.group is not None}
    neighbours: dict[str, dict[str, Fraction]] = {}
    for link in topology.live_links():
        for a, b in ((link.source, link.target), (link.target, link.source)):
            row = neighbours.setdefault(a, {})
            row[b] = row.get(b, Fraction(0)) + link.bandwidth
    outside = [n for n in topology.switch_nodes()
               if n not in server_of and not nodes[n].failed and n in neighbours]
    leaves = [s for s in outside if any(v in server_of for v in neighbours[s])]
    leaf_set = set(leaves)
    spines = [s for s in outside if s not in leaf_set]
    for s in spines:
        odd = next((v for v in neighbours[s] if v not in leaf_set), None)
        if odd is not None:
            raise ScheduleError(f"vClos needs a two-tier leaf-spine, but spine '{s}' links "
                                f"to '{odd}', which is not a leaf.")
    for leaf in leaves:
        odd = next((v for v in neighbours[leaf] if v in leaf_set), None)
        if odd is not None:
            raise ScheduleError(f"vClos needs a two-tier leaf-spine, but leaves '{leaf}' and "
                                f"'{odd}' are linked directly.")
    members: dict[str, list[str]] = {}
    for n in topology.nodes:
        if n.id in server_of:
            members.setdefault(server_of[n.id], []).append(n.id)
    return server_of, neighbours, members, leaves, spines


def leaf_spine(topology: Topology) -> LeafSpine:
    """The leaf-spine structure of ``topology``, or ScheduleError saying why it has none."""
    server_of, neighbours, _members, leaves, spines = server_tiers(topology)
    servers: dict[str, list[str]] = {}
    server_switches: dict[str, list[str]] = {}
    for n in topology.nodes:
        if n.id in server_of:
            target = servers if n.kind == COMPUTE else server_switches
            target.setdefault(server_of[n.id], []).append(n.id)
    server_leaf: dict[str, str] = {}
    downlinks: list[Fraction] = []
    for leaf in leaves:
        for v, bw in neighbours[leaf].items():
            if v in server_of:
                downlinks.append(bw)
                other = server_leaf.setdefault(server_of[v], leaf)
                if other != leaf:
                    raise ScheduleError(
                        f"the paper's vClos needs every server under one leaf, but server "
                        f"'{server_of[v]}' reaches leaves '{other}' and '{leaf}' (a "
                        "rail-optimised fabric: vclos_placer isolates it rail by rail).")
    for server in servers:
        if server not in server_leaf:
            raise ScheduleError(f"server '{server}' reaches no leaf switch.")
    sizes = {len(gpus) for gpus in servers.values()}
    if len(sizes) != 1:
        raise ScheduleError("vClos needs servers of equal size; these have "
                            f"{', '.join(map(str, sorted(sizes)))} compute nodes.")
    port = min(downlinks)
    ports = {(leaf, spine): int(neighbours[leaf].get(spine, 0) / port)
             for leaf in leaves for spine in spines}
    return LeafSpine(servers, server_switches, server_leaf, leaves, spines, port, ports,
                     sizes.pop())


@dataclass
class Allocation:
    """Where vClos put a job: its compute nodes, switches and reserved leaf-spine ports."""

    job: str
    nodes: list[str] = field(default_factory=list)
    stage: int = 0
    leaves: list[str] = field(default_factory=list)
    spines: list[str] = field(default_factory=list)
    refused: str | None = None
    rails: list[dict[str, Any]] = field(default_factory=list)   # per rail (rail fabrics)

    @property
    def accepted(self) -> bool:
        return self.refused is None


def take_idle(idle: dict[str, list[str]], servers: list[str], n: int) -> list[str]:
    """``n`` idle GPUs from ``servers`` in order, no longer idle after (``idle`` per
    server)."""
    taken: list[str] = []
    for s in servers:
        use = idle[s][:n - len(taken)]
        idle[s] = idle[s][len(use):]
        taken += use
    return taken


class Placer:
    """First in, first out placement of jobs on a :class:`LeafSpine` (module docstring)."""

    def __init__(self, fabric: LeafSpine) -> None:
        self.fabric = fabric
        self.idle = {s: list(g) for s, g in fabric.servers.items()}
        self.free = dict(fabric.ports)

    def idle_servers(self, leaf: str) -> list[str]:
        t = self.fabric.per_server
        return [s for s in self.fabric.leaf_servers(leaf) if len(self.idle[s]) == t]

    def place(self, job: str, n: int) -> Allocation:
        """Place a job of ``n`` compute nodes (stages 0, 1, 2), or refuse it."""
        t = self.fabric.per_server
        total = sum(len(g) for g in self.idle.values())
        if n > total:
            return Allocation(job, refused=f"it needs {n} compute nodes but only {total} "
                                           "are idle.")
        if n <= t:
            fits = [s for s in self.fabric.servers if len(self.idle[s]) >= n]
            if not fits:
                return Allocation(job, refused=f"no server has {n} idle compute nodes (a job "
                                               f"of at most {t} stays in one server).")
            server = min(fits, key=lambda s: len(self.idle[s]))
            return Allocation(job, self._take([server], n), 0, [self.fabric.server_leaf[server]])
        count = math.ceil(n / t)
        leaves = [leaf for leaf in self.fabric.leaves if len(self.idle_servers(leaf)) >= count]
        if leaves:
            leaf = min(leaves, key=lambda v: len(self.idle_servers(v)))
            return Allocation(job, self._take(self.idle_servers(leaf)[:count], n), 1, [leaf])
        return self._stage2(job, n, total)

    def _take(self, servers: list[str], n: int) -> list[str]:
        return take_idle(self.idle, servers, n)

    def _stage2(self, job: str, n: int, total: int) -> Allocation:
        fab = self.fabric
        t, spines = fab.per_server, len(fab.spines)
        width = max(1, (1 << (n.bit_length() - 1)) // max(spines, 1))
        shapes = []
        while width <= len(fab.leaves):
            s = n // width
            if width > 1 and n % width == 0 and s % t == 0 and s <= spines:
                shapes.append((width, s))
            width *= 2
        if not shapes:
            return Allocation(job, refused=f"{n} compute nodes do not split into l leaves x "
                                           f"s spines with whole servers of {t} under each leaf "
                                           f"(l doubling up to {len(fab.leaves)} leaves, s at "
                                           f"most {spines} spines).")
        for width, s in shapes:
            found = self._ilp(width, s)
            if found is not None:
                leaves, chosen = found
                nodes: list[str] = []
                for leaf in leaves:
                    nodes += self._take(self.idle_servers(leaf)[:s // t], s)
                for leaf in leaves:
                    for spine in chosen:
                        self.free[(leaf, spine)] -= 1
                return Allocation(job, nodes, 2, leaves, chosen)
        tried = ", ".join(f"{w}x{s}" for w, s in shapes)
        return Allocation(job, refused=f"the fabric is fragmented: {total} compute nodes are "
                                       f"idle, but no vClos of leaves x spines ({tried}) has "
                                       "idle servers under every leaf and a free port between "
                                       "every leaf and spine.")

    def _ilp(self, width: int, s: int) -> tuple[list[str], list[str]] | None:
        """The vClos-ILP (A.2, (2)-(6)) for l = ``width`` leaves x s spines, or None if
        infeasible."""
        fab = self.fabric
        t = fab.per_server
        leaves = [v for v in fab.leaves if len(self.idle_servers(v)) * t >= s]
        spines = [m for m in fab.spines if any(self.free[(v, m)] for v in leaves)]
        if len(leaves) < width or len(spines) < s:
            return None
        nl, ns = len(leaves), len(spines)
        weight = nl * nl + ns * ns + 1      # objective first, then file order
        cost = [len(self.idle_servers(v)) * t * weight + i for i, v in enumerate(leaves)]
        cost += [sum(self.free[(v, m)] for v in fab.leaves) * weight + j
                 for j, m in enumerate(spines)]
        rows = [[1] * nl + [0] * ns, [0] * nl + [1] * ns]
        lower, upper = [width, s], [width, s]
        for i, v in enumerate(leaves):
            for j, m in enumerate(spines):
                if self.free[(v, m)] == 0:            # no free port: not both chosen
                    row = [0] * (nl + ns)
                    row[i] = row[nl + j] = 1
                    rows.append(row)
                    lower.append(0)
                    upper.append(1)
        result = milp(np.array(cost, dtype=float), integrality=np.ones(nl + ns),
                      bounds=Bounds(0, 1),
                      constraints=LinearConstraint(np.array(rows, dtype=float), lower, upper))
        if result.x is None:
            return None
        chosen = np.round(result.x).astype(int)
        return ([v for i, v in enumerate(leaves) if chosen[i]],
                [m for j, m in enumerate(spines) if chosen[nl + j]])


def job_switches(fabric: LeafSpine, allocation: Allocation) -> frozenset[str]:
    """The switches a placed job may use: its servers' own, its leaves and spines."""
    servers = {s for s, gpus in fabric.servers.items()
               if any(g in allocation.nodes for g in gpus)}
    own = {sw for s in servers for sw in fabric.server_switches.get(s, [])}
    return frozenset(own | set(allocation.leaves) | set(allocation.spines))


def reserved_bandwidth(fabric: LeafSpine, allocation: Allocation
                       ) -> dict[frozenset[str], Fraction]:
    """One port of bandwidth on each of the job's leaf-spine pairs (its reservation)."""
    return {frozenset((leaf, spine)): fabric.port
            for leaf in allocation.leaves for spine in allocation.spines}
