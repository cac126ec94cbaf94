"""Schedules: spanning out-trees over the compute nodes, routed through the switches.

A :class:`Schedule` is what ``canopy solve`` returns (canopy-schedule v1, docs/formats.md).
Each :class:`Tree` of multiplicity ``m`` stands for ``m`` identical unit trees; every
unit tree carries 1/k of its root's shard at the tree bandwidth ``y`` (ForestColl (arXiv:2402.06787)
§3.2, App. C.3). For reduce-scatter the same out-trees are listed and data runs against
the arrows; allreduce is reduce-scatter followed by allgather (§4.6). On topologies with
one-way links the reduce phase needs out-trees of the transposed network instead; they
are kept in ``reduce_trees`` (data again runs against their arrows). An allreduce with
``split_budgets`` (ForestColl's allreduce LP, App. E) runs both phases at once, each
within its own share of every link (:mod:`canopy.engine.allreduce.lp_schedule`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from canopy.engine.model.collectives import collective_algbw


@dataclass(frozen=True)
class TreeEdge:
    """A logical compute-to-compute edge and its physical route (switches in between)."""

    src: str
    dst: str
    path: tuple[str, ...]


@dataclass(frozen=True)
class Tree:
    """``multiplicity`` identical unit out-trees rooted at ``root`` (parents first)."""

    root: str
    index: int
    multiplicity: int
    edges: tuple[TreeEdge, ...]

    def depth(self) -> dict[str, int]:
        """Depth of every compute node in the tree (root 0)."""
        d = {self.root: 0}
        for e in self.edges:
            d[e.dst] = d[e.src] + 1
        return d

    @property
    def height(self) -> int:
        return max(self.depth().values())

    def children(self) -> dict[str, list[TreeEdge]]:
        out: dict[str, list[TreeEdge]] = {}
        for e in self.edges:
            out.setdefault(e.src, []).append(e)
        return out


@dataclass(frozen=True)
class OptimumSummary:
    """The optimum of the topology the schedule was built for (for display and JSON)."""

    inverse_x: Fraction
    bottleneck_cut: tuple[str, ...]
    cut_bandwidth: Fraction
    k: int
    tree_bandwidth: Fraction

    @property
    def x(self) -> Fraction:
        return 1 / self.inverse_x


@dataclass
class Schedule:
    """A verified forest: k unit trees per compute node at tree bandwidth y."""

    collective: str
    compute_nodes: list[str]
    k: int
    tree_bandwidth: Fraction
    trees: list[Tree]
    optimum: OptimumSummary
    fixed_k: bool = False
    reduce_trees: list[Tree] | None = None  # only when the reduce phase needs other trees
    reduce_tree_bandwidth: Fraction | None = None  # y of reduce_trees, when they have one
    timings: dict[str, float] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    split_budgets: bool = False  # allreduce phases at once on split link budgets (App. E)

    @property
    def x(self) -> Fraction:
        """Per-node broadcast rate of this schedule: k·y."""
        return self.k * self.tree_bandwidth

    @property
    def algbw(self) -> Fraction:
        n = len(self.compute_nodes)
        if self.collective == "allreduce" and self.split_budgets:
            # Both phases pipelined at once, each moving k unit trees per node at y.
            return n * self.x
        if self.collective == "allreduce" and self.reduce_tree_bandwidth is not None:
            # Reduce-scatter then allgather, each moving k/N of the data per node.
            return n * self.k / (1 / self.reduce_tree_bandwidth + 1 / self.tree_bandwidth)
        return collective_algbw(self.collective, n, self.x)

    @property
    def optimal_algbw(self) -> Fraction:
        if self.split_budgets:
            # LP (6)'s optimum, which the schedule reaches (checked within HiGHS' tolerance
            # by canopy.engine.allreduce.lp_schedule.lp_schedule).
            return self.algbw
        return collective_algbw(self.collective, len(self.compute_nodes), self.optimum.x)

    def trees_of(self, root: str) -> list[Tree]:
        return [t for t in self.trees if t.root == root]
