"""Fuzzing every reader (bounded for the suite; ``bench/fuzz.py`` runs the long version).

Mutated valid files of every format Canopy reads go through the command line's error
path in process: the result is a clean answer (exit 0) or one sentence with exit 2,
never a traceback, an internal error, several lines or a hang. Below: the inputs the
long runs found, each kept as a regression test."""

import json
import random
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.fuzz import formats, judge, run_in_process
from bench.mutations import mutate

_FORMATS = {}
_WORKDIR = Path()


@pytest.fixture(scope="module", autouse=True)
def workdir(tmp_path_factory):
    """The seeds (written by canopy) and the inputs live in one folder per run."""
    global _WORKDIR
    _WORKDIR = tmp_path_factory.mktemp("fuzz")
    _FORMATS.clear()
    yield _WORKDIR
    _FORMATS.clear()


def _format(name):
    if not _FORMATS:
        _FORMATS.update(formats(_WORKDIR))
    return _FORMATS[name]


NAMES = ["topology-json", "graphml", "nccl-topology-xml", "msccl-xml", "schedule-json",
         "jobs-json", "sweep-toml", "mscclpp-plan", "ib-fabric", "slurm-topology"]


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(rng=st.randoms(use_true_random=False))
def test_a_mutated_file_gets_an_answer_or_one_sentence(name, rng):
    fmt = _format(name)
    data, how, path = fmt.draw(rng, 0, str(_WORKDIR))
    start = time.monotonic()
    code, stderr = run_in_process(fmt, str(path))
    assert judge(code, stderr) in ("answer", "refused"), (how, stderr)
    assert time.monotonic() - start < 10, how


def test_mutations_are_reproducible():
    seed = _format("topology-json").seeds[0]
    assert mutate(random.Random(5), seed, "json") == mutate(random.Random(5), seed, "json")


# --- regressions: inputs the long runs found -------------------------------------------

def _refused(name, data):
    fmt = _format(name)
    stem = fmt.stems[0] if fmt.stems else "input"
    path = _WORKDIR / f"{stem}-regression{fmt.suffix}"
    path.write_bytes(data)
    code, stderr = run_in_process(fmt, str(path))
    assert judge(code, stderr) == "refused", stderr
    return stderr


def test_an_xml_error_with_a_line_break_is_one_line():
    text = _refused("nccl-topology-xml", b"<system \x00>")
    assert text.count("\n") == 1


def test_a_sweep_kind_that_is_a_list_is_refused():
    text = _refused("sweep-toml", b'[[generator]]\nkind = [1, 2]\n')
    assert "is not a generator" in text


def test_a_sweep_grid_that_is_not_a_table_is_refused():
    _refused("sweep-toml", b'[[generator]]\nkind = "cluster"\ngrid = [1]\n')


def test_a_sweep_grid_past_the_point_limit_is_refused_before_any_point_is_built():
    start = time.process_time()
    text = _refused("sweep-toml", b'[[generator]]\nkind = "cluster"\ngrid = { servers = ['
                    + b", ".join(str(i).encode() for i in range(1, 200)) + b"], gpus = ["
                    + b", ".join(str(i).encode() for i in range(1, 200)) + b"] }\n")
    assert "39,601 points" in text
    assert time.process_time() - start < 2


def test_a_coordinate_of_a_hundred_digits_is_refused():
    topo = json.loads(_format("topology-json").seeds[0])
    topo["nodes"][0]["x"] = 10**100
    assert "outside -1e12 to 1e12" in _refused("topology-json", json.dumps(topo).encode())


def test_a_job_size_of_a_billion_digits_is_refused_at_once():
    jobs = b'{"format": "canopy-jobs", "version": 1, "jobs": [{"name": "a", "nodes": ' \
           b'["n0.gpu0", "n0.gpu1"], "size": 1e999999999}]}'
    assert "size" in _refused("jobs-json", jobs)


def test_a_job_size_may_be_written_as_on_the_command_line():
    fmt = _format("jobs-json")
    jobs = json.loads(fmt.seeds[0])
    jobs["jobs"][0]["size"] = "256M"
    path = _WORKDIR / "sized.json"
    path.write_text(json.dumps(jobs))
    assert fmt.reader(str(path))[0].size == 256 << 20


def test_jobs_nested_too_deeply_are_refused():
    assert "too deeply" in _refused("jobs-json", b"[" * 100_000)


def test_a_value_with_line_breaks_is_quoted_on_one_line():
    topo = json.loads(_format("topology-json").seeds[0])
    topo["nodes"][0]["kind"] = "\t\n"
    text = _refused("topology-json", json.dumps(topo).encode())
    assert text.count("\n") == 1 and "\\t\\n" in text


def test_a_very_long_value_is_cut_in_the_sentence():
    topo = json.loads(_format("topology-json").seeds[0])
    topo["nodes"][0]["kind"] = "x" * 5000
    assert len(_refused("topology-json", json.dumps(topo).encode())) < 700


