"""The MSCCL XML program as the runtime reads it: algorithm, GPUs, thread blocks, steps.

These classes are what :mod:`~canopy.engine.msccl.reader` builds from a file,
:mod:`~canopy.engine.msccl.checks` validates and :mod:`~canopy.engine.msccl.executor` runs.
Step semantics (those of the MSCCL interpreter, microsoft/msccl and RCCL): ``s`` sends
``src``; ``r`` receives into ``dst``; ``rcs`` receives into ``dst`` and sends it on; ``rrs``
receives, adds ``src`` and sends the sum; ``rrc`` receives and writes the sum with ``src`` to
``dst``; ``rrcs`` does both; ``cpy`` copies ``src`` to ``dst``; ``re`` adds ``src`` into
``dst``; ``nop`` only waits. The ``dst`` of a send and the ``src`` of a receive are not used
by the runtime; by the msccl-tools convention they name the slot on the peer, so both ends
of a transfer carry the same (src, dst) pair (see :mod:`~canopy.engine.msccl.checks`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from canopy.engine.model.errors import CanopyError

COLLECTIVES = {"allgather": "allgather", "reduce_scatter": "reduce_scatter",
               "reducescatter": "reduce_scatter", "allreduce": "allreduce",
               "alltoall": "alltoall"}
PROTOCOLS = ("Simple", "LL128", "LL")
BUFFER_NAMES = {"i": "input", "o": "output", "s": "scratch"}


@dataclass(frozen=True)
class StepType:
    """What a step type does locally and on its connections."""

    receives: bool
    sends: bool
    reads_src: bool
    reads_dst: bool
    writes_dst: bool


STEP_TYPES = {
    "s": StepType(False, True, True, False, False),
    "r": StepType(True, False, False, False, True),
    "rcs": StepType(True, True, False, False, True),
    "rrs": StepType(True, True, True, False, False),
    "rrc": StepType(True, False, True, False, True),
    "rrcs": StepType(True, True, True, False, True),
    "cpy": StepType(False, False, True, False, True),
    "re": StepType(False, False, True, True, True),
    "nop": StepType(False, False, False, False, False),
}


class MscclXmlError(CanopyError):
    """An MSCCL XML algorithm that the runtime rejects or that computes a wrong result."""


class XmlStep(NamedTuple):
    """One ``<step>`` (a named tuple: programs of tens of thousands of steps are built in
    a fraction of the time a frozen dataclass takes)."""

    s: int
    type: str
    srcbuf: str
    srcoff: int
    dstbuf: str
    dstoff: int
    cnt: int
    depid: int
    deps: int
    hasdep: bool

    @property
    def kind(self) -> StepType:
        return STEP_TYPES[self.type]

    @property
    def slots(self) -> tuple[str, int, str, int]:
        """(srcbuf, srcoff, dstbuf, dstoff): what both ends of a transfer must agree on."""
        return (self.srcbuf, self.srcoff, self.dstbuf, self.dstoff)


@dataclass
class XmlThreadBlock:
    id: int
    send: int
    recv: int
    chan: int
    steps: list[XmlStep] = field(default_factory=list)
    via: tuple[str, ...] = ()     # Canopy's ``via``: nodes between the GPUs of its send


@dataclass
class XmlGpu:
    id: int
    i_chunks: int
    o_chunks: int
    s_chunks: int
    tbs: list[XmlThreadBlock] = field(default_factory=list)


@dataclass
class XmlAlgo:
    name: str
    proto: str
    nchannels: int
    nchunksperloop: int
    ngpus: int
    coll: str                    # canonical: allgather, reduce_scatter or allreduce
    inplace: bool
    outofplace: bool
    gpus: list[XmlGpu]
    min_bytes: int = 0                 # the message sizes the runtime runs it at (both
    max_bytes: int = 2**63 - 1         # included, as RCCL reads them)

    @property
    def chunks_per_rank(self) -> int:
        return self.nchunksperloop // self.ngpus

    def modes(self) -> list[bool]:
        """The in-place flags to run: True for in place, False for out of place."""
        return [m for m, on in ((True, self.inplace), (False, self.outofplace)) if on]


Connection = tuple[int, int, int]        # (sender rank, receiver rank, channel)


def connection_steps(algo: XmlAlgo, sending: bool
                     ) -> dict[Connection, list[tuple[int, XmlStep]]]:
    """Per connection, its sending (or receiving) steps in order, as (tb id, step).
    Messages of a connection match in this order."""
    out: dict[Connection, list[tuple[int, XmlStep]]] = {}
    for gpu in algo.gpus:
        for tb in gpu.tbs:
            for step in tb.steps:
                kind = STEP_TYPES.get(step.type)
                if kind is None:
                    continue
                if sending and kind.sends:
                    out.setdefault((gpu.id, tb.send, tb.chan), []).append((tb.id, step))
                elif not sending and kind.receives:
                    out.setdefault((tb.recv, gpu.id, tb.chan), []).append((tb.id, step))
    return out


def where(gpu: int, tb: int | None = None, step: int | None = None) -> str:
    """'rank 3 tb 1 step 4', as far as known."""
    text = f"rank {gpu}"
    if tb is not None:
        text += f" tb {tb}"
    if step is not None:
        text += f" step {step}"
    return text
