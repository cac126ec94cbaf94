"""Module-level functions for engine-job tests (a child process imports them by name)."""

from canopy.engine.model.errors import TopologyError


def unbalanced(progress):
    raise TopologyError("x.json: node 'a' is unbalanced.")


def buggy(progress):
    return 1 / 0


def count_to(n, progress):
    for i in range(n):
        progress("counting", i / n)
    return n


def batch_settings(progress):
    """The collector's young threshold, whether start-up is frozen, and
    :func:`mapped_blocks_added` in this process."""
    import gc
    return gc.get_threshold()[0], gc.get_freeze_count() > 0, mapped_blocks_added()


def echo(value, progress):
    return value


def scheduling(progress):
    import os
    policy = os.sched_getscheduler(0) if hasattr(os, "SCHED_BATCH") else None
    return os.nice(0), policy


def solve_forever(topology, progress):
    """Solve ``topology`` again and again, reporting each solve's phases: an engine job
    still running whenever a phase is seen, however fast one solve is."""
    from canopy.engine.forestcoll.solve import solve
    while True:
        solve(topology, progress=progress)


def spin(pid_file, progress):
    """Compute forever (until killed), after writing this process's id to ``pid_file``."""
    import os
    with open(pid_file, "w") as f:
        f.write(str(os.getpid()))
    while True:
        progress("spinning", 0.5)


def spin_quietly(pid_file, progress):
    """Compute forever without a word to the parent (a long LP sends nothing for
    minutes), after writing this process's id to ``pid_file``."""
    import os
    with open(pid_file, "w") as f:
        f.write(str(os.getpid()))
    while True:
        pass


def grow(progress):
    """Take memory until stopped."""
    hoard = []
    while True:
        hoard.append(bytearray(16 << 20))
        progress("growing", 0.5)


def mapped_blocks_added():
    """How many blocks glibc serves with a mapping of their own for one malloc of 8 MiB
    (mallinfo2's hblks before and after; the block is not freed), or None where the C
    library has no mallinfo2 (not glibc)."""
    import ctypes

    class Info(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in
                    ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                     "uordblks", "fordblks", "keepcost")]

    try:
        libc = ctypes.CDLL(None)
        mallinfo2 = libc.mallinfo2
    except (OSError, AttributeError, TypeError):
        return None
    mallinfo2.restype = Info
    libc.malloc.restype = ctypes.c_void_p
    before = mallinfo2().hblks
    libc.malloc(8 << 20)
    return mallinfo2().hblks - before
