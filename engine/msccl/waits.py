"""Whether an MSCCL program's thread blocks can all run their steps to the end.

The runtime runs every thread block's steps in order; a step also waits for its
``depid``/``deps`` step and, if it receives, for its message; a send waits for room on its
connection, whose messages match in order. With connections that buffer a single message
(the strictest, as :mod:`canopy.engine.msccl.executor` runs them), the send of a
connection's (k+1)-th message waits for the receive of its k-th. Where these waits within
one loop iteration form no cycle, any order of the steps that respects them (a topological
order) is a run of the iteration, and the next iteration's steps wait only on this
iteration's (the steps before them in their thread blocks, the earlier messages of their
connections): no loop iteration deadlocks. A fused step (receive and send in one) is
taken as waiting for both its message and room, more than the runtime asks.
"""

from __future__ import annotations

from collections import defaultdict

from canopy.engine.msccl.lowering import Step
from canopy.engine.msccl.threadblocks import ThreadBlockAssignment


def runs_to_end(assignment: ThreadBlockAssignment) -> bool:
    """Whether the waits of one loop iteration of ``assignment`` form no cycle (see the
    module docstring)."""
    index: dict[Step, int] = {}
    for rank_tbs in assignment.tbs:
        for tb in rank_tbs:
            for step in tb.steps:
                index[step] = len(index)
    unlocks: list[list[int]] = [[] for _ in index]
    missing = [0] * len(index)

    def wait(before: int, after: int) -> None:
        unlocks[before].append(after)
        missing[after] += 1

    sends: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    receives: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    for rank, rank_tbs in enumerate(assignment.tbs):
        for tb in rank_tbs:
            previous = -1
            for step in tb.steps:
                i = index[step]
                if previous >= 0:
                    wait(previous, i)
                previous = i
                if step.dep is not None:
                    wait(index[step.dep], i)
                if step.send_peer >= 0:
                    sends[(rank, step.send_peer, tb.channel)].append(i)
                if step.recv_peer >= 0:
                    receives[(step.recv_peer, rank, tb.channel)].append(i)
    for connection, sent in sends.items():
        taken = receives[connection]
        for k, (send, receive) in enumerate(zip(sent, taken, strict=True)):
            wait(send, receive)
            if k + 1 < len(sent):
                wait(receive, sent[k + 1])
    ready = [i for i, count in enumerate(missing) if count == 0]
    ran = 0
    while ready:
        i = ready.pop()
        ran += 1
        for j in unlocks[i]:
            missing[j] -= 1
            if missing[j] == 0:
                ready.append(j)
    return ran == len(index)
