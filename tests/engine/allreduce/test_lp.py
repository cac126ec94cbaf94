"""The allreduce LP of ForestColl App. E against closed forms and RS + AG."""

from fractions import Fraction

import pytest

from canopy.cli import main
from canopy.engine.allreduce.lp import cut_bound, solve_allreduce_lp
from canopy.engine.allreduce.lp_cuts import solve_allreduce_cuts
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.topology import COMPUTE, SWITCH, Link, Node, Topology
from canopy.engine.network.indexed import Network


def _star(n: int, b: Fraction) -> Topology:
    nodes = [Node(f"c{i}", COMPUTE) for i in range(n)]
    return Topology("star", nodes, [Link("c0", f"c{i}", b) for i in range(1, n)])


def _ring(n: int, b: Fraction) -> Topology:
    nodes = [Node(f"c{i}", COMPUTE) for i in range(n)]
    return Topology("ring", nodes, [Link(f"c{i}", f"c{(i + 1) % n}", b) for i in range(n)])


@pytest.mark.parametrize("n", [3, 4, 6])
def test_star_with_a_compute_hub_beats_rs_ag(n):
    """Reduce into the hub and broadcast from it, each on its own direction of every
    link: algbw b, the cut bound; RS + AG gets N·b / (2(N-1))."""
    b = Fraction(5, 2)
    lp = solve_allreduce_lp(Network.from_topology(_star(n, b)))
    assert lp.rs_ag == n * b / (2 * (n - 1)) and lp.cut_bound == b
    assert lp.value == pytest.approx(float(b), rel=1e-7)
    assert lp.beats_rs_ag and lp.gain == pytest.approx(2 * (n - 1) / n - 1, rel=1e-6)


@pytest.mark.parametrize("n", [3, 5])
def test_bidirectional_ring_equals_rs_ag(n):
    """On a ring RS + AG's N·b/(N-1) is already optimal."""
    lp = solve_allreduce_lp(Network.from_topology(_ring(n, Fraction(1))))
    assert lp.rs_ag == Fraction(n, n - 1) and lp.cut_bound == 2
    assert lp.value == pytest.approx(n / (n - 1), rel=1e-7) and not lp.beats_rs_ag
    equal = solve_allreduce_lp(Network.from_topology(_ring(n, Fraction(1))), equal_rates=True)
    assert equal.value == pytest.approx(n / (n - 1), rel=1e-7)


def test_mesh_gains_with_equal_rates_too():
    """On the 3x3 mesh the gain over RS + AG (56.25 GB/s) needs no unequal rates: it
    comes from running both phases at once on split link budgets (App. E (ii))."""
    net = Network.from_topology(load_sample("mesh-2d-3x3"))
    free, equal = solve_allreduce_lp(net), solve_allreduce_lp(net, equal_rates=True)
    assert free.rs_ag == Fraction(225, 4) and free.cut_bound == 100
    assert free.value == pytest.approx(75, rel=1e-7) == equal.value
    assert equal.beats_rs_ag


def test_switch_star_equals_rs_ag():
    """Four GPUs on one switch: every GPU's own link bounds both phases."""
    nodes = [Node("w", SWITCH)] + [Node(f"c{i}", COMPUTE) for i in range(4)]
    topo = Topology("switch", nodes, [Link("w", f"c{i}", Fraction(3)) for i in range(4)])
    lp = solve_allreduce_lp(Network.from_topology(topo))
    assert lp.rs_ag == Fraction(4 * 3, 2 * 3) and cut_bound(Network.from_topology(topo)) == 3
    assert lp.value == pytest.approx(2.0, rel=1e-7) and not lp.beats_rs_ag


def test_sample_and_cli(capsys):
    lp = solve_allreduce_lp(Network.from_topology(load_sample("forestcoll-fig2")))
    assert lp.value == pytest.approx(float(lp.rs_ag), rel=1e-7) == 4.0
    assert main(["solve", "samples/mi250-8plus8.json", "--collective", "allreduce"]) == 0
    out = capsys.readouterr().out
    assert "schedule algbw:  128 GB/s (verified)" in out
    assert "allreduce:       ForestColl's allreduce LP (App. E, HiGHS, tolerance 1e-09): " \
        "128.00 GB/s, 23.08 % above reduce-scatter + allgather (104.00 GB/s)" in out
    assert main(["solve", "samples/mi250-8plus8.json", "--collective", "allreduce",
                 "--allreduce-lp", "off"]) == 0
    out = capsys.readouterr().out
    assert "schedule algbw:  104 GB/s (verified)" in out and "allreduce:" not in out


