"""How much of each physical link a schedule uses: the data of the link-load overlay.

A unit tree moves its 1/k shard at the tree bandwidth y over every hop of every edge's
path (ForestColl (arXiv:2402.06787) §3.2), so a directed link carrying L unit trees runs at L·y of
its
bandwidth b. For reduce phases the hops run against the listed paths (§4.6); allreduce
runs its two phases one after the other, so a link's utilisation is the larger of them,
or, for ForestColl's allreduce LP (``split_budgets``, App. E), both at once: their sum.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from canopy.engine.model.plan import add_path_load, path_links
from canopy.engine.model.schedule import Schedule, Tree
from canopy.engine.model.topology import Topology


@dataclass
class LinkLoad:
    """Load on one directed link: unit trees, bandwidth used and the trees using it."""

    bandwidth: Fraction
    unit_trees: int = 0
    used: Fraction = Fraction(0)
    trees: Sequence[int] = field(default_factory=list)
    """Positions in ``schedule.trees``; built as a list, read only (the editor keeps them
    as a compact :class:`array.array`)."""

    @property
    def utilisation(self) -> Fraction:
        return self.used / self.bandwidth


def _phase_loads(trees: list[Tree], y: Fraction, reverse: bool,
                 caps: dict[tuple[str, str], Fraction]) -> dict[tuple[str, str], LinkLoad]:
    units: dict[tuple[str, str], int] = {}
    users: dict[tuple[str, str], list[int]] = {}
    for pos, tree in enumerate(trees):
        for e in tree.edges:
            path = tuple(reversed(e.path)) if reverse else e.path
            add_path_load(units, path, tree.multiplicity)
            for hop in path_links(path):
                used_by = users.setdefault(hop, [])
                if not used_by or used_by[-1] != pos:
                    used_by.append(pos)
    return {hop: LinkLoad(caps[hop], count, count * y, users[hop])
            for hop, count in units.items()}


def link_loads(schedule: Schedule, topology: Topology) -> dict[tuple[str, str], LinkLoad]:
    """Per directed link of the topology, the schedule's load (links it never uses are
    included with zero load)."""
    caps = topology.capacities()
    y = schedule.tree_bandwidth
    if schedule.collective == "allgather":
        phases = [_phase_loads(schedule.trees, y, False, caps)]
    elif schedule.collective == "reduce-scatter":
        phases = [_phase_loads(schedule.trees, y, True, caps)]
    else:
        reduce_y = schedule.reduce_tree_bandwidth or y
        phases = [_phase_loads(schedule.reduce_trees or schedule.trees, reduce_y, True, caps),
                  _phase_loads(schedule.trees, y, False, caps)]
    result = {link: LinkLoad(bw) for link, bw in caps.items()}
    for phase in phases:
        for link, load in phase.items():
            if schedule.split_budgets:
                now = result[link]
                result[link] = LinkLoad(load.bandwidth, now.unit_trees + load.unit_trees,
                                        now.used + load.used, [*now.trees, *load.trees])
            elif load.used > result[link].used:
                result[link] = load
    return result
