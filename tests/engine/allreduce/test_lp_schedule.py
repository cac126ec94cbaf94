"""ForestColl's allreduce LP (App. E) as a schedule: exact, verified, simulated, exported."""

from dataclasses import replace
from fractions import Fraction

import pytest

from canopy.cli import main
from canopy.engine.allreduce.lp_schedule import choose_allreduce, describe_choice, lp_schedule
from canopy.engine.execution.simulate import fastest
from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.schedule_json import schedule_from_dict, schedule_to_dict
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.plan import bandwidth_bound, check_coverage, schedule_plan
from canopy.engine.model.topology import COMPUTE, Link, Node, Topology
from canopy.engine.model.verification import verify
from canopy.engine.msccl import MscclOptions, msccl_xml
from canopy.engine.msccl.checks import check_structure
from canopy.engine.msccl.executor import simulate_bytes
from canopy.engine.msccl.reader import read_msccl_bytes


@pytest.fixture(scope="module")
def mesh():
    topo = load_sample("mesh-2d-3x3")
    return topo, lp_schedule(topo)


def test_mesh_schedule_is_exact_and_verified(mesh):
    """3x3 mesh of 25 GB/s links: RS + AG reaches 225/4 GB/s; the LP's budgets give both
    phases x = 25/3 per node at once, so 9·25/3 = 75 GB/s, exactly 1/3 more. Packed per
    phase in the LP's budgets that needs k = 3; one spanning tree per GPU, reducing up and
    broadcasting down, reaches it with k = 1 (every link is two-way)."""
    topo, schedule = mesh
    assert schedule.split_budgets and schedule.algbw == 75 and schedule.k == 1
    assert schedule.tree_bandwidth == Fraction(25, 3)
    assert schedule.reduce_trees == schedule.trees and len(schedule.trees) == 9
    per_phase = lp_schedule(topo, spanning=False)
    assert per_phase.k == 3 and per_phase.tree_bandwidth == Fraction(25, 9)
    assert verify(topo, per_phase) == 75
    assert verify(topo, schedule) == 75
    assert schedule.algbw / Fraction(225, 4) == Fraction(4, 3)
    plan = schedule_plan(schedule)
    check_coverage(plan)
    assert bandwidth_bound(plan, topo.capacities())[0] == 75   # independent: link loads
    info = schedule.extra["allreduce_lp"]
    assert info["schedule_algbw_exact"] == "75" and info["gain_exact_percent"] == "100/3"


def test_verifier_adds_both_phases(mesh):
    """The same trees claimed at a larger y, or RS + AG's trees claimed at once, overload
    a link once reduction and broadcast share it."""
    topo, schedule = mesh
    with pytest.raises(ScheduleError, match="reduction and broadcast at once"):
        verify(topo, replace(schedule, tree_bandwidth=Fraction(26, 3),
                             reduce_tree_bandwidth=Fraction(26, 3)))
    rs_ag = solve(topo, "allreduce")
    with pytest.raises(ScheduleError, match="reduction and broadcast at once"):
        verify(topo, replace(rs_ag, split_budgets=True))


def test_json_round_trip_keeps_split_budgets(mesh):
    topo, schedule = mesh
    again = schedule_from_dict(schedule_to_dict(schedule))
    assert again.split_budgets and verify(topo, again) == 75


def test_simulated_at_its_bound(mesh):
    topo, schedule = mesh
    result = fastest(topo, schedule_plan(schedule), 1 << 30)
    assert result.algbw >= Fraction(95, 100) * 75


@pytest.mark.parametrize("inplace", [True, False])
def test_msccl_export_passes_checks(mesh, inplace):
    _, schedule = mesh
    data = msccl_xml(schedule, options=MscclOptions(inplace=inplace))
    check_structure(read_msccl_bytes(data))
    report = simulate_bytes(data)
    assert "allreduce" in report.summary() and "the result is correct" in report.summary()


def test_ties_keep_reduce_scatter_allgather():
    """On a bidirectional ring RS + AG is optimal: every node alone bounds the LP by
    5·2 / (2·4), RS + AG's algbw, so the LP is not solved. On forestcoll-fig2 the cut
    bound already equals RS + AG."""
    nodes = [Node(f"c{i}", COMPUTE) for i in range(5)]
    ring = Topology("ring", nodes, [Link(f"c{i}", f"c{(i + 1) % 5}", Fraction(1))
                                    for i in range(5)])
    chosen = choose_allreduce(ring, solve(ring, "allreduce"))
    assert not chosen.split_budgets and chosen.algbw == Fraction(5, 4)
    assert chosen.extra["allreduce_lp"]["partition_bound_exact"] == "5/4"
    assert "a partition into 5 compute nodes bounds" in describe_choice(chosen)
    fig2 = load_sample("forestcoll-fig2")
    chosen = choose_allreduce(fig2, solve(fig2, "allreduce"))
    assert not chosen.split_budgets
    assert "cut bound equals" in describe_choice(chosen)


def test_cli_exports_and_compare(tmp_path, capsys):
    xml, sched = tmp_path / "a.xml", tmp_path / "a.json"
    assert main(["solve", "samples/mesh-2d-3x3.json", "--collective", "allreduce",
                 "--msccl", str(xml), "--json", str(sched)]) == 0
    out = capsys.readouterr().out
    assert "33.33 % above reduce-scatter + allgather (56.25 GB/s)" in out
    assert "the result is correct" in out
    # both phases' trees are counted, as the Results and Trees docks count them
    assert ("trees:           18 distinct trees, 18 counting each as often as it is used: "
            "9 broadcast, 9 reduce") in out
    assert main(["verify", "samples/mesh-2d-3x3.json", str(sched)]) == 0
    assert "allreduce algbw 75 GB/s verified" in capsys.readouterr().out
    assert main(["compare", "samples/mesh-2d-3x3.json", "--collective", "allreduce",
                 "--sizes", "16M", "--algorithms", "ring"]) == 0
    out = capsys.readouterr().out
    assert "forestcoll       75.00" in out
    assert "forestcoll runs ForestColl's allreduce LP (App. E" in out


def test_an_allreduce_lp_past_the_memory_budget_is_refused_before_it_is_built(monkeypatch):
    import pytest

    from canopy.engine.allreduce.lp_schedule import solve_lp
    from canopy.engine.generators import generate
    from canopy.engine.model.limits import LimitError
    from canopy.engine.network.indexed import Network
    monkeypatch.setenv("CANOPY_MEMORY_BUDGET", "64M")
    net = Network.from_topology(generate("cluster", {"servers": 32, "gpus": 8}))
    with pytest.raises(LimitError, match="the allreduce LP of 256 GPUs would need about"):
        solve_lp(net)
