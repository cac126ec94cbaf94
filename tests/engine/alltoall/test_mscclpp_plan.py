"""All-to-all MSCCL++ plans: cut to the runtime's limits, and the one sentence that says
how far below compare's MCF row a plan runs and why."""

import json

import pytest

from canopy.engine.alltoall import mscclpp_plan, solve_alltoall
from canopy.engine.alltoall.mscclpp_plan import alltoall_plan, mcf_gap
from canopy.engine.io.topology_json import load_sample
from canopy.engine.mscclpp import writer as writer_module
from canopy.engine.mscclpp.executor import execute
from canopy.engine.mscclpp.reader import parse_plan

SIZE = 16 << 20


@pytest.fixture(scope="module")
def fig2():
    topo = load_sample("forestcoll-fig2")
    return topo, solve_alltoall(topo)


def test_a_plan_at_the_mcf_row_needs_no_explanation(fig2):
    topo, result = fig2
    plan = alltoall_plan("/nonexistent/a2a.json", topo, result.schedule, tune=False)
    assert mcf_gap(topo, result, plan, SIZE) is None


def test_a_gap_is_one_sentence_with_both_figures(monkeypatch, fig2):
    topo, result = fig2
    plan = alltoall_plan("/nonexistent/a2a.json", topo, result.schedule, tune=False)
    monkeypatch.setattr(mscclpp_plan, "NEAR", 2.0)
    text = mcf_gap(topo, result, plan, SIZE)
    assert text is not None and "MCF row" in text and "GB/s" in text and ". " not in text


def test_thread_blocks_past_the_limit_are_cut(monkeypatch, fig2):
    topo, result = fig2
    monkeypatch.setattr(writer_module, "MAX_OPERATION", 12)
    plan = json.loads(alltoall_plan("/nonexistent/a2a.json", topo, result.schedule,
                                    tune=False).data)
    assert max(sum(1 + len(op.get("ops", [])) for op in tb["ops"])
               for g in plan["gpus"] for tb in g["threadblocks"]) <= 12
    assert execute(parse_plan(plan)).checked


def test_cut_thread_blocks_run_their_parts_in_lockstep(monkeypatch):
    """A thread block cut into parts (rule 8): its first part acquires, at the end of each
    iteration, a semaphore its last part releases at the end of that iteration, so the
    parts run one iteration at a time as the one thread block did; the plan still proves
    the all-to-all's result."""
    from canopy.engine.generators import generate

    monkeypatch.setattr(writer_module, "MAX_OPERATION", 24)
    topo = generate("torus", {"dims": "2x2x4"})
    file = alltoall_plan("/nonexistent/a2a.json", topo, solve_alltoall(topo).schedule,
                         tune=False)
    assert file.report.checked
    plan = json.loads(file.data)

    def semaphores(ops, name):
        return {sem for op in ops for sem in op.get("semaphore_ids", ()) if op["name"] == name}

    loops = 0
    for gpu in plan["gpus"]:
        bodies = [next(op["ops"] for op in tb["ops"] if op["name"] == "pipeline")
                  for tb in gpu["threadblocks"]]
        for i, body in enumerate(bodies):
            tail = [op for op in body if op["name"] != "nop"][-1]
            if tail["name"] != "sem_acquire":
                continue
            (sem,) = tail["semaphore_ids"]
            releasers = [j for j, other in enumerate(bodies)
                         if sem in semaphores(other, "sem_release")]
            assert len(releasers) == 1 and releasers[0] > i
            last = [op for op in bodies[releasers[0]] if op["name"] != "nop"][-1]
            assert last == {"name": "sem_release", "semaphore_ids": [sem]}
            loops += 1
    assert loops > 0


RAILS = {"servers": "3", "gpus": "4", "fabric": "nvswitch", "scale_out": "leaf-spine",
         "leaf": "rail", "servers_per_leaf": "2", "spines": "2"}


def test_lanes_give_heavy_port_connections_their_rate_share(monkeypatch):
    """3 servers of 4 GPUs on rail leaves: a GPU's port connection to its rail-mate
    carries its own blocks and those its server's GPUs relay through it, several times
    what its other port connections carry. One channel each (the writer without lanes)
    gives them equal NIC shares and runs at 91 % of compare's MCF row; lanes in
    proportion to the chunks run within 1 %."""
    from canopy.engine.alltoall.compare import mcf_plan
    from canopy.engine.execution.program import algbw_gbps
    from canopy.engine.execution.simulate import fastest
    from canopy.engine.generators import generate
    from canopy.engine.mscclpp.timing import time_plan

    topo = generate("cluster", RAILS)
    result = solve_alltoall(topo)
    row = algbw_gbps(SIZE, fastest(topo, mcf_plan(result), SIZE).time_us)
    file = alltoall_plan("/nonexistent/a2a.json", topo, result.schedule, tune=False)
    plan = json.loads(file.data)
    widths = {len(ch["channel_ids"]) for g in plan["gpus"] for tb in g["threadblocks"]
              for ch in tb["channels"] if ch["channel_type"] == "port"}
    assert max(widths) > 1 and file.report.checked
    ratio = time_plan(parse_plan(plan), topo, SIZE).algbw / row
    assert abs(ratio - 1) < 0.01
    monkeypatch.setattr(mscclpp_plan, "port_lanes", lambda *args: {})
    single = alltoall_plan("/nonexistent/a2a.json", topo, result.schedule, tune=False)
    assert time_plan(parse_plan(json.loads(single.data)), topo, SIZE).algbw / row < 0.95


