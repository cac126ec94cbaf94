"""A watch on the process's memory: past the budget, one sentence and a clean stop.

Computations whose size is known beforehand are refused before they start
(:func:`canopy.engine.model.limits.check_memory`); anything else that grows past the budget
(:func:`canopy.engine.model.limits.memory_budget`, 4 GiB unless ``$CANOPY_MEMORY_BUDGET``
says otherwise) is caught here: a daemon thread reads the resident size from
``/proc/self/statm`` a few times a second and, past the budget, calls ``on_breach``
with one sentence, by default printing it and ending the process with exit code 2.
The kernel's out-of-memory killer, which ends a process with no message at all, is
never reached first on a machine that has the budget free.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from canopy.engine.model.limits import gigabytes, memory_budget

INTERVAL = 0.1
"""Seconds between two readings of the resident size."""
EXIT_OVER_BUDGET = 2


def resident_bytes() -> int | None:
    """This process's resident memory, or None where ``/proc`` does not tell it."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def over_budget_text(budget: int) -> str:
    """The sentence said when a computation passes ``budget`` bytes."""
    return (f"stopped: this computation passed Canopy's memory budget of "
            f"{gigabytes(budget)} (docs/limits.md; CANOPY_MEMORY_BUDGET raises it).")


def _default_breach(message: str) -> None:
    sys.stderr.write(f"canopy: {message}\n")
    sys.stderr.flush()
    os._exit(EXIT_OVER_BUDGET)


def start_memory_guard(on_breach: Callable[[str], None] = _default_breach,
                       budget: int | None = None) -> threading.Thread | None:
    """Watch this process's memory from a daemon thread; None where it cannot be read.
    One watch per process: a second call (a command run again in the same process)
    changes the budget and what a breach does, and starts no other thread."""
    if resident_bytes() is None:
        return None
    _watch["limit"] = memory_budget() if budget is None else budget
    _watch["on_breach"] = on_breach
    thread = _watch.get("thread")
    if isinstance(thread, threading.Thread) and thread.is_alive():
        return thread

    def watch() -> None:
        while not threading.Event().wait(INTERVAL):
            size, limit = resident_bytes(), _watch["limit"]
            if size is not None and size > limit:
                _watch["on_breach"](over_budget_text(limit))
                return

    thread = threading.Thread(target=watch, name="canopy-memory-guard", daemon=True)
    _watch["thread"] = thread
    thread.start()
    return thread


_watch: dict[str, Any] = {}
"""The process's one watch: its thread, budget and breach action."""
