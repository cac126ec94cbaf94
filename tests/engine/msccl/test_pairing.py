"""Thread blocks that pair a receive-only and a send-only connection end
(:mod:`canopy.engine.msccl.pairing`): the plan's waits in the execution model, and the
export writes exactly the thread blocks the layout reports."""

from fractions import Fraction

import pytest
from lxml import etree

from canopy.engine.execution.simulate import fastest, simulate
from canopy.engine.forestcoll.solve import solve
from canopy.engine.generators import generate
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.plan import CollectivePlan, FlowEdge, FlowTree, schedule_plan
from canopy.engine.model.topology import Link, Node, Topology
from canopy.engine.msccl import MscclLimits, MscclOptions, plan_xml
from canopy.engine.msccl.connections import describe_layout, iter_layouts, layouts
from canopy.engine.msccl.executor import simulate_bytes
from canopy.engine.msccl.pairing import _colour, _Image, connection_steps, threadblocks_per_gpu
from canopy.engine.msccl.reader import read_msccl_bytes
from canopy.engine.msccl.timing import fastest_xml


def _star() -> Topology:
    """A -> B at 1 GB/s, C -> B and B -> D at 2 GB/s, 1 µs per link."""
    nodes = [Node(x, "compute") for x in "ABCD"]
    links = [Link("A", "B", Fraction(1)), Link("C", "B", Fraction(2)),
             Link("B", "D", Fraction(2))]
    return Topology("star", nodes, links)


def _relay_plan(paired: bool) -> CollectivePlan:
    """Tree X: A -> B (B a leaf); tree Y: C -> B -> D; each half the message, all on
    channel 0. Paired, B's thread block receiving X from A also sends Y to D."""
    x = FlowTree("x", "A", (FlowEdge("A", "B", ("A", "B"), channel=0),), Fraction(1, 2))
    y = FlowTree("y", "C", (FlowEdge("C", "B", ("C", "B"), channel=0),
                            FlowEdge("B", "D", ("B", "D"), channel=0)), Fraction(1, 2))
    return CollectivePlan("allgather", tuple("ABCD"), broadcast_trees=(x, y),
                          paired=(("A", "B", "D", 0),) if paired else ())


def test_a_paired_send_waits_for_its_thread_blocks_receive_exactly():
    """2000 bytes in one piece: X reaches B at 1000 B / 1000 B/µs + 1 µs = 2 µs, Y at
    0.5 + 1 = 1.5 µs. On a thread block of its own B forwards Y at 1.5 µs (done at
    1.5 + 0.5 + 1 = 3 µs); paired with X's receive it runs that receive first and
    forwards at 2 µs (done at 3.5 µs)."""
    topo = _star()
    alone = simulate(topo, _relay_plan(False), 2000, exact=True).time_us
    paired = simulate(topo, _relay_plan(True), 2000, exact=True).time_us
    assert alone == 3
    assert paired == Fraction(7, 2)


def test_a_paired_send_waits_for_the_reductions_before_its_receive():
    """Reduce tree X into v from c1 and c2 (both leaves: c1 first, by rank), tree Y from
    u through v to w; 1500 bytes each. c1's data reaches v at 1.5 + 1 = 2.5 µs (1 GB/s),
    c2's and u's at 0.75 + 1 = 1.75 µs (2 GB/s). Alone, v forwards Y at 1.75 µs (done at
    3.5 µs). Paired with the receive from c2, which the export accumulates after c1's,
    the send waits for c1's too: it leaves at 2.5 µs and is done at 4.25 µs."""
    nodes = [Node(x, "compute") for x in ("c1", "c2", "v", "w", "u")]
    links = [Link("c1", "v", Fraction(1)), Link("c2", "v", Fraction(2)),
             Link("u", "v", Fraction(2)), Link("v", "w", Fraction(2))]
    topo = Topology("join", nodes, links)
    x = FlowTree("x", "v", (FlowEdge("v", "c1", ("c1", "v"), channel=0),
                            FlowEdge("v", "c2", ("c2", "v"), channel=0)), Fraction(1, 2),
                 reduce=True)
    y = FlowTree("y", "w", (FlowEdge("w", "v", ("v", "w"), channel=0),
                            FlowEdge("v", "u", ("u", "v"), channel=0)), Fraction(1, 2),
                 reduce=True)
    plan = CollectivePlan("reduce-scatter", ("c1", "c2", "v", "w", "u"), reduce_trees=(x, y))
    assert simulate(topo, plan, 3000, exact=True).time_us == Fraction(7, 2)
    paired = CollectivePlan(plan.collective, plan.compute_nodes, plan.reduce_trees,
                            paired=(("c2", "v", "w", 0),))
    assert simulate(topo, paired, 3000, exact=True).time_us == Fraction(17, 4)


