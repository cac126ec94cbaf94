"""The design advice's columns of a sweep row (docs/advise.md).

``limiting_class``: the link classes that raise the optimum when raised alone, joined
by "+"; when none does, the classes that cannot drop without lowering it (co-limiting
classes, which only gain when raised together). ``keeps_down_to.CLASS``: each class's
lowest per-link bandwidth (GB/s) that keeps the optimum; with ``advise-failures``,
``worst_failure`` (the element whose failure lowers the optimum most) and
``worst_failure_algbw`` (GB/s after it).
"""

from __future__ import annotations

from typing import Any

from canopy.engine.model.topology import Topology

ADVICE = ("advise", "advise-failures")


def advice_columns(topology: Topology, collective: str, failures: bool) -> dict[str, Any]:
    """The advice columns of one design."""
    from canopy.engine.advise.report import advise

    advisor = advise(topology, collective, failures=failures)
    names = [lc.name for lc in advisor.pnet.classes]
    limiting = [n for n, curve in zip(names, advisor.curves, strict=True) if curve.limits]
    if not limiting:
        limiting = [n for n, curve in zip(names, advisor.curves, strict=True)
                    if curve.threshold == curve.today]
    row: dict[str, Any] = {"limiting_class": "+".join(limiting)}
    for name, curve in zip(names, advisor.curves, strict=True):
        row[f"keeps_down_to.{name}"] = float(curve.threshold)
    if failures and advisor.failures:
        worst = advisor.failures[0]
        row["worst_failure"] = worst.element
        row["worst_failure_algbw"] = float(worst.ratio * advisor.factor)
    return row
