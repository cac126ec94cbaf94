"""The longest chain of sends: a lower bound on a loop's time, equal to it where no link
is shared, and a deep run it rules out is not built."""

from fractions import Fraction

import pytest

from canopy.engine.baselines.ring import ring_baseline
from canopy.engine.execution import simulate as sim
from canopy.engine.execution.compiler import IterationTemplate, expand_template
from canopy.engine.execution.critical_path import chains
from canopy.engine.execution.kernel import link_network
from canopy.engine.execution.program import DEFAULT_LATENCY_US, Connection
from canopy.engine.execution.simulate import fastest, simulate
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.plan import CollectivePlan
from canopy.engine.model.topology import Topology
from tests.engine.execution.chain_plans import chain, line


def bound(topology: Topology, plan: CollectivePlan, size: int, pieces: int,
          beyond: float | None = None) -> float:
    template = sim._running(topology, plan, "cut-through", False)[0]
    network = link_network(topology, template.connections, DEFAULT_LATENCY_US, False)
    return sim._chain_bound(plan, template, network, Fraction(size), pieces, beyond)


@pytest.mark.parametrize("pieces", [1, 2, 3, 7])
def test_a_chain_on_links_of_its_own_ends_at_its_bound(pieces):
    """A chain over a line has one connection per link, so nothing is shared: every send
    streams at its link's capacity and the run is its longest chain, α included (each
    link its own latency)."""
    topo, plan = line(4), chain(4)
    whole = simulate(topo, plan, 3 << 20, pieces, exact=True, symmetry=False).time_us
    assert float(whole) * (1 - 2 * sim.BOUND_SLACK) <= bound(topo, plan, 3 << 20, pieces) \
        <= float(whole)


def longest_chain(topology: Topology, plan: CollectivePlan, size: int, pieces: int) -> float:
    """The longest path over the whole program's sends, walked send by send."""
    template = sim._running(topology, plan, "cut-through", False)[0]
    network = link_network(topology, template.connections, DEFAULT_LATENCY_US, False)
    flat = expand_template(template, Fraction(size), pieces)
    conn = flat.conn.tolist()
    rate = [min(network.cap[k] for k in network.conn_link[network.conn_ptr[c]:
                                                          network.conn_ptr[c + 1]])
            for c in range(len(network.alpha))]
    waits: list[list[tuple[int, float]]] = [[] for _ in conn]
    for s, (lo, hi) in enumerate(zip(flat.dep_ptr[:-1], flat.dep_ptr[1:], strict=True)):
        for d in flat.dep_idx[lo:hi]:
            waits[d].append((s, network.alpha[conn[s]]))       # delivered
    previous: dict[int, int] = {}
    for s, c in enumerate(conn):                               # (piece, slot) per connection
        if c in previous:
            waits[s].append((previous[c], 0.0))                # its connection freed
        previous[c] = s
    finish: list[float] = []
    for s, c in enumerate(conn):              # every send waits for earlier ones only here
        start = max((finish[p] + extra for p, extra in waits[s]), default=0.0)
        finish.append(start + float(flat.amounts[flat.amount_of[s]]) / rate[c])
    return max(f + network.alpha[c] for f, c in zip(finish, conn, strict=True))


def test_a_ring_runs_no_faster_than_its_longest_chain_of_sends():
    """On a ring, whose rings share links, the bound is the program's longest path,
    walked send by send, and below the run."""
    topo = load_sample("dgx-a100-2x8.json")
    plan = ring_baseline(topo, "allgather").plan_at(Fraction(1 << 24))
    for pieces in (1, 3):
        run = simulate(topo, plan, 1 << 24, pieces, symmetry=False, budget=None)
        found = bound(topo, plan, 1 << 24, pieces)
        assert found == pytest.approx(longest_chain(topo, plan, 1 << 24, pieces), rel=1e-8)
        assert found < float(run.time_us)


def test_bound_stops_once_past_its_deadline_or_where_it_cannot_reach_it():
    topo, plan = line(3), chain(3)
    full = bound(topo, plan, 1 << 20, 64)
    assert bound(topo, plan, 1 << 20, 64, beyond=full / 4) > full / 4
    # a chain grows by its busiest edge's time per piece: after an eighth of the pieces
    # the bound stops short of a deadline it would not pass
    assert bound(topo, plan, 1 << 20, 64, beyond=2 * full) < full


def test_sends_waiting_on_each_other_are_a_deadlock():
    hop = Connection(("v0", "v1"))
    template = IterationTemplate([hop], [0, 0], [0, 0], [0, 0], [1, 1], [0, 1], [1, 0],
                                 [Fraction(1)], False, [0, 1])
    with pytest.raises(ScheduleError, match="deadlocks"):
        chains(template)


def test_a_deep_ring_run_ruled_out_by_its_chains_is_not_built(monkeypatch):
    """At 1 GiB the ring's depth rule runs the fewest iterations and then the deepest with
    the fewest's time as deadline: on a rail leaf-spine the deepest's chains already end
    after it, so its program is never expanded, and the answer is the one the event loop's
    deadline gives."""
    topo = load_sample("rail-leaf-spine-4x8.json")
    plan = ring_baseline(topo, "allreduce").plan_at(Fraction(1 << 30))
    sim.forget_results()
    expanded = []
    expand = sim.expand_template
    monkeypatch.setattr(sim, "expand_template",
                        lambda t, size, pieces: expanded.append(pieces) or expand(t, size, pieces))
    best = fastest(topo, plan, 1 << 30)
    assert best.pieces == 1 and max(expanded) == 1
    sim.forget_results()
    monkeypatch.setattr(sim, "chain_bound", lambda *a, **k: 0.0)
    unbounded = fastest(topo, plan, 1 << 30)
    assert unbounded.time_us == best.time_us and max(expanded) > 1
