"""Identical servers simulated once (engine/execution/folding.py): the folded program gives the
whole program's times (exactly, in exact arithmetic), and programs that are not invariant
under the rotation of the servers are not folded."""

from dataclasses import replace
from fractions import Fraction

import pytest

from canopy.engine.baselines.blink import blink_baseline
from canopy.engine.baselines.ring import ring_baseline
from canopy.engine.execution import simulate as sim
from canopy.engine.forestcoll.solve import solve
from canopy.engine.generators import generate
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.plan import CollectivePlan, FlowEdge, FlowTree, ring_plan, schedule_plan
from canopy.engine.model.topology import Link, Node, Topology
from canopy.engine.msccl.connection_counts import server_places
from canopy.engine.msccl.connections import layouts
from canopy.engine.msccl.threadblocks import MscclLimits
from canopy.engine.network.servers import server_rotations


def shared_core(servers: int, gpus: int = 2) -> Topology:
    """Servers of ``gpus`` GPUs on a switch; every server leaves through switch ``up``
    and enters from switch ``down`` (one-way links), and ``up -> down`` is one link that
    every server-to-server hop crosses: the rotation fixes it (its orbit is itself)."""
    nodes = [Node("up", "switch"), Node("down", "switch")]
    links = [Link("up", "down", Fraction(40), duplex=False)]
    for s in range(servers):
        sw = f"s{s}.sw"
        nodes.append(Node(sw, "switch", group=f"s{s}"))
        for g in range(gpus):
            nodes.append(Node(f"s{s}.g{g}", "compute", group=f"s{s}"))
            links.append(Link(f"s{s}.g{g}", sw, Fraction(100)))
        links += [Link(sw, "up", Fraction(25), duplex=False),
                  Link("down", sw, Fraction(25), duplex=False)]
    return Topology("shared core", nodes, links)


def ring_over(order: list[str], collective: str) -> CollectivePlan:
    """One ring visiting ``order``, routed through the server switches and the core."""
    hops = {}
    for a, b in zip(order, order[1:] + order[:1], strict=True):
        sa, sb = a.split(".")[0], b.split(".")[0]
        hops[(a, b)] = (a, f"{sa}.sw", b) if sa == sb else \
            (a, f"{sa}.sw", "up", "down", f"{sb}.sw", b)
    return ring_plan(collective, order, [(order, hops)])


def core_ring(topology: Topology, collective: str) -> CollectivePlan:
    """One ring visiting the servers in order, each server's GPUs in order."""
    return ring_over(topology.compute_nodes(), collective)


def star_trees(topology: Topology) -> CollectivePlan:
    """Per GPU a broadcast tree: to its server's GPUs, and through the core to the first
    GPU of every other server, which forwards to its neighbours (an allgather)."""
    compute = topology.compute_nodes()
    servers = sorted({c.split(".")[0] for c in compute})
    trees = []
    for root in compute:
        home = root.split(".")[0]
        edges = [FlowEdge(root, c, (root, f"{home}.sw", c)) for c in compute
                 if c != root and c.startswith(home + ".")]
        for s in servers:
            if s == home:
                continue
            head = f"{s}.g0"
            edges.append(FlowEdge(root, head, (root, f"{home}.sw", "up", "down", f"{s}.sw",
                                               head)))
            edges += [FlowEdge(head, c, (head, f"{s}.sw", c)) for c in compute
                      if c != head and c.startswith(s + ".")]
        trees.append(FlowTree(("star", root), root, tuple(edges),
                              Fraction(1, len(compute))))
    return CollectivePlan("allgather", tuple(compute), (), tuple(trees))


@pytest.mark.parametrize("collective", ["allgather", "reduce-scatter", "allreduce"])
def test_folded_ring_equals_whole_program_exactly(collective):
    topology = shared_core(3)
    plan = core_ring(topology, collective)
    for pieces in (1, 3):
        folded = sim.simulate(topology, plan, 1 << 22, pieces, exact=True)
        whole = sim.simulate(topology, plan, 1 << 22, pieces, exact=True, symmetry=False)
        assert folded.time_us == whole.time_us
        assert 3 * folded.messages == whole.messages       # one send per orbit of three
        floats = sim.simulate(topology, plan, 1 << 22, pieces)
        assert abs(floats.time_us - whole.time_us) <= Fraction(1, 10**9) * whole.time_us


