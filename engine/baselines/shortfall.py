"""Why a baseline's schedule executes below its own bound: one line naming the cause.

A schedule's bound is its busiest link's time (link congestion, bandwidth only); the
execution model (:mod:`canopy.engine.execution.simulate`) adds what the runtime adds. Where a
baseline runs below SHORTFALL of its bound at a message size, :func:`shortfall_line`
says which of these it is:

* *relayed ring hops.* A ring hop between two GPUs with no direct link is routed through
  other GPUs (:class:`~canopy.engine.network.routing.Router`); a GPU on such a route is a relay
  that stores and forwards each message (a compute node forwards a piece once it has it
  whole), and every step of a ring waits for the step before it on the neighbouring GPU,
  so the whole ring moves at the pace of its slowest, relayed, hop. NCCL's rings never
  relay through a GPU's compute engines; a topology without a Hamiltonian cycle of direct
  links (an odd mesh) has no ring that avoids it.
* *a timetable with idle links.* TACOS (Won et al., arXiv:2304.05301) matches whole
  chunks to links step by step; a link whose next chunk has not arrived yet waits idle,
  so its timetable takes longer than its busiest link's load needs even without latency
  (``timetable_algbw`` against the bound; the 3x3 mesh's allreduce: 87.5 %), and the
  execution cannot run much faster than the timetable it follows.
* *filling and draining the pipeline.* A piece crosses ``stages`` sends in a row; with
  ``pieces`` loop iterations up to (stages - 1) / (pieces + stages - 1) of the time is
  spent while the pipeline fills and drains (all of it where every stage is as slow as
  the busiest).
* otherwise, waiting on connections and links shared with other trees or rings, named
  with the busiest link.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction

SHORTFALL = Fraction(95, 100)   # below this fraction of its own bound a row says why


def relayed_hops(rings: Iterable[tuple[list[str], Mapping[tuple[str, str], tuple[str, ...]]]],
                 compute: set[str]) -> list[tuple[str, ...]]:
    """The routes of ring hops that pass through another compute node (in ring order)."""
    return [route for _, hops in rings for route in hops.values()
            if any(node in compute for node in route[1:-1])]


def shortfall_line(algorithm: str, fraction: Fraction, size_text: str,
                   details: Mapping[str, object], stages: int, pieces: int,
                   bound: Fraction | None = None) -> str | None:
    """One line on why ``algorithm`` runs at ``fraction`` of its own bound at a size, or
    None at SHORTFALL or above. ``details`` are the baseline's (``relayed_hops``,
    ``hops``, ``timetable_algbw``, ``bottleneck_link``); ``stages`` and ``pieces`` its
    pipeline there; ``bound`` its own bound (GB/s), which a timetable is measured by."""
    if fraction >= SHORTFALL:
        return None
    head = f"{algorithm} runs at {float(fraction):.1%} of its own bound at {size_text}"
    relayed = details.get("relayed_hops")
    if isinstance(relayed, list) and relayed:
        route = " -> ".join(relayed[0])
        return (f"{head}: {len(relayed)} of its {details.get('hops', '?')} ring hops relay "
                f"through other GPUs (e.g. {route}), which store and forward each message, "
                f"and every ring step waits for the one before it.")
    timetable = details.get("timetable_algbw")
    if isinstance(timetable, Fraction) and bound and timetable / bound < SHORTFALL:
        return (f"{head}: its timetable of whole chunks leaves links idle while their next "
                f"chunk is on its way, so even without latency it takes "
                f"{float(bound / timetable):.2f}x the busiest link's time "
                f"({float(timetable / bound):.1%} of the bound).")
    fill = Fraction(max(0, stages - 1), pieces + max(0, stages - 1))
    if fill >= (1 - fraction) / 2:
        return (f"{head}: its pieces cross {stages} sends in a row, and at {pieces} loop "
                f"iterations filling and draining that pipeline takes up to {float(fill):.1%} "
                f"of the time.")
    link = details.get("bottleneck_link")
    where = f" (busiest link {' -> '.join(link)})" if isinstance(link, list | tuple) else ""
    return (f"{head}: its messages wait on connections and links shared with its other "
            f"trees or rings{where}.")
