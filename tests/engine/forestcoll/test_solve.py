"""Full schedules: reference topologies, fixed k, random topologies, determinism."""

from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings

from canopy.engine.forestcoll.optimum import find_fixed_k
from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.schedule_json import schedule_from_dict, schedule_to_dict
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.collectives import COLLECTIVES
from canopy.engine.model.verification import verify
from canopy.engine.network.indexed import Network
from tests.strategies import topologies

OPTIMAL = [("dgx-a100-2x8", 13, Fraction(1040, 3)), ("mi250-2x16", 83, Fraction(5312, 15)),
           ("forestcoll-fig2", 1, Fraction(8))]


@pytest.mark.parametrize("name, k, algbw", OPTIMAL)
def test_optimal_schedule(name, k, algbw):
    topo = load_sample(name)
    schedule = solve(topo)
    assert schedule.k == k
    assert schedule.algbw == algbw == schedule.optimal_algbw
    assert verify(topo, schedule) == algbw
    for root in topo.compute_nodes():
        assert sum(t.multiplicity for t in schedule.trees_of(root)) == k


@pytest.mark.parametrize("name, k, algbw", [
    ("mi250-2x16", 1, Fraction(320)), ("mi250-2x16", 2, Fraction(1024, 3)),
    ("dgx-a100-2x8", 1, Fraction(2400, 7)), ("dgx-a100-2x8", 2, Fraction(2400, 7)),
    ("forestcoll-fig2", 2, Fraction(8))])
def test_fixed_k_schedule(name, k, algbw):
    topo = load_sample(name)
    schedule = solve(topo, k=k)
    assert schedule.k == k and schedule.fixed_k
    assert schedule.algbw == algbw
    assert verify(topo, schedule) == algbw


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_collectives_label_and_algbw(collective):
    topo = load_sample("dgx-a100-2x8")
    schedule = solve(topo, collective)
    assert schedule.collective == collective
    expected = Fraction(1040, 3) / (2 if collective == "allreduce" else 1)
    assert schedule.algbw == expected
    assert schedule_to_dict(schedule)["collective"] == collective


def test_schedule_json_round_trip():
    topo = load_sample("forestcoll-fig2")
    schedule = solve(topo)
    again = schedule_from_dict(schedule_to_dict(schedule))
    assert again.trees == schedule.trees
    assert verify(topo, again) == schedule.algbw


def test_deterministic():
    topo = load_sample("mi250-2x16")
    a = schedule_to_dict(solve(topo, k=2))
    b = schedule_to_dict(solve(load_sample("mi250-2x16"), k=2))
    a.pop("timings_s")
    b.pop("timings_s")
    assert a == b


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topologies(max_compute=5, max_switch=3))
def test_random_topologies_reach_optimum(topo):
    for collective in COLLECTIVES:
        schedule = solve(topo, collective)
        assert schedule.algbw == schedule.optimal_algbw
        assert verify(topo, schedule) == schedule.algbw


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topologies(max_compute=4, max_switch=3))
def test_random_topologies_fixed_k(topo):
    """Every k has a verified schedule, one-way networks included (§4.5)."""
    for k in (1, 2):
        for collective in ("allgather", "allreduce"):
            schedule = solve(topo, collective, k=k)
            assert verify(topo, schedule) == schedule.algbw
            assert schedule.algbw <= schedule.optimal_algbw


def test_fixed_k_on_a_one_way_network_with_unbalanced_floors(capsys):
    """floor(U*·b_e) leaves switch w0 unbalanced here; the schedule still exists and
    reaches Thm 14's U*, a lower bound for every schedule with k trees per node."""
    from canopy.cli import main
    from canopy.engine.io.topology_json import load_topology
    topo = load_topology("tests/data/fixed-k-unbalanced.json")
    net = Network.from_topology(topo)
    for k in (1, 2, 3):
        schedule = solve(topo, k=k)
        assert schedule.x == k / find_fixed_k(net, k).u_star
    assert main(["solve", "tests/data/fixed-k-unbalanced.json", "--k", "1"]) == 0
    assert "1 tree per GPU, as asked, reaches" in capsys.readouterr().out
