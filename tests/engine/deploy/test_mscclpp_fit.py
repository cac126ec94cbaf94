"""The runtime choice takes only layouts whose MSCCL++ plan fits the GPU's thread blocks, so
the plan ``canopy solve --mscclpp`` writes is the program ``canopy compare`` times."""

from canopy.engine.allreduce.lp_schedule import choose_allreduce
from canopy.engine.comparison.table import compare
from canopy.engine.deploy.mscclpp_export import schedule_plans
from canopy.engine.deploy.runtime_choice import _choose, plan_fits, runtime_schedule
from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.topology_json import load_sample
from canopy.engine.msccl import MscclLimits
from canopy.engine.mscclpp.reader import read_plan_bytes
from canopy.engine.mscclpp.timing import time_plan

SIZE = 1 << 30


def test_the_plan_of_the_choice_times_exactly_as_compare():
    """hypercube-3d allreduce on 8 thread blocks per GPU: the fastest MSCCL layout (k = 3,
    unit trees shared evenly) needs more than 8 thread blocks once MSCCL++'s ops per step
    cut its thread blocks into parts, and the export used to fall back to a tighter layout
    that compare never timed. The choice now passes over it, and the plan of the one it
    takes runs at exactly compare's algbw."""
    topology = load_sample("hypercube-3d.json")
    limits = MscclLimits(max_tbs_per_gpu=8)
    schedule = choose_allreduce(topology, solve(topology, "allreduce"))
    unchecked = _choose(topology, schedule, limits, check_plans=False)
    assert not plan_fits(topology, unchecked.schedule.k, unchecked.plan, limits)
    choice = runtime_schedule(topology, schedule, limits)
    assert plan_fits(topology, choice.schedule.k, choice.plan, limits)
    assert any(c.get("mscclpp_plan") == "does not fit" for c in choice.candidates)
    want = compare(topology, "allreduce", sizes=(SIZE,), algorithms=(),
                   limits=limits).rows[0].algbw_at(SIZE)
    files = schedule_plans("plan.json", topology, schedule, limits=limits)
    assert time_plan(read_plan_bytes(files[-1].data), topology, SIZE).algbw == want


def test_only_layouts_that_finish_are_asked_whether_their_plan_fits(monkeypatch):
    """Asking whether a layout's MSCCL++ plan fits lowers it to MSCCL thread blocks and
    counts the plan's ops, which costs more than many simulations. A layout stopped below
    the fastest can be neither chosen nor near it, so only those that finish are asked,
    and of those only where it decides something (the fastest so far, a new best, or one
    that could be chosen at a second size): on rail-leaf-spine-4x8's reduce-scatter the
    optimal k = 10's shared layouts stop below k = 1 on unit connections, and none of them
    is asked; of the two that finish, the slower is not asked either."""
    from canopy.engine.deploy import runtime_choice

    topology = load_sample("rail-leaf-spine-4x8.json")
    asked = []
    real = runtime_choice.plan_fits

    def counting(topology, k, laid, limits):
        asked.append(laid)
        return real(topology, k, laid, limits)

    monkeypatch.setattr(runtime_choice, "plan_fits", counting)
    choice = _choose(topology, solve(topology, "reduce-scatter"), MscclLimits())
    stopped = [c for c in choice.candidates if "executed_below" in c]
    finished = [c for c in choice.candidates if "executed_below" not in c]
    assert stopped and finished
    assert 1 <= len(asked) < len(finished)
    assert any(laid == choice.plan for laid in asked)
