"""A line of GPUs and the one tree that runs down it: the smallest program whose time
its longest chain of sends gives exactly (the bounds' tests start from it)."""

from fractions import Fraction

from canopy.engine.model.plan import CollectivePlan, FlowEdge, FlowTree
from canopy.engine.model.topology import Link, Node, Topology


def line(n: int) -> Topology:
    """``n`` GPUs in a line, links of 25 GB/s with latencies 1, 2, ... µs."""
    nodes = [Node(f"v{i}", "compute") for i in range(n)]
    links = [Link(f"v{i}", f"v{i + 1}", Fraction(25), latency=Fraction(i + 1))
             for i in range(n - 1)]
    return Topology("line", nodes, links)


def chain(n: int) -> CollectivePlan:
    """An allgather of one tree from v0 down the line."""
    names = [f"v{i}" for i in range(n)]
    edges = tuple(FlowEdge(a, b, (a, b)) for a, b in zip(names, names[1:], strict=False))
    return CollectivePlan("allgather", tuple(names),
                          broadcast_trees=(FlowTree("t", "v0", edges, Fraction(1)),))