def test_fixed_link_shared_by_every_orbit_member():
    """The up -> down link is crossed by all copies of a send: in the folded program it
    has a third of its capacity, and the times are the whole program's."""
    topology = shared_core(3)
    plan = star_trees(topology)
    for pieces in (1, 2):
        folded = sim.simulate(topology, plan, 1 << 22, pieces, exact=True)
        whole = sim.simulate(topology, plan, 1 << 22, pieces, exact=True, symmetry=False)
        assert folded.time_us == whole.time_us
        assert 3 * folded.messages == whole.messages


def test_rotation_of_identical_servers_only():
    (rotation, m), (_, half) = server_rotations(shared_core(4))
    assert m == 4 and rotation["s3.g1"] == "s0.g1" and rotation["up"] == "up" and half == 2
    odd = shared_core(3)
    odd.links[1] = Link("s0.g0", "s0.sw", Fraction(50))          # one slower GPU link
    assert server_rotations(odd) == []
    one_server = Topology("one", [Node("g0", "compute", group="s"),
                                  Node("g1", "compute", group="s")],
                          [Link("g0", "g1", Fraction(10))])
    assert server_rotations(one_server) == []


def test_asymmetric_plans_run_whole():
    """A ring that does not follow the rotation and Blink's single root are not folded."""
    topology = shared_core(3)
    plan = core_ring(topology, "allgather")
    order = list(plan.compute_nodes)
    order[0], order[1] = order[1], order[0]          # server 0 visited the other way
    skewed = ring_over(order, "allgather")
    result = sim.simulate(topology, skewed, 1 << 22, 2)
    assert result.messages == sim.simulate(topology, skewed, 1 << 22, 2,
                                           symmetry=False).messages
    sample = load_sample("dgx-a100-2x8.json")
    blink = blink_baseline(sample, "allgather").plan_at(Fraction(1 << 24))
    assert sim.simulate(sample, blink, 1 << 24, 2).messages == \
        sim.simulate(sample, blink, 1 << 24, 2, symmetry=False).messages


def test_sample_ring_folds_with_the_same_times():
    """2 x DGX A100: the ring baseline runs on half the sends, same float times."""
    sample = load_sample("dgx-a100-2x8.json")
    for collective in ("allgather", "allreduce"):
        plan = ring_baseline(sample, collective).plan_at(Fraction(1 << 27))
        folded = sim.simulate(sample, plan, 1 << 27, 8)
        whole = sim.simulate(sample, plan, 1 << 27, 8, symmetry=False)
        assert 2 * folded.messages == whole.messages
        assert folded.time_us == whole.time_us


def test_forestcoll_shared_layout_folds_with_the_same_exact_times():
    """ForestColl's trees on shared connections: where every server gives up the same
    connections, ties between trees go by where their roots sit relative to the sender
    (not by tree index), so the laid-out program is invariant and runs folded, with the
    whole program's exact times (2 servers of 4 GPUs, 6 thread blocks per GPU)."""
    topology = generate("cluster", {"servers": "2", "gpus": "4"})
    plan = schedule_plan(solve(topology, "allgather"))
    name, laid = layouts(plan, MscclLimits(max_tbs_per_gpu=6), topology)[0]
    assert name == "shared"
    assert any(len({e.priority for e in t.edges}) > 1 for t in laid.trees)
    for pieces in (1, 3):
        folded = sim.simulate(topology, laid, 1 << 22, pieces, exact=True)
        whole = sim.simulate(topology, laid, 1 << 22, pieces, exact=True, symmetry=False)
        assert 2 * folded.messages == whole.messages
        assert folded.time_us == whole.time_us


def test_forestcoll_layout_keeps_tree_order_where_servers_differ():
    """4 servers of 2 GPUs at 6 thread blocks per GPU: the servers give up different
    connections, so the layout cannot be invariant and keeps the tree-index order (no
    priorities), exactly as without identical servers; it runs whole."""
    topology = generate("cluster", {"servers": "4", "gpus": "2"})
    plan = schedule_plan(solve(topology, "allgather"))
    name, laid = layouts(plan, MscclLimits(max_tbs_per_gpu=6), topology)[0]
    _, alone = layouts(plan, MscclLimits(max_tbs_per_gpu=6))[0]
    assert name == "shared" and laid == alone
    assert all(e.priority == 0 for t in laid.trees for e in t.edges)
    assert sim.simulate(topology, laid, 1 << 22, 2).messages == \
        sim.simulate(topology, laid, 1 << 22, 2, symmetry=False).messages


