"""The runtime choice simulates a candidate's layouts fastest first and takes them in order."""

from canopy.engine.deploy.runtime_choice import REFERENCE_SIZE, _choose, _screen
from canopy.engine.execution import simulate as simulation
from canopy.engine.execution.simulate import depths, fastest
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


def test_fastest_first_chooses_as_the_search_in_order_and_runs_fewer_layouts_deep():
    """2 x p4d allgather with k = 3 (seven layouts): simulated fastest first, the choice
    is the one the search in the layouts' own order makes, listed in that order; every
    layout it runs in full the ordered search runs in full, to the same fraction; the
    layouts behind the fastest at the first depth run no deeper (listed with their time
    there), and none of them beats the choice in the ordered search."""
    topo = load_sample("aws-p4d-2x8.json")
    schedule = solve(topo, "allgather", k=3)
    first = _choose(topo, schedule, MscclLimits())
    ordered = _choose(topo, schedule, MscclLimits(), fastest_first=False)
    assert _summary(first) == _summary(ordered)
    assert [c["layout"] for c in first.candidates] == [c["layout"] for c in ordered.candidates]
    done, in_order = (_by_layout(c, "executed_fraction") for c in (first, ordered))
    assert done and set(done) <= set(in_order)
    assert all(in_order[name] == f for name, f in done.items())
    screened = {**_by_layout(first, "executed_first_depth"),
                **_by_layout(first, "executed_first_depth_below")}
    assert screened and not set(screened) & set(done)
    assert (3, "0", first.candidates[0]["layout"]) in screened     # the first one too
    assert "at the first pipeline depth tried, behind another layout there" in first.note
    chosen = max(done.values())
    assert all(in_order.get(name, 0) <= chosen for name in screened)
    # "shared" lays out the same program as "q = 3": stopped with it, not finished at its cut
    cut_in_order = _by_layout(ordered, "executed_below")
    assert (3, "0", "shared") in cut_in_order and (3, "0", "q = 3") in cut_in_order


def test_the_screen_runs_the_depth_fastest_runs_first_and_reaches_no_more_than_fastest():
    """Each layout is timed at the first of its depths, the depth fastest (with a
    deadline) runs first, so fastest reuses the run; the fraction the screen says is
    reached is one a layout's fastest depth reaches."""
    topo = load_sample("aws-p4d-2x8.json")
    schedule = solve(topo, "allgather", k=3)
    optimum = max(schedule.algbw, schedule.optimal_algbw)
    layouts = [laid for _, laid in iter_layouts(schedule_plan(schedule), MscclLimits(), topo)]
    fractions, screens, _, reached, leader = _screen(
        topo, optimum, [(laid, None) for laid in layouts], 0, lambda i: True)
    assert [s.fraction if s.below is None else 0 for s in screens] == fractions
    best = max(range(len(layouts)), key=lambda i: fractions[i])
    assert reached == fractions[best] > 0 and leader == best
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
    assert runs[0] == depths(topo, layouts[best], REFERENCE_SIZE)[1]
    assert result.algbw / optimum >= reached
    _, _, _, nothing, no_leader = _screen(topo, optimum, [(laid, None) for laid in layouts],
                                          0, lambda i: False)
    assert nothing == 0 and no_leader is None


def test_the_first_layout_is_screened_but_screens_out_none():
    """The first layout's run at the first depth is compared with the others', but it
    cannot be the one that screens them out (``followers``): coarse sharing can lead at
    the first depth and lose deeper. 2 x p4d allgather with k = 3: made the fastest there
    (the others' runs stopped below it), it still gives no answer."""
    topo = load_sample("aws-p4d-2x8.json")
    schedule = solve(topo, "allgather", k=3)
    optimum = max(schedule.algbw, schedule.optimal_algbw)
    layouts = [laid for _, laid in iter_layouts(schedule_plan(schedule), MscclLimits(), topo)]
    free = _screen(topo, optimum, [(laid, None) for laid in layouts], 0, lambda i: True)
    led = _screen(topo, optimum, [(laid, None) for laid in layouts], 0, lambda i: True,
                  followers=1)
    assert led.fractions == free.fractions and led.leader != 0
    assert 0 in led.screened_out() and led.leader == free.leader
    known = [(laid, 1 if i == 0 else None) for i, laid in enumerate(layouts)]
    ahead = _screen(topo, optimum, known, 0, lambda i: True, followers=1)
    assert ahead.leader not in (None, 0) and 0 not in ahead.screened_out()
