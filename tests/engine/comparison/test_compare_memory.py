"""A comparison past the memory budget is refused before any schedule is built."""

import time

import pytest

from canopy.engine.comparison.table import compare
from canopy.engine.generators import generate
from canopy.engine.model.limits import LimitError


def test_a_comparison_past_the_memory_budget_is_refused_at_once(monkeypatch):
    monkeypatch.setenv("CANOPY_MEMORY_BUDGET", "64M")
    topology = generate("cluster", {"servers": 8, "gpus": 8})
    start = time.process_time()
    with pytest.raises(LimitError, match="comparing schedules on 64 GPUs would need about"):
        compare(topology)
    assert time.process_time() - start < 2
