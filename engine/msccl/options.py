"""How an MSCCL XML program is written: protocol, runtime dialect, layout and limits."""

from __future__ import annotations

from dataclasses import dataclass, field

from canopy.engine.msccl.threadblocks import MscclLimits

PROTOCOLS = ("Simple", "LL128", "LL")
RUNTIMES = ("msccl", "rccl")
LAYOUTS = ("auto", "pipelined", "per-tree", "mixed", "compact")


@dataclass(frozen=True)
class MscclOptions:
    """How to write the program (the GUI's export dialog maps onto these).

    ``layout`` is how transfers share connections. ``"pipelined"``: every unit tree moves
    its chunk in chains of its own, and every connection (peer, channel) and thread block
    carries one chain, so successive loop iterations of a tree pipeline as in Canopy's
    execution model (:mod:`canopy.engine.execution.simulate`: every tree edge its own connection, a
    tree of multiplicity m on m of them); it needs about k channels per pair of GPUs.
    Where that does not fit, chains move q chunks per step for the smallest q of
    :func:`pipeline_pieces` that fits (a tree then has about m/q connections).
    ``"per-tree"``: the same with a tree's m chunks in one step, one connection per tree
    edge (fewer channels; a tree of multiplicity m then gets one share of a shared link,
    not m). ``"mixed"``: per-tree while channels last, shared beyond. ``"compact"``:
    chains share thread blocks, fewest channels and thread blocks, but a thread block's
    steps wait on each other. ``"auto"`` (default): the connections
    :func:`canopy.engine.deploy.runtime_choice.runtime_layout` gives the plan (the ones
    ``canopy compare`` simulates): unit connections (pipelined) where they fit, else
    trees cut into parts of q chunks with a connection per edge, else shared
    connections, each in the simulation's order; a plan whose edges name channels
    (rings) keeps them. Where none of those fits, the first of pipelined, per-tree,
    mixed and compact that does (compact shares thread blocks).
    ``fuse`` lets a relay receive and forward in one pipelined step (``rcs``, ``rrs``,
    ``rrcs``); ``channels`` is how many channels compact chains may spread over before one
    is cut into a receive and a dependent send.
    """

    inplace: bool = True
    protocol: str = "Simple"
    name: str | None = None
    min_bytes: int = 0
    max_bytes: int = 2**63 - 1
    runtime: str = "msccl"       # "rccl" names reduce-scatter as RCCL's parser does
    fuse: bool = True            # receive-and-forward in one step where channels allow
    channels: int = 4            # channels fused chains may spread over before splitting
    layout: str = "auto"         # "pipelined", "compact" or "auto" (see above)
    limits: MscclLimits = field(default_factory=MscclLimits)
