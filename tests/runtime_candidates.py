"""Stand-ins for runtime_schedule's choice rules (connections._near_tie,
connections._smaller_messages): candidates with a given fraction of the optimum at 1 GiB
and a simulator that answers a given fraction at SECOND_SIZE."""

from fractions import Fraction
from types import SimpleNamespace

import canopy.engine.execution.simulate as simulate
from canopy.engine.deploy.runtime_choice import _Candidate

OPTIMUM = Fraction(100)


def candidate(k: int, fraction: Fraction, name: str) -> _Candidate:
    """A candidate of ``k`` trees running ``fraction`` of the optimum at 1 GiB on the
    layout ``name`` (k = 5 exact, others within 1 %)."""
    plan = SimpleNamespace(name=name)
    return _Candidate(fraction, SimpleNamespace(k=k, extra={}), plan, plan, name,
                      "0" if k == 5 else "1")


def answer_at(monkeypatch, at_size: dict[str, Fraction]) -> list[tuple[int, str]]:
    """Make ``simulate.fastest`` answer ``at_size[layout name]`` of the optimum; returns
    the (size, layout name) pairs it is asked, in order."""
    asked: list[tuple[int, str]] = []

    def fake(topology, plan, size, *args, deadline_us=None, **kwargs):
        asked.append((size, plan.name))
        algbw = at_size[plan.name] * OPTIMUM
        # a run ending after its deadline stops there, as the event loop's does
        late = deadline_us is not None and size / (algbw * 1000) > deadline_us
        return SimpleNamespace(algbw=algbw, past_deadline=late)

    monkeypatch.setattr(simulate, "fastest", fake)
    return asked


def tried(cands: list[_Candidate]) -> list[dict]:
    """The ``tried`` records runtime_schedule keeps of ``cands``."""
    return [{"k": c.schedule.k, "layout": c.name, "tolerance_percent": c.tolerance}
            for c in cands]
