"""The runtime choice simulates a candidate's layouts fastest first and takes them in order."""

from canopy.engine.deploy.runtime_choice import REFERENCE_SIZE, _choose, _screen
from canopy.engine.execution import simulate as simulation
from canopy.engine.execution.simulate import fastest, first_depth
from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.plan import schedule_plan
from canopy.engine.msccl import MscclLimits
from canopy.engine.msccl.connections import iter_layouts


def _summary(choice):
    below = choice.below
    return (choice.schedule.k, choice.layout, below and (below.schedule.k, below.layout))


def _by_layout(choice, key):
    return {(c["k"], c["tolerance_percent"], c["layout"]): c[key]
            for c in choice.candidates if key in c}


def test_fastest_first_chooses_as_the_search_in_order_and_stops_losers_sooner():
    """2 x p4d allgather with k = 3 (seven layouts): simulated fastest first, the choice
    is the one the search in the layouts' own order makes, listed in that order; every
    layout it runs in full the ordered search runs in full, to the same fraction; and the
    layouts both stop, it stops at a higher cut (sooner), for one of them strictly."""
    topo = load_sample("aws-p4d-2x8.json")
    schedule = solve(topo, "allgather", k=3)
    first = _choose(topo, schedule, MscclLimits())
    ordered = _choose(topo, schedule, MscclLimits(), fastest_first=False)
    assert _summary(first) == _summary(ordered)
    assert [c["layout"] for c in first.candidates] == [c["layout"] for c in ordered.candidates]
    done, in_order = (_by_layout(c, "executed_fraction") for c in (first, ordered))
    assert done and set(done) <= set(in_order)
    assert all(in_order[name] == f for name, f in done.items())
    cut, cut_in_order = (_by_layout(c, "executed_below") for c in (first, ordered))
    both = set(cut) & set(cut_in_order)
    assert all(cut[name] >= cut_in_order[name] for name in both)
    assert any(cut[name] > cut_in_order[name] for name in both)
    # "shared" lays out the same program as "q = 3": stopped with it, not finished at its cut
    assert (3, "0", "shared") in cut_in_order and (3, "0", "q = 3") in cut_in_order


def test_the_screen_runs_the_depth_fastest_runs_first_and_reaches_no_more_than_fastest():
    """Each layout is timed at first_depth, the depth fastest (with a deadline) runs
    first, so fastest reuses the run; the fraction the screen says is reached is one a
    layout's fastest depth reaches."""
    topo = load_sample("aws-p4d-2x8.json")
    schedule = solve(topo, "allgather", k=3)
    optimum = max(schedule.algbw, schedule.optimal_algbw)
    layouts = [laid for _, laid in iter_layouts(schedule_plan(schedule), MscclLimits(), topo)]
    fractions, reached = _screen(topo, optimum, [(laid, None) for laid in layouts], 0,
                                 lambda i: True)
    best = max(range(len(layouts)), key=lambda i: fractions[i])
    assert reached == fractions[best] > 0
    runs: list[int] = []
    real = simulation.simulate

    def counted(topology, plan, size, pieces=1, *args, **kwargs):
        runs.append(pieces)
        return real(topology, plan, size, pieces, *args, **kwargs)

    simulation.simulate = counted
    try:
        result = fastest(topo, layouts[best], REFERENCE_SIZE, deadline_us=10 ** 9)
    finally:
        simulation.simulate = real
    assert runs[0] == first_depth(topo, layouts[best], REFERENCE_SIZE)
    assert result.algbw / optimum >= reached
    _, nothing = _screen(topo, optimum, [(laid, None) for laid in layouts], 0,
                         lambda i: False)
    assert nothing == 0
