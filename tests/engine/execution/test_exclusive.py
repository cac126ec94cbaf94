"""Programs whose links each carry one connection run in one pass, with the event loop's
times to the last bit (arrivals too), compiled and as Python, in floats and exactly."""

from fractions import Fraction

import pytest

from canopy.engine.baselines.tacos import tacos_baseline
from canopy.engine.execution import kernel
from canopy.engine.execution import simulate as sim
from canopy.engine.execution.compiler import expand_template, plan_template
from canopy.engine.execution.exclusive import exclusive_links
from canopy.engine.execution.kernel import (
    PastDeadline,
    link_network,
    run_flat,
    run_iterations,
    run_program,
)
from canopy.engine.execution.program import DEFAULT_LATENCY_US, Program
from canopy.engine.execution.simulate import simulate
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.plan import CollectivePlan, FlowEdge, FlowTree
from canopy.engine.model.progress import Cancelled
from canopy.engine.model.topology import Link, Node, Topology


def _both(monkeypatch, run):
    """``run()`` in one pass, then by the event loop (every network taken as shared)."""
    one_pass = run()
    with monkeypatch.context() as m:
        m.setattr(kernel, "exclusive_links", lambda *_: False)
        return one_pass, run()


def star():
    """Three GPUs on a switch (two of 100 GB/s links, one of 40), one latency-free link."""
    nodes = [Node(n, "compute") for n in ("a", "b", "c")] + [Node("s", "switch")]
    links = [Link("a", "s", Fraction(100)), Link("s", "b", Fraction(100)),
             Link("b", "s", Fraction(40)), Link("s", "c", Fraction(100)),
             Link("c", "a", Fraction(7, 3), latency=Fraction(0))]
    return Topology("star", nodes, links)


@pytest.mark.parametrize("compile_from", [0, 10**9])
@pytest.mark.parametrize("exact", [False, True])
def test_one_pass_gives_the_event_loops_times(monkeypatch, compile_from, exact):
    # weights other than 1, a send of no bytes, a bottleneck that is not the first link,
    # a latency-free link, dependencies across connections and sends queued on one
    monkeypatch.setattr(kernel, "COMPILE_FROM", compile_from)
    program = Program()
    ab = program.connect(("a", "s", "b"), Fraction(3))
    bc = program.connect(("b", "s", "c"), Fraction(1, 2))
    ca = program.connect(("c", "a"))
    first = program.send(ab, Fraction(10**6, 3))
    empty = program.send(ab, Fraction(0), [first])
    second = program.send(bc, Fraction(777_777), [first])
    third = program.send(ca, Fraction(12_345), [second, empty])
    program.send(bc, Fraction(5), [third])
    program.send(ab, Fraction(99_999), [third])
    topo = star()
    arrivals: list = [[], []]

    def run():
        which = arrivals[0] if not arrivals[0] else arrivals[1]
        return run_program(topo, program, exact=exact, arrivals=which)

    one_pass, event_loop = _both(monkeypatch, run)
    assert one_pass == event_loop and arrivals[0] == arrivals[1]
    assert len(arrivals[0]) == 6 and all(isinstance(t, Fraction if exact else float)
                                         for t in arrivals[0])


def test_tacos_timetables_run_in_one_pass_with_the_same_floats(monkeypatch):
    # TACOS unwinds each switch into a ring of logical links, one connection each: on
    # 2 x DGX A100 its allreduce timetable's links carry one connection each, and 3
    # iterations of it (both phases on each route, in the timetable's order) end at
    # the same float, compiled and as Python, every send arriving at the same time
    topo = load_sample("dgx-a100-2x8.json")
    plan = tacos_baseline(topo, "allreduce").plan_at(Fraction(1 << 24))
    template = plan_template(plan, frozenset(topo.switch_nodes()), "cut-through")
    flat = expand_template(template, Fraction(1 << 24), 3)
    network = link_network(topo, flat.connections, DEFAULT_LATENCY_US, False)
    assert network.is_exclusive() and len(flat.conn) > kernel.COMPILE_FROM
    for compile_from in (0, 10**9):
        monkeypatch.setattr(kernel, "COMPILE_FROM", compile_from)
        arrivals: list = [[], []]

        def run(arrivals=arrivals):
            network.exclusive = None
            which = arrivals[0] if not arrivals[0] else arrivals[1]
            return run_flat(topo, flat, DEFAULT_LATENCY_US, False, None, which)

        one_pass, event_loop = _both(monkeypatch, run)
        assert one_pass == event_loop and arrivals[0] == arrivals[1]


