"""All-to-all schedules as MSCCL++ execution plans: the MSCCL program of
:func:`canopy.engine.alltoall.msccl.alltoall_xml` (out of place) translated by
:func:`canopy.engine.mscclpp.writer.algo_plan` and checked (:mod:`canopy.engine.mscclpp.files`).

The program sends everything a GPU sends to one peer, its own blocks and those it relays,
through one thread block, so connections carry unequal data; the schedule's rates are what
let routes share a link, and the execution model gives every route a share of its links
in proportion to its rate (:mod:`canopy.engine.alltoall.compare`). A single channel per
connection would get equal shares instead, and on links shared by light and heavy
connections the light ones, held back elsewhere, leave their shares idle. So a port
connection through switches carrying V chunks of the loop gets ``V / v`` lanes (the
writer's rule 10: parallel port channels, each a queue pair the NIC serves in turn),
rounded, at least 1 and at most :data:`~canopy.engine.mscclpp.writer.MAX_LANES` (halved
until every thread block's channels fit the runtime's 16), v the fewest chunks any such
connection carries: connections sharing a NIC get shares in proportion to their chunks,
which follow the routes' rates.

A port connection between two GPUs joined by a link of their own keeps one channel. That
link carries only the connections between those two GPUs, each over that link alone, so
none is held back elsewhere and they use the whole link whatever their shares; lanes
there change only how the link serves the messages (a connection's chunks dealt over
parallel channels move side by side instead of one after the other), which on long relay
routes costs time, since relays wait for whole messages.

A thread block of more than the runtime's ops is cut into parts (the writer's rule 8),
and the plan asks for them in lockstep: a relay's next send waits for messages its
connection carries in order, and parts running iterations apart would put two iterations'
messages of one connection on its link at once.
"""

from __future__ import annotations

import os
from typing import Any

from canopy.engine.alltoall.msccl import alltoall_xml
from canopy.engine.model.topology import Topology
from canopy.engine.msccl.model import STEP_TYPES, XmlAlgo
from canopy.engine.msccl.reader import read_msccl_bytes
from canopy.engine.mscclpp.files import (
    REFERENCE_SIZE,
    PlanFile,
    checked_plan,
    rank_servers,
    unit_for,
)
from canopy.engine.mscclpp.writer import MAX_LANES, MAX_OPERATION, MscclppLimitError


def alltoall_plan(path: str | os.PathLike[str], topology: Topology, schedule: Any,
                  tune: bool = True) -> PlanFile:
    """The out-of-place all-to-all plan of an all-to-all schedule
    (:func:`canopy.engine.alltoall.msccl.alltoall_xml`'s program)."""
    algo = read_msccl_bytes(alltoall_xml(schedule).data)
    unit = unit_for(algo, topology if tune else None, REFERENCE_SIZE)
    servers = rank_servers(topology)
    direct = linked_ranks(topology)
    most = MAX_LANES
    while True:           # fewer lanes where a thread block's channels exceed the runtime's
        try:
            return checked_plan(algo, servers, os.fspath(path), unit, None,
                                lanes=port_lanes(algo, servers, most, direct),
                                lockstep=True)
        except MscclppLimitError:
            if most == 1:
                raise
            most //= 2


def linked_ranks(topology: Topology) -> frozenset[tuple[int, int]]:
    """The (sender, receiver) ranks joined by a link of their own."""
    rank = {v: r for r, v in enumerate(topology.compute_nodes())}
    return frozenset((rank[u], rank[v]) for u, v in topology.capacities()
                     if u in rank and v in rank)


def port_lanes(algo: XmlAlgo, servers: list[int], most: int = MAX_LANES,
               direct: frozenset[tuple[int, int]] = frozenset()
               ) -> dict[tuple[int, int, int], int]:
    """Lanes per port connection (sender, receiver, channel): one where ``direct`` holds
    its ranks (a link of their own), else its chunks of the loop over the fewest any
    such other port connection carries, rounded, within 1 and ``most``."""
    volumes: dict[tuple[int, int, int], int] = {}
    for gpu in algo.gpus:
        for tb in gpu.tbs:
            if tb.send >= 0 and servers[gpu.id] != servers[tb.send]:
                volumes[(gpu.id, tb.send, tb.chan)] = sum(
                    st.cnt for st in tb.steps if STEP_TYPES[st.type].sends)
    least = min((v for conn, v in volumes.items() if v and conn[:2] not in direct),
                default=1)
    return {conn: 1 if conn[:2] in direct else min(most, max(1, (2 * v + least) // (2 * least)))
            for conn, v in volumes.items()}


NEAR = 0.98       # a plan this near compare's MCF row needs no explanation


def mcf_gap(topology: Topology, result: Any, file: PlanFile, size: int = REFERENCE_SIZE
            ) -> str | None:
    """Where the plan of ``result`` (an :class:`~canopy.engine.alltoall.solve.AllToAllResult`)
    runs below NEAR of compare's MCF row at ``size`` in the execution model, one sentence
    saying by how much and why; else None.

    The plan's lanes follow the routes' rates only as closely as whole chunks per pair
    (the program's apportionment) and at most MAX_LANES channels per connection allow,
    and thread blocks past the runtime's ops are cut into parts (the writer's rule 8),
    whose semaphores hold each part back for the others; compare's MCF row gives every
    route of every pair a connection of its own weighted by the route's exact rate."""
    from canopy.engine.alltoall.compare import mcf_plan
    from canopy.engine.execution.program import algbw_gbps
    from canopy.engine.execution.simulate import fastest
    from canopy.engine.model.sizes import size_label
    from canopy.engine.mscclpp.reader import read_plan_bytes
    from canopy.engine.mscclpp.timing import time_plan

    mine = time_plan(read_plan_bytes(file.data, file.path), topology, size).algbw
    row = algbw_gbps(size, fastest(topology, mcf_plan(result), size).time_us)
    ratio = float(mine / row)
    if ratio >= NEAR:
        return None
    return (f"at {size_label(size)} the plan runs {float(mine):.2f} GB/s in the execution "
            f"model, {ratio:.1%} of compare's MCF row ({float(row):.2f} GB/s): its "
            "connections get shares of their links in lanes of whole chunks (at most "
            f"{MAX_LANES} per connection) and thread blocks past {MAX_OPERATION} ops run "
            "cut into parts that wait on each other, where the MCF row gives each route a "
            "connection of its own weighted by its exact rate")
