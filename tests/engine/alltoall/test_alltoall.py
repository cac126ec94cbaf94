"""All-to-all as maximum concurrent flow: closed forms, cut bounds, an independent path LP,
verification, decomposition, CLI and bad input."""

import itertools
import json
import random
from fractions import Fraction

import networkx as nx
import numpy as np
import pytest
from scipy.optimize import linprog

from canopy.cli import main
from canopy.engine.alltoall import build_problem, solve_alltoall, verify
from canopy.engine.alltoall.bound import cut_ratio, moore_distance_sum
from canopy.engine.generators import generate
from canopy.engine.io.topology_json import save_topology
from canopy.engine.model.errors import ScheduleError, TopologyError
from canopy.engine.model.topology import Link, Node, Topology


def star(n, b=Fraction(10)):
    nodes = [Node(f"g{i}") for i in range(n)] + [Node("sw", "switch")]
    return Topology("star", nodes, [Link(f"g{i}", "sw", b) for i in range(n)])


@pytest.mark.parametrize("n", [3, 4, 6, 7, 8])
def test_bidirectional_ring(n):
    result = solve_alltoall(generate("ring", {"n": str(n), "bandwidth": "50"}))
    expected = Fraction(8 * 50, n * n if n % 2 == 0 else n * n - 1)
    assert result.exact and result.lam == expected
    assert result.algbw == n * expected


@pytest.mark.parametrize("n", [3, 5])
def test_one_way_ring(n):
    result = solve_alltoall(generate("ring", {"n": str(n), "bandwidth": "50",
                                              "bidirectional": "false"}))
    assert result.exact and result.lam == Fraction(2 * 50, n * (n - 1))


@pytest.mark.parametrize("n", [2, 4, 6])
def test_complete_graph(n):
    result = solve_alltoall(generate("fully-connected", {"n": str(n), "bandwidth": "25"}))
    assert result.exact and result.lam == 25
    assert result.algbw == 25 * n


@pytest.mark.parametrize("forwarding", ["all", "switches"])
def test_star_through_one_switch(forwarding):
    result = solve_alltoall(star(5), forwarding=forwarding)
    assert result.exact and result.lam == Fraction(10, 4)
    assert len(result.bottleneck_links()) >= 5


def test_torus_distance_bound_and_theorem_1():
    result = solve_alltoall(generate("torus", {"dims": "3x3", "bandwidth": "50"}))
    # 36 arcs of 50, each source at total hop distance 12: λ = 36·50 / (9·12)
    assert result.exact and result.lam == Fraction(36 * 50, 9 * 12)
    assert result.regular_bound == Fraction(4 * 50, moore_distance_sum(9, 4))
    assert result.regular_bound >= result.lam
    assert moore_distance_sum(1 + 2 + 4, 2) == 2 * 1 + 4 * 2


def random_network(seed, tree=False):
    rng = random.Random(seed)
    n = rng.randint(3, 6)
    g = nx.random_labeled_tree(n, seed=seed) if tree else nx.gnp_random_graph(n, 0.6, seed=seed)
    if not tree:
        g = nx.compose(g, nx.path_graph(n))
    nodes = [Node(f"v{i}", "compute" if i < 2 or rng.random() < 0.7 else "switch")
             for i in range(n)]
    links = [Link(f"v{u}", f"v{v}", Fraction(rng.randint(1, 9))) for u, v in g.edges]
    return Topology(f"random {seed}", nodes, links)


def brute_force_cut(problem):
    ratios = []
    for size in range(1, problem.n):
        for side in itertools.combinations(range(problem.n), size):
            ratio = cut_ratio(problem, set(side))
            if ratio is not None:
                ratios.append(ratio)
    return min(ratios)


