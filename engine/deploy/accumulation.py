"""The order in which every node of a reduce tree adds its children's data: as they arrive.

**Why.** MSCCL and MSCCL++ run each thread block's steps in order, and the export chains a
node's reductions into one slot, each after the one before it
(:mod:`canopy.engine.msccl.lowering`): two thread blocks must not add into one buffer at
once. A reducing receive whose data has arrived but whose predecessor in that chain waits
for a later child holds back the receives behind it in its thread block. On a connection
that carries several trees (the shared layouts of :mod:`canopy.engine.msccl.connections`)
those are other trees' receives, which the plan's simulation
(:mod:`canopy.engine.execution.simulate`, what ``canopy compare`` times) lets go on as
soon as their data arrives: there a node's send waits for all its children's data,
in any order.

**How.** The laid-out plan is simulated at the depth the runtime choice ran it and every
reduce tree edge gets the sum, over the loop iterations, of the times its data reaches the
parent. Each node then adds its children's data in that order
(:attr:`canopy.engine.model.plan.FlowTree.accumulation`, the rank of the sum among the
tree's edges): a reduction then rarely waits for its predecessor, and a node's send still
waits for all of its data, as in the simulation. One order serves every iteration, and an
iteration whose data arrives in another order waits (short pipelines, far from their
steady state, do), so the order is kept only where the MSCCL program
(:mod:`canopy.engine.msccl.timing`, at the first depth
:func:`~canopy.engine.execution.simulate.fastest` tries, PIECES_PER_STAGE times the
pipeline's stages, or the choice's if smaller) runs as fast as the plan, or faster than
adding shallow first. Plans whose thread blocks pair connections (``paired``) keep their
order: the simulation models their chains
(:func:`canopy.engine.execution.compiler.plan_program`). The MSCCL export keeps the order
only where the program's waits form no cycle (:mod:`canopy.engine.msccl.writer`,
:mod:`canopy.engine.msccl.waits`).
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np

from canopy.engine.execution.compiler import (
    allreduce_parts,
    expand_template,
    pipeline_stages,
    plan_memo,
    plan_template,
)
from canopy.engine.execution.extrapolation import PIECES_PER_STAGE
from canopy.engine.execution.kernel import run_flat
from canopy.engine.execution.program import CUT_THROUGH, DEFAULT_LATENCY_US
from canopy.engine.execution.simulate import simulate
from canopy.engine.model.plan import CollectivePlan, FlowTree
from canopy.engine.model.topology import Topology
from canopy.engine.msccl.options import MscclOptions
from canopy.engine.msccl.threadblocks import MscclLimits
from canopy.engine.msccl.timing import time_xml
from canopy.engine.msccl.writer import plan_algo


def arranges(plan: CollectivePlan) -> bool:
    """Whether :func:`accumulating` may give ``plan`` an order: reduce trees on shared
    connections (edges naming channels), no paired thread blocks, not a timetable."""
    shared = any(isinstance(e.channel, int) for t in plan.reduce_trees for e in t.edges)
    return shared and not plan.paired and not plan.ordered_links


def accumulating(topology: Topology, plan: CollectivePlan, size: Fraction | int, pieces: int,
                 chunks: int, limits: MscclLimits) -> CollectivePlan:
    """``plan`` with every reduce tree's ``accumulation``: the order in which its
    simulation on ``topology`` at ``size`` bytes in ``pieces`` loop iterations delivers
    each node's children's data, where the MSCCL program (``chunks`` per root, within
    ``limits``) then runs as fast as the plan or faster than without it (see the module
    docstring); else ``plan`` itself, as where :func:`arranges` says no."""
    if not arranges(plan):
        return plan
    arrived = _arrivals(topology, plan, Fraction(size), pieces)
    trees: list[FlowTree] = []
    base = 0
    for tree in plan.reduce_trees:
        sums = arrived[base:base + len(tree.edges)]
        base += len(tree.edges)
        place = {value: i for i, value in enumerate(sorted(set(sums)))}
        trees.append(replace(tree, accumulation=tuple(place[value] for value in sums)))
    ordered = replace(plan, reduce_trees=tuple(trees))
    depth = min(pieces, PIECES_PER_STAGE * pipeline_stages(topology, plan))
    options = MscclOptions(inplace=True, limits=limits, layout="auto")

    def program_us(laid: CollectivePlan) -> Fraction:
        return time_xml(plan_algo(laid, chunks, options), topology, size, depth).time_us

    arranged = program_us(ordered)
    if arranged <= simulate(topology, plan, size, depth).time_us or \
            arranged < program_us(plan):
        return ordered
    return plan


def _arrivals(topology: Topology, plan: CollectivePlan, size: Fraction, pieces: int
              ) -> list[float]:
    """Per edge of ``plan``'s reduce trees (in order), the sum over the simulated loop
    iterations of the times its data reaches its parent (µs)."""
    switches = frozenset(topology.switch_nodes())
    template = plan_memo(plan, ("template", switches, CUT_THROUGH),
                         lambda: plan_template(plan, switches, CUT_THROUGH))
    flat = expand_template(template, size, pieces)
    times: list[Fraction | float] = []
    run_flat(topology, flat, DEFAULT_LATENCY_US, False, None, times)
    width = len(template.conn)
    # sends in the order (piece, slot); a slot's tree edge is delivered by its last hop
    last = np.nonzero(template.hop == template.hops - 1)[0]
    per_slot = np.asarray(times, dtype=np.float64).reshape(pieces, width)[:, last].sum(axis=0)
    per_edge = np.zeros(len(per_slot))
    per_edge[template.edge[last]] = per_slot
    # the template cuts allreduce's reduce trees into parts, each tree's in order, its
    # trees' edges numbered from 0 on (reduce trees first)
    parts = iter(allreduce_parts(plan)[0])
    out: list[float] = []
    base = 0
    for tree in plan.reduce_trees:
        sums = np.zeros(len(tree.edges))
        covered = Fraction(0)
        while covered < tree.share:
            part = next(parts)
            sums += per_edge[base:base + len(part.edges)]
            base += len(part.edges)
            covered += part.share
        out.extend(sums.tolist())
    return out
