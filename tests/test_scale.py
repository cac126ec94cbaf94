"""The faster paths agree with brute force and with the pair-by-pair algorithm;
--bound-only; the compact schedule JSON."""

import json
import os
import subprocess
import sys
from itertools import combinations
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from canopy.cli import main
from canopy.engine.forestcoll import tree_packing as packing
from canopy.engine.forestcoll.edge_splitting import remove_switches
from canopy.engine.forestcoll.optimum import find_optimum
from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.schedule_json import load_schedule, save_schedule, schedule_to_dict
from canopy.engine.io.topology_json import load_sample, save_topology
from canopy.engine.model.verification import verify
from canopy.engine.network.indexed import Network
from tests.engine.forestcoll.test_edge_splitting import all_cuts_hold
from tests.strategies import topologies


def tree_capacities(net, opt, k):
    """Prop. 3: capacities in trees b_e / y at the optimum."""
    y = opt.tree_bandwidth
    return y, {e: int(c / y) for e, c in net.capacity.items()}


def brute_mu(packer, compute, batch, x, y):
    """Thm 12 by enumeration: min{g(x,y), m, min over X ∋ y, ∌ x of ρ(X) - Σ m(R_i) over
    the other batches that miss X}."""
    others = [(frozenset([r]), m) for r, m in enumerate(packer.others.single) if m]
    others += list(packer.others.sets.items())
    compute = [v for v in compute if v != x and v != y]
    best = None
    for size in range(len(compute) + 1):
        for rest in combinations(compute, size):
            side = {y, *rest}
            rho = sum(c for (a, b), c in packer.g.cap.items() if a not in side and b in side)
            demand = sum(m for verts, m in others if not verts & side)
            value = rho - demand
            best = value if best is None else min(best, value)
    return max(0, min(packer.g.get(x, y), batch.m, best))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topologies(max_compute=5, max_switch=3))
def test_mu_equals_brute_force(topo):
    net = Network.from_topology(topo)
    opt = find_optimum(net)
    _, caps = tree_capacities(net, opt, None)
    logical = remove_switches(net, caps, opt.k)
    fast = packing._Packer.mu

    def checked(self, batch, x, y):
        value = fast(self, batch, x, y)
        assert value == brute_mu(self, net.compute, batch, x, y)
        return value

    packing._Packer.mu = checked
    try:
        result = packing.pack_trees(net.n, list(net.compute), logical.capacity,
                                    dict.fromkeys(net.compute, opt.k))
    finally:
        packing._Packer.mu = fast
    assert sum(b.m for b in result.batches) == len(net.compute) * opt.k


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topologies(max_compute=4, max_switch=3))
def test_bulk_split_is_as_safe_as_pair_by_pair(topo):
    net = Network.from_topology(topo)
    opt = find_optimum(net)
    _, caps = tree_capacities(net, opt, None)
    for bulk in (True, False):
        logical = remove_switches(net, caps, opt.k, bulk=bulk)
        assert all_cuts_hold(net, logical.capacity, opt.k)
        for (a, b), pool in logical.routes.items():
            assert sum(c for _, c in pool.segments) == logical.capacity[(a, b)]


def test_bulk_split_matches_the_published_schedules():
    topo = load_sample("dgx-a100-4x8")
    net = Network.from_topology(topo)
    opt = find_optimum(net)
    _, caps = tree_capacities(net, opt, None)
    bulk = remove_switches(net, caps, opt.k)
    assert bulk.gamma_flows == len(net.compute)     # one certifying flow per compute node
    assert bulk.capacity == remove_switches(net, caps, opt.k, bulk=False).capacity


def test_bound_only(tmp_path, capsys):
    path = tmp_path / "t.json"
    save_topology(load_sample("dgx-a100-2x8"), path)
    assert main(["solve", str(path), "--bound-only"]) == 0
    out = capsys.readouterr().out
    assert "optimal algbw:   346.67 GB/s" in out and "bound only" in out
    assert "trees:" not in out
    assert main(["solve", str(path), "--bound-only", "--json", str(tmp_path / "s.json")]) == 2
    assert "cannot be combined" in capsys.readouterr().err


@pytest.mark.parametrize("compact", [True, False])
def test_compact_json_round_trip_and_verify(tmp_path, compact, capsys):
    topo = load_sample("mi250-2x16")
    schedule = solve(topo, collective="allreduce")
    out = tmp_path / "s.json"
    save_schedule(schedule, out, compact=compact)
    data = json.loads(out.read_text())
    assert ("routes" in data) == compact
    if compact:
        paths = [tuple(p) for p in data["routes"]]
        assert len(paths) == len(set(paths))          # every path written once
        assert all(isinstance(e, int) for t in data["trees"] for e in t["edges"])
    again = load_schedule(out)
    assert again.trees == schedule.trees
    verify(topo, again)
    topo_path = tmp_path / "t.json"
    save_topology(topo, topo_path)
    assert main(["verify", str(topo_path), str(out)]) == 0


def test_large_schedules_are_compact_by_default():
    schedule = solve(load_sample("dgx-a100-4x8"))
    edges = sum(len(t.edges) for t in schedule.trees)
    data = schedule_to_dict(schedule)
    assert ("routes" in data) == (edges >= 20_000)
    import canopy.engine.io.schedule_json as io
    io_limit = io.COMPACT_FROM_EDGES
    io.COMPACT_FROM_EDGES = 1
    try:
        assert "routes" in schedule_to_dict(schedule)
    finally:
        io.COMPACT_FROM_EDGES = io_limit


def test_bad_route_index_is_one_sentence(tmp_path, capsys):
    topo = load_sample("dgx-a100-2x8")
    out = tmp_path / "s.json"
    save_schedule(solve(topo), out, compact=True)
    data = json.loads(out.read_text())
    data["trees"][0]["edges"][0] = len(data["routes"])
    out.write_text(json.dumps(data))
    topo_path = tmp_path / "t.json"
    save_topology(topo, topo_path)
    assert main(["verify", str(topo_path), str(out)]) == 2
    assert "not an index into the routes table" in capsys.readouterr().err


def test_a_small_solve_loads_neither_numpy_nor_ortools():
    """Start-up of a small `canopy solve` stays quick: the command line imports only its
    verb, not the MSCCL lowering its export options name, nor logging or multiprocessing,
    and small networks take the python maxflow backend."""
    code = ("import sys; from canopy.cli import main; "
            "main(['solve', 'samples/dgx-a100-2x8.json']); "
            "print(sorted({m for m in sys.modules if m.startswith('canopy.engine.msccl')} | "
            "{m.split('.')[0] for m in sys.modules} & {'numpy', 'scipy', 'networkx', "
            "'ortools', 'logging', 'multiprocessing', 'lxml'}))")
    env = {k: v for k, v in os.environ.items() if k != "CANOPY_MAXFLOW"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env=env, cwd=Path(__file__).parent.parent)
    assert "schedule algbw:" in done.stdout
    assert done.stdout.rstrip().endswith("[]")
