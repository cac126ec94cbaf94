"""App. E's allreduce with integer link budgets (canopy.engine.allreduce.rounding)."""

import math
from fractions import Fraction

import pytest

from canopy.engine.allreduce.lp_schedule import lp_schedule
from canopy.engine.allreduce.rounding import integer_budgets
from canopy.engine.deploy.runtime_choice import runtime_schedule
from canopy.engine.execution.simulate import fastest
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.plan import bandwidth_bound, schedule_plan
from canopy.engine.model.verification import verify
from canopy.engine.msccl import MscclOptions
from canopy.engine.msccl.checks import check_structure
from canopy.engine.msccl.executor import simulate_bytes
from canopy.engine.msccl.reader import read_msccl_bytes
from canopy.engine.msccl.threadblocks import MscclLimits
from canopy.engine.msccl.writer import plan_xml
from canopy.engine.network.indexed import Network
from canopy.engine.network.maxflow import FlowNetwork

# One worker runs the module: what its fixtures compute is kept per process.
pytestmark = pytest.mark.xdist_group("engine-allreduce-test_rounding")

MI250_SMS = MscclLimits(max_tbs_per_gpu=104)      # an MI250 GCD's compute units


@pytest.fixture(scope="module")
def mi250():
    topo = load_sample("mi250-8plus8")
    return topo, lp_schedule(topo)


def _holds_k_trees_per_root(net, counts, k, reverse):
    """Edmonds' condition checked independently: λ(s, t) >= k·N with arcs s -> v of
    capacity k (the reduce phase on the transposed links)."""
    flow = FlowNetwork(net.n + 1)
    for (a, b), n in counts.items():
        flow.add_arc(*((b, a) if reverse else (a, b)), n)
    for v in net.compute:
        flow.add_arc(net.n, v, k)
    return all(flow.max_flow(net.n, t) >= k * len(net.compute) for t in net.compute)


def test_integer_budgets_fit_the_links_and_hold_the_trees():
    """mi250-8plus8 at App. E's 128 GB/s (x = 8 per GPU): with one tree per GPU and phase
    (y = 8) HiGHS finds tree counts per link within floor(b / 8), balanced at the switch,
    and both phases hold a tree per root (checked by exact maxflows). Above the cut bound
    (y = 9) there are none."""
    net = Network.from_topology(load_sample("mi250-8plus8"))
    found = integer_budgets(net, 1, Fraction(8))
    assert found is not None
    reduce, broadcast = found
    for e, b in net.capacity.items():
        assert reduce.get(e, 0) + broadcast.get(e, 0) <= math.floor(b / 8)
    switch = next(w for w in range(net.n) if not net.is_compute(w))
    for counts in found:
        assert sum(n for (_, b), n in counts.items() if b == switch) == \
            sum(n for (a, _), n in counts.items() if a == switch)
    assert _holds_k_trees_per_root(net, broadcast, 1, reverse=False)
    assert _holds_k_trees_per_root(net, reduce, 1, reverse=True)
    assert integer_budgets(net, 1, Fraction(9)) is None


def test_one_tree_per_gpu_reaches_the_lp_optimum(mi250):
    """The LP's own budgets need k = 8 trees per GPU and phase; integer budgets reach the
    same verified 128 GB/s with k = 1 (16 reduce and 16 broadcast trees)."""
    topo, schedule = mi250
    assert schedule.split_budgets and schedule.k == 1 and schedule.algbw == 128
    assert len(schedule.trees) == len(schedule.reduce_trees) == 16
    assert verify(topo, schedule) == 128
    assert bandwidth_bound(schedule_plan(schedule), topo.capacities())[0] == 128
    assert "integer link budgets" in schedule.extra["allreduce_lp"]["trees"]
    assert lp_schedule(topo, spanning=False).k == 8


def test_runs_at_the_optimum_on_unit_connections_with_104_sms(mi250):
    """Every unit tree edge keeps a connection of its own within an MI250 GCD's 104
    compute units, and the schedule executes at 95 % of the optimum at 1 GiB (86 % with
    k = 8 on shared connections). The XML keeps the runtime's limits and computes the
    allreduce."""
    topo, schedule = mi250
    choice = runtime_schedule(topo, schedule, MI250_SMS)
    assert choice.layout == "unit" and choice.schedule is schedule
    assert choice.describe()["threadblocks_per_gpu"] <= 104
    assert fastest(topo, choice.plan, 1 << 30).algbw >= Fraction(95, 100) * 128
    data = plan_xml(choice.plan, schedule.k, MscclOptions(limits=MI250_SMS))
    check_structure(read_msccl_bytes(data))
    assert "the result is correct" in simulate_bytes(data, limits=MI250_SMS).summary()
