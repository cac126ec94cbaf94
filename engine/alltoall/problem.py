"""The all-to-all problem: a topology as indexed arcs, with the forwarding rule.

All-to-all is a maximum concurrent multi-commodity flow (Basu et al. (arXiv:2309.13541),
"Max Concurrent Multi-Commodity Flow"): every ordered pair (s, t) of distinct compute nodes
is a commodity of demand λ, and λ* is the largest λ every pair can send at once within the
link bandwidths. By default every node may relay (the paper's host- and NIC-based forwarding
on direct-connect networks); ``forwarding="switches"`` lets only switch nodes relay, as in a
switched cluster whose hosts do not forward.

Parallel links are merged into one arc per direction with the bandwidths added up.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order, connected_components

from canopy.engine.model.errors import TopologyError
from canopy.engine.model.topology import Topology, find_problems

FORWARDING = ("all", "switches")


@dataclass(frozen=True)
class AllToAllProblem:
    """Node ``i`` is ``names[i]``; arc ``a`` runs ``tails[a] -> heads[a]`` with
    bandwidth ``capacity[a]`` (GB/s, exact). ``compute`` lists compute nodes in rank order;
    ``relay[i]`` says whether node ``i`` may forward other nodes' data."""

    names: tuple[str, ...]
    compute: tuple[int, ...]
    tails: np.ndarray
    heads: np.ndarray
    capacity: tuple[Fraction, ...]
    relay: np.ndarray
    forwarding: str

    @property
    def n(self) -> int:
        return len(self.names)

    @property
    def m(self) -> int:
        return len(self.capacity)

    @property
    def num_compute(self) -> int:
        return len(self.compute)

    def arc_index(self) -> dict[tuple[int, int], int]:
        return {(int(u), int(v)): a for a, (u, v) in enumerate(zip(self.tails, self.heads,
                                                                    strict=True))}

    def float_capacity(self) -> np.ndarray:
        return np.array([float(c) for c in self.capacity])


def build_problem(topo: Topology, forwarding: str = "all", where: str = "") -> AllToAllProblem:
    """Index ``topo`` for all-to-all, raising :class:`TopologyError` (one sentence) when it
    has fewer than two compute nodes, a structural fault, or a pair with no path.

    Unlike ForestColl, all-to-all does not need balanced nodes.
    """
    if forwarding not in FORWARDING:
        raise TopologyError(f"forwarding must be one of {', '.join(FORWARDING)}, "
                            f"not '{forwarding}'.")
    prefix = f"{where}: " if where else ""
    for fault in find_problems(topo):
        if "is unbalanced" not in fault.message and "cannot" not in fault.message:
            raise TopologyError(prefix + fault.message.replace("a collective", "all-to-all"))
    names = tuple(topo.node_ids())
    index = {name: i for i, name in enumerate(names)}
    caps = topo.capacities()
    arcs = sorted((index[u], index[v], c) for (u, v), c in caps.items())
    tails = np.array([a[0] for a in arcs], dtype=np.int64)
    heads = np.array([a[1] for a in arcs], dtype=np.int64)
    compute = tuple(index[c] for c in topo.compute_nodes())
    is_compute = np.zeros(len(names), dtype=bool)
    is_compute[list(compute)] = True
    relay = np.ones(len(names), dtype=bool) if forwarding == "all" else ~is_compute
    problem = AllToAllProblem(names, compute, tails, heads, tuple(a[2] for a in arcs),
                              relay, forwarding)
    _check_paths(problem, prefix)
    return problem


def _check_paths(problem: AllToAllProblem, prefix: str) -> None:
    """Every ordered pair of compute nodes needs a path whose inner nodes may relay.

    Searched in the graph where a node that may not relay sends from a copy of its own
    (index ``n + v``) that nothing enters: a search from a source's copy then passes
    only through relaying nodes. When every compute node relays, one strongly connected
    component holding them all settles it at once; otherwise (or to name the pair that
    has no path) a breadth-first search per source, in compiled code.
    """
    n = problem.n
    senders = np.where(problem.relay[problem.tails], problem.tails, n + problem.tails)
    graph = csr_matrix((np.ones(len(senders)), (senders, problem.heads)), shape=(2 * n, 2 * n))
    compute = np.array(problem.compute, dtype=np.int64)
    if problem.relay[compute].all():
        _, labels = connected_components(graph, directed=True, connection="strong")
        if len(np.unique(labels[compute])) == 1:
            return
    for s in problem.compute:
        reached = np.zeros(2 * n, dtype=bool)
        reached[breadth_first_order(graph, s if problem.relay[s] else n + s, directed=True,
                                    return_predecessors=False)] = True
        for t in problem.compute:
            if t != s and not reached[t]:
                how = " through switches" if problem.forwarding == "switches" else ""
                raise TopologyError(
                    f"{prefix}compute node '{problem.names[t]}' cannot be reached from "
                    f"'{problem.names[s]}'{how}, so all-to-all has no schedule.")
