"""The runtime choice's MSCCL++ fit check (plan_fits) is made cheaper without changing
what it decides: every layout keeps the verdict, the MSCCL program (thread blocks per GPU
and a digest of all of it) and the MSCCL++ verdict the earlier implementation gave.
tests/data/fit_verdicts.json holds those records for every layout of every sample up to 64
GPUs (``bench/fit_check.py --golden``, written before the change; ``--verify`` checks them
all); the suite checks the layouts of a few samples, fitting and refused ones."""

import json
from pathlib import Path

import pytest

from bench.fit_check import fit_record, record_key, sample_layouts
from canopy.engine.io.topology_json import load_sample

GOLDEN = Path(__file__).parents[2] / "data" / "fit_verdicts.json"


@pytest.mark.parametrize("sample,collective,k,layouts,verdicts", [
    ("mi250-2x16", "allreduce", 2,
     {"shared by step", "shared by phase, unit trees, paired", "shared evenly, unit trees"},
     {True, False}),
    ("dgx-a100-2x8", "allreduce", None, None, {True}),
    ("dgx-a100-2x8", "reduce-scatter", None, None, {True})])
def test_every_layout_keeps_its_verdict_and_program(sample, collective, k, layouts, verdicts):
    """mi250-2x16's allreduce at k = 2 (three of its layouts: two do not fit 108 thread
    blocks once MSCCL++ cuts them), and every layout of 2 x DGX A100's allreduce and
    reduce-scatter (paired ones among them)."""
    want = json.loads(GOLDEN.read_text())
    topology = load_sample(sample)
    seen = set()
    for chunks, name, laid in sample_layouts(topology, collective, k):
        if layouts is not None and name not in layouts:
            continue
        got = {"k": chunks, **fit_record(topology, chunks, laid)}
        assert got == want[record_key(f"{sample}.json", collective, k, name)], name
        seen.add(got["fits"])
    assert seen == verdicts
