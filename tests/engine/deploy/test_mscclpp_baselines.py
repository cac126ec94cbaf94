"""Baselines as MSCCL++ plans: NCCL's rings for allgather, reduce-scatter and allreduce pass
check-plan's symbolic run and time like the ring row of compare."""

import json

import pytest

from canopy.cli import main
from canopy.engine.comparison.table import compare
from canopy.engine.deploy.mscclpp_baselines import baseline_plan
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.collectives import COLLECTIVES
from tests import ROOT

SIZE = 16 << 20


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_ring_plans_pass_and_time_like_the_ring_row(tmp_path, collective):
    topo = load_sample("forestcoll-fig2")
    done = baseline_plan(topo, collective, "ring", str(tmp_path / "ring.json"), SIZE)
    assert done.file is not None and done.file.report.checked, done.reason
    assert json.loads((tmp_path / "ring.json").read_text())["name"].startswith(
        "canopy-baseline-ring")
    assert (tmp_path / "ring-run.py").exists()
    row = compare(topo, collective, sizes=(SIZE,), algorithms=("ring",)).row("ring")
    assert abs(done.algbw / row.algbw_at(SIZE) - 1) <= 0.02


def test_tacos_is_not_exported_with_a_reason(tmp_path):
    done = baseline_plan(load_sample("forestcoll-fig2"), "allgather", "tacos",
                         str(tmp_path / "t.json"))
    assert done.file is None and "TACOS" in done.reason


def test_compare_writes_baseline_plans(tmp_path, capsys):
    sample = str(ROOT / "samples" / "forestcoll-fig2.json")
    out = tmp_path / "plans"
    assert main(["compare", sample, "--collective", "allgather", "--sizes", "16M",
                 "--algorithms", "ring", "--mscclpp-baselines", str(out)]) == 0
    text = capsys.readouterr().out
    assert "ring.json" in text and "of its row's" in text
    assert main(["check-plan", str(out / "ring.json")]) == 0


def test_blink_says_in_one_sentence_why_it_has_no_plan(tmp_path):
    topo = load_sample("forestcoll-fig2")
    done = baseline_plan(topo, "allreduce", "blink", str(tmp_path / "blink.json"), SIZE)
    assert done.file is None and not (tmp_path / "blink.json").exists()
    assert "rooted at one GPU" in done.reason and ". " not in done.reason
