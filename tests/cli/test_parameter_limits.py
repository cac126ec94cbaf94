"""Every numeric parameter has a documented limit (docs/limits.md) and one sentence past
it, given at once: no option makes a command run out of memory or time."""

import contextlib
import io
import time

import pytest

from canopy.cli import main
from canopy.engine.model.limits import LimitError, check_memory, memory_budget
from canopy.engine.model.sizes import parse_size
from tests import ROOT

SAMPLE = str(ROOT / "samples" / "dgx-a100-2x8.json")


def run(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:      # argparse's refusal of an option's value
            code = exc.code
    return code, err.getvalue()


@pytest.mark.parametrize("argv", [
    ("solve", SAMPLE, "--k", "10000000000000000"),
    ("solve", SAMPLE, "--k", "0"),
    ("solve", SAMPLE, "--collective", "alltoall", "--time-steps", "100000000"),
    ("solve", SAMPLE, "--msccl", "x.xml", "--msccl-channels", "1000000000"),
    ("solve", SAMPLE, "--msccl", "x.xml", "--msccl-sms", "1000000000000"),
    ("check-xml", "x.xml", "--capacity", "1000000000000"),
    ("check-xml", "x.xml", "--iterations", "1000000000000"),
    ("check-xml", "x.xml", "--size", "999999999999999999999999999G"),
    ("compare", SAMPLE, "--sizes", "2048G"),
    ("compare", SAMPLE, "--sizes", ",".join(["1M"] * 65)),
    ("compare", SAMPLE, "--tacos-chunks", "1000000000"),
    ("compare", SAMPLE, "--tacos-seeds", "1000000000"),
    ("compare", SAMPLE, "--latency", "1e99999999"),
    ("fabric", str(ROOT / "samples" / "leaf-spine-jobs.json"), "--seeds", "100000000"),
    ("sweep", str(ROOT / "samples" / "sweep-rails.toml"), "--workers", "1000000", "-o", "r.csv"),
    ("import-nccl", str(ROOT / "samples" / "nccl-h100-topo.xml"), "-o", "x.json", "--hosts",
     "1000000000"),
    ("generate", "cluster", "--servers", "1000000000", "-o", "x.json"),
])
def test_past_a_limit_is_one_sentence_and_exit_2_at_once(argv):
    start = time.process_time()
    code, err = run(*argv)
    assert code == 2, err
    last = err.strip().splitlines()[-1]
    assert "limits.md" in last or "limit" in last or "not a message size" in last \
        or "not a positive integer" in last \
        or "between" in last, last
    assert time.process_time() - start < 5


def test_a_fixed_k_of_a_trillion_answers_fast():
    start = time.process_time()
    code, err = run("solve", SAMPLE, "--k", "1000000000000")
    assert code == 0, err
    assert time.process_time() - start < 10


def test_sizes_stop_at_a_tebibyte():
    assert parse_size("1024G") == 1 << 40
    with pytest.raises(Exception, match="1 TiB"):
        parse_size("1025G")


def test_a_computation_over_the_budget_says_so_first(monkeypatch):
    monkeypatch.setenv("CANOPY_MEMORY_BUDGET", "1G")
    assert memory_budget() == 1 << 30
    with pytest.raises(LimitError, match="about 2 GiB of memory, over Canopy's budget of 1 GiB"):
        check_memory("this", 2 << 30)
    monkeypatch.setenv("CANOPY_MEMORY_BUDGET", "lots")
    with pytest.raises(LimitError, match="not a size"):
        memory_budget()


def test_a_full_solve_past_the_budget_is_refused_before_it_starts(monkeypatch):
    from canopy.engine.forestcoll import solve as forest
    from canopy.engine.io.topology_json import load_sample
    monkeypatch.setenv("CANOPY_MEMORY_BUDGET", "64M")     # 64 GPUs at 32 KiB a pair: 126 MiB
    monkeypatch.setattr(forest, "SOLVE_BYTES_PER_PAIR", 32 << 10)
    start = time.process_time()
    with pytest.raises(LimitError, match="a schedule of 64 GPUs would need about 126 MiB"):
        forest.solve(load_sample("tpu-v4-4x4x4-torus.json"))
    assert time.process_time() - start < 1
