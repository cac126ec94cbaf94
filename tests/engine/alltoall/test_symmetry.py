"""The all-to-all link LP folded by the automorphisms of a vertex-transitive network."""

import numpy as np

from canopy.engine.alltoall import solve as solve_module
from canopy.engine.alltoall.problem import build_problem
from canopy.engine.alltoall.solve import solve_alltoall
from canopy.engine.alltoall.symmetry import transitive_maps
from canopy.engine.generators import generate
from canopy.engine.io.topology_json import load_sample


def test_every_compute_node_gets_an_automorphism_from_the_first():
    problem = build_problem(generate("torus", {"dims": "3x4"}))
    nodes, arcs = transitive_maps(problem)
    s0 = problem.compute[0]
    index = problem.arc_index()
    for v, perm, images in zip(problem.compute, nodes, arcs, strict=True):
        assert perm[s0] == v and sorted(perm.tolist()) == list(range(problem.n))
        for a in range(problem.m):
            b = index[(int(perm[problem.tails[a]]), int(perm[problem.heads[a]]))]
            assert images[a] == b and problem.capacity[b] == problem.capacity[a]


def test_a_network_that_is_not_vertex_transitive_has_none():
    assert transitive_maps(build_problem(load_sample("mesh-2d-3x3"))) is None


def test_the_folded_lp_gives_the_whole_lps_exact_optimum(monkeypatch):
    """3x4 torus: the folded LP's verified schedule meets the exact certificate, and the
    whole LP (the folding switched off) finds the same optimum."""
    topo = generate("torus", {"dims": "3x4"})
    folded = solve_alltoall(topo)
    monkeypatch.setattr(solve_module, "transitive_maps", lambda problem: None)
    whole = solve_alltoall(topo)
    assert folded.exact and whole.exact and folded.lam == whole.lam == folded.bound
    loads = np.array([float(x) for x in folded.schedule.arc_loads()])
    assert (loads <= folded.problem.float_capacity() + 1e-12).all()