@pytest.mark.parametrize("name", ["mesh-2d-3x3", "mi250-8plus8", "forestcoll-fig2"])
def test_cut_generation_agrees_with_the_flow_formulation(name):
    """Two formulations of LP (6): flow variables as App. E writes it, and cut generation
    (maxflow-mincut); both solved by HiGHS to the same value."""
    net = Network.from_topology(load_sample(name))
    for equal in (True, False):
        flows = solve_allreduce_lp(net, equal_rates=equal)
        cuts = solve_allreduce_cuts(net, equal_rates=equal)
        assert cuts.value == pytest.approx(flows.value, rel=1e-7)
        assert cuts.formulation == "cuts" and cuts.variables < flows.variables


def test_cut_generation_on_a_star():
    """A star with a compute hub reaches the cut bound b with free and with equal rates,
    in both formulations."""
    net = Network.from_topology(_star(4, Fraction(3)))
    for equal in (True, False):
        assert solve_allreduce_cuts(net, equal_rates=equal).value == \
            pytest.approx(3.0, rel=1e-7) == solve_allreduce_lp(net, equal_rates=equal).value


def test_cut_generation_on_a_punctured_torus():
    """A 4x4x4 torus without 3 GPUs (generator defaults, LP (6) as written has 57,396
    variables): RS + AG reaches 8000/63 GB/s, the LP 150 GB/s, built and verified."""
    from canopy.engine.allreduce.lp_schedule import lp_schedule
    from canopy.engine.generators import generate

    topo = generate("punctured-torus")
    lp = solve_allreduce_cuts(Network.from_topology(topo), equal_rates=True)
    assert lp.rs_ag == Fraction(8000, 63) and lp.value == pytest.approx(150, rel=1e-7)
    assert lp_schedule(topo, lp).algbw == 150


def test_identical_servers_keep_one_budget_per_link_orbit(monkeypatch):
    """On identical servers cut generation solves for budgets constant on the orbits of
    the server rotation (App. E's LP is convex and invariant under it): fewer variables,
    the same value as without the symmetry, and a schedule that verifies."""
    import canopy.engine.allreduce.lp_cuts as cuts_module
    from canopy.engine.allreduce.lp_schedule import lp_schedule

    topo = load_sample("mi250-8plus8")
    net = Network.from_topology(topo)
    image = cuts_module.network_rotation(net)
    assert image is not None and sorted(image) == list(range(net.n))
    for equal in (False, True):     # the schedule below needs equal rates
        sym = solve_allreduce_cuts(net, equal_rates=equal)
        for (a, b), budget in sym.reduce_budget.items():
            assert sym.reduce_budget[(image[a], image[b])] == budget
        with monkeypatch.context() as patched:
            patched.setattr(cuts_module, "network_rotation", lambda _net: None)
            plain = solve_allreduce_cuts(net, equal_rates=equal)
        assert sym.value == pytest.approx(plain.value, rel=1e-7) == 128.0
        assert sym.variables < plain.variables
    assert lp_schedule(topo, sym).algbw == 128


def test_a_rotation_that_is_not_an_automorphism_is_refused():
    """Servers of different sizes, or a link whose image is missing, have no rotation."""
    import canopy.engine.allreduce.lp_cuts as cuts_module
    from canopy.engine.generators import generate

    topo = generate("cluster", {"servers": "3", "gpus": "2"})
    assert cuts_module.network_rotation(Network.from_topology(topo)) is not None
    first = next(link for link in topo.links if topo.node(link.source).group == "n0"
                 and topo.node(link.target).group == "n0")
    topo.links.remove(first)
    assert cuts_module.network_rotation(Network.from_topology(topo)) is None