def test_pairs_go_from_earlier_steps_to_later_ones():
    """Every pair's receive connection carries steps of the piece before every step of
    its send connection, and its receiver forwards its data only over that send
    connection or to nobody."""
    topo = load_sample("hypercube-3d")
    plan = schedule_plan(solve(topo, "allgather"))
    found = dict(layouts(plan, MscclLimits(max_tbs_per_gpu=34), topo))
    laid = found["unit, paired"]
    assert laid.paired
    ends = connection_steps(laid)
    for p, v, w, c in laid.paired:
        receive, send = ends[(p, v, c)], ends[(v, w, c)]
        assert receive.last < send.first
        assert receive.terminal or (p, v, c) in (send.fed_by or set()) and \
            receive.edges == send.edges == 1


@pytest.mark.parametrize(("collective", "sms"), [("allgather", 34), ("reduce-scatter", 34),
                                                  ("allreduce", 60)])
def test_exported_thread_blocks_are_the_layouts(collective, sms):
    """hypercube-3d needs 39 thread blocks per GPU for allgather with relays fused (43 per
    connection end); paired it fits 34 SMs, allreduce 60. The XML (out of place) has
    exactly the thread blocks the layout reports on every GPU, each pair receives
    before it sends, the executor accepts it, and check-xml's time agrees with the
    plan's within 2 %."""
    topo = load_sample("hypercube-3d")
    schedule = solve(topo, collective)
    plan = schedule_plan(schedule)
    limits = MscclLimits(max_tbs_per_gpu=sms)
    name, laid = next((n, p) for n, p in layouts(plan, limits, topo) if p.paired)
    reported = describe_layout(plan, laid, name, limits)["threadblocks_per_gpu"]
    assert reported <= sms
    options = MscclOptions(limits=limits, inplace=False)
    data = plan_xml(laid, schedule.k, options)
    simulate_bytes(data, limits=limits)
    root = etree.fromstring(data)
    per_gpu = {g.get("id"): len(g.findall("tb")) for g in root.iter("gpu")}
    expected = threadblocks_per_gpu(laid)
    rank = {name: str(r) for r, name in enumerate(laid.compute_nodes)}
    assert per_gpu == {rank[g]: n for g, n in expected.items()}
    assert max(per_gpu.values()) == reported
    pairs = 0
    for gpu in root.iter("gpu"):
        for tb in gpu.iter("tb"):
            kinds = [s.get("type") for s in tb.iter("step")]
            if tb.get("send") != "-1" and tb.get("recv") != "-1" and "s" in kinds:
                pairs += 1
                last_receive = max(i for i, k in enumerate(kinds) if k in ("r", "rrc"))
                assert last_receive < kinds.index("s")
    assert pairs >= len(laid.paired)
    size = 64 << 20
    expected_algbw = fastest(topo, laid, size).algbw
    timed = fastest_xml(read_msccl_bytes(data), topo, size).algbw
    assert abs(timed / expected_algbw - 1) <= 0.02


@pytest.mark.parametrize(("per_leaf", "collective", "sms", "layouts_paired", "order"),
                         [("4", "allgather", 12, 1, 4), ("4", "allreduce", 20, 4, 4),
                          ("2", "reduce-scatter", 10, 3, 2)])
def test_paired_layouts_on_identical_servers_run_folded_with_the_same_exact_times(
        per_leaf, collective, sms, layouts_paired, order):
    """4 servers of 2 GPUs on rail leaves: in one pod rotating the servers by one is an
    automorphism of order 4; in two pods of 2, rotating by a pod with the pods' leaves
    exchanged is one of order 2. Every paired layout (one pod: allgather at 12 SMs, unit
    paired; allreduce at 20, each shared layout paired; two pods: reduce-scatter at 10)
    matches one GPU per orbit and moves its pairs to the others, so its pairs are
    invariant: the simulation runs it folded, on 1/order of the sends, with the whole
    program's exact times, and its XML passes the executor's checks with the thread
    blocks the layout counts."""
    topo = generate("cluster", {"servers": "4", "gpus": "2", "scale_out": "leaf-spine",
                                "servers_per_leaf": per_leaf, "gpu_bw": "450",
                                "nic_bw": "50"})
    schedule = solve(topo, collective)
    limits = MscclLimits(max_tbs_per_gpu=sms)
    paired = [(name, laid) for name, laid in iter_layouts(schedule_plan(schedule), limits, topo)
              if laid.paired]
    assert len(paired) == layouts_paired
    for name, laid in paired:
        assert max(threadblocks_per_gpu(laid).values()) <= sms, name
        for pieces in (1, 3):
            folded = simulate(topo, laid, 1 << 22, pieces, exact=True)
            whole = simulate(topo, laid, 1 << 22, pieces, exact=True, symmetry=False)
            assert order * folded.messages == whole.messages, name
            assert folded.time_us == whole.time_us, name
        data = plan_xml(laid, schedule.k, MscclOptions(limits=limits, inplace=False))
        simulate_bytes(data, limits=limits)
        root = etree.fromstring(data)
        rank = {gpu: str(r) for r, gpu in enumerate(laid.compute_nodes)}
        assert {g.get("id"): len(g.findall("tb")) for g in root.iter("gpu")} == \
            {rank[g]: n for g, n in threadblocks_per_gpu(laid).items()}, name


