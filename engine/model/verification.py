"""Independent verification of a schedule against its topology (exact arithmetic).

Checks, in order, and stops at the first failure with one sentence naming the tree,
edge or link at fault:

1. the schedule's compute nodes are the topology's, and every root has trees whose
   multiplicities sum to k;
2. each tree is an out-arborescence from its root spanning all compute nodes, parents
   listed before children;
3. each edge's path starts at src, ends at dst, follows existing links and has only
   switches in between (for reduce phases, the reversed path must exist too);
4. per directed link, unit trees crossing it times y stay within its bandwidth;
5. the achieved algbw, N·k / max_e(load_e / b_e) (halved for allreduce), equals the
   algbw the schedule claims.
"""

from __future__ import annotations

from fractions import Fraction

from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.plan import add_path_load
from canopy.engine.model.schedule import Schedule, Tree, TreeEdge
from canopy.engine.model.topology import Topology, format_gbps


def _fail(message: str) -> None:
    raise ScheduleError(message)


def _check_path(label: str, e: TreeEdge, switches: set[str],
                caps: dict[tuple[str, str], Fraction], reverse: bool) -> list[tuple[str, str]]:
    """The directed links edge ``e`` loads, after checking its path."""
    path = e.path
    if len(path) < 2 or path[0] != e.src or path[-1] != e.dst:
        _fail(f"{label}: the path of edge {e.src} -> {e.dst} does not run from "
              f"'{e.src}' to '{e.dst}'.")
    for mid in path[1:-1]:
        if mid not in switches:
            _fail(f"{label}: the path of edge {e.src} -> {e.dst} passes through "
                  f"'{mid}', which is not a switch.")
    hops = []
    for a, b in zip(path, path[1:], strict=False):
        hop = (b, a) if reverse else (a, b)
        if hop not in caps:
            _fail(f"{label}: the path of edge {e.src} -> {e.dst} needs link "
                  f"{hop[0]} -> {hop[1]}, which is not in the topology.")
        hops.append(hop)
    return hops


def _check_tree(tree: Tree, compute: set[str], label: str) -> None:
    """Tree shape: an out-arborescence from its root over the compute nodes, parents
    first, spanning them all (paths are checked once per distinct edge)."""
    if tree.root not in compute:
        _fail(f"{label}: root is not a compute node of the topology.")
    if tree.multiplicity < 1:
        _fail(f"{label}: multiplicity {tree.multiplicity} is not positive.")
    reached = {tree.root}
    for e in tree.edges:
        if e.src not in reached:
            _fail(f"{label}: edge {e.src} -> {e.dst} leaves '{e.src}' before the tree "
                  "reaches it.")
        if e.dst in reached:
            _fail(f"{label}: '{e.dst}' is reached twice, so this is not a tree.")
        if e.dst not in compute:
            _fail(f"{label}: edge {e.src} -> {e.dst} ends at a node that is not a compute "
                  "node.")
        reached.add(e.dst)
    if len(reached) != len(compute):
        missing = compute - reached
        _fail(f"{label} does not reach {len(missing)} compute node(s), "
              f"e.g. '{sorted(missing)[0]}'.")


def _check_phase(trees: list[Tree], reverse: bool, y: Fraction, schedule: Schedule,
                 topology: Topology, caps: dict[tuple[str, str], Fraction],
                 together: dict[tuple[str, str], Fraction] | None = None) -> Fraction:
    """Check one phase's trees; return its worst load/bandwidth ratio (in unit trees).
    With ``together``, also add the phase's load (GB/s) per link to it."""
    compute_list = topology.compute_nodes()
    compute = set(compute_list)
    switches = set(topology.switch_nodes())
    totals = dict.fromkeys(compute_list, 0)
    uses: dict[TreeEdge, int] = {}
    for tree in trees:
        label = f"tree {tree.index} of root '{tree.root}'"
        _check_tree(tree, compute, label)
        totals[tree.root] += tree.multiplicity
        for e in tree.edges:
            if e in uses:
                uses[e] += tree.multiplicity
            else:
                _check_path(label, e, switches, caps, reverse)
                uses[e] = tree.multiplicity
    for root, total in totals.items():
        if total != schedule.k:
            _fail(f"root '{root}' has {total} unit trees, but k = {schedule.k}.")
    loads: dict[tuple[str, str], int] = {}
    for e, count in uses.items():
        add_path_load(loads, tuple(reversed(e.path)) if reverse else e.path, count)
    worst = Fraction(0)
    for link, load in sorted(loads.items()):
        if load * y > caps[link]:
            _fail(f"link {link[0]} -> {link[1]} carries {load} unit trees at "
                  f"{format_gbps(y)} GB/s each, more than its "
                  f"{format_gbps(caps[link])} GB/s.")
        worst = max(worst, Fraction(load) / caps[link])
        if together is not None:
            together[link] = together.get(link, Fraction(0)) + load * y
    return worst


