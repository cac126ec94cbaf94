"""Depth runs ordered by their lower bounds: the link bound of a loop is below its run
(and reaches it on a chain of links of their own), and the depth rule run in that order
gives the answer it gives in its own order."""

import random
from dataclasses import dataclass
from fractions import Fraction

import pytest

from canopy.engine.baselines.blink import blink_baseline
from canopy.engine.baselines.ring import ring_baseline
from canopy.engine.execution import simulate as sim
from canopy.engine.execution.simulate import best_depth, fastest, lower_bound, simulate
from canopy.engine.generators import generate
from canopy.engine.io.topology_json import load_sample
from tests.engine.execution.chain_plans import chain, line


@pytest.mark.parametrize("pieces", [1, 2, 5])
def test_a_chain_on_links_of_its_own_ends_at_its_link_bound(pieces):
    """Each link of a line carries one connection: a piece crosses it after the fill
    before it, the pieces follow back to back, and the last drains through the links
    after it, which is the run."""
    topo, plan = line(4), chain(4)
    whole = float(simulate(topo, plan, 3 << 20, pieces, symmetry=False).time_us)
    found = lower_bound(topo, plan, 3 << 20, pieces)
    assert found == pytest.approx(whole, rel=1e-9) and found <= whole


def test_blinks_pipeline_is_bounded_by_its_fill_and_drain_not_only_its_busiest_link():
    """Blink's single-root trees on 2 x DGX A100 at 16 pieces: the bound is below the
    run, above the busiest link's time and the longest chain of sends."""
    topo = load_sample("dgx-a100-2x8.json")
    plan = blink_baseline(topo, "allreduce").plan_at(Fraction(1))
    size, pieces = 1 << 27, 16
    run = float(simulate(topo, plan, size, pieces, budget=None).time_us)
    found = lower_bound(topo, plan, size, pieces)
    template = sim._running(topo, plan, "cut-through", True)[0]
    network = sim._network(topo, plan, template, None, sim.DEFAULT_LATENCY_US, False,
                           "cut-through")
    longest = sim._chain_bound(plan, template, network, Fraction(size), pieces, None)
    floor = float(sim.bandwidth_floor(topo, plan, size))
    assert max(longest, floor) < found <= run


def test_a_ring_that_runs_folded_has_no_link_bound():
    topo = load_sample("dgx-a100-2x8.json")
    plan = ring_baseline(topo, "allgather").plan_at(Fraction(1 << 24))
    assert lower_bound(topo, plan, 1 << 24, 2) is None


@dataclass
class Run:
    time_us: Fraction
    pieces: int
    past_deadline: bool = False


def test_runs_ordered_by_their_bounds_give_the_rules_answer():
    """Random times per depth, bounds at or below them (or none), floors near them, and
    runs stopped at their deadlines or not (either is a run's right once it ends after
    one): the rule's answer is the same with the bounds, without, and without deadlines."""
    rng = random.Random(11)
    for _ in range(4000):
        lowest = rng.randint(1, 4)
        limit = rng.randint(lowest, 10)
        target = rng.randint(1, 12)
        times = {n: Fraction(rng.randint(95, 110)) for n in range(1, 13)}
        bounds = {n: rng.choice([None, float(times[n]), float(times[n]) - rng.randint(1, 9)])
                  for n in times}
        floor = rng.choice([94.0, 98.0, 100.0])

        def time_at(n: int, times: dict[int, Fraction] = times) -> Run:
            return Run(times[n], n)

        def time_within(n: int, deadline: float, times: dict[int, Fraction] = times) -> Run:
            if times[n] > deadline and rng.random() < 0.7:
                return Run(Fraction(deadline), n, True)
            return Run(times[n], n)

        plain = best_depth(time_at, lowest, limit, target, floor)
        for result in (best_depth(time_at, lowest, limit, target, floor, time_within),
                       best_depth(time_at, lowest, limit, target, floor, time_within,
                                  bounds.__getitem__)):
            assert (result.time_us, result.pieces, result.past_deadline) == \
                (plain.time_us, plain.pieces, False)


def test_blinks_shallower_run_is_never_built_where_its_bound_loses(monkeypatch):
    """Blink on four 8-GPU servers at 1 GiB: the deepest pipeline runs first, and the
    first depth the rule tries, twice its stages, whose pieces fill the pipeline almost
    four times longer, is ruled out by its bound before its program is built; the time
    is the one the rule's own order finds."""
    topo = generate("cluster", {"servers": 4, "gpus": 8, "gpu_bw": 450, "nic_bw": 50,
                                "scale_out": "leaf-spine"})
    plan = blink_baseline(topo, "allreduce").plan_at(Fraction(1))
    _, first, limit = sim.depths(topo, plan, 1 << 30)
    built: list[int] = []
    expand = sim.expand_template
    monkeypatch.setattr(sim, "expand_template",
                        lambda t, size, n: built.append(n) or expand(t, size, n))
    sim.forget_results()
    ordered = fastest(topo, plan, 1 << 30, saturated=True)
    assert ordered.pieces == limit and first not in built
    sim.forget_results()
    monkeypatch.setattr(sim, "_bounds", lambda *args: None)
    assert fastest(topo, plan, 1 << 30, saturated=True) == ordered
    assert first in built
    sim.forget_results()