def path_lp(problem):
    """An independent formulation: every simple path of every pair, as floats."""
    g = nx.DiGraph()
    for u, v in zip(problem.tails, problem.heads, strict=True):
        g.add_edge(int(u), int(v))
    index = problem.arc_index()
    columns = []
    pairs = [(s, t) for s in problem.compute for t in problem.compute if s != t]
    for k, (s, t) in enumerate(pairs):
        for path in nx.all_simple_paths(g, s, t):
            if all(problem.relay[v] for v in path[1:-1]):
                columns.append((k, [index[e] for e in zip(path, path[1:], strict=False)]))
    nvar = len(columns) + 1
    a_ub = np.zeros((len(pairs) + problem.m, nvar))
    for j, (k, arcs) in enumerate(columns):
        a_ub[k, j] = -1
        for a in arcs:
            a_ub[len(pairs) + a, j] += 1
    a_ub[: len(pairs), -1] = 1
    b_ub = np.concatenate([np.zeros(len(pairs)), [float(c) for c in problem.capacity]])
    c = np.zeros(nvar)
    c[-1] = -1
    return linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=(0, None), method="highs").x[-1]


@pytest.mark.parametrize("seed", range(8))
def test_random_networks_against_cuts_and_path_lp(seed):
    topo = random_network(seed)
    for forwarding in ("all", "switches"):
        try:
            problem = build_problem(topo, forwarding)
        except TopologyError:
            continue
        result = solve_alltoall(topo, forwarding=forwarding)
        assert result.lam <= brute_force_cut(problem)
        assert result.lam <= result.bound <= result.cut_bound
        assert float(result.lam) == pytest.approx(path_lp(problem), rel=1e-7)


@pytest.mark.parametrize("seed", range(6))
def test_trees_meet_the_cut_bound(seed):
    """On a tree every pair has one path, so λ* is the worst single-link cut."""
    topo = random_network(seed, tree=True)
    result = solve_alltoall(topo)
    assert result.exact
    assert result.lam == brute_force_cut(build_problem(topo))


def test_schedule_conserves_and_fits():
    result = solve_alltoall(generate("torus", {"dims": "3x4", "bandwidth": "50"}))
    schedule = result.schedule
    problem = result.problem
    loads = schedule.arc_loads()
    assert all(load <= c for load, c in zip(loads, problem.capacity, strict=True))
    net: dict = {}
    for s, t, path, rate in schedule.paths():
        for u, v in zip(path, path[1:], strict=False):
            net[(s, t, u)] = net.get((s, t, u), 0) - rate
            net[(s, t, v)] = net.get((s, t, v), 0) + rate
    for (s, t, v), value in net.items():
        want = -result.lam if v == s else result.lam if v == t else 0
        assert value == want
    schedule.numerators[0] += 1
    with pytest.raises(ScheduleError):
        verify(schedule)


def test_decomposition_method_is_verified_and_close():
    topo = generate("torus", {"dims": "4x4", "bandwidth": "50"})
    exact = solve_alltoall(topo, method="lp")
    result = solve_alltoall(topo, method="decomposition", target_gap=0.01)
    assert result.method == "decomposition"
    assert result.lam <= exact.lam <= result.bound
    assert result.gap <= 0.01
    verify(result.schedule)


def test_decomposition_through_switches():
    nodes = [Node(f"g{i}") for i in range(6)] + [Node("s0", "switch"), Node("s1", "switch")]
    links = [Link(f"g{i}", f"s{i // 3}", Fraction(10)) for i in range(6)]
    links += [Link("g0", "g1", Fraction(5)), Link("s0", "s1", Fraction(12))]
    topo = Topology("two switches", nodes, links)
    exact = solve_alltoall(topo, forwarding="switches", method="lp")
    result = solve_alltoall(topo, forwarding="switches", method="decomposition")
    assert result.lam <= exact.lam <= result.bound
    assert result.gap <= 0.01


def test_bad_input_is_one_sentence():
    with pytest.raises(TopologyError, match="1 compute node"):
        build_problem(Topology("one", [Node("a"), Node("s", "switch")],
                               [Link("a", "s", Fraction(1))]))
    split = Topology("split", [Node("a"), Node("b"), Node("c")], [Link("a", "b", Fraction(1))])
    with pytest.raises(TopologyError, match="'c' cannot be reached from 'a'"):
        build_problem(split)
    ring = generate("ring", {"n": "4"})
    with pytest.raises(TopologyError, match="through switches"):
        build_problem(ring, "switches")


