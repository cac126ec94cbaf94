"""The runtime choice's MSCCL++ fit check skips building the MSCCL program where no thread
block can exceed the runtime's ops (operation_bounds): the bound must be at least what the
count gives every thread block, and plan_fits must decide as building and counting the
program does, at the runtime's limit and at tighter ones."""

import pytest

from canopy.engine.deploy import runtime_choice
from canopy.engine.deploy.best_schedule import best_schedule
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.plan import schedule_plan
from canopy.engine.msccl import MscclLimitError, MscclLimits, MscclOptions
from canopy.engine.msccl import writer as msccl_writer
from canopy.engine.msccl.connections import iter_layouts
from canopy.engine.msccl.lowering import Step, StepProgram
from canopy.engine.msccl.threadblocks import ThreadBlock, ThreadBlockAssignment
from canopy.engine.mscclpp import writer as W
from canopy.engine.mscclpp.files import rank_servers

# One worker runs the module: what its fixtures compute is kept per process.
pytestmark = pytest.mark.xdist_group("engine-mscclpp-test_operation_bounds")


def hand_made() -> ThreadBlockAssignment:
    """Rank 0: a thread block copying 2 chunks and sending 9 to rank 1, and one receiving
    1 chunk, then 3 that it adds to the copy (which the other thread block runs)."""
    copy = Step(0, "cpy", 2, src=("i", 0), dst=("o", 0))
    send = Step(0, "s", 9, send_peer=1, src=("o", 0), dst=("o", 0), dep=copy)
    receive = Step(0, "r", 1, recv_peer=2, src=("o", 4), dst=("o", 4))
    add = Step(0, "rrc", 3, recv_peer=2, src=("o", 0), dst=("o", 0), dep=copy)
    tbs = [ThreadBlock(1, -1, 0, [copy, send]), ThreadBlock(-1, 2, 0, [receive, add])]
    return ThreadBlockAssignment(StepProgram("allreduce", 3, 1, True), [tbs])


def test_bounds_of_a_hand_made_program(monkeypatch):
    """First thread block: 5 of its own, the copy's 2 chunks with a nop each (4) and the
    release the other thread block waits on (2), the send's 2 puts and signal with a nop
    each (6): 17. Second: 5, the receive's wait (1), the addition's wait (1), 3 chunks
    with a nop each (6), its acquire (1) and the acquires before the pipeline (1): 15."""
    assignment = hand_made()
    assert W.operation_bounds(assignment) == [[17, 15]]
    assert W.fits_uncut(assignment)
    monkeypatch.setattr(W, "MAX_OPERATION", 16)
    assert not W.fits_uncut(assignment)


def built_and_counted(topology, k, laid, limits) -> bool:
    """plan_fits as it was: the MSCCL program built and its MSCCL++ plan counted."""
    options = MscclOptions(inplace=True, limits=limits, layout="auto")
    try:
        algo = msccl_writer.plan_algo(laid, k, options, routes=False)
    except MscclLimitError:
        return True
    try:
        W.check_fits(algo, rank_servers(topology), limits.max_tbs_per_gpu)
    except W.MscclppLimitError:
        return False
    return True


@pytest.mark.parametrize("sample,collective,k,sms,limits_of_ops", [
    ("hypercube-3d", "allreduce", 2, 8, (64, 40, 24)),
    ("mesh-2d-3x3", "allreduce", 2, 12, (64, 40, 24))])
def test_bounds_hold_and_verdicts_agree(monkeypatch, sample, collective, k, sms,
                                        limits_of_ops):
    """Every layout: each thread block's bound is at least its counted ops, and plan_fits
    gives the verdict of building and counting at 64 ops per thread block and fewer
    (where the bound no longer holds and the program is built, on some layouts)."""
    topology = load_sample(sample)
    limits = MscclLimits(max_tbs_per_gpu=sms)
    schedule = best_schedule(topology, collective, k=k)
    options = MscclOptions(inplace=True, limits=limits, layout="auto")
    paths = set()
    for _, laid in iter_layouts(schedule_plan(schedule), limits, topology):
        assignment = msccl_writer.kept_threadblocks(laid, schedule.k, options)
        algo = msccl_writer.threadblocks_algo(assignment, options, routes=False)
        counted = W._Counter(W._Cut(W._Program(algo, rank_servers(topology)), {})).sizes
        bounds = W.operation_bounds(assignment)
        assert all(n >= counted[(g, t, 0)] for g, rank in enumerate(bounds)
                   for t, n in enumerate(rank))
        for most in limits_of_ops:
            monkeypatch.setattr(W, "MAX_OPERATION", most)
            paths.add(W.fits_uncut(assignment))
            assert runtime_choice.plan_fits(topology, schedule.k, laid, limits) == \
                built_and_counted(topology, schedule.k, laid, limits)
    assert paths == {True, False}


def test_a_layout_within_the_bound_is_not_built(monkeypatch):
    """Where every thread block is within the bound, plan_fits neither builds the MSCCL
    program nor counts its plan."""
    topology = load_sample("dgx-a100-2x8")
    schedule = best_schedule(topology, "allreduce")
    limits = MscclLimits()
    _, laid = next(iter_layouts(schedule_plan(schedule), limits, topology))

    def refused(*args, **kwargs):
        raise AssertionError("built")

    monkeypatch.setattr(msccl_writer, "threadblocks_algo", refused)
    assert runtime_choice.plan_fits(topology, schedule.k, laid, limits)
