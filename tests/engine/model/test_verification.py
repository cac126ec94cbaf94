"""The verifier catches broken trees, overloaded links, wrong paths and false claims."""

import dataclasses
import json

import pytest

from canopy.cli import main
from canopy.engine.forestcoll.solve import solve
from canopy.engine.io.schedule_json import save_schedule
from canopy.engine.io.topology_json import load_sample
from canopy.engine.model.errors import ScheduleError
from canopy.engine.model.schedule import Tree, TreeEdge
from canopy.engine.model.verification import verify


@pytest.fixture(scope="module")
def a100():
    topo = load_sample("dgx-a100-2x8")
    return topo, solve(topo)


def with_tree(schedule, i, tree):
    trees = list(schedule.trees)
    trees[i] = tree
    return dataclasses.replace(schedule, trees=trees)


def test_broken_tree_is_caught(a100):
    topo, schedule = a100
    tree = schedule.trees[0]
    broken = dataclasses.replace(tree, edges=tree.edges[:-1])
    with pytest.raises(ScheduleError, match="does not reach 1 compute node"):
        verify(topo, with_tree(schedule, 0, broken))


def test_edge_before_parent_is_caught(a100):
    topo, schedule = a100
    tree = schedule.trees[0]
    swapped = dataclasses.replace(tree, edges=tree.edges[1:] + tree.edges[:1])
    with pytest.raises(ScheduleError, match="before the tree reaches it"):
        verify(topo, with_tree(schedule, 0, swapped))


def test_over_capacity_link_is_caught(a100):
    topo, schedule = a100
    greedy = dataclasses.replace(schedule, tree_bandwidth=schedule.tree_bandwidth * 2)
    with pytest.raises(ScheduleError, match="more than its"):
        verify(topo, greedy)


def test_wrong_path_is_caught(a100):
    topo, schedule = a100
    tree = schedule.trees[0]
    e = tree.edges[0]
    bad = TreeEdge(e.src, e.dst, (e.src, "ib0", e.dst))
    wrong = dataclasses.replace(tree, edges=(bad, *tree.edges[1:]))
    with pytest.raises(ScheduleError, match="which is not in the topology"):
        verify(topo, with_tree(schedule, 0, wrong))


def test_path_through_compute_node_is_caught(a100):
    topo, schedule = a100
    tree = schedule.trees[0]
    e = tree.edges[0]
    other = next(c for c in topo.compute_nodes() if c not in (e.src, e.dst))
    bad = TreeEdge(e.src, e.dst, (e.src, other, e.dst))
    wrong = dataclasses.replace(tree, edges=(bad, *tree.edges[1:]))
    with pytest.raises(ScheduleError, match="not a switch"):
        verify(topo, with_tree(schedule, 0, wrong))


def test_multiplicities_must_sum_to_k(a100):
    topo, schedule = a100
    extra = Tree(schedule.trees[0].root, 99, 1, schedule.trees[0].edges)
    with pytest.raises(ScheduleError, match="unit trees, but k = 13"):
        verify(topo, dataclasses.replace(schedule, trees=[*schedule.trees, extra]))


def test_false_algbw_claim_is_caught(a100):
    topo, schedule = a100
    wrong_k = dataclasses.replace(schedule, k=12,
                                  trees=[dataclasses.replace(t) for t in schedule.trees])
    with pytest.raises(ScheduleError):
        verify(topo, wrong_k)


def test_cli_verify_ok_and_tampered(tmp_path, capsys, a100):
    topo, schedule = a100
    good = tmp_path / "s.json"
    save_schedule(schedule, good)
    assert main(["verify", "samples/dgx-a100-2x8.json", str(good)]) == 0
    assert "346.67" in capsys.readouterr().out
    data = json.loads(good.read_text())
    data["algbw_exact"] = "400"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    assert main(["verify", "samples/dgx-a100-2x8.json", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "claims algbw 400" in err
