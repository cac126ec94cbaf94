"""The baselines ``canopy compare`` times, as MSCCL++ plans a user can run on the hardware
(``canopy compare T --collective C --mscclpp-baselines DIR``).

NCCL's rings (:mod:`canopy.engine.baselines.ring`: several rings, each server's GPUs
contiguous, the data split evenly), and where they apply Blink's trees and the LR rings,
are lowered to MSCCL programs exactly as Canopy lowers its own plans
(:func:`canopy.engine.msccl.plan_xml`: a ring keeps its channel, chains pipelined) and
translated to plans (:mod:`canopy.engine.mscclpp.writer`), each checked by the parser's
rules and a symbolic run. Each plan is timed in the execution model at the size given
(:func:`canopy.engine.mscclpp.timing.time_plan`) to set it beside the baseline's own row:
running the baseline's plan and Canopy's on the same cluster compares them on hardware.
NCCL's double binary tree has no baseline in Canopy (its trees are not modelled), so it
is not exported. TACOS (a timetable per size) is left out too, and so is Blink: it runs
every collective as an allreduce, a reduce of the whole buffer into one root pipelined
with a broadcast from it, over trees all rooted at that GPU, while the MSCCL lowering
(:mod:`canopy.engine.msccl.lowering`) cuts the buffer into a block per rank, each lowered
over the trees of its own root.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from canopy.engine.model.errors import CanopyError
from canopy.engine.model.plan import BaselineResult
from canopy.engine.model.topology import Topology
from canopy.engine.msccl.threadblocks import MscclLimits
from canopy.engine.mscclpp.files import PlanFile, checked_plan, rank_servers, unit_for

EXPORTABLE = ("ring", "blink", "lr1", "lr3")
SINGLE_ROOT = ("not exported as a plan (Blink runs every collective as an allreduce over "
               "trees all rooted at one GPU, and Canopy's lowering lowers each rank's block "
               "over trees of its own root)")


@dataclass(frozen=True)
class BaselinePlan:
    """One baseline's plan (None, with ``reason``, where it does not apply or fit) and its
    algbw in the execution model at ``size`` bytes."""

    algorithm: str
    path: str
    file: PlanFile | None = None
    launcher: str = ""
    size: int = 0
    algbw: Fraction | None = None
    reason: str | None = None


def _builders(topology: Topology, collective: str) -> dict[str, Callable[[], BaselineResult]]:
    from canopy.engine.baselines.blink import blink_baseline
    from canopy.engine.baselines.lr_rings import lr_baseline
    from canopy.engine.baselines.ring import ring_baseline
    return {"ring": lambda: ring_baseline(topology, collective),
            "blink": lambda: blink_baseline(topology, collective),
            "lr1": lambda: lr_baseline(topology, collective, "lr1"),
            "lr3": lambda: lr_baseline(topology, collective, "lr3")}


def baseline_plan(topology: Topology, collective: str, algorithm: str, path: str,
                  size: int = 1 << 30, inplace: bool = True,
                  limits: MscclLimits | None = None, result: BaselineResult | None = None,
                  write: bool = True) -> BaselinePlan:
    """The MSCCL++ plan of baseline ``algorithm`` (one of EXPORTABLE) for ``collective``,
    its pipeline unit picked for ``size`` as compare picks the baseline's depth, checked,
    timed at ``size`` and (``write``) written to ``path`` with its launcher."""
    from canopy.engine.deploy.mscclpp_export import _first_fitting
    from canopy.engine.msccl import MscclOptions, plan_xml
    from canopy.engine.mscclpp.files import write_plans
    from canopy.engine.mscclpp.reader import read_plan_bytes
    from canopy.engine.mscclpp.timing import time_plan

    if algorithm not in EXPORTABLE:
        return BaselinePlan(algorithm, path, reason=(
            "not exported as a plan (TACOS runs a timetable per message size)"
            if algorithm == "tacos" else f"no baseline '{algorithm}' is exported as a plan"))
    if algorithm == "blink":
        return BaselinePlan(algorithm, path, reason=SINGLE_ROOT)
    limits = limits or MscclLimits()
    result = result or _builders(topology, collective)[algorithm]()
    if not result.applicable or result.plan_at is None:
        return BaselinePlan(algorithm, path, reason=f"does not apply: "
                            f"{(result.not_applicable_reason or 'no plan').rstrip('.')}")
    plan = result.plan_at(Fraction(size))
    servers = rank_servers(topology)

    def build(layout: str, lim: MscclLimits) -> bytes:
        return plan_xml(plan, None, MscclOptions(inplace=inplace, limits=lim, layout=layout))

    try:
        algo = _first_fitting(build, limits, servers)
        unit = unit_for(algo, topology, size)
        name = (f"canopy-baseline-{algorithm}-{collective}-{algo.ngpus}gpus-"
                f"{'inplace' if inplace else 'outofplace'}")
        file = checked_plan(algo, servers, path, unit, name)
        timing = time_plan(read_plan_bytes(file.data, path), topology, size)
    except CanopyError as exc:
        return BaselinePlan(algorithm, path, reason=str(exc).rstrip("."))
    launcher = write_plans([file], path, collective, inplace).launcher if write else ""
    return BaselinePlan(algorithm, path, file, launcher, size, timing.algbw)


def baseline_plans(topology: Topology, collective: str, algorithms: tuple[str, ...],
                   directory: str | os.PathLike[str], size: int = 1 << 30,
                   inplace: bool = True, limits: MscclLimits | None = None
                   ) -> list[BaselinePlan]:
    """:func:`baseline_plan` of each of ``algorithms`` (ForestColl's own plan is
    ``canopy solve --mscclpp``) into ``directory`` as ``ALGORITHM.json``."""
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise CanopyError(f"{directory} cannot be made ({exc.strerror or exc}).") from None
    return [baseline_plan(topology, collective, a, os.path.join(os.fspath(directory),
                                                                f"{a}.json"),
                          size, inplace, limits)
            for a in algorithms if a != "forestcoll"]
