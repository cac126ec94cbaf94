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


def collector_threshold(progress):
    import gc
    return gc.get_threshold()[0], gc.get_freeze_count() > 0


def echo(value, progress):
    return value


def scheduling(progress):
    import os
    policy = os.sched_getscheduler(0) if hasattr(os, "SCHED_BATCH") else None
    return os.nice(0), policy
