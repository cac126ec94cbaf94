"""Facts of a plan's trees (a template's frame, link loads, stages, rotation images) are
worked out once for every connection layout of the same trees, and never shared with a
plan whose trees differ: each layout's template equals the one built from nothing."""

from dataclasses import replace
from fractions import Fraction

import numpy as np

from canopy.engine.execution import compiler
from canopy.engine.execution.compiler import plan_template, tree_memo
from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.memo import RecentMemo
from canopy.engine.model.plan import schedule_plan
from canopy.engine.msccl.connections import iter_layouts
from canopy.engine.msccl.threadblocks import MscclLimits


def _fresh(monkeypatch):
    """Nothing remembered: per plan or per trees."""
    monkeypatch.setattr(compiler, "_FACTS", RecentMemo(16))
    monkeypatch.setattr(compiler, "_BY_SHAPE", {})
    monkeypatch.setattr(compiler, "_SHAPES", {})


def _same(a, b):
    assert [(c.route, c.weight) for c in a.connections] == \
        [(c.route, c.weight) for c in b.connections]
    for name in ("conn", "tree", "hop", "hops", "src", "dst", "edge"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert a.shares == b.shares and a.ordered == b.ordered


def test_every_layout_gets_the_template_built_from_nothing(monkeypatch):
    topo = load_sample("dgx-a100-2x8.json")
    plan = schedule_plan(solve(topo, "allreduce"))
    switches = frozenset(topo.switch_nodes())
    found = list(iter_layouts(plan, MscclLimits(), topo))
    assert len(found) > 2 and any(laid.paired for _, laid in found)
    _fresh(monkeypatch)
    shared = [plan_template(laid, switches, "cut-through") for _, laid in found]
    assert len(compiler._BY_SHAPE) < len(found)      # some layouts shared a frame
    for (_, laid), template in zip(found, shared, strict=True):
        _fresh(monkeypatch)
        _same(template, plan_template(laid, switches, "cut-through"))


def test_trees_that_differ_share_nothing(monkeypatch):
    topo = load_sample("dgx-a100-2x8.json")
    plan = schedule_plan(solve(topo, "allgather"))
    first = plan.broadcast_trees[0]
    edge = first.edges[-1]
    # the same trees but for one edge's priority: its order in the iteration may change
    other = replace(plan, broadcast_trees=(
        replace(first, edges=(*first.edges[:-1], replace(edge, priority=Fraction(-1)))),
        *plan.broadcast_trees[1:]))
    _fresh(monkeypatch)
    calls = []
    for p in (plan, replace(plan), other):
        tree_memo(p, ("probe",), lambda p=p: calls.append(p) or len(calls))
    assert len(calls) == 2 and calls[1] is other


def test_a_timetable_keeps_its_facts_to_itself(monkeypatch):
    # two equal timetables (TACOS makes one per size): each computes its facts, no shape
    topo = load_sample("dgx-a100-2x8.json")
    plan = replace(schedule_plan(solve(topo, "allgather")), ordered_links=True)
    _fresh(monkeypatch)
    calls = []
    for p in (plan, replace(plan)):
        tree_memo(p, ("probe",), lambda p=p: calls.append(p) or len(calls))
        assert tree_memo(p, ("probe",), lambda: 0) == len(calls)
    assert len(calls) == 2 and not compiler._SHAPES and not compiler._BY_SHAPE
