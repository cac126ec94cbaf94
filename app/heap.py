"""Short pauses of the cyclic garbage collector in the editor.

CPython's cyclic collector now and then makes a full pass over every object it tracks,
holding up the event loop meanwhile. At start-up the editor's modules (PySide6,
pyqtgraph, numpy, scipy, the engine) alone are 120,000 such objects: every full pass
cost 0.1 s before it even reached a drawing, and opening, solving and showing 128 x DGX
A100 saw passes of 260 to 380 ms (bench/gui_responsiveness.py).

:func:`settle_start_up` runs once, when ``canopy gui`` starts, before the first window
exists: it collects what importing left behind, then moves every object alive (modules,
classes, functions: they live as long as the process) out of the collector's sight with
:func:`gc.freeze`. Full passes then walk only what the editor made since: drawings, their
canvas items, results. Nothing a window creates is ever frozen: frozen garbage cycles
are never collected, and a Qt wrapper kept alive that way could be handed out for a new
object at its address. This is the only place the editor touches the collector; engine
jobs run in their own processes.
"""

from __future__ import annotations

import gc

_settled = False


def settle_start_up() -> None:
    """Keep the objects of start-up out of the collector's full passes (first call only)."""
    global _settled
    if not _settled:
        _settled = True
        gc.collect()
        gc.freeze()