def test_pods_of_a_leaf_spine_fold_with_their_leaves_exchanged():
    """4 servers of 2 GPUs, two servers per leaf: rotating the servers by one moves a
    server off its leaf, so it is no automorphism; rotating by two with the two pods'
    leaves exchanged (spines staying) is one, and the ring and ForestColl's plan run
    folded on half the sends with the whole program's exact times."""
    topology = generate("cluster", {"servers": "4", "gpus": "2", "scale_out": "leaf-spine",
                                    "servers_per_leaf": "2"})
    [(rotation, order)] = server_rotations(topology)
    assert order == 2 and rotation["n0.gpu1"] == "n2.gpu1" and rotation["n3.nic0"] == "n1.nic0"
    assert rotation["leaf0.1"] == "leaf1.1" and rotation["leaf1.0"] == "leaf0.0"
    assert rotation["spine0"] == "spine0"
    plans = [ring_baseline(topology, "allgather").plan_at(Fraction(1 << 22)),
             schedule_plan(solve(topology, "reduce-scatter"))]
    for plan in plans:
        folded = sim.simulate(topology, plan, 1 << 22, 3, exact=True)
        whole = sim.simulate(topology, plan, 1 << 22, 3, exact=True, symmetry=False)
        assert 2 * folded.messages == whole.messages
        assert folded.time_us == whole.time_us


def test_switches_outside_servers_stay_or_no_rotation_is_found():
    """The core switches outside the servers serve every server alike, so each is its
    own image; with one server's uplink to the core faster than the others' no rotation
    keeps every link's bandwidth, and none is found."""
    topology = shared_core(2)
    [(rotation, order)] = server_rotations(topology)
    assert order == 2 and rotation["up"] == "up" and rotation["down"] == "down"
    lopsided = shared_core(2)
    lopsided.links.append(Link("s0.sw", "up", Fraction(5), duplex=False))
    assert server_rotations(lopsided) == []


def test_pods_of_a_leaf_spine_fold_a_shared_layout_with_the_same_exact_times():
    """4 servers of 2 GPUs in two pods of a leaf-spine, allreduce at 8 thread blocks per
    GPU: the layout ranks ties between trees by where their roots sit relative to the
    sender, which rotating by a pod with the pods' leaves exchanged keeps (the rotation
    the simulation folds by), so the shared layout runs folded on half the sends, with
    the whole program's exact times."""
    topology = generate("cluster", {"servers": "4", "gpus": "2", "scale_out": "leaf-spine",
                                    "servers_per_leaf": "2"})
    plan = schedule_plan(solve(topology, "allreduce"))
    name, laid = layouts(plan, MscclLimits(max_tbs_per_gpu=8), topology)[0]
    assert name == "shared"
    assert any(len({e.priority for e in t.edges}) > 1 for t in laid.trees)
    places = server_places(topology)         # found once per network
    assert places is server_places(topology) and len(places.rotations) == 1
    for pieces in (1, 3):
        folded = sim.simulate(topology, laid, 1 << 22, pieces, exact=True)
        whole = sim.simulate(topology, laid, 1 << 22, pieces, exact=True, symmetry=False)
        assert 2 * folded.messages == whole.messages
        assert folded.time_us == whole.time_us


def test_a_connection_whose_image_has_another_weight_does_not_fold():
    """Weights compare by value: an equal weight in another object folds alike, a
    different one on a single connection keeps the iteration whole."""
    topology = shared_core(3)
    plan = star_trees(topology)
    template = sim.plan_template(plan, frozenset(topology.switch_nodes()), "cut-through")
    rotation, m = server_rotations(topology)[0]
    folded = sim._folded_by(plan, template, rotation, m)
    assert folded is not None and len(folded[0].conn) * m == len(template.conn)
    for weight, folds in ((Fraction(2, 2), True), (Fraction(2), False)):
        connections = list(template.connections)
        connections[1] = replace(connections[1], weight=weight)
        other = sim._folded_by(plan, replace(template, connections=connections), rotation, m)
        assert (other is not None) == folds
        if folds:
            assert other[0].conn.tolist() == folded[0].conn.tolist() and \
                other[1] == folded[1]