def test_graphml_with_an_untyped_key_prints_no_networkx_warning():
    data = _format("graphml").seeds[0]
    data = data.replace(b'attr.type="string"', b"", 1).replace(b'attr.type="double"', b"", 1)
    fmt = _format("graphml")
    path = _WORKDIR / f"untyped{fmt.suffix}"
    path.write_bytes(data)
    code, stderr = run_in_process(fmt, str(path))
    assert "UserWarning" not in stderr and judge(code, stderr) in ("answer", "refused")


def test_tacos_on_a_switch_that_reaches_no_gpu_is_no_internal_error():
    from canopy.engine.baselines.tacos import _interleave
    assert _interleave([], {}) == []


def test_a_job_size_of_a_thousand_digits_is_refused_in_one_sentence():
    topo = json.loads(_format("topology-json").seeds[-1])     # the sample with jobs
    topo["jobs"][0]["size"] = 10**999
    assert "an integer of 1000 digits" in _refused("topology-json", json.dumps(topo).encode())


def _plan():
    return json.loads(_format("mscclpp-plan").seeds[0])


def test_a_plan_nested_too_deeply_is_refused():
    assert "too deeply" in _refused("mscclpp-plan", b"[" * 100_000)


def test_a_plan_whose_buffer_list_is_a_number_is_refused():
    plan = _plan()
    plan["gpus"][0]["threadblocks"][0]["ops"][0]["src_buff"] = 1e-320
    assert "not a list" in _refused("mscclpp-plan", json.dumps(plan).encode())


def _first_op(plan, names):
    for gpu in plan["gpus"]:
        for tb in gpu["threadblocks"]:
            for op in tb["ops"]:
                for inner in [op, *op.get("ops", [])]:
                    if inner["name"] in names:
                        return inner
    raise AssertionError(names)


def test_a_reduction_sending_to_a_local_buffer_is_refused():
    plan = json.loads(_format("mscclpp-plan").seeds[1])       # allreduce
    op = _first_op(plan, ("re", "res", "rre", "rres"))
    op["dst_buff"].append(dict(op["dst_buff"][0]))
    assert "must be remote" in _refused("mscclpp-plan", json.dumps(plan).encode())


def test_a_plan_too_large_for_the_symbolic_run_is_refused_at_once():
    plan = _plan()
    for gpu in plan["gpus"]:
        gpu["scratch_chunks"] = 10**18
    start = time.process_time()
    assert "symbolic run holds at most" in _refused("mscclpp-plan", json.dumps(plan).encode())
    assert time.process_time() - start < 2


def test_a_thread_block_group_past_the_limit_is_refused():
    plan = _plan()
    op = _first_op(plan, ("put", "pws", "copy", "re", "rres"))
    op["tbg_info"] = {"tb_id": 0, "tbg_size": 10**9}
    assert "tbg_size" in _refused("mscclpp-plan", json.dumps(plan).encode())


def test_a_switch_cabled_to_nothing_is_no_internal_error():
    fmt = _format("ib-fabric")
    head, rest = fmt.seeds[1].split(b"\n\n", 1)
    lonely = (b'vendid=0x2c9\nswitchguid=0xff(ff)\nSwitch\t2 "S-00000000000000ff"\t# '
              b'"MF0;lonely:MQM9700/U1" enhanced port 0 lid 99 lmc 0\n\n')
    path = _WORKDIR / f"fabric-lonely{fmt.suffix}"
    path.write_bytes(head + b"\n\n" + lonely + rest)
    code, stderr = run_in_process(fmt, str(path))
    assert judge(code, stderr) == "answer", stderr


def test_a_slurm_hierarchy_deeper_than_the_stack_is_read():
    from canopy.engine.io.slurm_topology import parse_topology_conf
    text = "".join(f"SwitchName=s{i} Switches=s{i + 1}\n" for i in range(5000))
    conf = parse_topology_conf(text + "SwitchName=s5000 Nodes=h[1-2]\n")
    assert conf.levels["s0"] == 5000


def test_a_slurm_cycle_is_named():
    text = "SwitchName=a Switches=b\nSwitchName=b Switches=c\nSwitchName=c Switches=a\n"
    assert "a -> b -> c -> a form a cycle" in _refused("slurm-topology", text.encode())


def test_a_slurm_file_naming_a_million_hosts_is_refused_before_they_are_written_out():
    start = time.process_time()
    text = _refused("slurm-topology", b"SwitchName=y Nodes=r[1-1000]n[1-1000]\n")
    assert "at most 400,000" in text and time.process_time() - start < 1


def test_a_job_field_nested_just_under_the_parsers_limit_is_refused():
    jobs = json.loads(_format("jobs-json").seeds[0])
    jobs["jobs"][0]["x"] = "DEEP"
    text = json.dumps(jobs).replace('"DEEP"', "[" * 900 + "]" * 900)
    assert "too deeply" in _refused("jobs-json", text.encode())


def test_a_wait_naming_one_channel_twice_is_no_internal_error():
    fmt = _format("mscclpp-plan")
    plan = json.loads(fmt.seeds[0])
    op = _first_op(plan, ("wait",))
    op["channel_ids"] = op["channel_ids"][:1] * 2
    path = _WORKDIR / f"input-twice{fmt.suffix}"
    path.write_text(json.dumps(plan))
    code, stderr = run_in_process(fmt, str(path))
    assert judge(code, stderr) in ("answer", "refused"), stderr