def test_gpus_joined_by_a_link_keep_one_lane():
    """A 2x2x4 torus in servers of 4 GPUs: every port connection runs over a link between
    its two GPUs, which carries only the connections between them. It keeps one channel,
    so the plan takes exactly its MSCCL program's time; in lanes (chunks dealt over
    parallel channels) it took 7.7 % longer at one iteration (90.4 % of compare's MCF row
    at 1 GiB, against 97.8 %)."""
    from canopy.engine.alltoall.msccl import alltoall_xml
    from canopy.engine.generators import generate
    from canopy.engine.msccl.reader import read_msccl_bytes
    from canopy.engine.msccl.timing import time_xml
    from canopy.engine.mscclpp.timing import time_plan

    topo = generate("torus", {"dims": "2x2x4"})
    result = solve_alltoall(topo)
    file = alltoall_plan("/nonexistent/a2a.json", topo, result.schedule, tune=False)
    plan = json.loads(file.data)
    assert file.report.checked
    assert {len(ch["channel_ids"]) for g in plan["gpus"] for tb in g["threadblocks"]
            for ch in tb["channels"] if ch["channel_type"] == "port"} == {1}
    size = 64 << 20                      # one iteration of the default unit
    program = read_msccl_bytes(alltoall_xml(result.schedule).data)
    mine = time_plan(parse_plan(plan), topo, size).time_us
    assert abs(mine / time_xml(program, topo, size, 1).time_us - 1) < 1e-9


def test_relays_get_thread_blocks_of_their_own():
    """mesh-2d-3x3: GPUs relay on every link. A thread block per peer runs a relay's send,
    which waits for its chunks, before the GPU's own blocks of the next iteration and ran
    at 85 % of compare's MCF row; a thread block per peer and hop number runs within 1 %,
    and where those exceed the GPU's thread blocks the program falls back to one per
    peer."""
    from canopy.engine.alltoall.compare import mcf_plan
    from canopy.engine.alltoall.msccl import alltoall_xml
    from canopy.engine.execution.program import algbw_gbps
    from canopy.engine.execution.simulate import fastest
    from canopy.engine.msccl.threadblocks import MscclLimits
    from canopy.engine.mscclpp.timing import time_plan

    topo = load_sample("mesh-2d-3x3")
    result = solve_alltoall(topo)
    size = 1 << 30                       # the plan's pipeline unit is picked for 1 GiB
    row = algbw_gbps(size, fastest(topo, mcf_plan(result), size).time_us)
    file = alltoall_plan("/nonexistent/a2a.json", topo, result.schedule)
    assert abs(time_plan(parse_plan(json.loads(file.data)), topo, size).algbw / row - 1) < 0.01
    split = alltoall_xml(result.schedule)
    merged = alltoall_xml(result.schedule, limits=MscclLimits(max_tbs_per_gpu=8))
    assert split.report.max_threadblocks > 8 >= merged.report.max_threadblocks
    assert split.report.threadblocks > merged.report.threadblocks



def test_lanes_shrink_until_each_thread_block_holds_the_runtimes_channels(monkeypatch):
    """A thread block holds at most MAX_CHANNEL port channels, and lanes multiply a port
    connection's channels (the 4x4x4 torus needed 24 in one thread block at 8 lanes, a
    plan the runtime refuses). Here, with the writer's limit lowered to 1, the plan's
    lanes (2 on its heaviest connections) come down to 1, and the plan loads."""
    from canopy.engine.generators import generate

    topo = generate("cluster", RAILS)
    result = solve_alltoall(topo)

    def widest():
        file = alltoall_plan("/nonexistent/a2a.json", topo, result.schedule, tune=False)
        plan = json.loads(file.data)
        return plan, max(sum(len(ch["channel_ids"]) for ch in tb["channels"]
                             if ch["channel_type"] == "port")
                         for g in plan["gpus"] for tb in g["threadblocks"])

    assert widest()[1] == 2
    monkeypatch.setattr(writer_module, "MAX_CHANNEL", 1)
    plan, most = widest()
    assert most == 1
    assert execute(parse_plan(plan)).checked
