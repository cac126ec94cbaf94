"""The maxflow interface: every backend on the same cases (exact values, min cuts, updates,
big-integer capacities), against a brute-force min cut on random small networks."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from canopy.engine.model.errors import CanopyError
from canopy.engine.network.maxflow import (
    INT64_SAFE,
    LOADED_BUDGET,
    PYTHON_BUDGET,
    FlowNetwork,
    available_backends,
    default_backend,
    dinic,
)

BACKENDS = available_backends()


def diamond(backend, big=1):
    f = FlowNetwork(4, backend)
    f.add_arc(0, 1, 3 * big)
    f.add_arc(0, 2, 2 * big)
    f.add_arc(1, 3, 2 * big)
    f.add_arc(2, 3, 5 * big)
    f.add_arc(1, 2, 1 * big)
    return f


def cut_value(arcs, side):
    return sum(c for a, b, c in arcs if a in side and b not in side)


@pytest.mark.parametrize("backend", BACKENDS)
def test_value_and_cut(backend):
    f = diamond(backend)
    assert f.max_flow(0, 3) == 5
    value, side = f.min_cut(0, 3)
    assert value == 5 and 0 in side and 3 not in side


@pytest.mark.parametrize("backend", BACKENDS)
def test_capacity_update_after_a_solve(backend):
    f = diamond(backend)
    assert f.max_flow(0, 3) == 5
    f.set_capacity(1, 10)
    assert f.capacity(1) == 10
    assert f.max_flow(0, 3) == 7
    f.add_arc(0, 3, 4)
    assert f.max_flow(0, 3) == 11


@pytest.mark.parametrize("backend", BACKENDS)
def test_capacities_beyond_int64_stay_exact(backend):
    big = INT64_SAFE * 3 + 7
    f = diamond(backend, big)
    assert f.max_flow(0, 3) == 5 * big
    value, side = f.min_cut(0, 3)
    assert value == 5 * big and 3 not in side
    f = diamond(backend)
    f.max_flow(0, 3)
    f.set_capacity(3, big)       # one update past int64 moves the network to big integers
    assert f.max_flow(0, 3) == 5


@pytest.mark.parametrize("backend", BACKENDS)
def test_isolated_sink_and_parallel_arcs(backend):
    f = FlowNetwork(5, backend)
    f.add_arc(0, 1, 2)
    f.add_arc(0, 1, 3)
    f.add_arc(1, 2, 9)
    assert f.max_flow(0, 2) == 5
    assert f.max_flow(0, 4) == 0


def test_scipy_scales_by_the_gcd_beyond_int32():
    f = diamond("scipy", 2**40)
    assert f.max_flow(0, 3) == 5 * 2**40


def test_unknown_backend_is_one_sentence(monkeypatch):
    with pytest.raises(CanopyError, match="unknown maxflow backend"):
        FlowNetwork(2, "simplex")
    monkeypatch.setenv("CANOPY_MAXFLOW", "networkx")
    assert default_backend() == "networkx"
    assert FlowNetwork(2).backend == "networkx"


@settings(max_examples=40, deadline=None)
@given(st.integers(3, 6).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1),
                                   st.integers(0, 9)), max_size=14))))
def test_backends_agree_with_brute_force(case):
    n, arcs = case
    arcs = [(a, b, c) for a, b, c in arcs if a != b]
    others = range(1, n - 1)
    best = min(cut_value(arcs, {0, *chosen}) for r in range(n - 1)
               for chosen in itertools.combinations(others, r))
    for backend in BACKENDS:
        f = FlowNetwork(n, backend)
        for a, b, c in arcs:
            f.add_arc(a, b, c)
        value, side = f.min_cut(0, n - 1)
        assert value == best, backend
        assert 0 in side and n - 1 not in side and cut_value(arcs, set(side)) == best, backend


def test_small_networks_use_the_python_backend_unless_one_is_named(monkeypatch):
    """Below SMALL_ARCS an unnamed backend answers in plain Python (no numpy, no OR-Tools
    to load); the answers are the same as a named backend's."""
    monkeypatch.delenv("CANOPY_MAXFLOW", raising=False)
    monkeypatch.setattr("canopy.engine.network.maxflow._python_spent", 0)
    auto, named = diamond(None), diamond(BACKENDS[0])
    calls = []
    monkeypatch.setattr("canopy.engine.network.maxflow.dinic",
                        lambda *a: calls.append(a) or dinic(*a))
    assert auto.min_cut(0, 3)[0] == named.min_cut(0, 3)[0] == 5
    assert len(calls) == 1 + (BACKENDS[0] == "python")


def test_big_capacities_go_to_the_python_backend():
    f = diamond("ortools" if "ortools" in BACKENDS else "scipy")
    f.max_flow(0, 3)
    f.set_capacity(0, INT64_SAFE)        # sums past int64: exact Python integers
    assert f.max_flow(0, 3) == 5
    f.set_capacity(0, 3)                 # and back to the fast backend
    assert f.max_flow(0, 3) == 5


def test_the_python_budget_hands_over_to_the_fastest_backend(monkeypatch):
    """Once a process has spent PYTHON_BUDGET arcs in python answers, small networks go
    to the default backend too (sweeps of many small solves stay fast)."""
    monkeypatch.delenv("CANOPY_MAXFLOW", raising=False)
    monkeypatch.setattr("canopy.engine.network.maxflow._python_spent", PYTHON_BUDGET)
    calls = []
    monkeypatch.setattr("canopy.engine.network.maxflow.dinic", lambda *a: calls.append(a) or
    dinic(*a))
    assert diamond(None).max_flow(0, 3) == 5
    assert len(calls) == (default_backend() == "python")


@pytest.mark.parametrize("numpy_loaded", [True, False])
def test_with_numpy_loaded_ortools_takes_over_sooner(monkeypatch, numpy_loaded):
    """Where numpy is loaded, loading OR-Tools costs a third of the first load, and so
    does the python budget (LOADED_BUDGET arcs); without numpy it stays PYTHON_BUDGET."""
    import sys

    monkeypatch.delenv("CANOPY_MAXFLOW", raising=False)
    if not numpy_loaded:
        monkeypatch.delitem(sys.modules, "numpy")   # (restored after the test)
    monkeypatch.setattr("canopy.engine.network.maxflow._python_spent", LOADED_BUDGET)
    calls = []
    monkeypatch.setattr("canopy.engine.network.maxflow.dinic", lambda *a: calls.append(a) or
    dinic(*a))
    monkeypatch.setattr(FlowNetwork, "_ortools", lambda self, s, t, cut: (5, [s]))
    assert diamond(None).max_flow(0, 3) == 5
    assert len(calls) == (not numpy_loaded)