def verify(topology: Topology, schedule: Schedule) -> Fraction:
    """Check a schedule independently of how it was built; return the algbw it achieves.

    Allgather runs ``trees`` forward; reduce-scatter runs the reduce trees (``reduce_trees``
    or else ``trees``) against their arrows; allreduce runs reduce-scatter then allgather,
    so its time is the sum of both phases', or, with ``split_budgets`` (ForestColl,
    arXiv:2402.06787, App. E), both at once, so their loads add up on every link.

    Parameters
    ----------
    topology : Topology
        The physical network the schedule claims to run on.
    schedule : Schedule
        Trees with physical routes, k, tree bandwidth y and the claimed algbw.

    Returns
    -------
    Fraction
        The achieved algbw in GB/s, equal to ``schedule.algbw``.

    Raises
    ------
    ScheduleError
        With one sentence naming the first fault: a tree that does not span, an edge
        before its parent, a route that is not a path of links or that passes a compute
        node, a link loaded past its bandwidth, a root without k trees, or a false claim.

    Examples
    --------
    >>> from canopy.engine import load_sample, solve
    >>> topo = load_sample("forestcoll-fig2.json")
    >>> verify(topo, solve(topo)) > 0
    True
    """
    compute_list = topology.compute_nodes()
    if sorted(schedule.compute_nodes) != sorted(compute_list):
        _fail("the schedule's compute nodes differ from the topology's.")
    if schedule.k < 1 or schedule.tree_bandwidth <= 0:
        _fail("the schedule's k and tree bandwidth must be positive.")
    caps = topology.capacities()
    y = schedule.tree_bandwidth
    reduce = (schedule.reduce_trees or schedule.trees, True,
              schedule.reduce_tree_bandwidth or y)
    phases = {"allgather": [(schedule.trees, False, y)],
              "reduce-scatter": [(schedule.trees, True, y)],
              "allreduce": [reduce, (schedule.trees, False, y)]}[schedule.collective]
    n = len(compute_list)
    if schedule.split_budgets:
        # App. E: both phases at once, so their loads add up on every link.
        if schedule.collective != "allreduce" or schedule.reduce_tree_bandwidth not in (None, y):
            _fail("only an allreduce with one tree bandwidth can split link budgets.")
        total: dict[tuple[str, str], Fraction] = {}
        for trees, reverse, y_phase in phases:
            _check_phase(trees, reverse, y_phase, schedule, topology, caps, total)
        for link, load in sorted(total.items()):
            if load > caps[link]:
                _fail(f"link {link[0]} -> {link[1]} carries {format_gbps(load)} GB/s of "
                      f"reduction and broadcast at once, more than its "
                      f"{format_gbps(caps[link])} GB/s.")
        achieved = n * schedule.k * y   # every unit tree gets its y on every link
    else:
        time_per_shard = sum((_check_phase(trees, reverse, y_phase, schedule, topology, caps)
                              for trees, reverse, y_phase in phases), Fraction(0))
        achieved = n * schedule.k / time_per_shard
    if achieved != schedule.algbw:
        _fail(f"the schedule claims algbw {format_gbps(schedule.algbw)} GB/s but achieves "
              f"{format_gbps(achieved)} GB/s.")
    claimed = schedule.extra.get("claimed_algbw")
    if claimed is not None and abs(float(Fraction(str(claimed))) - float(achieved)) > \
            1e-6 * float(achieved):
        _fail(f"the file claims algbw {claimed} GB/s but the schedule achieves "
              f"{format_gbps(achieved)} GB/s.")
    return achieved
