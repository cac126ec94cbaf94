"""Packing by translation on vertex-transitive fabrics (engine/forestcoll/symmetric_packing.py)."""

import time

import pytest

from canopy.engine.forestcoll import solve as forest
from canopy.engine.forestcoll.edge_splitting import remove_switches
from canopy.engine.forestcoll.optimum import find_optimum, optimum
from canopy.engine.forestcoll.solve import solve
from canopy.engine.forestcoll.symmetric_packing import pack_symmetric
from canopy.engine.generators import generate
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.verification import verify
from canopy.engine.network.indexed import Network
from tests.engine.forestcoll.test_tree_packing import check_packing, check_trees

SYMMETRIC = [("torus", {"dims": "3x4x5"}), ("torus", {"dims": "4x4x4"}),
             ("torus", {"dims": "2x3"}), ("ring", {"n": "7"}),
             ("hypercube", {"dimension": "4"}), ("fully-connected", {"n": "5"})]


def logical(topo):
    net = Network.from_topology(topo)
    opt = find_optimum(net)
    caps = {e: int(c / opt.tree_bandwidth) for e, c in net.capacity.items()}
    return net, remove_switches(net, caps, opt.k).capacity, opt.k


@pytest.mark.parametrize(("kind", "params"), SYMMETRIC)
def test_translated_trees_are_a_packing(kind, params):
    net, capacity, k = logical(generate(kind, params))
    packing = pack_symmetric(list(net.compute), capacity, dict.fromkeys(net.compute, k))
    assert packing is not None
    check_packing(net, capacity, k, packing)
    check_trees(net, packing)


@pytest.mark.parametrize(("kind", "params"), SYMMETRIC[:5])
def test_schedule_is_verified_and_optimal(kind, params, monkeypatch):
    topo = generate(kind, params)
    used = []

    def spy(*args):
        result = pack_symmetric(*args)
        used.append(result is not None)
        return result

    monkeypatch.setattr(forest, "pack_symmetric", spy)
    schedule = solve(topo)
    assert used == [True]
    assert schedule.algbw == optimum(topo).algbw()
    assert verify(topo, schedule) == schedule.algbw


@pytest.mark.parametrize(("kind", "params"), [
    ("mesh", {"dims": "3x4"}), ("punctured-torus", {"dims": "4x4", "removed": "2"}),
    ("torus", {"dims": "4x4", "bandwidth": "100,50"})])
def test_asymmetric_fabrics_fall_back(kind, params):
    topo = generate(kind, params)
    net, capacity, k = logical(topo)
    packing = pack_symmetric(list(net.compute), capacity, dict.fromkeys(net.compute, k))
    if kind == "torus":     # unequal dimensions are still translation-invariant
        assert packing is not None
        check_packing(net, capacity, k, packing)
    else:
        assert packing is None
    schedule = solve(topo)
    assert schedule.algbw == optimum(topo).algbw()


def test_unequal_demands_fall_back():
    net, capacity, k = logical(generate("ring", {"n": "6"}))
    demands = dict.fromkeys(net.compute, k)
    demands[net.compute[0]] = k + 1
    assert pack_symmetric(list(net.compute), capacity, demands) is None


@pytest.mark.parametrize("k", [257, 10**12])
def test_a_large_fixed_k_costs_what_a_small_one_does(k):
    """Past ONE_BY_ONE_K the trees at 0 grow as groups of equal trees: k = 10^12 on a
    vertex-transitive fabric is solved (and verified) in well under a second, not
    k lists of n labels."""
    start = time.process_time()
    schedule = solve(load_sample("hypercube-3d.json"), "allgather", k=k)
    assert schedule.k == k
    assert sum(t.multiplicity for t in schedule.trees) == k * 8
    assert time.process_time() - start < 5