def test_iterations_run_in_one_pass_as_unrolled_by_the_event_loop(monkeypatch):
    # run_iterations walks the template's iterations in the order expand_template lays
    # them out, (slot, piece) for a timetable: the same end as the unrolled program run
    # by the event loop, compiled and as Python
    topo = load_sample("dgx-a100-2x8.json")
    plan = tacos_baseline(topo, "allreduce").plan_at(Fraction(1 << 24))
    template = plan_template(plan, frozenset(topo.switch_nodes()), "cut-through")
    assert template.ordered
    for compile_from in (0, 10**9):
        monkeypatch.setattr(kernel, "COMPILE_FROM", compile_from)
        network = link_network(topo, template.connections, DEFAULT_LATENCY_US, False)
        once = run_iterations(template, Fraction(1 << 24), 3, False, None, network)
        network.exclusive = False
        assert run_iterations(template, Fraction(1 << 24), 3, False, None, network) is None
        assert once == run_flat(topo, expand_template(template, Fraction(1 << 24), 3),
                                DEFAULT_LATENCY_US, False, None, None, network=network)


@pytest.mark.parametrize("reduce", [False, True])
@pytest.mark.parametrize("exact", [False, True])
def test_a_chain_over_a_switch_runs_in_one_pass_with_the_same_times(monkeypatch, reduce,
                                                                     exact):
    # a loop in the order (piece, slot): a chain v0 -> v1 -> (switch) -> v3 in 5 pieces
    monkeypatch.setattr(kernel, "COMPILE_FROM", 0)
    topo = Topology("line", [Node(f"v{i}", "switch" if i == 2 else "compute")
                             for i in range(4)],
                    [Link("v0", "v1", Fraction(30)), Link("v1", "v2", Fraction(20)),
                     Link("v2", "v3", Fraction(50), latency=Fraction(0))])

    def chain():
        edges = (FlowEdge("v0", "v1", ("v0", "v1")), FlowEdge("v1", "v3", ("v1", "v2", "v3")))
        if reduce:
            edges = (FlowEdge("v3", "v1", ("v1", "v2", "v3")),
                     FlowEdge("v1", "v0", ("v0", "v1")))
            tree = FlowTree("t", "v3", edges, Fraction(1), True)
            return CollectivePlan("reduce-scatter", ("v0", "v1", "v3"), reduce_trees=(tree,))
        tree = FlowTree("t", "v0", edges, Fraction(1))
        return CollectivePlan("allgather", ("v0", "v1", "v3"), broadcast_trees=(tree,))

    sim.forget_results()
    one_pass = simulate(topo, chain(), 10**7, 5, exact=exact).time_us
    sim.forget_results()
    monkeypatch.setattr(kernel, "exclusive_links", lambda *_: False)
    assert simulate(topo, chain(), 10**7, 5, exact=exact).time_us == one_pass


def test_a_link_on_two_routes_is_not_exclusive():
    assert exclusive_links([0, 1, 2, 3], 4)
    assert not exclusive_links([0, 1, 1, 3], 4)      # link 1 on two routes
    assert exclusive_links([], 0)


def test_one_pass_stops_at_its_deadline_and_finds_deadlocks(monkeypatch):
    topo = star()
    program = Program()
    ca = program.connect(("c", "a"))
    program.send(ca, Fraction(7 * 10**6, 3))        # 1000 µs at 7/3 GB/s, no latency
    flats = []
    original = kernel.run_flat
    monkeypatch.setattr(kernel, "run_flat", lambda t, flat, *a: flats.append(flat) or
                        original(t, flat, *a))
    assert run_program(topo, program) == 1000
    with pytest.raises(PastDeadline):
        original(topo, flats[0], DEFAULT_LATENCY_US, False, None, None, deadline=999.0)
    assert original(topo, flats[0], DEFAULT_LATENCY_US, False, None, None,
                    deadline=1000.0) == 1000
    stuck = Program()
    x = stuck.connect(("c", "a"))
    stuck.send(x, Fraction(1), [1])
    stuck.send(x, Fraction(1), [0])
    with pytest.raises(ScheduleError, match="deadlocks"):
        run_program(topo, stuck)


@pytest.mark.parametrize("compile_from", [0, 10**9])
def test_a_check_that_raises_stops_the_one_pass(monkeypatch, compile_from):
    # called every CHECK_EVERY sends, compiled (through ctypes, and once before) and as
    # Python: the second call raises, and the run stops there
    monkeypatch.setattr(kernel, "COMPILE_FROM", compile_from)
    program = Program()
    ca = program.connect(("c", "a"))
    for _ in range(2 * kernel.CHECK_EVERY + 1):
        program.send(ca, Fraction(7))
    calls = []

    def check():
        calls.append(1)
        if len(calls) > 1:
            raise Cancelled()

    with pytest.raises(Cancelled):
        run_program(star(), program, check=check)
    assert len(calls) == 2
