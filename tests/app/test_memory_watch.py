"""The editor's memory watch: a computation in the editor's process that passes the
budget is stopped with a sentence in a dialog, not killed by the kernel."""

import sys
import time

import pytest

from canopy.app import memory_watch
from canopy.app.error_hook import install_error_hook
from canopy.app.memory_watch import MemoryBudgetExceeded, install_memory_watch
from canopy.engine.process.memory_guard import resident_bytes, start_memory_guard

NEVER = 1 << 62


@pytest.fixture
def disarm():
    yield
    memory_watch._gui["budget"] = NEVER          # a re-arming watch stays harmless
    start_memory_guard(memory_watch._breach, NEVER)


def test_a_computation_past_the_budget_is_stopped_in_the_gui_thread(disarm):
    assert install_memory_watch(resident_bytes() + (60 << 20))
    held = []
    start = time.monotonic()
    with pytest.raises(MemoryBudgetExceeded):
        while time.monotonic() - start < 30:
            held.append(bytearray(4 << 20))      # 4 MiB a step, touched
            time.sleep(0.01)
    grown = len(held) * 4
    held.clear()
    assert 60 <= grown < 300, grown


def test_the_exception_hook_shows_the_budget_sentence(window, dialogs, monkeypatch):
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    install_error_hook(window)
    sys.excepthook(MemoryBudgetExceeded, MemoryBudgetExceeded(), None)
    assert dialogs.calls == [("warning", "Canopy: memory", str(MemoryBudgetExceeded()))]
    assert "memory budget of 4 GiB" in dialogs.calls[0][2]
