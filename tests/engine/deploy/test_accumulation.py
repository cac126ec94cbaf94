"""Nodes of reduce trees add their children's data in the order it arrives, so that MSCCL's
in-order thread blocks run shared connections as the plan's simulation does."""

import random
from dataclasses import replace

import pytest

from canopy.engine.deploy.accumulation import accumulating
from canopy.engine.execution.simulate import simulate
from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.plan import schedule_plan
from canopy.engine.msccl import MscclLimits, MscclOptions, plan_xml
from canopy.engine.msccl.connections import describe_layout, runtime_layout
from canopy.engine.msccl.executor import simulate_bytes
from canopy.engine.msccl.lowering import plan_steps
from canopy.engine.msccl.model import MscclXmlError
from canopy.engine.msccl.reader import read_msccl_bytes
from canopy.engine.msccl.threadblocks import assign_threadblocks
from canopy.engine.msccl.timing import time_xml
from canopy.engine.msccl.waits import runs_to_end
from canopy.engine.msccl.writer import threadblocks_xml

SIZE = 1 << 30
PIECES = 8


@pytest.fixture(scope="module")
def shared():
    """aws-p4d-2x8 allreduce on 16 thread blocks per GPU: tree edges share connections."""
    topology = load_sample("aws-p4d-2x8")
    schedule = solve(topology, "allreduce")
    limits = MscclLimits(max_tbs_per_gpu=16)
    laid = runtime_layout(schedule_plan(schedule), limits)
    assert describe_layout(schedule_plan(schedule), laid)["layout"].startswith(
        "connections shared by tree edges")
    return topology, schedule, limits, laid


def test_arrival_order_runs_the_program_as_the_plan(shared):
    """Nodes adding their children's data shallow first: a reducing receive waits for a
    sibling's later data and holds back other trees' receives on its connection, 13.8 %
    slower than the plan at 8 loop iterations. Adding them in the order the plan's
    simulation delivers them, the program runs in exactly the plan's time, and its result
    is the allreduce's."""
    topology, schedule, limits, laid = shared
    ordered = accumulating(topology, laid, SIZE, PIECES, schedule.k, limits)
    assert all(t.accumulation for t in ordered.reduce_trees)
    planned = simulate(topology, laid, SIZE, PIECES).time_us

    def program_us(plan):
        data = plan_xml(plan, schedule.k, MscclOptions(limits=limits))
        simulate_bytes(data, limits=limits)
        return time_xml(read_msccl_bytes(data), topology, SIZE, PIECES).time_us

    assert program_us(laid) > planned * 113 / 100
    assert program_us(ordered) == planned


def test_an_order_whose_waits_cycle_is_not_written(shared):
    """An order of the children that is not the arrivals' can make thread blocks wait on
    each other in a cycle, and the runtime would hang: such a program is found before it
    is written (the executor, whose connections hold one message, finds it hangs), and the
    export adds shallow first instead, which runs to the end."""
    topology, schedule, limits, laid = shared
    draw = random.Random(1)
    trees = tuple(replace(t, accumulation=tuple(draw.randrange(64) for _ in t.edges))
                  for t in laid.reduce_trees)
    shuffled = replace(laid, reduce_trees=trees)
    steps = plan_steps(shuffled, schedule.k, True, limits.max_count, fuse_fanout=False)
    assignment = assign_threadblocks(steps, limits, False, 1, "given")
    assert not runs_to_end(assignment)
    with pytest.raises(MscclXmlError, match="wait"):
        simulate_bytes(threadblocks_xml(assignment, MscclOptions(limits=limits)),
                       limits=limits)
    written = plan_xml(shuffled, schedule.k, MscclOptions(limits=limits))
    assert written == plan_xml(laid, schedule.k, MscclOptions(limits=limits))
    simulate_bytes(written, limits=limits)


def test_the_export_orders_a_copy_and_compare_keeps_the_plans_it_simulated():
    """The MSCCL++ export's choice is the memoized choice with its reductions ordered,
    worked out once; the memoized choice itself keeps its plan, so a comparison after an
    export in the same process times the plans it simulated when choosing."""
    from canopy.engine.deploy.runtime_choice import export_choice, runtime_schedule

    topology = load_sample("aws-p4d-2x8")
    schedule = solve(topology, "allreduce")
    limits = MscclLimits(max_tbs_per_gpu=24)
    choice = runtime_schedule(topology, schedule, limits)
    plan = choice.plan
    exported = export_choice(topology, schedule, limits)
    assert exported is not choice and exported.layout == choice.layout
    assert all(t.accumulation for t in exported.plan.reduce_trees)
    assert not any(t.accumulation for t in plan.reduce_trees)
    assert runtime_schedule(topology, schedule, limits).plan is plan
    assert export_choice(topology, schedule, limits) is exported
