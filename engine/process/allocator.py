"""The C allocator set for a process that runs one engine computation.

glibc's ``malloc`` serves a block above its mmap threshold (128 KiB at first, raised as
such blocks are freed, to 32 MiB at most) with a fresh mapping of its own, and returns the
heap's free top to the system once it passes the trim threshold (128 KiB). The simulator
allocates and frees arrays of megabytes in every run (a program's sends, their sizes,
dependencies and times), dozens of runs per command: each fresh mapping is zero-filled by
the kernel page by page as it is first written, system time spent again and again on
memory the process had a moment before. :func:`batch_allocator` keeps blocks up to
KEPT_BYTES on the heap and the heap's freed top up to KEPT_BYTES, so they are reused. It is
called where a process starts such work and ends with it (the ``canopy`` command, an
engine job's child process, beside :func:`~canopy.engine.process.gc_tuning.batch_collector`):
the memory kept is at most KEPT_BYTES above what the computation holds, and goes back to
the system when the process ends. Elsewhere than glibc (no ``mallopt``, or one that
ignores these settings) the allocator's own defaults stay.
"""

from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD = -1     # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3

KEPT_BYTES = 64 << 20
"""Blocks up to this size come from the heap, and a free top up to it stays there."""


def batch_allocator() -> None:
    """Keep freed blocks for reuse (see above); nothing where there is no ``mallopt``."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):
        return
    mallopt(M_MMAP_THRESHOLD, KEPT_BYTES)
    mallopt(M_TRIM_THRESHOLD, KEPT_BYTES)
