"""Contention-free logical rings on tree networks (Faraj, Patarasuk and Yuan, "Bandwidth Efficient
All-to-All Broadcast on Switched Clusters" (IEEE Cluster 2005) §4).

The model of the paper (§3): the network is a tree of switches, machines (compute
nodes) are leaves hanging off one switch each, and links are duplex. A logical ring is
contention free when no directed link carries two of its hops; then allgather runs at
the rate of one link, the absolute lower bound (§1), which on equal bandwidths is also
ForestColl's optimum. On store-and-forward switches the longest hop, counted in
switches crossed ("path length", §3), adds to the time, so shorter is better.

* **LR1** (§4.1, Algorithm 1, Theorem 1): number the switches in depth-first order and
  list each switch's machines in that order. Contention free, but long hops.
* **LR3** (§4.2.2, Algorithm 3, Lemma 2): a ring is contention free iff every subtree's
  machines are consecutive; a dynamic program over the tree keeps, for each subtree
  and each pair (height of the first machine, height of the last), the best logical
  array. The ring closing over the root costs i + j - 1. LR3's longest hop is optimal.

The paper enumerates the orders of each switch's subtrees (O(n^k)); we run the same
concatenation recurrence over multisets of interchangeable subtrees (subtrees with
equal tables), which visits each distinct order of distinct tables once.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from canopy.engine.execution.simulate import plan_bound
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.plan import (
    BaselineResult,
    Edge,
    Path,
    path_links,
    ring_plan,
)
from canopy.engine.model.topology import Topology
from canopy.engine.network.routing import Router

INF = 10**9
MAX_STATES = 200_000      # LR3 states per switch before we give up (exponential case)

Table = dict[tuple[int, int], int]


@dataclass(frozen=True)
class SwitchTree:
    """A tree network as the paper models it: switches, machines hanging off them."""

    root: str
    children: dict[str, list[str]]      # switch -> child switches, in file order
    machines: dict[str, list[str]]      # switch -> attached compute nodes, in file order


def switch_tree(topology: Topology) -> SwitchTree:
    """The tree model of ``topology``, or ScheduleError saying why it does not fit (most
    networks have a cycle, found without networkx, whose import would cost a comparison
    more than the rest of this row)."""
    neighbours: dict[str, dict[str, None]] = {n: {} for n in topology.node_ids()}
    for link in topology.links:
        if not link.duplex:
            raise ScheduleError(f"link {link.describe()} is one-way; contention-free rings "
                                "need duplex links.")
        neighbours[link.source][link.target] = None
        neighbours[link.target][link.source] = None
    cycle = _first_cycle(neighbours)
    if cycle is not None:
        through = ", ".join(cycle[:6]) + (", …" if len(cycle) > 6 else "")
        raise ScheduleError(f"the network is not a tree (it has a cycle through {through}), "
                            "so contention-free logical rings do not apply.")
    import networkx as nx  # here, not at the top: the comparison's start-up stays lean

    compute_order = topology.compute_nodes()
    compute = set(compute_order)
    order = {n: i for i, n in enumerate(topology.node_ids())}
    graph = nx.Graph()
    graph.add_nodes_from(topology.node_ids())
    for link in topology.links:
        graph.add_edge(link.source, link.target)
    graph.remove_nodes_from([n for n in topology.switch_nodes() if graph.degree(n) == 0])
    if not nx.is_connected(graph):
        raise ScheduleError("the network is not connected, so no ring exists.")
    for c in compute_order:
        nbrs = list(graph.neighbors(c))
        if len(nbrs) != 1 or nbrs[0] in compute:
            raise ScheduleError(f"compute node '{c}' is not a leaf hanging off one switch "
                                "(the 1-port model of contention-free rings).")
    # Switches with no machine below them carry nothing: prune leaf switches.
    leaves = [n for n in graph if n not in compute and graph.degree(n) <= 1]
    while leaves:
        graph.remove_nodes_from(leaves)
        leaves = [n for n in graph if n not in compute and graph.degree(n) <= 1]
    root = min((n for n in graph if n not in compute), key=order.__getitem__)
    children: dict[str, list[str]] = {}
    machines: dict[str, list[str]] = {}
    for parent, child in nx.dfs_edges(graph, root):
        children.setdefault(child, [])
        machines.setdefault(child, [])
        children.setdefault(parent, [])
        machines.setdefault(parent, [])
        (machines if child in compute else children)[parent].append(child)
    for lists in (children, machines):
        for v in lists.values():
            v.sort(key=order.__getitem__)
    for c in compute:
        children.pop(c, None)
        machines.pop(c, None)
    return SwitchTree(root, children, machines)


def _first_cycle(neighbours: dict[str, dict[str, None]]) -> list[str] | None:
    """The nodes of the first cycle a depth-first search meets, nodes and their neighbours
    taken in the order given (the cycle networkx's ``find_cycle`` names on every sample),
    or None where the undirected graph is a forest. The search does not go back over the
    link it came by; a node met again on the current path closes the cycle."""
    seen: set[str] = set()
    for start in neighbours:
        if start in seen:
            continue
        seen.add(start)
        path, on_path = [start], {start: 0}
        walks = [iter(neighbours[start])]
        while walks:
            v = next(walks[-1], None)
            if v is None:
                walks.pop()
                del on_path[path.pop()]
                continue
            if len(path) > 1 and v == path[-2]:
                continue                       # the link it came by
            if v in on_path:
                return path[on_path[v]:]
            if v in seen:
                continue
            seen.add(v)
            on_path[v] = len(path)
            path.append(v)
            walks.append(iter(neighbours[v]))
    return None


def lr1_order(tree: SwitchTree) -> list[str]:
    """Algorithm 1: machines grouped by switch, switches in depth-first order."""
    ring: list[str] = []

    def visit(s: str) -> None:
        ring.extend(tree.machines[s])
        for c in tree.children[s]:
            visit(c)

    visit(tree.root)
    return ring


# ------------------------------------------------------------------ LR3 (Algorithm 3)


@dataclass
class _Arrays:
    """A subtree's optimal logical arrays: best max path length per (first, last) height
    and how to rebuild each (the sequence of (child kind, child key) it concatenates)."""

    table: Table
    recipe: dict[tuple[int, int], list[tuple[int, tuple[int, int]]]]
    kinds: list[list[str]]        # for a switch: its children grouped by kind


def _concat(left: Table, right: Table) -> dict[tuple[int, int], tuple[int, int, int]]:
    """seq.optimal[i][j] = min_{k,l} max(left[i][k], right[l][j], k+l+1): value, k, l."""
    out: dict[tuple[int, int], tuple[int, int, int]] = {}
    for (i, k), a in left.items():
        for (m, j), b in right.items():
            value = max(a, b, k + m + 1)
            if (i, j) not in out or value < out[(i, j)][0]:
                out[(i, j)] = (value, k, m)
    return out


def _solve_switch(child_tables: list[tuple[str, Table]], where: str) -> _Arrays:
    """The best arrays of a switch from its children's tables (heights in child frames)."""
    kinds: list[list[str]] = []
    kind_tables: list[Table] = []
    for name, child_table in child_tables:
        for index, known in enumerate(kind_tables):
            if known == child_table:
                kinds[index].append(name)
                break
        else:
            kinds.append([name])
            kind_tables.append(child_table)
    counts = tuple(len(k) for k in kinds)
    states = 1
    for c in counts:
        states *= c + 1
    if states > MAX_STATES:
        raise ScheduleError(f"switch '{where}' has too many distinct subtrees for LR3's "
                            "dynamic program (it is exponential in them).")
    # best[state][(i, j)] = (value, previous state, kind appended, k, l)
    best: dict[tuple[int, ...], dict[tuple[int, int], tuple]] = {}
    zero = tuple(0 for _ in counts)
    for t, kind_table in enumerate(kind_tables):
        state = tuple(1 if x == t else 0 for x in range(len(counts)))
        best[state] = {key: (v, zero, t, None, key) for key, v in kind_table.items()}
    for total in range(1, sum(counts)):
        for state in [s for s in best if sum(s) == total]:
            current = {key: entry[0] for key, entry in best[state].items()}
            for t, kind_table in enumerate(kind_tables):
                if state[t] == counts[t]:
                    continue
                nxt = tuple(c + (1 if x == t else 0) for x, c in enumerate(state))
                slot = best.setdefault(nxt, {})
                for (i, j), (value, k, m) in _concat(current, kind_table).items():
                    if (i, j) not in slot or value < slot[(i, j)][0]:
                        slot[(i, j)] = (value, state, t, k, (m, j))
    full = best[counts]
    table: Table = {}
    recipe: dict[tuple[int, int], list[tuple[int, tuple[int, int]]]] = {}
    for (i, j), (value, *_rest) in full.items():
        key = (i + 1, j + 1)
        table[key] = value
        # Walk back: the appended kinds and the keys their arrays must have.
        steps: list[tuple[int, tuple[int, int]]] = []
        state, want = counts, (i, j)
        while state != zero:
            _, prev, kind, k, child_key = best[state][want]
            steps.append((kind, child_key))
            if k is None:
                break
            want = (want[0], k)
            state = prev
        recipe[key] = list(reversed(steps))
    return _Arrays(table, recipe, kinds)


def lr3_order(tree: SwitchTree) -> tuple[list[str], int]:
    """Algorithm 3: an optimal contention-free ring and its longest hop (switches)."""
    arrays: dict[str, _Arrays] = {}

    def solve(s: str) -> Table:
        tables = [(m, {(0, 0): 0}) for m in tree.machines[s]]
        tables += [(c, solve(c)) for c in tree.children[s]]
        arrays[s] = _solve_switch(tables, s)
        return arrays[s].table

    root_table = solve(tree.root)
    value, key = min((max(v, i + j - 1), (i, j)) for (i, j), v in root_table.items())

    def build(s: str, key: tuple[int, int]) -> list[str]:
        if s not in arrays:
            return [s]                       # a machine
        a = arrays[s]
        pools = [list(names) for names in a.kinds]
        out: list[str] = []
        for kind, child_key in a.recipe[key]:
            out += build(pools[kind].pop(0), child_key)
        return out

    return build(tree.root, key), value


# ------------------------------------------------------------------ rings as baselines


def hop_length(path: Path, compute: set[str]) -> int:
    """Path length in the paper's sense: the number of switches a message crosses."""
    return sum(1 for node in path[1:-1] if node not in compute)


def ring_hops(order: list[str], router: Router) -> dict[Edge, Path]:
    """Each hop of the ring routed along the tree (its unique path)."""
    hops = {}
    for a, b in zip(order, order[1:] + order[:1], strict=True):
        paths = router.paths(a, b)
        if not paths:
            raise ScheduleError(f"no route from '{a}' to '{b}'.")
        hops[(a, b)] = paths[0]
    return hops


def is_contention_free(hops: dict[Edge, Path]) -> bool:
    used = [e for path in hops.values() for e in path_links(path)]
    return len(used) == len(set(used))


def lr_baseline(topology: Topology, collective: str = "allgather", variant: str = "lr3"
                ) -> BaselineResult:
    """LR1 or LR3 on a tree network: the ring, its longest hop and its algbw."""
    try:
        tree = switch_tree(topology)
        order = lr1_order(tree) if variant == "lr1" else lr3_order(tree)[0]
    except ScheduleError as exc:
        return BaselineResult.not_applicable(variant, collective, str(exc))
    router = Router(topology)
    hops = ring_hops(order, router)
    compute = set(topology.compute_nodes())
    plan = ring_plan(collective, topology.compute_nodes(), [(order, hops)])
    algbw, link = plan_bound(topology, plan)   # remembered: its row asks again
    longest = max(hop_length(p, compute) for p in hops.values())
    return BaselineResult(
        variant, collective, algbw, schedule=[order],
        details={"hops": longest, "contention_free": is_contention_free(hops),
                 "bottleneck_link": list(link)},
        plan_at=lambda size: plan)


def brute_force_hops(topology: Topology) -> int | None:
    """Smallest longest hop over all contention-free rings (tests, small trees only)."""
    compute = topology.compute_nodes()
    router = Router(topology)
    cset = set(compute)
    best: int | None = None
    first, rest = compute[0], compute[1:]
    for perm in itertools.permutations(rest):
        hops = ring_hops([first, *perm], router)
        if is_contention_free(hops):
            longest = max(hop_length(p, cset) for p in hops.values())
            best = longest if best is None else min(best, longest)
    return best