def test_cli_json_and_errors(tmp_path, capsys):
    path = tmp_path / "star.json"
    save_topology(star(4), path)
    out = tmp_path / "a2a.json"
    assert main(["solve", str(path), "--collective", "alltoall", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["format"] == "canopy-alltoall" and data["version"] == 1
    assert data["method"] == "lp" and data["algbw_exact"] == "40/3"
    assert data["compute_nodes"] == ["g0", "g1", "g2", "g3"]
    assert len(data["bottleneck_links"]) >= 4
    assert {(p["source"], p["target"]) for p in data["paths"]} == {
        (f"g{i}", f"g{j}") for i in range(4) for j in range(4) if i != j}
    assert "algbw:" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    save_topology(Topology("one", [Node("a"), Node("s", "switch")],
                           [Link("a", "s", Fraction(1))]), bad)
    assert main(["solve", str(bad), "--collective", "alltoall"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "1 compute node" in err


@pytest.mark.parametrize("topo", [
    generate("ring", {"n": "5"}),
    generate("torus", {"dims": "3x3"}),
    star(4),
], ids=["ring", "torus", "star"])
def test_msccl_xml_runs_correctly(topo):
    from canopy.engine.alltoall.msccl import alltoall_xml
    from canopy.engine.msccl.executor import MscclXmlError, simulate_bytes
    xml = alltoall_xml(solve_alltoall(topo).schedule)
    assert b'coll="alltoall"' in xml.data and b'outofplace="1"' in xml.data
    assert "the result is correct" in simulate_bytes(xml.data).summary()
    # a receive landing in the wrong output block is caught
    broken = xml.data.replace(b'type="r" srcbuf="i" srcoff="1" dstbuf="o" dstoff="0"',
                              b'type="r" srcbuf="i" srcoff="1" dstbuf="o" dstoff="1"', 1)
    if broken != xml.data:
        with pytest.raises(MscclXmlError):
            simulate_bytes(broken)


def test_cli_msccl(tmp_path):
    path = tmp_path / "ring.json"
    save_topology(generate("ring", {"n": "4"}), path)
    out = tmp_path / "a2a.xml"
    assert main(["solve", str(path), "--collective", "alltoall", "--msccl", str(out)]) == 0
    assert main(["check-xml", str(out)]) == 0


def test_compare_mcf_beats_direct_and_ring(tmp_path, capsys):
    from canopy.engine.alltoall.compare import compare_alltoall
    topo = generate("torus", {"dims": "3x3", "bandwidth": "50"})
    comp = compare_alltoall(topo, sizes=(1 << 20, 1 << 27))
    rows = {row.algorithm: row for row in comp.rows}
    assert rows["mcf"].bound_algbw == comp.result.algbw == 150
    assert rows["direct"].bound_algbw < rows["mcf"].bound_algbw
    for size in comp.sizes:
        assert rows["mcf"].algbw(size) <= rows["mcf"].bound_algbw
        assert rows["mcf"].algbw(size) > rows["direct"].algbw(size) > rows["ring"].algbw(size)
    path = tmp_path / "t.json"
    save_topology(topo, path)
    out = tmp_path / "cmp.json"
    assert main(["compare", str(path), "--collective", "alltoall", "--sizes", "1M",
                 "--json", str(out)]) == 0
    assert [r["algorithm"] for r in json.loads(out.read_text())["rows"]] == ["mcf", "direct",
                                                                              "ring"]


def test_time_steps_store_and_forward():
    from canopy.engine.alltoall.timesteps import time_steps
    full = solve_alltoall(generate("fully-connected", {"n": "4", "bandwidth": "50"}))
    stepped = time_steps(full.schedule)
    assert len(stepped.steps) == 1 and stepped.algbw == full.algbw
    ring = solve_alltoall(generate("ring", {"n": "6", "bandwidth": "50"}))
    stepped = time_steps(ring.schedule)
    assert len(stepped.steps) == 3
    # (the ring's symmetric optimum, from the LP folded by its rotations, splits the
    # antipodal pairs evenly: its steps lose nothing to store-and-forward)
    assert stepped.algbw <= ring.algbw
    # every step's loads fit the links, and all the data moves
    first = stepped.steps[0].loads
    assert sum(first.values()) == Fraction(5, 6) * 6       # every pair's first hop


def test_punctured_torus_is_seeded_and_slower():
    a = generate("punctured-torus", {"dims": "3x3", "removed": "2", "seed": "4"})
    b = generate("punctured-torus", {"dims": "3x3", "removed": "2", "seed": "4"})
    assert a.links == b.links and len(a.links) == 18 - 2
    whole = solve_alltoall(generate("torus", {"dims": "3x3"}))
    assert solve_alltoall(a).lam < whole.lam


@pytest.mark.parametrize("forwarding, algbw", [("nic", Fraction(160, 3)), ("host", 40)])
def test_host_to_nic_bottleneck(forwarding, algbw):
    """Ring of 4 (50 GB/s links), host-NIC 40 GB/s: each host sends 3λ through its NIC,
    so λ = 40/3 with NIC forwarding; with host forwarding each host also relays one
    opposite pair's λ (4λ ≤ 40, λ = 10). Without NICs the ring allows λ = 25."""
    ring = generate("ring", {"n": "4", "bandwidth": "50"})
    assert solve_alltoall(ring).algbw == 100
    result = solve_alltoall(ring, nic_bandwidth=Fraction(40), nic_forwarding=forwarding)
    assert result.exact and result.algbw == algbw
    assert result.num_compute == 4
    assert all("/nic" in u + v for u, v in result.bottleneck_links())
    # a wide NIC changes nothing
    wide = solve_alltoall(ring, nic_bandwidth=Fraction(1000), nic_forwarding=forwarding)
    assert wide.algbw == 100


def test_cli_nic_bandwidth(tmp_path, capsys):
    path = tmp_path / "ring.json"
    save_topology(generate("ring", {"n": "4", "bandwidth": "50"}), path)
    out = tmp_path / "a2a.json"
    assert main(["solve", str(path), "--collective", "alltoall", "--nic-bandwidth", "40",
                 "--nic-forwarding", "host", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["algbw_exact"] == "40"
    capsys.readouterr()
    assert main(["solve", str(path), "--collective", "alltoall", "--nic-bandwidth", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--nic-bandwidth" in err


def test_exact_on_degenerate_tori():
    """Tori make HiGHS's vertex messy (many equal shortest paths); the exact support solve
    recovers λ* = (links · b) / Σ hop distances exactly."""
    result = solve_alltoall(generate("torus", {"dims": "4x4x2", "bandwidth": "50"}))
    assert result.exact and result.lam == result.bound
    assert result.algbw == 100
    hurt = solve_alltoall(generate("punctured-torus", {"dims": "4x4x2", "removed": "4",
                                                       "seed": "1"}))
    assert hurt.exact and hurt.algbw < 100


def test_exact_support_solve_refuses_a_wrong_rate():
    from canopy.engine.alltoall.exact import exact_flows
    from canopy.engine.alltoall.lp import solve_link_lp
    problem = build_problem(generate("torus", {"dims": "3x3", "bandwidth": "50"}))
    flows = solve_link_lp(problem)
    unit = max(problem.capacity)
    lam = Fraction(36 * 50, 9 * 12)
    exact, den = exact_flows(problem, flows.flow, unit, lam)
    assert all(sum(exact[:, a]) <= problem.capacity[a] * den for a in range(problem.m))
    assert exact_flows(problem, flows.flow, unit, lam * Fraction(1001, 1000)) is None


def test_punctured_kautz_is_seeded_and_slower():
    a = generate("punctured-kautz", {"degree": "3", "n": "16", "removed": "3", "seed": "2"})
    b = generate("punctured-kautz", {"degree": "3", "n": "16", "removed": "3", "seed": "2"})
    whole = generate("kautz", {"degree": "3", "n": "16"})
    assert a.links == b.links and len(a.links) == len(whole.links) - 3
    assert solve_alltoall(a).lam < solve_alltoall(whole).lam


def test_failed_links_carry_nothing(tmp_path, capsys):
    ring = generate("ring", {"n": "4", "bandwidth": "50"})
    path = tmp_path / "ring.json"
    save_topology(ring, path)
    out = tmp_path / "a2a.json"
    assert main(["solve", str(path), "--collective", "alltoall", "--fail", "n0-n1",
                 "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    # a path of 4: the middle link carries 2·2 pairs each way, λ = 50/4
    assert data["algbw_exact"] == "50"
    assert all({p["route"][i], p["route"][i + 1]} != {"n0", "n1"}
               for p in data["paths"] for i in range(len(p["route"]) - 1))
    ring.links[0].failed = True
    assert solve_alltoall(ring).algbw == 50


def test_time_stepped_lp():
    """Triangle a-b 10, a-c 10, b-c 1 (GB/s). One step allows only direct sends, so b-c
    limits every pair to 1 GB: algbw 3·1/1. Two steps let b and c relay through a: by
    hand D = 11 GB per pair (b->c: 1 per step direct plus 9 relayed), algbw 3·11/2 = 16.5,
    the fluid optimum λ* = 5.5."""
    from canopy.engine.alltoall.timestep_lp import check_against_fluid, solve_time_steps
    tri = Topology("tri", [Node("a"), Node("b"), Node("c")],
                   [Link("a", "b", Fraction(10)), Link("a", "c", Fraction(10)),
                    Link("b", "c", Fraction(1))])
    problem = build_problem(tri)
    fluid = solve_alltoall(tri)
    assert fluid.exact and fluid.algbw == Fraction(33, 2)
    one = solve_time_steps(problem, 1)
    assert one.algbw == pytest.approx(3, rel=1e-7)
    two = solve_time_steps(problem, 2)
    assert two.pair_data == pytest.approx(11, rel=1e-7)
    assert two.algbw == pytest.approx(16.5, rel=1e-7)
    # relayed data leaves a only in step 2, after it arrived in step 1
    assert two.step_loads[0].get(("a", "c"), 0) <= 10 + 1e-6
    for loads in two.step_loads:
        for (u, v), x in loads.items():
            assert x <= float(problem.capacity[problem.arc_index()[
                (problem.names.index(u), problem.names.index(v))]]) * (1 + 1e-7)
    check_against_fluid(two, fluid.algbw)
    ring = build_problem(generate("ring", {"n": "4", "bandwidth": "50"}))
    with pytest.raises(ScheduleError, match="1 store-and-forward step cannot reach"):
        solve_time_steps(ring, 1)
    assert solve_time_steps(ring, 2).algbw == pytest.approx(100, rel=1e-7)


@pytest.mark.parametrize("seed", [0, 12])
def test_time_stepped_lp_never_beats_the_fluid_optimum(seed):
    from canopy.engine.alltoall.timestep_lp import solve_time_steps
    topo = random_network(seed)
    fluid = solve_alltoall(topo)
    problem = build_problem(topo)
    values = [solve_time_steps(problem, t).algbw for t in (3, 5)]
    assert all(v <= float(fluid.algbw) * (1 + 1e-7) for v in values)
    assert values[-1] == pytest.approx(float(fluid.algbw), rel=0.2)


def test_cli_time_steps(tmp_path, capsys):
    path = tmp_path / "ring.json"
    save_topology(generate("ring", {"n": "4", "bandwidth": "50"}), path)
    out = tmp_path / "a2a.json"
    assert main(["solve", str(path), "--collective", "alltoall", "--time-steps", "2",
                 "--json", str(out)]) == 0
    stepped = json.loads(out.read_text())["time_stepped"]
    assert stepped["steps"] == 2 and stepped["algbw"] == pytest.approx(100)
    assert "time-stepped LP" in capsys.readouterr().out
    assert main(["solve", str(path), "--collective", "alltoall", "--time-steps", "1"]) == 2
    assert "allow more steps" in capsys.readouterr().err


def test_json_is_compact_and_may_be_gzipped(tmp_path):
    import gzip

    from canopy.engine.alltoall.io import result_to_json, save_result
    result = solve_alltoall(generate("torus", {"dims": "3x3", "bandwidth": "50"}))
    plain, packed = tmp_path / "a.json", tmp_path / "a.json.gz"
    size, paths = save_result(result, str(plain))
    assert size == plain.stat().st_size and paths == len(result_to_json(result)["paths"])
    text = plain.read_text()
    assert json.loads(text) == result_to_json(result)
    assert text.count("\n") == len(json.loads(text)) + paths + 3   # a line per key and path
    gz_size, _ = save_result(result, str(packed))
    assert gz_size == packed.stat().st_size < size
    assert json.loads(gzip.decompress(packed.read_bytes())) == result_to_json(result)


def test_tori_reach_the_hop_bound_on_shortest_routes_alone():
    """On a torus every link is alike, so flows on shortest routes fill every link at the
    hop-length bound Σc / Σ dist: the feasibility LP on shortest-route arcs finds them, and
    the two-phase LP is never run. Every route of the schedule is a shortest one."""
    from canopy.engine.alltoall.bound import length_bound, pair_distances
    from canopy.engine.alltoall.lp import solve_at_hop_bound
    topo = generate("torus", {"dims": "4x4", "bandwidth": "50"})
    problem = build_problem(topo)
    hops = length_bound(problem, [Fraction(1)] * problem.m)
    # 64 arcs of 50 GB/s; from each of the 16 nodes the hop distances sum to 2 x 4 x 4
    # (each dimension's offsets 0, 1, 2, 1 sum to 4, over the 4 offsets of the other)
    assert hops == Fraction(64 * 50, 16 * 32)
    assert solve_at_hop_bound(problem, hops) is not None
    result = solve_alltoall(topo)
    assert result.exact and result.lam == hops
    dist = pair_distances(problem, [1] * problem.m)
    where = {c: k for k, c in enumerate(problem.compute)}
    for s, t, path, _ in result.schedule.paths():
        assert len(path) - 1 == dist[where[s]][where[t]]


def test_a_hop_bound_no_flows_reach_falls_back_to_the_two_phase_lp():
    """A line a - b - c with a thin link b-c: the hop bound counts the wide link's spare
    bandwidth, which no flows can use, so the shortest-route LP is infeasible and the
    two-phase LP gives λ* (the path LP's)."""
    from canopy.engine.alltoall.bound import length_bound
    from canopy.engine.alltoall.lp import solve_at_hop_bound
    nodes = [Node(x) for x in "abc"]
    topo = Topology("line", nodes, [Link("a", "b", Fraction(100)), Link("b", "c", Fraction(10))])
    problem = build_problem(topo)
    hops = length_bound(problem, [Fraction(1)] * problem.m)
    assert solve_at_hop_bound(problem, hops) is None
    result = solve_alltoall(topo)
    assert result.exact and result.lam == 5     # b-c carries a→c and b→c: 2λ = 10
    assert float(result.lam) == pytest.approx(path_lp(problem), rel=1e-9)


def test_a_link_lp_past_the_memory_budget_is_refused_before_it_is_built(monkeypatch):
    from canopy.engine.alltoall.lp import solve_link_lp
    from canopy.engine.model.limits import LimitError
    monkeypatch.setenv("CANOPY_MEMORY_BUDGET", "64M")
    problem = build_problem(generate("cluster", {"servers": 8, "gpus": 8}))
    with pytest.raises(LimitError, match="the all-to-all LP of 64 GPUs would need about"):
        solve_link_lp(problem)


def test_the_lp_at_the_hop_bound_past_the_memory_budget_is_refused(monkeypatch):
    from canopy.engine.alltoall.lp import solve_at_hop_bound
    from canopy.engine.model.limits import LimitError
    monkeypatch.setenv("CANOPY_MEMORY_BUDGET", "64M")
    problem = build_problem(generate("cluster", {"servers": 16, "gpus": 8}))
    with pytest.raises(LimitError, match="the all-to-all LP at the hop bound of 128 GPUs"):
        solve_at_hop_bound(problem, Fraction(1))


def test_the_link_lp_past_the_budget_is_refused_before_any_bound():
    """At 512 GPUs the link LP needs about 6 GiB, over the default budget of 4 GiB: it is
    refused in seconds (the symmetry search and the bounds before it once took minutes
    first), and ``method="auto"`` takes the decomposition."""
    import time

    from canopy.engine.alltoall import solve as solve_module
    from canopy.engine.model.limits import LimitError
    topo = generate("cluster", {"servers": 64, "gpus": 8, "scale_out": "leaf-spine"})
    start = time.process_time()
    with pytest.raises(LimitError, match="the all-to-all LP of 512 GPUs would need about"):
        solve_alltoall(topo, method="lp")
    assert time.process_time() - start < 10
    assert not solve_module._link_lp_fits(build_problem(topo))
