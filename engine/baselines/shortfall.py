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
* *a schedule per size that loads a link more.* TACOS (Won et al., arXiv:2304.05301)
  synthesizes a timetable per message size (with latency, the fastest of its seeds in its
  own step times) and its row's bound is the best of its schedules'; a timetable that
  loads a link more than the best is named with that link and its own bound, and the
  causes below are measured against that bound. (Its timetable's own idle links are no
  cause: the pieces of the loop pipeline each chunk along its route, so the execution
  runs at its link loads' pace even where the timetable's whole-chunk steps do not.)
* *phases in sequence.* TACOS's allreduce is its reduce-scatter timetable followed by its
  allgather timetable, and each link sends the first's chunks before the second's; the
  row's bound adds both phases' loads per link as if they overlapped, but where the
  phases' busiest links differ, in sequence they take the sum of their own bounds' times
  (``phase_bounds_at``), and the pipeline of loop iterations overlaps them only in part.
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
                   bound: Fraction | None = None,
                   own: tuple[Fraction, tuple[str, str]] | None = None,
                   size: int | None = None) -> str | None:
    """One line on why ``algorithm`` runs at ``fraction`` of its own bound at a size, or
    None at SHORTFALL or above. ``details`` are the baseline's (``relayed_hops``,
    ``hops``, ``bottleneck_link``; TACOS's ``timetable_algbw_at``, ``chunks_by_size``,
    ``seeds`` and ``latency_free_bound``);
    ``stages`` and ``pieces`` its pipeline there; ``bound`` its own bound (GB/s);
    ``own`` the bound and busiest link of the schedule it runs at this size (``size``
    bytes) where it builds one per size (TACOS): where that is below ``bound``, the line
    says so first, and the causes below are measured
    against it."""
    if fraction >= SHORTFALL:
        return None
    head = f"{algorithm} runs at {float(fraction):.1%} of its own bound at {size_text}"
    joint = ":"
    if own is not None and bound and own[0] < bound:
        below = fraction * bound / own[0]
        head = (f"{head}: {_per_size(details, size_text, size)} loads {' -> '.join(own[1])} "
                f"more than {_best(details, bound)} (bound {float(own[0]):.2f} GB/s against "
                f"{float(bound):.2f}), and runs at {float(below):.2%} of that bound")
        if below >= SHORTFALL:
            return f"{head}."
        fraction, bound, joint = below, own[0], ";"
    return f"{head}{joint} {_cause(fraction, details, stages, pieces, bound, size)}"


def _per_size(details: Mapping[str, object], size_text: str, size: int | None) -> str:
    """The schedule built for one size, in words (TACOS's timetable, as it chose it)."""
    timed = details.get("timetable_algbw_at")
    algbw = timed.get(size) if isinstance(timed, Mapping) else None
    chosen = details.get("chunks_by_size")
    chunks = chosen.get(size) if isinstance(chosen, Mapping) else None
    if not isinstance(algbw, Fraction) or chunks is None:
        return f"the schedule it builds for {size_text}"
    return (f"its timetable for {size_text}, synthesized with latency ({chunks} chunks per "
            f"node, the fastest of {details.get('seeds', '?')} seeds in TACOS's own step "
            f"times: {float(algbw):.2f} GB/s),")


def _best(details: Mapping[str, object], bound: Fraction) -> str:
    """The schedule whose bound is the row's."""
    if details.get("latency_free_bound") == bound:
        return "its timetable without latency"
    return "its best schedule"


def _cause(fraction: Fraction, details: Mapping[str, object], stages: int, pieces: int,
           bound: Fraction | None, size: int | None = None) -> str:
    """Why a schedule runs at ``fraction`` of ``bound`` (see :func:`shortfall_line`)."""
    relayed = details.get("relayed_hops")
    if isinstance(relayed, list) and relayed:
        route = " -> ".join(relayed[0])
        return (f"{len(relayed)} of its {details.get('hops', '?')} ring hops relay "
                f"through other GPUs (e.g. {route}), which store and forward each message, "
                f"and every ring step waits for the one before it.")
    phases = details.get("phase_bounds_at")
    found = phases.get(size) if isinstance(phases, Mapping) else None
    if found is not None and bound:
        (rs, rs_link), (ag, ag_link) = found
        in_sequence = 1 / (1 / rs + 1 / ag)
        if in_sequence < SHORTFALL * bound:
            return (f"TACOS runs its reduce-scatter timetable and then its allgather "
                    f"timetable, and a link sends the first's chunks before the second's: "
                    f"the phases' times add up ({float(rs):.2f} GB/s with busiest link "
                    f"{' -> '.join(rs_link)}, {float(ag):.2f} with {' -> '.join(ag_link)}: "
                    f"{float(in_sequence):.2f} GB/s in sequence, {float(in_sequence / bound):.1%}"
                    f" of the bound, which takes their loads as overlapping), and the "
                    f"pipeline overlaps them only in part.")
    fill = Fraction(max(0, stages - 1), pieces + max(0, stages - 1))
    if fill >= (1 - fraction) / 2:
        return (f"its pieces cross {stages} sends in a row, and at {pieces} loop "
                f"iterations filling and draining that pipeline takes up to {float(fill):.1%} "
                f"of the time.")
    link = details.get("bottleneck_link")
    where = f" (busiest link {' -> '.join(link)})" if isinstance(link, list | tuple) else ""
    return (f"its messages wait on connections and links shared with its other "
            f"trees or rings{where}.")
