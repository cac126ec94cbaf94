"""Allreduce by spanning trees on two-way links (canopy.engine.allreduce.spanning_trees)."""

from fractions import Fraction
from itertools import combinations

from canopy.engine.allreduce.lp_schedule import choose_allreduce
from canopy.engine.allreduce.spanning_trees import _spanning, pack, symmetric_trees, two_way_pairs
from canopy.engine.comparison.table import compare
from canopy.engine.forestcoll.solve import solve
from canopy.engine.generators import generate
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.verification import verify


def test_complete_graph_on_four_nodes_splits_into_two_spanning_trees():
    """Offered a-b, a-c, a-d, b-c, b-d, c-d, the first forest takes the star at a and the
    second b-c, b-d; c-d closes a cycle in both and gets in only by exchanges (c-d for
    b-c in the second, b-c for a-b in the first, a-b into the second)."""
    nodes = ["a", "b", "c", "d"]
    trees = pack(nodes, {p: 1 for p in combinations(nodes, 2)}, 2)
    assert trees is not None and len(trees) == 2
    assert all(_spanning(nodes, t) for t in trees)
    assert sorted(e for t in trees for e in t) == sorted(combinations(nodes, 2))


def test_a_bridge_caps_the_trees_whatever_the_edge_count():
    """Two 4-cliques with every pair doubled and one bridge: 25 edges, but 2 spanning trees
    need the bridge twice (Nash-Williams-Tutte), so there are none."""
    left, right = ["a", "b", "c", "d"], ["e", "f", "g", "h"]
    copies = {p: 2 for side in (left, right) for p in combinations(side, 2)}
    copies[("d", "e")] = 1
    assert pack(left + right, copies, 2) is None
    assert pack(left + right, copies, 1) is not None


def test_the_4x4_mesh_allreduce_needs_one_tree_per_gpu():
    """The 4x4 mesh at 50 GB/s: App. E's LP reaches 80 GB/s (RS + AG 53.33). Packed per
    phase in the LP's budgets that takes k = 3 (52 trees, 240 connection ends on a centre
    GPU, over the 108 thread blocks); 16 spanning trees, one per GPU, each reducing up and
    broadcasting down, reach the same 80 GB/s exactly, and every tree edge then has its
    own connection: 98 % of the optimum at 1 GiB (91.2 % with k = 3)."""
    topo = generate("mesh")
    schedule = choose_allreduce(topo, solve(topo, "allreduce"))
    assert schedule.split_budgets and schedule.k == 1 and len(schedule.trees) == 16
    assert schedule.reduce_trees == schedule.trees
    assert verify(topo, schedule) == 80 == schedule.algbw
    fc = compare(topo, "allreduce", sizes=(1 << 30,), algorithms=()).row("forestcoll")
    assert fc.details["connections"]["layout"] == "unit connections"
    assert fc.algbw_at(1 << 30) >= Fraction(95, 100) * 80


def test_only_two_way_links_between_gpus_qualify():
    assert two_way_pairs(load_sample("dgx-a100-2x8")) is None          # switches
    assert two_way_pairs(generate("kautz")) is None                     # one-way arcs
    assert symmetric_trees(generate("mesh"), Fraction(6), 4) is None    # above the optimum
