"""The time-stepped form of a route schedule, for store-and-forward links.

Basu et al. (arXiv:2309.13541), "time-stepped MCF": where every hop stores a whole message
before forwarding it (host-based forwarding), data cannot stream through a relay; a schedule
then runs in steps, and step k moves every route's k-th hop. A relay forwards in step k+1
only what it received in step k, so each step is a set of independent link transfers whose
duration is set by its busiest link.

:func:`time_steps` turns a verified schedule into that form: per step, the exact load of
every link as a fraction of the per-rank buffer M, and the step's time per byte of M
(max over links of load / bandwidth). The total, ``time_per_byte``, is what the
store-and-forward execution needs; it is at least the fluid time 1 / algbw and equals
it when every route is a single hop (a fully connected network).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from canopy.engine.alltoall.schedule import AllToAllSchedule


@dataclass(frozen=True)
class TimeStep:
    """Step ``index``: ``loads[(u, v)]`` bytes per byte of M cross link u -> v."""

    index: int
    loads: dict[tuple[str, str], Fraction]
    seconds_per_byte: Fraction        # 1e-9 s per byte of M per GB/s: time = M · this


@dataclass(frozen=True)
class SteppedSchedule:
    steps: tuple[TimeStep, ...]

    @property
    def time_per_byte(self) -> Fraction:
        """Σ over steps of the busiest link's load / bandwidth (1/GB/s per byte of M)."""
        return sum((s.seconds_per_byte for s in self.steps), Fraction(0))

    @property
    def algbw(self) -> Fraction:
        """M / time in GB/s for the store-and-forward execution."""
        return 1 / self.time_per_byte


def time_steps(schedule: AllToAllSchedule) -> SteppedSchedule:
    """Split ``schedule``'s routes into store-and-forward steps (module docstring). Hops
    are counted between compute nodes; switches (cut-through) stay inside a hop."""
    problem = schedule.problem
    names = problem.names
    caps = dict(zip(zip(problem.tails.tolist(), problem.heads.tolist(), strict=True),
                    problem.capacity, strict=True))
    compute = set(problem.compute)
    n = problem.num_compute
    # integer rate numerators per step and link; each is a share of M once scaled
    per_step: list[dict[tuple[int, int], int]] = []
    for route, num in zip(schedule.routes, schedule.numerators, strict=True):
        if not num:
            continue
        for _, path in route.paths():
            hop = 0
            for u, v in zip(path, path[1:], strict=False):
                while len(per_step) <= hop:
                    per_step.append({})
                per_step[hop][(u, v)] = per_step[hop].get((u, v), 0) + num
                if v in compute:
                    hop += 1
    scale = 1 / (schedule.denominator * schedule.lam * n)   # fraction of M per numerator
    steps = []
    for k, sums in enumerate(per_step):
        loads = {link: x * scale for link, x in sums.items()}
        worst = max(load / caps[link] for link, load in loads.items())
        steps.append(TimeStep(k, {(names[u], names[v]): x for (u, v), x in loads.items()},
                              worst))
    return SteppedSchedule(tuple(steps))
