"""A plan's iteration template, built with NumPy over all tree edges at once, is the one
the rules give edge by edge: connections numbered as first used, slots in the order
(phase, step, priority, tree, edge), the same dependencies in the same order, the same
pipeline stages; and the program unrolled from it is the one its slots and dependencies
say, piece by piece."""

from fractions import Fraction
from functools import cache

import numpy as np
import pytest

from canopy.engine.baselines.blink import blink_baseline
from canopy.engine.baselines.ring import ring_baseline
from canopy.engine.baselines.tacos import tacos_baseline
from canopy.engine.execution import compiler
from canopy.engine.execution.compiler import (
    _hops,
    _reduction_chains,
    allreduce_parts,
    expand_template,
    pipeline_stages,
    plan_template,
)
from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.memo import RecentMemo
from canopy.engine.model.plan import schedule_plan, tree_levels
from canopy.engine.msccl.connections import iter_layouts
from canopy.engine.msccl.threadblocks import MscclLimits


def _reference(plan, switches, mode):
    """(connections, conn, src, dst) of ``plan``'s template, edge by edge."""
    reducing, broadcasting = allreduce_parts(plan)
    trees = [*reducing, *broadcasting]
    smallest = min(t.share for t in trees)
    edges = [(i, t, e) for i, t in enumerate(trees) for e in t.edges]
    levels = [level for t in trees for level in tree_levels(t)]
    connections, ids, edge_conns = [], {}, []
    for _, t, e in edges:
        edge_conns.append([])
        for hop in _hops(e.path, switches, mode):
            if e.channel is None and not plan.ordered_links:
                connections.append((hop, t.share / smallest))
                edge_conns[-1].append(len(connections) - 1)
                continue
            if (e.channel, hop) not in ids:
                ids[(e.channel, hop)] = len(connections)
                connections.append((hop, Fraction(1)))
            edge_conns[-1].append(ids[(e.channel, hop)])
    deps, done, base = [], {}, 0               # (y, x): x's first hop after y's last
    for t in trees:
        mine = range(base, base + len(t.edges))
        for x in mine:
            e = edges[x][2]
            if t.reduce:
                deps += [(y, x) for y in mine if edges[y][2].parent == e.child]
                if e.parent == t.root:
                    done.setdefault(t.key, []).append(x)
            elif e.parent != t.root:
                deps += [(y, x) for y in mine if edges[y][2].child == e.parent]
        base += len(t.edges)
    deps += [(y, x) for x, (_, t, e) in enumerate(edges)
             if not t.reduce and e.parent == t.root for y in done.get(t.key, [])]
    order = sorted(range(len(edges)), key=lambda x: (
        int(edges[x][0] >= len(reducing)), *([] if plan.ordered_links else [levels[x]]),
        edges[x][2].priority, edges[x][0], x))
    slots, conn = {}, []
    for x in order:
        slots[x] = list(range(len(conn), len(conn) + len(edge_conns[x])))
        conn += edge_conns[x]
    src = [s for x in order for s in slots[x][:-1]]
    dst = [s + 1 for s in src]
    rank = {v: k for k, v in enumerate(plan.compute_nodes)}
    receives, before, base = {}, {}, 0
    for t in trees:
        for x, e in enumerate(t.edges, base):
            ends = (e.child, e.parent) if t.reduce else (e.parent, e.child)
            if e.channel is not None:
                receives.setdefault((*ends, e.channel), []).append(x)
        if t.reduce:
            before.update(_reduction_chains(t, rank, base))
        base += len(t.edges)
    for p, v, w, c in plan.paired:
        received, sent = receives.get((p, v, c)), receives.get((v, w, c))
        if received and sent:
            last = max(received, key=order.index)
            earlier = sorted({x for y in received for x in before.get(y, [])})
            deps += [(y, x) for y in [last, *earlier] for x in sent]
    src += [slots[y][-1] for y, _ in deps]
    dst += [slots[x][0] for _, x in deps]
    return connections, conn, src, dst


@cache
def _reference_stages(plan, switches, mode):
    """Per phase the most hops from a root down a tree, summed, walked tree by tree."""
    total = 0
    for phase in (plan.reduce_trees, plan.broadcast_trees):
        deepest = 0
        for t in phase:
            depth = {t.root: 0}
            for e in t.edges:
                depth[e.child] = depth[e.parent] + len(_hops(e.path, switches, mode))
            deepest = max(deepest, *depth.values())
        total += deepest
    return total


def _plans():
    topo = load_sample("dgx-a100-2x8.json")
    plan = schedule_plan(solve(topo, "allreduce"))
    laid = [p for _, p in iter_layouts(plan, MscclLimits(), topo)]
    assert any(p.paired for p in laid)
    size = Fraction(1 << 24)
    return topo, [plan, *laid, ring_baseline(topo, "allreduce").plan_at(size),
                  blink_baseline(topo, "allgather").plan_at(size),
                  tacos_baseline(topo, "allreduce").plan_at(size)]


@pytest.mark.parametrize("mode", ["cut-through", "store-and-forward"])
def test_the_template_is_the_one_built_edge_by_edge(monkeypatch, mode):
    topo, plans = _plans()
    switches = frozenset(topo.switch_nodes())
    assert any(p.ordered_links for p in plans)
    for plan in plans:
        monkeypatch.setattr(compiler, "_FACTS", RecentMemo(16))
        template = plan_template(plan, switches, mode)
        connections, conn, src, dst = _reference(plan, switches, mode)
        assert [(c.route, c.weight) for c in template.connections] == connections
        assert template.conn.tolist() == conn
        assert template.src.tolist() == src and template.dst.tolist() == dst
        assert pipeline_stages(topo, plan, mode) == _reference_stages(plan, switches, mode)


def test_the_unrolled_program_is_every_piece_of_the_template():
    topo, plans = _plans()
    switches = frozenset(topo.switch_nodes())
    for plan in (plans[0], plans[-1]):                 # by piece; a timetable by edge
        template = plan_template(plan, switches, "cut-through")
        pieces, width = 3, len(template.conn)
        flat = expand_template(template, Fraction(3 << 20), pieces)
        hop, hops = template.hop.tolist(), template.hops.tolist()
        where = {}                                     # (piece, slot) -> its send
        for p in range(pieces):
            for s in range(width):
                where[(p, s)] = (s - hop[s]) * pieces + p * hops[s] + hop[s] \
                    if template.ordered else p * width + s
        pairs = sorted(zip(template.src.tolist(), template.dst.tolist(), strict=True))
        waits = {}
        for p in range(pieces):
            for a, b in pairs:
                waits.setdefault(where[(p, a)], []).append(where[(p, b)])
        assert sorted(where.values()) == list(range(pieces * width))
        for (p, s), send in where.items():
            assert flat.conn[send] == template.conn[s] and flat.iteration[send] == p
            share = template.shares[template.tree[s]]
            assert flat.amounts[flat.amount_of[send]] == share * Fraction(3 << 20) / pieces
        ptr, idx = flat.dep_ptr.tolist(), flat.dep_idx.tolist()
        assert all(idx[ptr[s]:ptr[s + 1]] == waits.get(s, []) for s in range(pieces * width))
        assert np.array_equal(flat.pending, np.bincount(flat.dep_idx, minlength=len(flat.conn)))
