"""Thread blocks cut into parts where their ops exceed the runtime's limit, fused ops, and
the launcher's selector leaving sizes the runtime refuses to NCCL."""

import json

import pytest

from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.topology_json import load_sample
from canopy.engine.msccl import MscclOptions, msccl_xml
from canopy.engine.msccl.reader import read_msccl_bytes
from canopy.engine.mscclpp import writer as writer_module
from canopy.engine.mscclpp.executor import execute
from canopy.engine.mscclpp.files import rank_servers
from canopy.engine.mscclpp.launcher import launcher_script
from canopy.engine.mscclpp.reader import parse_plan
from canopy.engine.mscclpp.timing import time_plan
from canopy.engine.mscclpp.writer import MscclppLimitError, algo_plan

# One worker runs the module: what its fixtures compute is kept per process.
pytestmark = pytest.mark.xdist_group("engine-mscclpp-test_split")


def ops_of(tb):
    return sum(1 + len(op.get("ops", [])) for op in tb["ops"])


@pytest.fixture(scope="module")
def program():
    topo = load_sample("hypercube-3d")
    servers = rank_servers(topo)
    xml = msccl_xml(solve(topo, "allreduce"), options=MscclOptions(layout="compact"))
    return topo, servers, read_msccl_bytes(xml)      # thread blocks of up to 64 ops


@pytest.mark.parametrize("limit", [40, 24])
def test_thread_blocks_over_the_limit_are_cut_into_parts_that_pass(monkeypatch, program,
                                                                   limit):
    topo, servers, algo = program
    whole = algo_plan(algo, servers)
    assert max(ops_of(tb) for g in whole["gpus"] for tb in g["threadblocks"]) > limit
    monkeypatch.setattr(writer_module, "MAX_OPERATION", limit)
    plan = algo_plan(algo, servers)
    tbs = [tb for g in plan["gpus"] for tb in g["threadblocks"]]
    assert max(ops_of(tb) for tb in tbs) <= limit
    assert len(tbs) > sum(len(g["threadblocks"]) for g in whole["gpus"])
    model = parse_plan(json.loads(json.dumps(plan)))
    assert execute(model).checked
    # the parts move the same data in the same order within an iteration, and run
    # iterations apart where the one thread block could not: no slower
    size = 1 << 26
    base = time_plan(parse_plan(json.loads(json.dumps(whole))), topo, size).algbw
    assert time_plan(model, topo, size).algbw >= base * 0.99


def test_parts_beyond_the_gpus_thread_blocks_are_refused(monkeypatch, program):
    _, servers, algo = program
    monkeypatch.setattr(writer_module, "MAX_OPERATION", 24)
    with pytest.raises(MscclppLimitError, match="thread blocks"):
        algo_plan(algo, servers, max_tbs=4)


def test_reductions_sent_on_memory_channels_are_fused(program):
    _, servers, algo = program
    names = {op["name"] for g in algo_plan(algo, servers)["gpus"] for tb in g["threadblocks"]
             for top in tb["ops"] for op in (top, *top.get("ops", []))}
    assert "res" in names


def test_launcher_leaves_sizes_the_runtime_refuses_to_nccl():
    source = launcher_script(["/nonexistent/plan.json"], "allgather", True).decode()
    compile(source, "plan-run.py", "exec")
    body = source[source.index("def runtime_accepts"):source.index("def register")]
    space: dict = {}
    exec(body, space)
    accepts = space["runtime_accepts"]
    meta = {"gpus": [{"input_chunks": 3, "output_chunks": 24, "scratch_chunks": 0}] * 8}
    assert not accepts(meta, 0, 8, "allgather", 1 << 30)
    assert accepts(meta, 0, 8, "allgather", 3 << 30)
    meta = {"gpus": [{"input_chunks": 32, "output_chunks": 32, "scratch_chunks": 32}] * 8}
    assert accepts(meta, 0, 8, "allreduce", 1 << 30) and not accepts(meta, 0, 8, "allreduce",
                                                                      (1 << 30) + 16)
    # byte offsets stay below 4 GiB (32 bits in the runtime): here GPU 1's scratch of 64
    # chunks ends at twice the message, and every rank answers alike
    meta["gpus"] = [meta["gpus"][0], dict(meta["gpus"][0], scratch_chunks=64)] * 4
    for rank in (0, 1):
        assert accepts(meta, rank, 8, "allreduce", (2 << 30) - 512)
        assert not accepts(meta, rank, 8, "allreduce", 2 << 30)


def test_plans_whose_chunks_are_not_a_power_of_two_say_which_sizes_they_run():
    from canopy.engine.mscclpp.files import PlanFile
    odd = PlanFile("p.json", json.dumps({"gpus": [{"input_chunks": 3,
                                                    "output_chunks": 24}]}).encode(), None)
    assert odd.size_step == 384 and "multiples of 384 B only" in odd.sizes_text()
    even = PlanFile("p.json", json.dumps({"gpus": [{"input_chunks": 4,
                                                     "output_chunks": 32}]}).encode(), None)
    assert even.sizes_text() == "every size"