def test_chains_of_one_orbit_are_cut_alike():
    """Two servers (a0, a1) and (b0, b1) swapped by the rotation, 16 connections and 8
    pairs invariant under it, 3 channels of at most 3 thread blocks per GPU. Coloured
    chain by chain the greedy cuts one chain whose image it placed, so the pairs kept
    would not be invariant; coloured an orbit at a time it cuts a chain and its image
    alike, and the channels still keep every rule: paired connections on one channel,
    connections between the same two GPUs apart."""
    swap = {"a0": "b0", "a1": "b1", "b0": "a0", "b1": "a1"}
    one_side = [("a0", "a1", 0), ("a0", "b0", 0), ("a0", "b0", 1), ("a0", "b0", 2),
                ("a0", "b1", 0), ("a0", "b1", 1), ("a1", "a0", 0), ("a1", "a0", 1)]
    conns = sorted({c for a, b, ch in one_side for c in ((a, b, ch), (swap[a], swap[b], ch))})
    moved = {c: (swap[c[0]], swap[c[1]], c[2]) for c in conns}
    pairs = [(("a0", "b0", 0), ("b0", "a1", 0)), (("a0", "b0", 2), ("b0", "b1", 0)),
             (("a0", "b1", 1), ("b1", "b0", 0)), (("a1", "a0", 1), ("a0", "b0", 1))]
    pairs += [(moved[r], moved[s]) for r, s in pairs]
    limits = MscclLimits(max_channels=3, max_tbs_per_channel=3)
    _, alone = _colour(conns, pairs, limits)
    assert alone == {(("b0", "a1", 1), ("a1", "a0", 0))}
    channels, dropped = _colour(conns, pairs, limits, _Image(swap, moved, 2))
    assert dropped == {(("a0", "b1", 1), ("b1", "b0", 0)), (("b0", "a1", 1), ("a1", "a0", 0))}
    assert channels is not None and set(channels) == set(conns)
    assert all(channels[r] == channels[s] for r, s in pairs if (r, s) not in dropped)
    assert len({(u, v, channels[(u, v, c)]) for u, v, c in conns}) == len(conns)
    assert max(channels.values()) < 3


def test_a_first_gpu_short_of_pairs_refuses_as_the_whole_matching_does(monkeypatch):
    """pairing refuses at once where the first GPU finds too few pairs (before the
    rotation and the other GPUs' ends): every pairing the paired layouts' bisections ask
    of a 4 x 4 leaf-spine cluster's allreduce on 24 SMs gives what the whole matching
    gives, and most, not all, are refused early."""
    from canopy.engine.deploy.best_schedule import best_schedule
    from canopy.engine.msccl import connections
    from canopy.engine.msccl import pairing as pairing_module

    topo = generate("cluster", {"servers": 4, "gpus": 4, "gpu_bw": 450, "nic_bw": 50,
                                "scale_out": "leaf-spine"})
    asked = []
    real = connections.pairing

    def recorded(*args, **kwargs):
        asked.append((args, kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(connections, "pairing", recorded)
    plan = schedule_plan(best_schedule(topo, "allreduce"))
    list(iter_layouts(plan, MscclLimits(max_tbs_per_gpu=24), topo))
    enough = pairing_module._enough_pairs
    verdicts = []

    def checked(*args):
        verdicts.append(enough(*args))
        return verdicts[-1]

    monkeypatch.setattr(pairing_module, "_enough_pairs", checked)
    early = [real(*args, **kwargs) for args, kwargs in asked]
    monkeypatch.setattr(pairing_module, "_enough_pairs", lambda *args: True)
    assert [real(*args, **kwargs) for args, kwargs in asked] == early
    assert 0 < verdicts.count(False) < len(verdicts)
