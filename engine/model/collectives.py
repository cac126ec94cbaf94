"""The collectives Canopy schedules and the algbw that nccl-tests reports for each.

Zhao et al., "ForestColl", arXiv:2402.06787, §4.6: reduce-scatter runs the allgather trees
reversed at the same rate; allreduce is reduce-scatter then allgather, half the algbw.
"""

from __future__ import annotations

from fractions import Fraction

COLLECTIVES = ("allgather", "reduce-scatter", "allreduce")


def collective_algbw(collective: str, n: int, x: Fraction) -> Fraction:
    """nccl-tests algbw from per-node broadcast rate x: N·x, halved for allreduce (§4.6)."""
    if collective not in COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r}")
    return n * x / 2 if collective == "allreduce" else n * x
