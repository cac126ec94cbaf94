"""The editor's watch on its own memory: past the budget, a dialog instead of dying.

Engine work (solves, comparisons, checks) runs in child processes, each watched by
:mod:`canopy.engine.process.memory_guard` and refused up front where its size is known
(:func:`canopy.engine.model.limits.check_memory`); the editor then shows the job's one
sentence. What runs in the editor's own process (opening and laying out a file, building
its drawing, undoing) is watched here: the same guard's thread reads the resident size a
few times a second and, past the budget (:func:`~canopy.engine.model.limits.memory_budget`),
stops whatever the GUI thread is computing by raising :class:`MemoryBudgetExceeded` in it
(an asynchronous exception, delivered at its next Python instruction). The exception
hook (:mod:`canopy.app.error_hook`) and the undo commands (:mod:`canopy.app.commands`)
show its sentence in a dialog; the computation's objects are freed as the exception
unwinds it, and the kernel's out-of-memory killer, which ends a process without a word,
is not reached first. The watch arms again once the editor is back under the budget.
"""

from __future__ import annotations

import ctypes
import threading

from canopy.engine.model.limits import gigabytes, memory_budget
from canopy.engine.process.memory_guard import resident_bytes, start_memory_guard

REARM_SECONDS = 1.0
"""How often a spent watch checks whether the editor is back under the budget."""


class MemoryBudgetExceeded(Exception):  # noqa: N818 - what the user reads is its sentence
    """Raised in the GUI thread when the editor passes the memory budget."""

    def __str__(self) -> str:
        return (f"Canopy stopped this computation: the editor passed its memory budget of "
                f"{gigabytes(memory_budget())} (docs/limits.md; CANOPY_MEMORY_BUDGET raises "
                "it). The document is kept; a smaller topology or a computation in the "
                "engine (Compute menu) needs less.")


_gui: dict[str, int] = {}


def install_memory_watch(budget: int | None = None) -> bool:
    """Watch the editor's memory from now on (call it from the GUI thread); False where
    the resident size cannot be read (no ``/proc``)."""
    _gui["thread"] = threading.get_ident()
    _gui["budget"] = memory_budget() if budget is None else budget
    return start_memory_guard(_breach, _gui["budget"]) is not None


def _breach(message: str) -> None:
    """On the guard's thread: stop the GUI thread's computation, then wait to re-arm."""
    raise_in_gui_thread(MemoryBudgetExceeded)
    threading.Thread(target=_rearm, name="canopy-memory-rearm", daemon=True).start()


def raise_in_gui_thread(kind: type[BaseException]) -> None:
    """Have the GUI thread raise ``kind`` at its next Python instruction."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(_gui["thread"]),
                                               ctypes.py_object(kind))


def _rearm() -> None:
    stop = threading.Event()
    while not stop.wait(REARM_SECONDS):
        size = resident_bytes()
        if size is not None and size < _gui["budget"]:
            start_memory_guard(_breach, _gui["budget"])
            return
